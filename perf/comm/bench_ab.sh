#!/usr/bin/env bash
# A/B of two builds on `hpctrain bench allreduce` (ours vs bare MPI_Allreduce per size), rounds
# interleaved A B A B ..., then per size the median and spread of each build's busbw ratio
# (ours / MPI, from the same run) and the median times. Each build's ratio is measured against the
# MPI_Allreduce of its own run, so the machine's drift between runs cancels.
#   perf/comm/bench_ab.sh --a BIN_A --b BIN_B [--ranks 4] [--rounds 10] [--min-bytes 4096]
#                    [--max-bytes 4194304] [--iters 50] [--out FILE.jsonl] [-- MPIRUN_FLAGS...]
# mpirun's stderr goes to FILE.log. BIN_* is an `hpctrain` executable (or a wrapper that sets LD_LIBRARY_PATH for its libhpctrain).
# Example (4 ranks on a 2-vCPU machine): ... --ranks 4 -- --oversubscribe --bind-to none
set -euo pipefail
cd "$(dirname "$0")/../.."
a="" b="" n=4 rounds=10 min=4096 max=$((4 << 20)) iters=50 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --a) a=$2; shift 2 ;;
    --b) b=$2; shift 2 ;;
    --ranks) n=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --min-bytes) min=$2; shift 2 ;;
    --max-bytes) max=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "bench_ab.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$a" ] && [ -x "$b" ] || { echo "bench_ab.sh: --a and --b must name executables" >&2; exit 2; }
[ -n "$out" ] || out=perf/comm/results/bench-ab-np$n-$(date +%Y%m%d-%H%M%S).jsonl
mkdir -p "$(dirname "$out")"
: > "$out"; : > "${out%.jsonl}.log"
root=(); [ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
for r in $(seq "$rounds"); do
  for v in a b; do
    bin=$a; [ $v = b ] && bin=$b
    mpirun -np "$n" "${root[@]}" "$@" -x OMP_NUM_THREADS=1 "$bin" bench allreduce \
      --min-bytes "$min" --max-bytes "$max" --iters "$iters" 2>>"${out%.jsonl}.log" \
      | grep '^{' | sed "s/^{/{\"v\":\"$v\",\"round\":$r,/" >> "$out"
  done
done
/usr/bin/python3 - "$out" <<'EOF'
import collections, json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
d = collections.defaultdict(list)
for r in rows:
    d[(r["bytes"], r["v"])].append(r)
print("| size | A: ratio median (q25, min) | B: ratio median (q25, min) | A: ours / MPI us | B: ours / MPI us |")
print("|---|---|---|---|---|")
for size in sorted({r["bytes"] for r in rows}):
    cells, times = [], []
    for v in "ab":
        rs = d[(size, v)]
        q = sorted(x["busbw_ratio"] for x in rs)
        cells.append(f"{statistics.median(q):.2f} ({q[(len(q) - 1) // 4]:.2f}, {q[0]:.2f})")
        times.append(f"{statistics.median(x['time_us'] for x in rs):.0f} / "
                     f"{statistics.median(x['mpi_time_us'] for x in rs):.0f}")
    k = f"{size >> 10} KiB" if size < 1 << 20 else f"{size >> 20} MiB"
    print(f"| {k} | {cells[0]} | {cells[1]} | {times[0]} | {times[1]} |")
print(f"bench_ab.sh: {len({r['round'] for r in rows})} rounds, raw {sys.argv[1]}")
EOF
