#!/usr/bin/env bash
# cluster (label `cluster`): --zero 3 shard snapshots with several ranks per host (README
# "Snapshots in host memory"). 2 namespace hosts x 2 ranks, each host with its own /dev/shm
# (tests/cluster/nscluster.sh); gpt under --zero 3, --snapshot-every 2, disk checkpoints only at
# the end. Each rank's snapshot holds only its own parameter blocks and optimizer shard, and its
# copy goes to its partner on the next host (the i-th rank of a host -> the i-th of the next:
# 0 -> 2, 1 -> 3, 2 -> 0, 3 -> 1): before the cut node0's /dev/shm holds ranks 0 and 1's own
# shards and the copies of ranks 2 and 3's, node1's the other way round, nothing else. node1's
# cable is pulled at step >= 20; with --shrink the job goes on on node0 alone (2 ranks, global
# batch kept), resumes from node0's own shards and its copies of node1's ranks (4 shards of a
# 4-rank run, resharded for 2), loses at most 2 steps + the one in flight, and ends bitwise equal
# to the same 2-rank run resumed from a disk checkpoint of that step written by the 2 x 2 job.
source "$(dirname "$0")/lib.sh"
t_start=$SECONDS
cluster_start 2
T="$WORK/t"
run_np 1 data text --out "$T" --test-fraction 0.1 /usr/share/common-licenses >/dev/null
hostfile "$WORK/hf" node0:2 node1:2
base=(train --device cpu --model gpt --model-config n_layer=2,n_head=2,n_embd=64,bias=false --data "$T" --seq-len 32
  --zero 3 --optimizer adamw --lr 3e-3 --weight-decay 0.1 --schedule constant --seed 4 --log-every 1 --epochs 100
  --ckpt-every 1000 --collective-timeout 15 --snapshot-every 2 --snapshot-nice 0)

MN_FLAGS="--spares 0 --shrink --max-restarts 1 --oversubscribe" mn "$WORK/hf" "${base[@]}" --max-steps 80 --batch-size 4 \
  --ckpt-dir "$WORK/job" --metrics "$WORK/job.jsonl" >"$WORK/job.txt" 2>"$WORK/job.err" &
job=$!
wait_for_step "$WORK/job.jsonl" 20 240 || { tail -n 20 "$WORK/job.err" "$WORK/job.txt"; fail "no train record for step 20"; }
# Every host: its ranks' own shards and the copies of the other host's, each the rank's own
# parameter blocks and optimizer shard only.
/usr/bin/python3 - "/etc/netns/$(_ns node0)/shm" "/etc/netns/$(_ns node1)/shm" <<'PY' ||
import glob, json, os, sys
for host, own, other in ((sys.argv[1], (0, 1), (2, 3)), (sys.argv[2], (2, 3), (0, 1))):
    job = max(glob.glob(f"{host}/hpctrain-*"), key=os.path.getmtime)
    got = sorted(os.listdir(job))
    want = sorted([f"rank-{r:05d}" for r in own] + [f"copy-of-rank-{r:05d}" for r in other])
    assert got == want, (host, got)
    for d in want:
        r = int(d[-5:])
        steps = sorted(s for s in os.listdir(os.path.join(job, d)) if s.startswith("step-") and not s.endswith(".tmp"))
        assert 1 <= len(steps) <= 2, (d, steps)
        names = [t["name"] for t in json.load(open(os.path.join(job, d, steps[-1], "manifest.json")))["tensors"]]
        blocks = [n for n in names if n.startswith("zero3/")]
        optim = [n for n in names if n.startswith("optim/zero/r")]
        assert blocks and all(n.startswith(f"zero3/r{r}.b") for n in blocks), (d, blocks)
        assert optim and all(n.startswith(f"optim/zero/r{r}.") for n in optim), (d, optim)
        assert not [n for n in names if n.startswith("model/") and n.endswith(".weight")], (d, names)
print("ok: node0's /dev/shm: ranks 0 and 1's own shards + the copies of ranks 2 and 3's; node1's: the other way "
      "round (each a rank's own parameter blocks and optimizer shard, no gathered state)")
PY
  { link_down node1; wait $job; fail "a host's /dev/shm holds other than its ranks' shards and its partners' copies"; }
link_down node1
t_cut=$(date +%s.%N)
set +e; wait $job; rc=$?; set -e
[ "$rc" = 0 ] || { tail -30 "$WORK/job.err"; fail "the job exited $rc after losing node1"; }
grep -q "^multinode.sh: restart 1/1: host node1 lost (ranks\? 2.*shrunk to node0 with 2 rank(s), --batch-size 4 -> 8" "$WORK/job.err" ||
  { cat "$WORK/job.err"; fail "no restart line naming the shrink"; }
grep -q "saved with 4 rank(s); now 2, global batch 16" "$WORK/job.txt" || { grep resumed "$WORK/job.txt"; fail "not resumed on 2 ranks"; }
/usr/bin/python3 - "$WORK/job.jsonl" "$t_cut" <<'PY' || fail "restart record"
import json, sys
r = [x for x in map(json.loads, open(sys.argv[1])) if x["type"] == "restart"]
assert len(r) == 1, r
r = r[0]
assert r["lost_hosts"] == ["node1"], r
want = ("snapshot step %d: rank 0's shard from host node0's memory, rank 1's shard from host node0's memory, rank 2's "
        "shard from host node0's copy, rank 3's shard from host node0's copy (4 shard(s) of a 4-rank run") % r["resumed_step"]
assert r["resumed_from"].startswith(want), r
assert r["steps_lost"] <= 3, r
again = r["failed_at"] + r["recovery_s"] - float(sys.argv[2])
print(f"measured: resumed from {r['resumed_from']}; {r['steps_lost']} steps lost; training again {again:.1f} s "
      f"after the cut (recovery_s {r['recovery_s']:.1f})")
assert 0 < again <= 45, f"training again {again:.1f} s after the cut"
PY
n=$(/usr/bin/python3 -c "import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if '\"restart\"' in l][0]['resumed_step'])" "$WORK/job.jsonl")
# The reference: the 2 x 2 job's state at step n (it is deterministic: a 2 x 2 run that stops
# there writes it to disk), resumed by 2 ranks x 8 on one host.
link_up node1
mn "$WORK/hf" "${base[@]}" --max-steps "$n" --batch-size 4 --ckpt-dir "$WORK/at" >"$WORK/at.txt" 2>&1 ||
  { tail "$WORK/at.txt"; fail "the 2 x 2 run to step $n"; }
run_np 2 "${base[@]}" --max-steps 80 --batch-size 8 --ckpt-dir "$WORK/at" >"$WORK/replay.txt" 2>&1 ||
  { tail "$WORK/replay.txt"; fail "replay"; }
run_np 1 ckpt merge "$WORK/job" --out "$WORK/job.h5" >/dev/null
run_np 1 ckpt merge "$WORK/at" --out "$WORK/at.h5" >/dev/null
/usr/bin/python3 "$COMPARE" "$WORK/job.h5" "$WORK/at.h5" --exact || fail "differs from a 2-rank resume of the same step's state"
ok "node1 (ranks 2, 3) lost: node0 alone resumed from its ranks' own shards and its copies of ranks 2 and 3's (4-rank --zero 3 run, step $n); final model == a 2 x 8 resume of that step from disk, bitwise"
echo "test_cluster_snapshot_zero3: total $((SECONDS - t_start)) s"
