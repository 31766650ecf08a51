#!/usr/bin/env bash
# Weak-scaling sweep: build/perf/ddp_bench (DDP, in-memory data, fixed batch per rank) at each
# rank count, one CSV row per count:
#   perf/scaling.sh [--model cnn|resnet] [--ranks "1 2 4"] [--batch 64] [--steps 30] [--out FILE]
# efficiency = samples_per_s(N) / (N * samples_per_s(1)) — 1.0 is perfect weak scaling.
# Writes perf/results/scaling-<model>-<date>.csv unless --out is given.
# Launcher: inside a Slurm allocation (SLURM_JOB_ID set) `srun --mpi=pmix -n N`, else `mpirun -np N`
# (HPCTRAIN_LAUNCHER=mpirun forces mpirun; HPCTRAIN_OVERSUBSCRIBE=1 adds --oversubscribe).
# CPU-only hosts measure CPU DDP; with GPUs, ddp_bench picks one GPU per local rank.
set -euo pipefail
cd "$(dirname "$0")/.."
model=cnn ranks="1 2 4" batch=64 steps=30 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "scaling.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
BENCH=${HPCTRAIN_DDP_BENCH:-build/perf/ddp_bench}
[ -x "$BENCH" ] || { echo "scaling.sh: $BENCH not built (bash launch/setup.sh)" >&2; exit 2; }
[ -n "$out" ] || out=perf/results/scaling-$model-$(date +%Y%m%d-%H%M%S).csv
mkdir -p "$(dirname "$out")"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

launch() {
  local n=$1; shift
  if [ -n "${SLURM_JOB_ID:-}" ] && [ "${HPCTRAIN_LAUNCHER:-srun}" != mpirun ]; then
    srun --mpi=pmix -n "$n" --kill-on-bad-exit=1 "$@"
  else
    local f=(-np "$n" -x OMP_NUM_THREADS)
    [ "$(id -u)" = 0 ] && f+=(--allow-run-as-root)
    [ "${HPCTRAIN_OVERSUBSCRIBE:-0}" = 1 ] && f+=(--oversubscribe)
    mpirun "${f[@]}" "$@"
  fi
}

echo "model,ranks,batch_per_rank,step_s,samples_per_s,efficiency" >"$out"
base=""
for n in $ranks; do
  line=$(launch "$n" "$BENCH" --model "$model" --mode ddp --batch "$batch" --steps "$steps" | grep '^{' | tail -1)
  [ -n "$line" ] || { echo "scaling.sh: ddp_bench printed no result at $n rank(s)" >&2; exit 1; }
  row=$(/usr/bin/python3 -c '
import json, sys
j = json.loads(sys.argv[1]); n = int(sys.argv[2]); base = sys.argv[3]
tp = j["samples_per_s"]
eff = "%.4f" % (tp / (n * float(base))) if base else ("1.0000" if n == 1 else "")
print("%s,%d,%d,%.6f,%.3f,%s" % (j["model"], n, j["batch_per_rank"], j["step_s"], tp, eff))' "$line" "$n" "$base")
  # Efficiency is relative to the 1-rank throughput, the first count when it is 1.
  if [ -z "$base" ] && [ "$n" = 1 ]; then base=$(echo "$row" | cut -d, -f5); fi
  echo "$row" | tee -a "$out"
done
echo "scaling.sh: wrote $out"
