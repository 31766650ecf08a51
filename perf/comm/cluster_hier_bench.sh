#!/usr/bin/env bash
# Collectives across 2 namespace hosts whose egress is shaped to a real link rate (tc tbf on each
# host's veth, default 1 Gbit/s): `hpctrain bench allreduce` (fp32 and bf16), `bench
# reduce_scatter` and `bench allgather` (ZeRO-1's, fp32) with --allreduce flat, hierarchical (and
# the bare MPI call, which the bench runs beside ours), for 2 hosts x 2 and 2 hosts x 3 ranks;
# then `hpctrain train` (cnn, resnet; DDP with fp32 and bf16 gradients, and ZeRO-1) samples/s and
# comm-blocked % with each path, on the first layout (--train-layouts: others too).
# Each figure's `link_frac` is the least time the collective can take on that link (allreduce:
# 2(H-1)/H x bytes / rate; reduce_scatter, allgather: (H-1)/H x bytes / rate) over the time
# measured. Interleaved rounds (flat, hierarchical, ...).
#   perf/comm/cluster_hier_bench.sh [--rate-mbit 1000] [--rounds 2] [--layouts "2 3"] [--models "cnn resnet"]
#                              [--ops "allreduce reduce_scatter allgather"] [--train-layouts "2"] [--no-train]
#                              [--out FILE.md]
# Open MPI settings come from the environment as for any run (hpctrain itself defaults
# OMPI_MCA_btl_tcp_links to 2; export OMPI_MCA_btl_tcp_links=1 to see Open MPI's default).
# Needs root and network namespaces (as `ctest -L cluster`). Writes perf/comm/results/cluster-hier-<date>.{jsonl,md}.
set -euo pipefail
cd "$(dirname "$0")/../.."
rate=1000 rounds=2 layouts="2 3" train_layouts="" train=1 out="" models="cnn resnet" ops="allreduce reduce_scatter allgather"
while [ $# -gt 0 ]; do
  case "$1" in
    --rate-mbit) rate=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --layouts) layouts=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    --train-layouts) train_layouts=$2; shift 2 ;;
    --no-train) train=0; shift ;;
    --out) out=$2; shift 2 ;;
    *) echo "cluster_hier_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
export HPCTRAIN_BIN=${HPCTRAIN_BIN:-$PWD/build/hpctrain}
[ -x "$HPCTRAIN_BIN" ] || { echo "cluster_hier_bench.sh: $HPCTRAIN_BIN not built (bash launch/setup.sh)" >&2; exit 2; }
[ -n "$out" ] || out=perf/comm/results/cluster-hier-$(date +%Y%m%d-%H%M).md
raw=${out%.md}.jsonl
source tests/cluster/lib.sh
cluster_start 2
for h in node0 node1; do
  ip netns exec "$(_ns "$h")" tc qdisc replace dev eth0 root tbf rate "${rate}mbit" burst 256kb latency 50ms
done
export MN_FLAGS=--oversubscribe
gbit=$(/usr/bin/python3 -c "print($rate / 1000)")
: >"$raw"
tag() { sed "s/^{/{\"ranks_per_host\":$1,\"round\":$2,\"path\":\"$3\",/"; }
for L in $layouts; do
  hostfile "$WORK/hf$L" "node0:$L" "node1:$L"
  for r in $(seq "$rounds"); do
    for op in $ops; do
      dts=fp32
      [ "$op" = allreduce ] && dts="fp32 bf16"
      for path in flat hierarchical; do
        for dt in $dts; do
          dtflag=()
          [ "$op" = allreduce ] && dtflag=(--dtype "$dt")
          mn "$WORK/hf$L" bench "$op" --allreduce "$path" "${dtflag[@]}" --link-gbit "$gbit" \
            --min-bytes $((4 << 20)) --max-bytes $((64 << 20)) --iters 5 2>/dev/null | grep '^{' | tag "$L" "$r" "$path" >>"$raw"
        done
      done
    done
  done
done
if [ "$train" = 1 ]; then
  D="$WORK/d"
  run_np 1 data synthetic --out "$D" --n 4096 --test-n 256 --classes 10 --height 28 --width 28 --seed 5 >/dev/null
  for L in ${train_layouts:-${layouts%% *}}; do
    hostfile "$WORK/hf$L" "node0:$L" "node1:$L"
    for r in $(seq "$rounds"); do
      for model in $models; do
        for path in flat hierarchical; do
          for mode in fp32 bf16 zero1; do
            flags=(--grad-comm-dtype "${mode/zero1/fp32}")
            [ "$mode" = zero1 ] && flags+=(--zero 1)
            mn "$WORK/hf$L" train --model "$model" --device cpu --data "$D" --batch-size 32 --max-steps 40 \
              --log-every 20 --allreduce "$path" "${flags[@]}" 2>/dev/null | grep '^{' | tail -1 \
              | sed "s/^{/{\"train\":\"$model\",\"dtype\":\"$mode\",/" | tag "$L" "$r" "$path" >>"$raw"
          done
        done
      done
    done
  done
fi
/usr/bin/python3 - "$raw" "$out" "$rate" "$rounds" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = statistics.median
with open(sys.argv[2], "w") as f:
    f.write(f"### Collectives across 2 namespace hosts, egress shaped to {sys.argv[3]} Mbit/s (tbf)\n\n")
    f.write(f"Median of {sys.argv[4]} interleaved rounds; `hpctrain bench <op> --link-gbit`; raw: "
            f"{sys.argv[1].split('/')[-1]}. link_frac = (least bytes per host / link rate) / time: "
            "2(H-1)/H x bytes for allreduce, (H-1)/H x bytes for reduce_scatter and allgather.\n\n")
    f.write("| op | ranks/host | dtype | bytes | flat ms | hierarchical ms | bare MPI ms | flat link_frac | hier link_frac | MPI link_frac |\n")
    f.write("|---|---|---|---|---|---|---|---|---|---|\n")
    bench = [r for r in rows if "op" in r]
    keys = sorted({(r["op"], r["ranks_per_host"], r["dtype"], r["bytes"]) for r in bench})
    for op, L, dt, b in keys:
        sel = lambda p: [r for r in bench if (r["op"], r["ranks_per_host"], r["dtype"], r["bytes"], r["path"]) == (op, L, dt, b, p)]
        fl, hi = sel("flat"), sel("hierarchical")
        if not fl or not hi:
            continue
        m = lambda rs, k: med([r[k] for r in rs])
        mpi = fl + hi
        f.write(f"| {op} | {L} | {dt} | {b} | {m(fl, 'time_us') / 1e3:.1f} | {m(hi, 'time_us') / 1e3:.1f} | "
                f"{m(mpi, 'mpi_time_us') / 1e3:.1f} | {m(fl, 'link_frac'):.2f} | {m(hi, 'link_frac'):.2f} | "
                f"{m(mpi, 'mpi_link_frac'):.2f} |\n")
    tr = [r for r in rows if "train" in r]
    if tr:
        f.write("\n| model | ranks/host | path | grad comm | samples/s | comm-blocked % |\n|---|---|---|---|---|---|\n")
        for key in sorted({(r["train"], r["ranks_per_host"], r["path"], r["dtype"]) for r in tr}):
            rs = [r for r in tr if (r["train"], r["ranks_per_host"], r["path"], r["dtype"]) == key]
            cb = [r.get("comm_blocked_pct") for r in rs if r.get("comm_blocked_pct") is not None]
            f.write(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {med([r['samples_per_s'] for r in rs]):.0f} | "
                    f"{(med(cb) if cb else float('nan')):.1f} |\n")
print(open(sys.argv[2]).read())
PY
