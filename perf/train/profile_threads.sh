#!/usr/bin/env bash
# Per-thread profile of a 2-rank `hpctrain train` (cnn, batch 64/rank, launch/local.sh, so
# --bind-to core): after a warm-up, `perf stat --per-thread` counts each thread of every rank
# (main = compute, hpc-comm = comm thread, hpc-loader = loader thread, the rest Open MPI/PMIx and
# the watchdog) for a fixed window; prints task-clock (CPU ms), context switches and the share
# of the window per thread, plus the run's own metrics.
#   perf/train/profile_threads.sh [--data DIR] [--steps 400] [--window 5] [--model cnn] [-- EXTRA TRAIN FLAGS]
# Environment the ranks get: whatever is exported (e.g. OMPI_MCA_mpi_yield_when_idle=1 to compare).
# Needs perf (linux-perf) and kernel.perf_event_paranoid <= 2 (user-space counting of own tasks).
set -euo pipefail
cd "$(dirname "$0")/../.."
data="" steps=400 window=5 model=cnn
while [ $# -gt 0 ]; do
  case "$1" in
    --data) data=$2; shift 2 ;; --steps) steps=$2; shift 2 ;; --window) window=$2; shift 2 ;;
    --model) model=$2; shift 2 ;; --) shift; break ;;
    *) echo "profile_threads.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v perf >/dev/null || { echo "profile_threads.sh: perf not installed (apt-get install linux-perf)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/hpctrain_prof_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if [ -z "$data" ]; then data=$tmp/data; build/hpctrain data fashion-mnist --out "$data" >/dev/null; fi
export OMP_NUM_THREADS=1
launch/local.sh -n 2 -- train --model "$model" --data "$data" --batch-size 64 --max-steps "$steps" \
  --log-every 10 --lr 0.01 --momentum 0.9 --weight-decay 0 --schedule constant \
  --metrics "$tmp/m.jsonl" "$@" >"$tmp/out.log" 2>&1 &
lp=$!
# Wait for the first metrics interval, then a little more (startup and first steps excluded).
for _ in $(seq 300); do grep -q '"type":"train"' "$tmp/m.jsonl" 2>/dev/null && break; sleep 0.1; done
sleep 1
pids=$(pgrep -x hpctrain | sort -n)
for p in $pids; do
  perf stat --per-thread -e task-clock,context-switches,cpu-migrations -p "$p" -x, -o "$tmp/stat.$p" -- sleep "$window" &
done
wait $(jobs -p | grep -v "^$lp$") 2>/dev/null || true
wait "$lp"
r=0
for p in $pids; do
  echo "rank $r (pid $p), ${window} s window:"
  # -x, lines: "name-tid,value,unit,event,..."
  awk -F, -v w="$window" '
    /task-clock/ {cpu[$1]=$2} /context-switches/ {cs[$1]=$2}
    END { for (t in cpu) if (cpu[t] > 1) printf "  %-24s cpu %8.1f ms (%5.1f%% of window)  ctx-switches %s\n", t, cpu[t], cpu[t]/(w*10), cs[t] }' \
    "$tmp/stat.$p" | sort -k3 -rn
  r=$((r + 1))
done
/usr/bin/python3 - "$tmp/m.jsonl" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
tr = [r for r in recs if r.get("type") == "train"][1:]
print("metrics: median step %.1f ms, comm-blocked %.1f%%, data-wait %.1f%%" % (
    1e3 * statistics.median(r["step_s"] for r in tr), statistics.median(r["comm_blocked_pct"] for r in tr),
    statistics.median(r["data_wait_pct"] for r in tr)))
PY
