#!/usr/bin/env bash
# Cost of the flight recorder (#33): step time with it on (--flight-records 2048, the default) over
# off (--flight-records 0), mlp (many small steps: the most collectives per second) and cnn on 2 ranks, runs interleaved on/off/on/off... so
# machine noise hits both arms alike. Step time: the mean of the train records' step_s after
# the first interval (warm-up). Prints and writes perf/results/flight-cost-<date>.{jsonl,md}.
#   perf/flight_cost.sh [PAIRS (default 5)] [DATA DIR (default: a synthetic 28x28 set)]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/launch_lib.sh"
BIN=${HPCTRAIN_BIN:-$HERE/../build/hpctrain}
PAIRS=${1:-5}
export OMP_NUM_THREADS=1
TMP=$(mktemp -d /tmp/flight-cost.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
DATA=${2:-$TMP/d}
[ -d "$DATA" ] || "$BIN" data synthetic --out "$DATA" --n 4096 --height 28 --width 28 --classes 10 >/dev/null
STAMP=$(date -u +%Y%m%d-%H%M)
OUT=$HERE/results/flight-cost-$STAMP
: >"$OUT.jsonl"
step_s() {  # mean step_s after the first train record
  /usr/bin/python3 -c "
import json,sys
t=[json.loads(l)['step_s'] for l in open(sys.argv[1]) if '\"type\": \"train\"' in l or '\"type\":\"train\"' in l][1:]
print(sum(t)/len(t))" "$1"
}
for model in mlp cnn; do
  if [ $model = mlp ]; then steps=1500 every=100; else steps=200 every=20; fi
  for ((p = 0; p < PAIRS; p++)); do
    for arm in on off; do
      rec=2048; [ $arm = off ] && rec=0
      launch 2 --bind-to core "$BIN" train --model $model --data "$DATA" --epochs 100 --max-steps $steps \
        --batch-size 32 --log-every $every --flight-records $rec --metrics "$TMP/m.jsonl" >/dev/null
      echo "{\"model\":\"$model\",\"pair\":$p,\"arm\":\"$arm\",\"step_s\":$(step_s "$TMP/m.jsonl")}" >>"$OUT.jsonl"
    done
  done
done
/usr/bin/python3 - "$OUT.jsonl" "$OUT.md" "$PAIRS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
md = ["# Flight recorder cost: step time on / off (2 ranks, interleaved, %s pairs)" % sys.argv[3], "",
      "| model | median on/off | per-pair ratios | mean step on (ms) | mean step off (ms) |", "|---|---|---|---|---|"]
for m in ("mlp", "cnn"):
    on = {r["pair"]: r["step_s"] for r in rows if r["model"] == m and r["arm"] == "on"}
    off = {r["pair"]: r["step_s"] for r in rows if r["model"] == m and r["arm"] == "off"}
    ratios = [on[p] / off[p] for p in sorted(on)]
    md.append("| %s | %.3f | %s | %.2f | %.2f |" % (m, statistics.median(ratios), " ".join("%.3f" % r for r in ratios),
              1e3 * statistics.mean(on.values()), 1e3 * statistics.mean(off.values())))
open(sys.argv[2], "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
