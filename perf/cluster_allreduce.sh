#!/usr/bin/env bash
# Allreduce busbw across 2 hosts (network-namespace hosts, TCP over a veth bridge) next to the
# same 2 ranks on 1 host (shared memory), interleaved A/B rounds so that load drift hits both.
# Both without core binding: the namespace hosts share this machine's cores, and binding would put
# each host's rank 0 on core 0.
#   perf/cluster_allreduce.sh [--rounds 2] [--min-bytes 1048576] [--max-bytes 67108864] [--out FILE.md]
# Needs root and network namespaces (as `ctest -L cluster`). Writes perf/results/cluster-allreduce-<date>.{jsonl,md}.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=2 min=$((1 << 20)) max=$((64 << 20)) out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --min-bytes) min=$2; shift 2 ;;
    --max-bytes) max=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "cluster_allreduce.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
export HPCTRAIN_BIN=${HPCTRAIN_BIN:-$PWD/build/hpctrain}
[ -x "$HPCTRAIN_BIN" ] || { echo "cluster_allreduce.sh: $HPCTRAIN_BIN not built (bash launch/setup.sh)" >&2; exit 2; }
[ -n "$out" ] || out=perf/results/cluster-allreduce-$(date +%Y%m%d-%H%M).md
raw=${out%.md}.jsonl
source tests/cluster/lib.sh
cluster_start 2
hostfile "$WORK/hf" node0:1 node1:1
: >"$raw"
bench=(bench allreduce --min-bytes "$min" --max-bytes "$max")
for r in $(seq "$rounds"); do
  MN_FLAGS=--oversubscribe mn "$WORK/hf" "${bench[@]}" 2>/dev/null | grep '^{' | sed "s/^{/{\"setup\":\"2 hosts x 1\",\"round\":$r,/" >>"$raw"
  run_np 2 "${bench[@]}" 2>/dev/null | grep '^{' | sed "s/^{/{\"setup\":\"1 host x 2\",\"round\":$r,/" >>"$raw"
done
/usr/bin/python3 - "$raw" "$out" "$rounds" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows:
    by.setdefault((r["bytes"], r["setup"]), []).append(r["busbw_GBps"])
sizes = sorted({b for b, _ in by})
with open(sys.argv[2], "w") as f:
    f.write(f"### Allreduce busbw, 2 ranks: 2 namespace hosts (TCP, veth bridge) vs 1 host (shared memory)\n\n")
    f.write(f"Median of {sys.argv[3]} interleaved rounds; `hpctrain bench allreduce`; raw: {sys.argv[1].split('/')[-1]}.\n\n")
    f.write("| bytes | 2 hosts x 1 busbw GB/s | 1 host x 2 busbw GB/s | 2 hosts / 1 host |\n|---|---|---|---|\n")
    for b in sizes:
        a, o = statistics.median(by[(b, "2 hosts x 1")]), statistics.median(by[(b, "1 host x 2")])
        f.write(f"| {b} | {a:.3f} | {o:.3f} | {a / o:.2f} |\n")
print(open(sys.argv[2]).read())
PY
