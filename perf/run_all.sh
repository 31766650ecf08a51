#!/usr/bin/env bash
# Regenerates every performance result, plot and perf/README.md's generated part, in order:
#   1. perf/comm/allreduce_sweep.sh (2 ranks) -> comm/results/allreduce-np2-<date>.{jsonl,csv,png}
#   2. perf/train/scaling.sh, cnn and resnet, weak and strong, reading Fashion-MNIST through the
#      loader -> train/results/scaling-<model>-<date>.{jsonl,csv}; then the analytical model
#      calibrated on them (-model.{csv,md}) and the plots (.png, with the model's prediction drawn in)
#   3. perf/train/run_perf.py      (`hpctrain train` end to end vs PyTorch DDP from the same
#                                   train.h5, weak scaling, mlp; then the ddp_bench
#                                   microbenchmark: DDP/SyncBN/watchdog overheads)
#                                   -> train/results/perf-<date>.{jsonl,md}
#   4. perf/train/loader_bench.sh  -> train/results/loader.jsonl
#   5. perf/ckpt/ckpt_bench.py     (write vs dd, async stall vs sync save) -> ckpt/results/ckpt-<date>.{jsonl,md}
#   6. perf/report.py probe + render -> machine.json, perf/README.md
# (Paths under perf/. The other benchmarks, one question each, are listed in perf/README.md.)
#   perf/run_all.sh [--quick]     (--quick: fewer steps/sizes/rounds, ranks "1 2"; for a smoke run)
# Environment: HPCTRAIN_SCALING_RANKS (default "1 2 4"; --quick "1 2"), HPCTRAIN_SCALING_STEPS
# (30; --quick 10), HPCTRAIN_SCALING_BATCH (per rank, 64), HPCTRAIN_DATA (a dir with train.h5;
# default: Fashion-MNIST converted once into a temp dir).
# Needs build/hpctrain and build/perf/ddp_bench (bash launch/setup.sh) and, for step 3, the
# torch venv that setup.sh creates. Stops at the first failing step.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=""
case "${1:-}" in --quick) quick=--quick ;; "") ;; *) echo "run_all.sh: unknown argument $1" >&2; exit 2 ;; esac
PY=/usr/bin/python3
stamp=$(date +%Y%m%d-%H%M%S)
export OMP_NUM_THREADS=1
if [ -n "$quick" ]; then
  ranks=${HPCTRAIN_SCALING_RANKS:-1 2} steps=${HPCTRAIN_SCALING_STEPS:-10} ar_max=$((16 << 20)) ar_iters=10
else
  ranks=${HPCTRAIN_SCALING_RANKS:-1 2 4} steps=${HPCTRAIN_SCALING_STEPS:-30} ar_max=$((256 << 20)) ar_iters=20
fi
step() { echo; echo "=== run_all: $* ($(date +%H:%M:%S))"; }

DATA=${HPCTRAIN_DATA:-}
if [ -z "$DATA" ]; then
  DATA=$(mktemp -d /tmp/hpctrain_perf_data_XXXXXX)
  trap 'rm -rf "$DATA"' EXIT
  step "converting Fashion-MNIST into $DATA"
  build/hpctrain data fashion-mnist --out "$DATA" >/dev/null
fi

step "1/6 allreduce sweep"
ar=perf/comm/results/allreduce-np2-$stamp.csv
bash perf/comm/allreduce_sweep.sh --ranks 2 --max-bytes "$ar_max" --iters "$ar_iters" --out "$ar"
$PY perf/plot.py allreduce "$ar"

for model in cnn resnet; do
  step "2/6 scaling sweep, $model, ranks $ranks, weak and strong"
  csv=perf/train/results/scaling-$model-$stamp.csv
  bash perf/train/scaling.sh --model "$model" --ranks "$ranks" --mode both --steps "$steps" \
    --batch "${HPCTRAIN_SCALING_BATCH:-64}" --data "$DATA/train.h5" --out "$csv"
  $PY perf/scaling_model.py --from-scaling "$csv" --allreduce "$ar"
  $PY perf/plot.py scaling "$csv"
done

step "3/6 perf/train/run_perf.py $quick"
$PY perf/train/run_perf.py $quick --data "$DATA"

step "4/6 loader bench"
bash perf/train/loader_bench.sh "$DATA"

step "5/6 checkpoint bench (perf/ckpt/ckpt_bench.py $quick)"
$PY perf/ckpt/ckpt_bench.py $quick

step "6/6 machine description and perf/README.md"
$PY perf/report.py probe
$PY perf/report.py render
echo "run_all: done; results in perf/*/results, table and plots in perf/README.md"
