#!/usr/bin/env bash
# Weak- and strong-scaling sweep: build/perf/ddp_bench (DDP, one model) at each rank count.
#   perf/train/scaling.sh [--model cnn|resnet|mlp] [--ranks "1 2 4"] [--mode weak|strong|both]
#                   [--batch 64] [--global-batch G] [--steps 30] [--data DIR|FILE.h5] [--out FILE]
# weak:   fixed batch per rank (--batch); the world's batch grows with N.
#         speedup = T(N) / T(1 rank, batch b), efficiency = T(N) / (N * T(1))  (1.0 = perfect)
# strong: fixed global batch G (--global-batch, default batch x largest rank count), per rank G/N
#         (G must divide by every N). Baseline is ONE rank running the whole batch G, so
#         speedup = T(N) / T(1 rank, batch G) = step_s(1) / step_s(N) (same samples per step)
#         and efficiency = speedup / N.
# T = samples/s of the whole world, from the slowest rank's median step. A rank count of 1 is
# added to the sweep when missing: both definitions need it.
# Columns: model, mode, ranks, batch_per_rank, global_batch, step_s, samples_per_s, speedup,
# efficiency, comm_blocked_s (median time blocked in DDP finalize waiting for allreduce),
# backward_s, data_wait_s (median time a step waited for its batch: 0 with the default in-memory
# batch; --data reads through the real Loader with prefetch 2), bucket_mb (launch order).
# Writes perf/train/results/scaling-<model>-<date>.csv (+ .jsonl with ddp_bench's raw lines) unless
# --out is given.
# Launcher: perf/launch_lib.sh (srun inside Slurm, else mpirun, with --oversubscribe added
# automatically when N exceeds this host's cores outside Slurm).
# CPU-only hosts measure CPU DDP; with GPUs, ddp_bench picks one GPU per local rank.
set -euo pipefail
cd "$(dirname "$0")/../.."
model=cnn ranks="1 2 4" mode=both batch=64 global="" steps=30 data="" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --global-batch) global=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "scaling.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$mode" in weak) modes=weak ;; strong) modes=strong ;; both) modes="weak strong" ;;
  *) echo "scaling.sh: --mode must be weak, strong or both, not '$mode'" >&2; exit 2 ;; esac
BENCH=${HPCTRAIN_DDP_BENCH:-build/perf/ddp_bench}
[ -x "$BENCH" ] || { echo "scaling.sh: $BENCH not built (bash launch/setup.sh)" >&2; exit 2; }
[ -d "$data" ] && data=$data/train.h5
[ -z "$data" ] || [ -f "$data" ] || { echo "scaling.sh: --data $data: no such file" >&2; exit 2; }
# Both definitions divide by the 1-rank throughput: make sure 1 is measured, first.
ranks=$(echo 1 $ranks | tr ' ' '\n' | awk 'NF && !seen[$1]++' | sort -n | tr '\n' ' ')
maxn=$(echo $ranks | tr ' ' '\n' | tail -1)
[ -n "$global" ] || global=$((batch * maxn))
if [[ " $modes " == *" strong "* ]]; then
  for n in $ranks; do
    [ $((global % n)) = 0 ] || { echo "scaling.sh: --global-batch $global does not divide by $n ranks" >&2; exit 2; }
  done
fi
[ -n "$out" ] || out=perf/train/results/scaling-$model-$(date +%Y%m%d-%H%M%S).csv
raw=${out%.csv}.jsonl
mkdir -p "$(dirname "$out")"
: >"$raw"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
source perf/launch_lib.sh

for m in $modes; do
  for n in $ranks; do
    b=$batch
    [ "$m" = strong ] && b=$((global / n))
    line=$(launch "$n" "$BENCH" --model "$model" --mode ddp --batch "$b" --steps "$steps" ${data:+--data "$data"} \
      | grep '^{' | tail -1)
    [ -n "$line" ] || { echo "scaling.sh: ddp_bench printed no result at $n rank(s), $m" >&2; exit 1; }
    # Tag the raw line with the sweep it belongs to; perf/to_csv.py derives the rest.
    echo "{\"scaling_mode\":\"$m\",${line#\{}" | tee -a "$raw"
  done
done
/usr/bin/python3 perf/to_csv.py scaling "$raw" "$out"
cat "$out"
echo "scaling.sh: wrote $out"
