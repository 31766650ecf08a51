#!/usr/bin/env bash
# e2e: --snapshot-every under --zero 3 (README "Snapshots in host memory"): each rank's snapshot
# holds only its own parameter blocks (zero3/r<rank>.b<unit>) and optimizer shard
# (optim/zero/r<rank>.*), never the whole model, and nothing is gathered at a snapshot step.
# 1. A 2-rank gpt run under `launch/local.sh --max-restarts 1`: rank 1 SIGKILLed mid-run; the
#    restarted job resumes from both ranks' shard snapshots (steps lost as its restart record
#    says) and ends bitwise equal to an uninterrupted run.
# 2. Another world size: a 2-rank run killed whole, resumed on 1 rank (global batch kept) from
#    its shard snapshots, ends bitwise equal to the same 1-rank run resumed from a disk
#    checkpoint of that step.
# (A rank killed while writing its ZeRO snapshot: test_snapshot_zero_midwrite.sh.)
source "$(dirname "$0")/lib.sh"
SRC=${HPCTRAIN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
export HPCTRAIN_BIN="$BIN"
SHM=$(mktemp -d /dev/shm/hpctrain-e2e-snap3.XXXXXX)
trap 'rm -rf "$WORK" "$SHM"' EXIT
run_np 1 data text --out "$WORK/t" --test-fraction 0.1 /usr/share/common-licenses >/dev/null
STEPS=80
gpt=(train --device cpu --model gpt --model-config n_layer=2,n_head=2,n_embd=64,bias=false --data "$WORK/t" --seq-len 32
  --epochs 100 --optimizer adamw --lr 3e-3 --weight-decay 0.1 --schedule constant --seed 4 --log-every 1
  --ckpt-every 1000 --zero 3 --snapshot-every 2 --snapshot-dir "$SHM")
L() { timeout 300 "$SRC/launch/local.sh" -n 2 --oversubscribe "$@"; }
merge() { run_np 1 ckpt merge "$WORK/$1" --out "$WORK/$1.h5" >/dev/null || fail "merge $1"; }
exact() {  # A B WHAT
  /usr/bin/python3 "$(dirname "$0")/compare_ckpt.py" "$WORK/$1.h5" "$WORK/$2.h5" --exact >"$WORK/cmp.txt" ||
    { cat "$WORK/cmp.txt"; fail "$3"; }
  ok "$3 ($(tail -1 "$WORK/cmp.txt" | cut -c5-))"
}

L -- "${gpt[@]}" --max-steps $STEPS --batch-size 8 --ckpt-dir "$WORK/ref" >"$WORK/ref.txt" 2>&1 || { tail "$WORK/ref.txt"; fail "uninterrupted run"; }
line=$(grep -o "snapshots every 2 step(s) in $SHM/hpctrain-.*" "$WORK/ref.txt") || { cat "$WORK/ref.txt"; fail "no start-up line"; }
[[ "$line" == *"each rank keeps its own ZeRO-3 shard (parameter blocks and optimizer state); one host"* ]] ||
  fail "--zero 3 start-up line: $line"
ok "uninterrupted --zero 3 run: $(echo "$line" | grep -o '[0-9]* MiB per host[^;]*')"
merge ref

# Each rank's newest snapshot: its own blocks and shard only, about a 1/2 of the parameter bytes.
check_shards() {
  /usr/bin/python3 - "$SHM" <<'PY'
import glob, json, os, sys
for r in (0, 1):
    steps = sorted(d for d in glob.glob(f"{sys.argv[1]}/hpctrain-*/rank-0000{r}/step-*") if not d.endswith(".tmp"))
    assert steps, f"no snapshot of rank {r}"
    m = json.load(open(os.path.join(steps[-1], "manifest.json")))
    ts = {t["name"]: t["nbytes"] for t in m["tensors"]}
    blocks = {n: b for n, b in ts.items() if n.startswith("zero3/")}
    optim = [n for n in ts if n.startswith("optim/zero/r")]
    model = {n: b for n, b in ts.items() if n.startswith("model/")}
    assert blocks and all(n.startswith(f"zero3/r{r}.b") for n in blocks), (r, sorted(blocks))
    assert optim and all(n.startswith(f"optim/zero/r{r}.") for n in optim), (r, optim)
    assert not [n for n in model if n.endswith(".weight")], (r, sorted(model))  # every weight is sharded
print(f"ok: each rank's snapshot holds its own {len(blocks)} parameter block(s) ({sum(blocks.values())} bytes) "
      f"and {len(optim)} optimizer shard tensor(s), no whole parameter ({len(model)} replicated model/ tensor(s))")
PY
}

restart_check() {
  /usr/bin/python3 - "$WORK/$1.jsonl" <<'PY'
import json, sys
r = [x for x in map(json.loads, open(sys.argv[1])) if x["type"] == "restart"]
assert len(r) == 1, r
r = r[0]
assert r["resumed_from"].startswith("snapshot step %d" % r["resumed_step"]), r
assert r["steps_lost"] <= 3, r
print(f"ok: {r['resumed_from']}; {r['steps_lost']} steps lost; training again {r['recovery_s']:.1f} s after the failure")
PY
}

# 1. Rank 1 SIGKILLed at step >= 25 (no disk checkpoint yet): resumed from both ranks' shards.
L --max-restarts 1 -- "${gpt[@]}" --max-steps $STEPS --batch-size 8 --snapshot-nice 0 --ckpt-dir "$WORK/r" --metrics "$WORK/r.jsonl" \
  >"$WORK/r.txt" 2>"$WORK/r.err" &
JOB=$!
wait_for_step "$WORK/r.jsonl" 25 120 || fail "no train record for step 25"
check_shards || { signal_ranks KILL "$BIN train"; fail "a --zero 3 snapshot holds more than its rank's shard"; }
signal_ranks KILL "$BIN train" 1
set +e; wait $JOB; RC=$?; set -e
[ "$RC" = 0 ] || { tail -20 "$WORK/r.err"; fail "restarted job: exit $RC, expected 0"; }
grep -q "hpctrain train: resumed from snapshot step [0-9]*: rank 0's shard from host [^ ]*'s memory, rank 1's shard from host [^ ]*'s memory" "$WORK/r.txt" ||
  { cat "$WORK/r.txt" "$WORK/r.err"; fail "not resumed from both ranks' shard snapshots"; }
restart_check r || fail "restart record"
merge r
exact r ref "--zero 3, rank 1 SIGKILLed at step >= 25: resumed from shard snapshots; final model == uninterrupted run, bitwise"
[ -z "$(ls -A "$SHM")" ] || { ls -R "$SHM"; fail "a clean finish left snapshots behind"; }

# 2. A 2-rank run SIGKILLed whole at step >= 25, resumed on 1 rank x 16 from its snapshots; the
# reference: the same 1-rank run resumed from a disk checkpoint of that step (a 2-rank run that
# stops there: --schedule constant, so its steps are the longer run's).
run_np 2 "${gpt[@]}" --max-steps $STEPS --batch-size 8 --ckpt-dir "$WORK/s" --metrics "$WORK/s.jsonl" >"$WORK/s.txt" 2>&1 &
JOB=$!
wait_for_step "$WORK/s.jsonl" 25 120 || fail "no train record for step 25 (shrink)"
signal_ranks KILL "$BIN train"
set +e; wait $JOB; set -e
S=$(/usr/bin/python3 - "$SHM" <<'PY'
import glob, os, sys
have = [{int(os.path.basename(d)[5:]) for d in glob.glob(f"{sys.argv[1]}/hpctrain-*/rank-0000{r}/step-*")
         if not d.endswith(".tmp")} for r in (0, 1)]
print(max(have[0] & have[1]))
PY
) || { ls -R "$SHM"; fail "no step both ranks' snapshots hold"; }
run_np 2 "${gpt[@]}" --batch-size 8 --ckpt-dir "$WORK/d" --max-steps "$S" >"$WORK/d.txt" 2>&1 ||
  { tail "$WORK/d.txt"; fail "the 2-rank run to step $S"; }
run_np 1 "${gpt[@]}" --max-steps $STEPS --batch-size 16 --ckpt-dir "$WORK/s" >"$WORK/s1.txt" 2>&1 || { tail "$WORK/s1.txt"; fail "1-rank resume from snapshots"; }
grep -q "hpctrain train: resumed from snapshot step $S: rank 0's shard from host [^ ]*'s memory, rank 1's shard from host [^ ]*'s memory (2 shard(s) of a 2-rank run" "$WORK/s1.txt" ||
  { cat "$WORK/s1.txt"; fail "the 1-rank run did not resume from the 2-rank run's shards of step $S"; }
grep -q "saved with 2 rank(s); now 1" "$WORK/s1.txt" || { cat "$WORK/s1.txt"; fail "no resharding line"; }
run_np 1 "${gpt[@]}" --max-steps $STEPS --batch-size 16 --ckpt-dir "$WORK/d1" --resume "$WORK/d/step-$(printf %08d "$S")" >"$WORK/d1.txt" 2>&1 ||
  { tail "$WORK/d1.txt"; fail "1-rank resume from the disk checkpoint"; }
merge s
merge d1
exact s d1 "2-rank --zero 3 run killed at step >= 25, resumed on 1 rank from its step-$S shard snapshots == from a disk checkpoint of step $S, bitwise"
[ -z "$(ls -A "$SHM")" ] || { ls -R "$SHM"; fail "a clean finish left snapshots behind"; }
