#!/usr/bin/env bash
# Instruction counts per thread (valgrind callgrind: repeatable on a noisy machine) of a short
# 2-rank `hpctrain train` (cnn, batch 64/rank, both ranks under callgrind, --bind-to core), and
# the comm thread's top functions.
#   perf/callgrind_threads.sh [--data DIR] [--steps 20] [--out DIR]  (exported env reaches the ranks,
#   e.g. HPCTRAIN_SHM_ALLREDUCE=0 for the MPI_Allreduce path)
# Prints, per rank and thread, instructions (Ir) in total and per step; writes the callgrind
# files to --out (default a temp dir, removed).
set -euo pipefail
cd "$(dirname "$0")/.."
data="" steps=20 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --data) data=$2; shift 2 ;; --steps) steps=$2; shift 2 ;; --out) out=$2; shift 2 ;;
    *) echo "callgrind_threads.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v valgrind >/dev/null || { echo "callgrind_threads.sh: valgrind not installed" >&2; exit 2; }
tmp=$(mktemp -d /tmp/hpctrain_cg_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
[ -n "$out" ] || out=$tmp/cg
mkdir -p "$out"
if [ -z "$data" ]; then data=$tmp/data; build/hpctrain data fashion-mnist --out "$data" >/dev/null; fi
f=(-np 2 --bind-to core --map-by slot -x OMP_NUM_THREADS=1)
[ "$(id -u)" = 0 ] && f+=(--allow-run-as-root)
for v in $(env | grep -o '^HPCTRAIN_[A-Z_]*\|^OMPI_MCA_[a-z_]*' || true); do f+=(-x "$v"); done
mpirun "${f[@]}" valgrind --tool=callgrind --separate-threads=yes --dump-instr=no \
  --callgrind-out-file="$out/cg.%q{OMPI_COMM_WORLD_RANK}" \
  build/hpctrain train --model cnn --data "$data" --batch-size 64 --max-steps "$steps" --log-every 10 \
  --lr 0.01 --momentum 0.9 --weight-decay 0 --schedule constant --collective-timeout 0 >"$tmp/log" 2>&1 \
  || { tail "$tmp/log"; exit 1; }
for r in 0 1; do
  echo "rank $r:"
  for t in "$out"/cg.$r-*; do
    ir=$(grep -m1 '^totals:\|^summary:' "$t" | awk '{print $2}')
    # the thread's name: the function at its root (main for the compute thread)
    top=$(callgrind_annotate --inclusive=yes "$t" 2>/dev/null | grep -m1 -E 'CommThread::loop|Loader::produce|Watchdog|Writer|main' | sed 's/^ *//' | cut -c1-90)
    printf "  %-14s Ir %14s (%10.0f per step)  %s\n" "$(basename "$t")" "$ir" "$(echo "$ir / $steps" | bc -l)" "$top"
  done
done
echo "comm thread (rank 0), top functions by self instructions:"
t=$(grep -l 'CommThread::loop' "$out"/cg.0-* | head -1)
callgrind_annotate "$t" 2>/dev/null | sed -n '/^Ir/,$p' | sed -n 3,14p | cut -c1-140
