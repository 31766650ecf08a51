#!/usr/bin/env bash
# e2e: --snapshot-every (README "Snapshots in host memory"). Two ranks under
# `launch/local.sh --max-restarts 1`, disk checkpoints far apart (only at the end): rank 1 is
# SIGKILLed mid-run; the restarted job resumes from the snapshot in /dev/shm (its restart record
# and first line say so), loses at most 2 steps + the one in flight, and ends bitwise equal to an
# uninterrupted run. The same under --zero 1, where each rank's snapshot holds only its own
# optimizer shard (one host: no copies) and the resume puts the shards back together. Then a
# rank killed while its snapshot is being written: the previous slot is used. A clean finish
# leaves no snapshot behind; the summary counts the snapshots taken and skipped. Bad input: see
# bad_input_cases.py.
source "$(dirname "$0")/lib.sh"
SRC=${HPCTRAIN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
export HPCTRAIN_BIN="$BIN"
SHM=$(mktemp -d /dev/shm/hpctrain-e2e-snap.XXXXXX)
trap 'rm -rf "$WORK" "$SHM"' EXIT
"$BIN" data synthetic --out "$WORK/d" --n 2048 --height 28 --width 28 --classes 4 --seed 3 --noise 200 >/dev/null
common=(train --device cpu --model cnn --data "$WORK/d" --epochs 3 --batch-size 32 --lr 0.02 --seed 4 --log-every 1
  --max-steps 60 --ckpt-every 1000 --schedule constant --optimizer adamw --snapshot-every 2 --snapshot-dir "$SHM")
L() { timeout 300 "$SRC/launch/local.sh" -n 2 --oversubscribe "$@"; }
# The runs that are killed bound the steps lost: their writers compete for the CPU (--snapshot-nice
# 0); at the default (19: idle time only) 2 ranks on 2 busy cores skip most snapshots (the
# uninterrupted runs' counts show how many).
NICE=(--snapshot-nice 0)

L -- "${common[@]}" --ckpt-dir "$WORK/ref" >"$WORK/ref.txt" 2>&1 || { tail "$WORK/ref.txt"; fail "uninterrupted run"; }
grep -q "hpctrain train: snapshots every 2 step(s) in $SHM/hpctrain-.*MiB per host" "$WORK/ref.txt" ||
  { cat "$WORK/ref.txt"; fail "no snapshot start-up line"; }
[ -z "$(ls -A "$SHM")" ] || { ls -R "$SHM"; fail "a clean finish left snapshots behind"; }
ok "uninterrupted run: $(grep -o 'snapshots every.*per host' "$WORK/ref.txt"); a clean finish removed them"
taken=$(json_field "$WORK/ref.txt" snapshots_taken); skipped=$(json_field "$WORK/ref.txt" snapshots_skipped)
[ "$taken" -gt 0 ] && [ $((taken + skipped)) = 29 ] || fail "summary: snapshots_taken $taken, snapshots_skipped $skipped (want 29 in all)"
grep -q "^hpctrain train: snapshots: $taken taken, $skipped skipped" "$WORK/ref.txt" || fail "no final snapshots line"
ok "summary (--snapshot-nice 19, 2 ranks on 2 cores): snapshots_taken $taken, snapshots_skipped $skipped"

# A --snapshot-dir without room for two slots: one warning line, the run goes on without snapshots.
mkdir "$WORK/small"
if mount -t tmpfs -o size=4m tmpfs "$WORK/small" 2>/dev/null; then
  set +e
  run_np 2 train --device cpu --model cnn --data "$WORK/d" --batch-size 32 --max-steps 4 --snapshot-every 2 \
    --snapshot-dir "$WORK/small" >"$WORK/small.txt" 2>&1; rc=$?
  set -e
  umount "$WORK/small"
  [ "$rc" = 0 ] && [ "$(grep -c 'WARNING: snapshots off' "$WORK/small.txt")" = 1 ] ||
    { cat "$WORK/small.txt"; fail "a small --snapshot-dir: exit $rc, or not one warning line"; }
  ok "$(grep -o 'WARNING: snapshots off.*' "$WORK/small.txt" | cut -c1-200)"
else
  echo "SKIPPED (part): cannot mount a small tmpfs here (not root?)"
fi

# restart_check RUN: the record says the state came from a snapshot, steps lost <= 3.
restart_check() {
  /usr/bin/python3 - "$WORK/$1.jsonl" "$WORK/$1.txt" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
r = [x for x in recs if x["type"] == "restart"]
assert len(r) == 1, r
r = r[0]
assert r["resumed_from"].startswith("snapshot step %d" % r["resumed_step"]), r
assert r["steps_lost"] <= 3, r
print(f"ok: resumed from {r['resumed_from']}; {r['steps_lost']} steps lost; training again {r['recovery_s']:.1f} s after the failure")
PY
}

# 1. Rank 1 SIGKILLed at step >= 25 (the newest disk checkpoint: none).
L --max-restarts 1 -- "${common[@]}" "${NICE[@]}" --ckpt-dir "$WORK/r" --metrics "$WORK/r.jsonl" >"$WORK/r.txt" 2>"$WORK/r.err" &
JOB=$!
wait_for_step "$WORK/r.jsonl" 25 120 || fail "no train record for step 25"
signal_ranks KILL "$BIN train" 1
set +e; wait $JOB; RC=$?; set -e
[ "$RC" = 0 ] || { tail -20 "$WORK/r.err"; fail "restarted job: exit $RC, expected 0"; }
grep -q "hpctrain train: resumed from snapshot step [0-9]*: rank 0's snapshot on host" "$WORK/r.txt" ||
  { cat "$WORK/r.txt" "$WORK/r.err"; fail "the second run did not resume from a snapshot"; }
restart_check r || fail "restart record"
grep -q "hpctrain train: restart 1/1 after exit .*; resumed from snapshot step" "$WORK/r.txt" || fail "no restart line naming the snapshot"
run_np 1 ckpt merge "$WORK/ref" --out "$WORK/ref.h5" >/dev/null
run_np 1 ckpt merge "$WORK/r" --out "$WORK/r.h5" >/dev/null
/usr/bin/python3 "$(dirname "$0")/compare_ckpt.py" "$WORK/r.h5" "$WORK/ref.h5" --exact || fail "the restarted run differs from the uninterrupted one"
ok "rank 1 SIGKILLed at step >= 25: resumed from a snapshot; final model == uninterrupted run, bitwise"

# 1b. --zero 1: shard-only snapshots (each rank's holds optim/zero/r<its rank>.* only), rank 1
# SIGKILLed at step >= 25, resumed from both ranks' shards, bitwise equal to an uninterrupted run.
z1=("${common[@]}" --zero 1)
L -- "${z1[@]}" --ckpt-dir "$WORK/zref" >"$WORK/zref.txt" 2>&1 || { tail "$WORK/zref.txt"; fail "uninterrupted --zero 1 run"; }
grep -q "each rank keeps its own ZeRO shard; one host, so no copy" "$WORK/zref.txt" || { cat "$WORK/zref.txt"; fail "--zero 1: start-up line"; }
L --max-restarts 1 -- "${z1[@]}" "${NICE[@]}" --ckpt-dir "$WORK/z" --metrics "$WORK/z.jsonl" >"$WORK/z.txt" 2>"$WORK/z.err" &
JOB=$!
wait_for_step "$WORK/z.jsonl" 25 120 || fail "--zero 1: no train record for step 25"
/usr/bin/python3 - "$SHM" <<'PY' || { signal_ranks KILL "$BIN train"; fail "--zero 1: a snapshot holds another rank's shard"; }
import glob, json, os, sys
for r in (0, 1):
    steps = sorted(d for d in glob.glob(f"{sys.argv[1]}/hpctrain-*/rank-0000{r}/step-*") if not d.endswith(".tmp"))
    assert steps, f"no snapshot of rank {r}"
    names = [t["name"] for t in json.load(open(os.path.join(steps[-1], "manifest.json")))["tensors"]]
    zero = [n for n in names if n.startswith("optim/zero/r")]
    assert zero and all(n.startswith(f"optim/zero/r{r}.") for n in zero), (r, zero)
    assert any(n.startswith("model/") for n in names), names
print(f"ok: rank 0's and rank 1's snapshots hold only their own shard ({len(zero)} optimizer tensor(s) each)")
PY
signal_ranks KILL "$BIN train" 1
set +e; wait $JOB; RC=$?; set -e
[ "$RC" = 0 ] || { tail -20 "$WORK/z.err"; fail "--zero 1 restarted job: exit $RC, expected 0"; }
grep -q "hpctrain train: resumed from snapshot step [0-9]*: rank 0's shard from host [^ ]*'s memory, rank 1's shard from host [^ ]*'s memory" "$WORK/z.txt" ||
  { cat "$WORK/z.txt" "$WORK/z.err"; fail "--zero 1: not resumed from both ranks' shards"; }
restart_check z || fail "--zero 1: restart record"
run_np 1 ckpt merge "$WORK/zref" --out "$WORK/zref.h5" >/dev/null
run_np 1 ckpt merge "$WORK/z" --out "$WORK/z.h5" >/dev/null
/usr/bin/python3 "$(dirname "$0")/compare_ckpt.py" "$WORK/z.h5" "$WORK/zref.h5" --exact || fail "--zero 1: the restarted run differs from the uninterrupted one"
ok "--zero 1, rank 1 SIGKILLed at step >= 25: resumed from both ranks' shard snapshots; final model == uninterrupted run, bitwise"

# 2. A rank SIGKILLed while writing its snapshot leaves its previous slot whole. Rank 1 is
# stopped once a step-*.tmp slot appears in its directory (the write in flight), then every rank
# is SIGKILLed; rank 0's snapshots are removed (as if its host were lost), so only rank 1's
# previous slot is left to resume from.
run_np 2 "${common[@]}" --ckpt-dir "$WORK/w" --metrics "$WORK/w.jsonl" >"$WORK/w.txt" 2>"$WORK/w.err" &
JOB=$!
wait_for_step "$WORK/w.jsonl" 20 120 || fail "no train record for step 20 (mid-write kill)"
kill_rank1_mid_write "$JOB" "mid-write kill"
rm -rf "$SHM"/hpctrain-*/rank-00000
run_np 2 "${common[@]}" --ckpt-dir "$WORK/w" --metrics "$WORK/w2.jsonl" >"$WORK/w2.txt" 2>"$WORK/w2.err" ||
  { tail "$WORK/w2.err"; fail "resume after the mid-write kill"; }
grep -q "hpctrain train: resumed from snapshot step $WSTEP: rank 1's snapshot on host" "$WORK/w2.txt" ||
  { cat "$WORK/w2.txt" "$WORK/w2.err"; fail "not resumed from rank 1's previous slot (step $WSTEP)"; }
run_np 1 ckpt merge "$WORK/w" --out "$WORK/w.h5" >/dev/null
/usr/bin/python3 "$(dirname "$0")/compare_ckpt.py" "$WORK/w.h5" "$WORK/ref.h5" --exact || fail "mid-write kill: differs from the uninterrupted run"
ok "rank 1 SIGKILLed while writing $(basename "$TMP_SLOT"): resumed from its previous slot, step $WSTEP; final model == uninterrupted run, bitwise"
[ -z "$(ls -A "$SHM")" ] || { ls -R "$SHM"; fail "a clean finish left snapshots behind"; }
