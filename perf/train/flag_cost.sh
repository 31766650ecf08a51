#!/usr/bin/env bash
# The cost of one `hpctrain train` feature: step time with it on over off, mlp (many small steps)
# and cnn on 2 ranks, runs interleaved on/off/on/off... so machine noise hits both arms alike.
# Step time: the mean of the train records' step_s after the first interval (warm-up). Prints and
# writes perf/train/results/<NAME>-cost-<date>.{jsonl,md}.
#   perf/train/flag_cost.sh NAME "ON FLAGS" "OFF FLAGS" [PAIRS (default 5)] [DATA DIR (default: a synthetic 28x28 set)]
# Its two uses (perf/README "Straggler detection cost", "Flight recorder"):
#   perf/train/flag_cost.sh straggler "--straggler-threshold 0.05" "--straggler-threshold 0"
#   perf/train/flag_cost.sh flight "--flight-records 2048" "--flight-records 0"
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../launch_lib.sh"
BIN=${HPCTRAIN_BIN:-$HERE/../../build/hpctrain}
NAME=$1 ON=$2 OFF=$3
PAIRS=${4:-5}
export OMP_NUM_THREADS=1
TMP=$(mktemp -d "/tmp/$NAME-cost.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
DATA=${5:-$TMP/d}
[ -d "$DATA" ] || "$BIN" data synthetic --out "$DATA" --n 4096 --height 28 --width 28 --classes 10 >/dev/null
STAMP=$(date -u +%Y%m%d-%H%M)
OUT=$HERE/results/$NAME-cost-$STAMP
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
      flags=$ON; [ $arm = off ] && flags=$OFF
      launch 2 --bind-to core "$BIN" train --model $model --data "$DATA" --epochs 100 --max-steps $steps \
        --batch-size 32 --log-every $every $flags --metrics "$TMP/m.jsonl" >/dev/null
      echo "{\"model\":\"$model\",\"pair\":$p,\"arm\":\"$arm\",\"step_s\":$(step_s "$TMP/m.jsonl")}" >>"$OUT.jsonl"
    done
  done
done
/usr/bin/python3 - "$OUT.jsonl" "$OUT.md" "$PAIRS" "$NAME" "$ON" "$OFF" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
md = ["# %s cost: step time on (%s) / off (%s) (2 ranks, interleaved, %s pairs)" % (sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[3]), "",
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
