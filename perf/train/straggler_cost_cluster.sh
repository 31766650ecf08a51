#!/usr/bin/env bash
# Cost of straggler detection across hosts (#20), where the link probe runs: step time with
# detection on (default --straggler-threshold 0.05: wait meter + one link probe per log
# interval, diag/link_probe.h) over off (0), mlp (comm-heavy) on 2 network-namespace hosts x 1
# rank, default --log-every 50, runs interleaved on/off/on/off... Step time: the mean of the
# train records' step_s after the first interval. Needs root and netns (as `ctest -L cluster`).
#   perf/train/straggler_cost_cluster.sh [PAIRS (default 8)] [STEPS (default 1000)]
# Writes perf/train/results/straggler-cost-cluster-<date>.{jsonl,md}.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
export HPCTRAIN_BIN=${HPCTRAIN_BIN:-$HERE/../../build/hpctrain}
PAIRS=${1:-8} STEPS=${2:-1000}
source "$HERE/../../tests/cluster/lib.sh"
set +x
cluster_start 2
run_np 1 data synthetic --out "$WORK/d" --n 4096 --height 28 --width 28 --classes 10 >/dev/null
hostfile "$WORK/hf" node0:1 node1:1
OUT=$HERE/results/straggler-cost-cluster-$(date -u +%Y%m%d-%H%M)
: >"$OUT.jsonl"
for ((p = 0; p < PAIRS; p++)); do
  for arm in on off; do
    thr=0.05; [ $arm = off ] && thr=0
    mn "$WORK/hf" train --model mlp --device cpu --data "$WORK/d" --epochs 100 --max-steps "$STEPS" --batch-size 32 \
      --straggler-threshold $thr --metrics "$WORK/m.jsonl" >"$WORK/o.txt" 2>&1 || { tail "$WORK/o.txt"; exit 1; }
    /usr/bin/python3 - "$WORK/m.jsonl" "$p" "$arm" >>"$OUT.jsonl" <<'PY'
import json, sys
t = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "train"][1:]
links = [k["link_s"] for r in t for k in r["per_rank"] if k.get("link_s", 0) > 0]
print(json.dumps({"pair": int(sys.argv[2]), "arm": sys.argv[3], "step_s": sum(r["step_s"] for r in t) / len(t),
                  "probe_ms_median": 1e3 * sorted(links)[len(links) // 2] if links else None}))
PY
  done
done
/usr/bin/python3 - "$OUT.jsonl" "$OUT.md" "$PAIRS" "$STEPS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
on = {r["pair"]: r for r in rows if r["arm"] == "on"}
off = {r["pair"]: r for r in rows if r["arm"] == "off"}
ratios = [on[p]["step_s"] / off[p]["step_s"] for p in sorted(on)]
probe = statistics.median(r["probe_ms_median"] for r in on.values())
md = ["# Straggler detection cost across 2 hosts (mlp, 1 rank per host, %s steps, %s interleaved pairs)" % (sys.argv[4], sys.argv[3]), "",
      "| median on/off | per-pair ratios | mean step on (ms) | mean step off (ms) | link probe (ms per 256 KiB) |",
      "|---|---|---|---|---|",
      "| %.3f | %s | %.2f | %.2f | %.2f |" % (statistics.median(ratios), " ".join("%.3f" % r for r in ratios),
          1e3 * statistics.mean(r["step_s"] for r in on.values()), 1e3 * statistics.mean(r["step_s"] for r in off.values()), probe)]
open(sys.argv[2], "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
