#!/usr/bin/env bash
# Allreduce bandwidth sweep: `hpctrain bench allreduce` (ours and bare MPI_Allreduce per message
# size) on N ranks; keeps the JSON lines and writes the CSV that perf/plot.py draws.
#   perf/comm/allreduce_sweep.sh [--ranks 2] [--min-bytes 4096] [--max-bytes 268435456] [--iters 20] [--out FILE.csv]
# Writes perf/comm/results/allreduce-np<N>-<date>.csv and .jsonl unless --out is given.
set -euo pipefail
cd "$(dirname "$0")/../.."
n=2 min=4096 max=$((256 << 20)) iters=20 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) n=$2; shift 2 ;;
    --min-bytes) min=$2; shift 2 ;;
    --max-bytes) max=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "allreduce_sweep.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
BIN=${HPCTRAIN_BIN:-build/hpctrain}
[ -x "$BIN" ] || { echo "allreduce_sweep.sh: $BIN not built (bash launch/setup.sh)" >&2; exit 2; }
[ -n "$out" ] || out=perf/comm/results/allreduce-np$n-$(date +%Y%m%d-%H%M%S).csv
raw=${out%.csv}.jsonl
mkdir -p "$(dirname "$out")"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
source perf/launch_lib.sh
launch "$n" "$BIN" bench allreduce --min-bytes "$min" --max-bytes "$max" --iters "$iters" | grep '^{' | tee "$raw"
/usr/bin/python3 perf/to_csv.py allreduce "$raw" "$out"
echo "allreduce_sweep.sh: wrote $out"
