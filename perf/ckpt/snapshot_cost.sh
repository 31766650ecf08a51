#!/usr/bin/env bash
# What --snapshot-every 1 costs the step (README "Snapshots in host memory"): cnn and gpt, 2 ranks
# on this machine, runs without snapshots (A) and with --snapshot-every 1 (B) interleaved
# A B A B ..., each run's samples/s from its summary line; the ratio is taken pair by pair and its
# median printed (step time B/A = samples/s A/B). Usage: perf/ckpt/snapshot_cost.sh [PAIRS] [STEPS]
# (default 5 pairs of 60 steps). Prints one line per model; quote the machine's load with it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BIN=${HPCTRAIN_BIN:-$here/../../build/hpctrain}
pairs=${1:-5} steps=${2:-60}
W=$(mktemp -d /tmp/hpctrain-snapcost.XXXXXX) SHM=$(mktemp -d /dev/shm/hpctrain-snapcost.XXXXXX)
trap 'rm -rf "$W" "$SHM"' EXIT
mpi=(mpirun -np 2 --oversubscribe -x OMP_NUM_THREADS=1)
[ "$(id -u)" != 0 ] || mpi+=(--allow-run-as-root)
"$BIN" data synthetic --out "$W/img" --n 4096 --height 28 --width 28 --classes 10 --seed 1 >/dev/null
cat "$here/../../README.md" "$here/../../docs/"*.md >"$W/corpus.txt"
"$BIN" data text --out "$W/txt" --test-fraction 0.1 "$W/corpus.txt" >/dev/null
declare -A args=(
  [cnn]="--model cnn --data $W/img --batch-size 64"
  [gpt]="--model gpt --model-config n_layer=2,n_head=4,n_embd=128 --seq-len 64 --data $W/txt --batch-size 8 --optimizer adamw")
field() { /usr/bin/python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])[sys.argv[2]])" "$1" "$2"; }
sps() { field "$1" samples_per_s; }
for m in cnn gpt; do
  ratios=()
  for ((i = 0; i < pairs; i++)); do
    # shellcheck disable=SC2086
    "${mpi[@]}" "$BIN" train --device cpu ${args[$m]} --max-steps "$steps" --log-every 1000 >"$W/a.txt" 2>/dev/null
    # shellcheck disable=SC2086
    "${mpi[@]}" "$BIN" train --device cpu ${args[$m]} --max-steps "$steps" --log-every 1000 --snapshot-every 1 \
      --snapshot-dir "$SHM" >"$W/b.txt" 2>/dev/null
    ratios+=("$(/usr/bin/python3 -c "print($(sps "$W/a.txt") / $(sps "$W/b.txt"))")")
    taken=$((${taken:-0} + $(field "$W/b.txt" snapshots_taken))) skipped=$((${skipped:-0} + $(field "$W/b.txt" snapshots_skipped)))
  done
  /usr/bin/python3 - "$m" "$pairs" "$steps" "$taken" "$skipped" "${ratios[@]}" <<'PY'
import statistics, sys
m, pairs, steps, taken, skipped, r = *sys.argv[1:6], [float(x) for x in sys.argv[6:]]
print(f"{m}: step time with --snapshot-every 1 / without = {statistics.median(r):.3f} (median of {pairs} interleaved "
      f"pairs of {steps} steps, 2 ranks; min {min(r):.3f}, max {max(r):.3f}); snapshots {taken} taken, {skipped} "
      f"skipped (a write still in flight: every rank skips)")
PY
  unset taken skipped
done
