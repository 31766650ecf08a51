"""Checks a run's straggler report: metrics JSONL + rank 0's stdout.

straggler_check.py METRICS STDOUT --none                 no record, progress line or summary names a rank
straggler_check.py METRICS STDOUT --rank R --cause C --within K
    a train record among the first K names rank R with cause C (and the progress line of that
    step says "slowest: rank R"), and the summary names rank R as slowest most often.
"""
import argparse, json, sys

ap = argparse.ArgumentParser()
ap.add_argument("metrics"); ap.add_argument("stdout")
ap.add_argument("--none", action="store_true")
ap.add_argument("--rank", type=int); ap.add_argument("--cause"); ap.add_argument("--within", type=int, default=2)
a = ap.parse_args()
recs = [json.loads(l) for l in open(a.metrics)]
train = [r for r in recs if r["type"] == "train"]
summary = [r for r in recs if r["type"] == "summary"][0]["summary"]
lines = open(a.stdout).read().splitlines()
for r in train:  # every record carries the widened split
    for k in r["per_rank"]:
        assert {"step_s", "data_wait_s", "compute_s", "optimizer_s", "comm_blocked_s", "wait_s"} <= set(k), k
def splits(r):
    return " ".join("r%d[data %.1f compute %.1f blocked %.1f wait %.1f]" % (i, k["data_wait_s"] * 1e3, k["compute_s"] * 1e3,
                    k["comm_blocked_s"] * 1e3, k["wait_s"] * 1e3) for i, k in enumerate(r["per_rank"]))
if a.none:
    named = [r for r in train if "straggler" in r]
    if named or summary.get("straggler") is not None or any("slowest:" in l for l in lines):
        sys.exit("FAIL: a balanced run named a straggler: %s" % [(r["step"], r["straggler"]["rank"], r["straggler"]["cause"]) for r in named])
    worst = max(train, key=lambda r: abs(r["per_rank"][0]["wait_s"] - r["per_rank"][1]["wait_s"]))
    print("ok: %d intervals, none named; largest wait gap at step %d: %s" % (len(train), worst["step"], splits(worst)))
    sys.exit(0)
hit = next((r for r in train[:a.within] if r.get("straggler", {}).get("rank") == a.rank), None)
if not hit:
    sys.exit("FAIL: no record among the first %d names rank %d: %s" % (a.within, a.rank, [splits(r) for r in train[:a.within]]))
s = hit["straggler"]
if s["cause"] != a.cause:
    sys.exit("FAIL: rank %d named at step %d with cause %s, expected %s: %s" % (a.rank, hit["step"], s["cause"], a.cause, splits(hit)))
assert s["cost_ms_per_step"] > 0 and s["host"] and len(s["per_rank"]) == len(hit["per_rank"]), s
line = next((l for l in lines if (" step %d/" % hit["step"]) in l), "")
if ("slowest: rank %d on %s" % (a.rank, s["host"])) not in line:
    sys.exit("FAIL: progress line of step %d does not name rank %d: %r" % (hit["step"], a.rank, line))
if not summary.get("straggler") or summary["straggler"]["rank"] != a.rank:
    sys.exit("FAIL: summary straggler %r, expected rank %d" % (summary.get("straggler"), a.rank))
print("ok: step %d: %s" % (hit["step"], line[line.index("slowest:"):]))
print("ok: split at step %d (ms/step): %s" % (hit["step"], splits(hit)))
print("ok: metrics straggler %s" % json.dumps({k: s[k] for k in ("rank", "host", "cost_ms_per_step", "cause")}))
print("ok: summary %s" % json.dumps(summary["straggler"]))
