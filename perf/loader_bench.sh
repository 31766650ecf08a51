#!/usr/bin/env bash
# Loader throughput on Fashion-MNIST train.h5 (a measurement, not a test). Appends JSON lines to
# perf/results/loader.jsonl. Usage: perf/loader_bench.sh [DATA_DIR] (default: a temp conversion).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${HPCTRAIN_BIN:-./build/hpctrain}
DATA=${1:-}
if [ -z "$DATA" ]; then
  DATA=$(mktemp -d)
  trap 'rm -rf "$DATA"' EXIT
  "$BIN" data fashion-mnist --out "$DATA" >/dev/null
fi
export OMP_NUM_THREADS=1
mkdir -p perf/results
out=perf/results/loader.jsonl
run() { "$@" | tail -1 | tee -a "$out"; }
for pf in 0 2; do
  run "$BIN" bench loader --data "$DATA/train.h5" --batch-size 128 --prefetch $pf
  run "$BIN" bench loader --data "$DATA/train.h5" --batch-size 128 --prefetch $pf --augment true
  # With 2 ms of simulated compute per batch, prefetching should hide most of the data wait.
  run "$BIN" bench loader --data "$DATA/train.h5" --batch-size 128 --prefetch $pf --compute-ms 2
done
