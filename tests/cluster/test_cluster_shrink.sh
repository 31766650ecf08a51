#!/usr/bin/env bash
# cluster (label `cluster`): a lost host and no usable spare: `launch/multinode.sh --spares 1
# --shrink --max-restarts 1` goes on with the remaining host, the global batch kept.
# 3 namespace hosts: node0 and node1 run the job (1 rank each, --batch-size 16: global batch 32);
# node2 is the spare, but its own cable is pulled before the job starts. After the first
# checkpoint node1's cable is pulled too (--collective-timeout 15). The launcher names node1
# (rank 1), finds the spare unreachable (skipped and named), shrinks to node0 alone with
# --batch-size 32, and the job finishes: exit 0, one restart line, the restart record with
# shrunk_to, and the model:
#   - at the checkpoint it resumed from (written by the 2 hosts): within 1e-6 of the uninterrupted
#     2-rank run's at that step;
#   - at the end: bitwise the model of a 1-rank x 32 run resumed on one host from a copy of that
#     checkpoint (the launcher resumed with the right batch, step and data position);
#   - train losses for 15 steps after the resume within 1e-3 of the uninterrupted run's (a wrong
#     batch or data position moves them by percents).
# Not the final model against the uninterrupted 2 x 16 run: 1 x 32 and 2 x 16 agree to ~1e-7 per
# step, and then one step jumps (measured, seed 3: 5e-7 at step 27, 8e-4 at step 28; the loss
# 1.8e-2 apart at step 120; 4 x 8 against 1 x 32 jumped at other steps or not at all, seeds
# 3-7), as when a ReLU input or a max-pool pair within rounding takes the other branch (a
# ReLU input within 1e-7 of 0 is expected about once per 50 steps among this cnn's ~220k per
# step; not traced to the element), and the runs drift apart from there. That 1 x 32 == 2 x 16
# holds step by step is tests/e2e/test_train_equivalence.sh and test_resume.sh (short runs).
source "$(dirname "$0")/lib.sh"
t_start=$SECONDS
lost_host_start
common=(train --model cnn --sync-bn --device cpu --data "$D" --epochs 10 --max-steps 120 --lr 0.005 --schedule constant
  --seed 3 --log-every 5 --ckpt-every 10 --collective-timeout 15)
run_np 2 "${common[@]}" --batch-size 16 --ckpt-dir "$WORK/ref" --metrics "$WORK/ref.jsonl" >"$WORK/ref.txt" 2>&1 ||
  { tail "$WORK/ref.txt"; fail "uninterrupted run"; }

link_down node2
MN_FLAGS="--spares 1 --shrink --max-restarts 1 --oversubscribe" lose_node1 "--shrink" "${common[@]}" --batch-size 16
one_restart '^multinode.sh: restart 1/1: host node1 lost \(rank 1\), no spare left \(spare node2 unreachable, skipped\): shrunk to node0 with 1 rank\(s\), --batch-size 16 -> 32 \(global batch 32 kept\); resuming from step-[0-9]{8}$' \
  "node1, the unreachable spare and the shrink"
ok "node1 off the network, spare node2 too: exit 0; $line"
grep -q "saved with 2 rank(s); now 1, global batch 32" "$WORK/job.txt" || { grep resumed "$WORK/job.txt"; fail "the shrunk run did not resume on 1 rank with global batch 32"; }
[ "$(json_field "$WORK/job.txt" steps)" = 120 ] || fail "the shrunk job ended at step $(json_field "$WORK/job.txt" steps)"
run_np 1 ckpt merge "$WORK/ck/$st" --out "$WORK/ck-at.h5" >/dev/null
run_np 1 ckpt merge "$WORK/ref/$st" --out "$WORK/ref-at.h5" >/dev/null
/usr/bin/python3 "$COMPARE" "$WORK/ck-at.h5" "$WORK/ref-at.h5" --rtol 1e-6 ||
  fail "the 2-host job's $st is not within 1e-6 of the uninterrupted run's"
mkdir "$WORK/replay"
cp -r "$WORK/ck/$st" "$WORK/replay/"
echo "$st" >"$WORK/replay/latest"
run_np 1 "${common[@]}" --batch-size 32 --ckpt-dir "$WORK/replay" >"$WORK/replay.txt" 2>&1 || { tail "$WORK/replay.txt"; fail "replay"; }
run_np 1 ckpt merge "$WORK/ck" --out "$WORK/ck.h5" >/dev/null
run_np 1 ckpt merge "$WORK/replay" --out "$WORK/replay.h5" >/dev/null
/usr/bin/python3 "$COMPARE" "$WORK/ck.h5" "$WORK/replay.h5" --exact ||
  fail "the shrunk job's model differs from a 1-rank x 32 resume from its $st on one host"
/usr/bin/python3 - "$WORK/m.jsonl" "$WORK/ref.jsonl" "$n" <<'PY' || fail "losses after the resume"
import json, sys
def losses(p):
    return {r["step"]: r["loss"] for r in map(json.loads, open(p)) if r.get("type") == "train"}
job, ref, n = losses(sys.argv[1]), losses(sys.argv[2]), int(sys.argv[3])
steps = [s for s in sorted(job) if n < s <= n + 15]
assert steps, (n, sorted(job))
worst = max(abs(job[s] - ref[s]) / abs(ref[s]) for s in steps)
assert worst <= 1e-3, {s: (job[s], ref[s]) for s in steps}
print(f"losses at steps {steps}: within {worst:.1e} of the uninterrupted run's")
PY
ok "finished on node0 alone (1 rank x 32): $st within 1e-6 of the uninterrupted run; the end bitwise a one-host 1 x 32 resume from it"
/usr/bin/python3 - "$WORK/m.jsonl" "$t_cut" "$n" <<'PY' || fail "restart record"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"restart"' in l]
r = [x for x in r if x["type"] == "restart"]
assert len(r) == 1, r
r = r[0]
assert r["lost_hosts"] == ["node1"] and r["lost_ranks"] == [1] and "replaced_by" not in r, r
assert r["shrunk_to"] == {"hosts": ["node0"], "ranks": 1, "batch_size": 32}, r
assert r["recovery_s"] > 0 and r["steps_lost"] >= 0, r
assert r["resumed_step"] == int(sys.argv[3]) >= 10, f"resumed at step {r['resumed_step']}, the launcher named {sys.argv[3]}"
print(f"measured: training again {r['failed_at'] + r['recovery_s'] - float(sys.argv[2]):.1f} s after the cut, "
      f"recovery_s {r['recovery_s']:.1f}, resumed at step {r['resumed_step']}, {r['steps_lost']} steps lost")
PY
ok "restart record: lost_hosts [node1], lost_ranks [1], shrunk_to node0 x 1 rank, batch 32"
echo "test_cluster_shrink: total $((SECONDS - t_start)) s"
