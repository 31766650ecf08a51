#!/usr/bin/env bash
# Loader throughput on Fashion-MNIST train.h5 (a measurement, not a test): `hpctrain bench loader`,
# one rank, batch 128, whole epoch, data read into memory (the default --data-in-memory-mb).
# Appends JSON lines (with "measured" and "load1") to perf/train/results/loader.jsonl. Usage: perf/train/loader_bench.sh [DATA_DIR] (default: a temp conversion).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${HPCTRAIN_BIN:-./build/hpctrain}
DATA=${1:-}
if [ -z "$DATA" ]; then
  DATA=$(mktemp -d)
  trap 'rm -rf "$DATA"' EXIT
  "$BIN" data fashion-mnist --out "$DATA" >/dev/null
fi
export OMP_NUM_THREADS=1
mkdir -p perf/train/results
out=perf/train/results/loader.jsonl
# Each line gets when it was measured (UTC) and the 1-minute load average then: a figure from a
# loaded machine says so.
stamp() { /usr/bin/python3 -c '
import json, os, sys, time
r = json.loads(sys.stdin.read().strip().splitlines()[-1])
r["measured"] = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
r["load1"] = round(os.getloadavg()[0], 1)
print(json.dumps(r, separators=(",", ":")))'; }
run() { "$@" | stamp | tee -a "$out"; }
for pf in 0 2; do
  run "$BIN" bench loader --data "$DATA/train.h5" --batch-size 128 --prefetch $pf
  run "$BIN" bench loader --data "$DATA/train.h5" --batch-size 128 --prefetch $pf --augment true
  # With 2 ms of simulated compute per batch, prefetching should hide most of the data wait.
  run "$BIN" bench loader --data "$DATA/train.h5" --batch-size 128 --prefetch $pf --compute-ms 2
done
