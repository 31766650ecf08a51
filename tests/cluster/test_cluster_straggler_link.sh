#!/usr/bin/env bash
# cluster (label `cluster`): a slow link is named (#20). 2 namespace hosts, 1 rank each, mlp
# (comm-heavy: 0.4 MB of gradients per step).
#   a. Balanced, 2 hosts: the link probe runs every interval and nothing is reported.
#   a2. 2 hosts x 2 ranks: only the ranks whose next rank is on the other host (1 and 3) probe.
#   b. node1's egress shaped to 200 Mbit/s with `tc ... tbf` (this kernel has no sch_netem; a
#      rate limit is what the probe can attribute, see diag/link_probe.h): within three log
#      intervals the progress line and the metrics name rank 1 on node1, cause comm, its link to
#      rank 0 on node0; the summary names rank 1.
#   c. 3 hosts (an odd ring: three probe phases), node1 shaped as in b: rank 1 on node1 named,
#      its link to rank 2 on node2.
source "$(dirname "$0")/lib.sh"
cluster_start 3
D="$WORK/d"
CHECK="$CLUSTER_TESTS_DIR/../e2e/straggler_check.py"
run_np 1 data synthetic --out "$D" --n 2048 --height 28 --width 28 --classes 10 >/dev/null
hostfile "$WORK/hf" node0:1 node1:1
args=(train --model mlp --device cpu --data "$D" --epochs 5 --max-steps 60 --batch-size 32 --log-every 10)

mn "$WORK/hf" "${args[@]}" --metrics "$WORK/m0.jsonl" >"$WORK/o0.txt" 2>&1 || { tail "$WORK/o0.txt"; fail "balanced 2-host run"; }
grep -q "hpctrain train: 2 rank(s) on 2 node(s)" "$WORK/o0.txt" || fail "the balanced run was not on 2 nodes"
/usr/bin/python3 "$CHECK" "$WORK/m0.jsonl" "$WORK/o0.txt" --none || fail "a balanced 2-host run named a straggler"
/usr/bin/python3 - "$WORK/m0.jsonl" <<'PY' || fail "balanced run: link probes"
import json, sys
t = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "train"]
probes = [[k["link_s"] * 1e3 for k in r["per_rank"]] for r in t]
assert all(p[0] > 0 and p[1] > 0 for p in probes), probes  # both ranks probed every interval
print("ok: a. balanced: link probes (ms per 256 KiB, r0->r1 / r1->r0): " + ", ".join("%.2f/%.2f" % tuple(p) for p in probes))
PY
ok "a. 2 hosts balanced, 60 steps: nothing reported"

hostfile "$WORK/hf22" node0:2 node1:2
MN_FLAGS=--oversubscribe mn "$WORK/hf22" "${args[@]}" --metrics "$WORK/m22.jsonl" >"$WORK/o22.txt" 2>&1 \
  || { tail "$WORK/o22.txt"; fail "2 hosts x 2 ranks"; }
/usr/bin/python3 - "$WORK/m22.jsonl" <<'PY' || fail "2 hosts x 2 ranks: probe placement"
import json, sys
t = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "train"]
for r in t:
    l = [k["link_s"] for k in r["per_rank"]]
    assert l[0] == 0 and l[2] == 0 and l[1] > 0 and l[3] > 0, l
print("ok: a2. 2 hosts x 2 ranks: ranks 1 and 3 probe (%s ms), ranks 0 and 2 send nothing" %
      ", ".join("%.2f/%.2f" % (r["per_rank"][1]["link_s"] * 1e3, r["per_rank"][3]["link_s"] * 1e3) for r in t))
PY

ns=$(_ns node1)
ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate 200mbit burst 64kb latency 50ms \
  || { echo "SKIPPED (b): tc tbf unavailable"; exit 0; }
mn "$WORK/hf" "${args[@]}" --metrics "$WORK/m1.jsonl" >"$WORK/o1.txt" 2>&1 || { tail "$WORK/o1.txt"; fail "shaped 2-host run"; }
hostfile "$WORK/hf3" node0:1 node1:1 node2:1
mn "$WORK/hf3" "${args[@]}" --metrics "$WORK/m3.jsonl" >"$WORK/o3.txt" 2>&1 || { tail "$WORK/o3.txt"; fail "shaped 3-host run"; }
ip netns exec "$ns" tc qdisc del dev eth0 root
/usr/bin/python3 - "$WORK/m1.jsonl" <<'PY'
import json, sys
t = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "train"]
print("b. shaped: link probes (ms per 256 KiB, r0->r1 / r1->r0): " +
      ", ".join("%.2f/%.2f" % tuple(k["link_s"] * 1e3 for k in r["per_rank"]) for r in t))
PY
/usr/bin/python3 "$CHECK" "$WORK/m1.jsonl" "$WORK/o1.txt" --rank 1 --cause comm --within 3 || fail "the slow link was not named"
/usr/bin/python3 - "$WORK/m1.jsonl" "$WORK/o1.txt" <<'PY' || fail "shaped run: link details"
import json, sys
t = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "train"]
hit = next(r for r in t if "straggler" in r)
link = hit["straggler"]["link"]
assert link["to"] == 0 and link["to_host"] == "node0" and link["probe_ms"] > 3 * link["median_probe_ms"], link
line = next(l for l in open(sys.argv[2]) if "slowest:" in l)
assert "comm: its link to rank 0 on node0" in line, line
print("ok: b. step %d: link %s" % (hit["step"], json.dumps(link)))
PY
ok "b. node1's egress at 200 Mbit/s: rank 1 on node1 named, cause comm, link to rank 0"

grep -q "hpctrain train: 3 rank(s) on 3 node(s)" "$WORK/o3.txt" || fail "the 3-host run was not on 3 nodes"
/usr/bin/python3 "$CHECK" "$WORK/m3.jsonl" "$WORK/o3.txt" --rank 1 --cause comm --within 3 || fail "3 hosts: the slow link was not named"
grep -q "comm: its link to rank 2 on node2" "$WORK/o3.txt" || fail "3 hosts: the finding does not name the link to rank 2 on node2"
ok "c. 3 hosts, node1's egress at 200 Mbit/s: rank 1 on node1 named, its link to rank 2 on node2"
