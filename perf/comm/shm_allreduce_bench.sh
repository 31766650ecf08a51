#!/usr/bin/env bash
# Microbenchmark: ShmAllreduce against bare MPI_Allreduce, one host (perf/comm/shm_allreduce_bench.cpp).
# Builds it standalone with mpicxx (no LibTorch, no cmake; the library's RelWithDebInfo flags),
# checks correctness on 2 and 4 ranks, then times 2 ranks bound to cores and 4 ranks
# oversubscribed (--bind-to none), each REPEATS times; prints the tables.
#
#   bash perf/comm/shm_allreduce_bench.sh [--repeats N] [--baseline REV] [--fifo] [--ranks "2 4"] [--out DIR]
#
# --baseline REV  also builds src/comm/mpi/shm_allreduce.{h,cpp} as of git revision REV and
#                 runs it right before the working tree's build in every repeat (before/after).
# --fifo          runs the 2-rank timings under `chrt -f 10` (needs root): a woken rank then
#                 gets its core at once, as on an idle host, even while other jobs load the
#                 cores. The 4-rank (oversubscribed) runs never use it: FIFO ranks sharing a
#                 core would not time-slice.
set -euo pipefail
cd "$(dirname "$0")/../.."
repeats=3 baseline="" fifo="" ranks="2 4" out="${TMPDIR:-/tmp}/shm_allreduce_bench"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --repeats) repeats="$2"; shift 2 ;;
    --baseline) baseline="$2"; shift 2 ;;
    --fifo) fifo="chrt -f 10"; shift ;;
    --ranks) ranks="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
flags=(-O2 -g -DNDEBUG -std=c++20 -DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1)
mpicxx "${flags[@]}" -Isrc perf/comm/shm_allreduce_bench.cpp src/comm/mpi/shm_allreduce.cpp -o "$out/shmbench"
builds=(shmbench)
if [[ -n "$baseline" ]]; then
  b="$out/baseline/src"
  mkdir -p "$b/comm/mpi" "$b/runtime"
  git show "$baseline:src/comm/mpi/shm_allreduce.h" > "$b/comm/mpi/shm_allreduce.h"
  git show "$baseline:src/comm/mpi/shm_allreduce.cpp" > "$b/comm/mpi/shm_allreduce.cpp"
  cp src/runtime/check.h "$b/runtime/"
  mpicxx "${flags[@]}" -I"$b" perf/comm/shm_allreduce_bench.cpp "$b/comm/mpi/shm_allreduce.cpp" -o "$out/shmbench_baseline"
  builds=(shmbench_baseline shmbench)
fi
export OMP_NUM_THREADS=1
run() { mpirun --allow-run-as-root "$@"; }
echo "== $(date -u '+%F %T') UTC, $(getconf _NPROCESSORS_ONLN) CPUs, load: $(cut -d' ' -f1-3 /proc/loadavg)"
run -np 2 --bind-to core "$out/shmbench" --check
run -np 4 --oversubscribe --bind-to none "$out/shmbench" --check
if [[ " $ranks " == *" 2 "* ]]; then
  for r in $(seq 1 "$repeats"); do
    for exe in "${builds[@]}"; do
      echo "== 2 ranks, --bind-to core ${fifo:+(chrt -f 10)}, $exe, repeat $r, load: $(cut -d' ' -f1-3 /proc/loadavg)"
      $fifo mpirun --allow-run-as-root -np 2 --bind-to core "$out/$exe" --iters-scale 0.5
    done
  done
fi
if [[ " $ranks " == *" 4 "* ]]; then
  for r in $(seq 1 "$repeats"); do
    for exe in "${builds[@]}"; do
      echo "== 4 ranks, --oversubscribe --bind-to none, $exe, repeat $r, load: $(cut -d' ' -f1-3 /proc/loadavg)"
      run -np 4 --oversubscribe --bind-to none "$out/$exe" --iters-scale 0.25
    done
  done
fi
