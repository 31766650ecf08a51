#!/usr/bin/env bash
# e2e: `launch/local.sh --max-restarts N` on one host. Rank 1 is SIGKILLed mid-run (after the
# checkpoint of step 20): the job restarts once, resumes from the newest checkpoint, finishes with
# exit 0 and ends bitwise equal to an uninterrupted run, with a `restart` record in its metrics
# and in TensorBoard (text + restart/* scalars). A second kill with --max-restarts 0 (the
# default) is not restarted; bad input (exit 2) is never restarted; --resume none is refused.
source "$(dirname "$0")/lib.sh"
SRC=${HPCTRAIN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
export HPCTRAIN_BIN="$BIN"
"$BIN" data synthetic --out "$WORK/d" --n 2048 --height 28 --width 28 --classes 4 --seed 3 --noise 200 >/dev/null
common=(train --device cpu --model cnn --data "$WORK/d" --epochs 3 --batch-size 32 --lr 0.02 --seed 4 --log-every 5
  --max-steps 60 --ckpt-every 10 --schedule constant)
L() { timeout 300 "$SRC/launch/local.sh" -n 2 --oversubscribe "$@"; }

L -- "${common[@]}" --ckpt-dir "$WORK/ref" >"$WORK/ref.txt" 2>&1 || { tail "$WORK/ref.txt"; fail "uninterrupted run"; }
# Kill rank 1 once the metrics show step 25 (past the checkpoint of step 20).
L --max-restarts 1 -- "${common[@]}" --ckpt-dir "$WORK/r" --metrics "$WORK/r.jsonl" --tensorboard "$WORK/r-tb" \
  >"$WORK/r.txt" 2>"$WORK/r.err" &
JOB=$!
wait_for_step "$WORK/r.jsonl" 25 120 || fail "no train record for step 25"
signal_ranks KILL "$BIN train" 1
set +e; wait $JOB; RC=$?; set -e
[ "$RC" = 0 ] || { tail -20 "$WORK/r.err"; fail "restarted job: exit $RC, expected 0"; }
grep -Eq "^launch/local.sh: restart 1/1: the job ended with exit [0-9]+ \(.*\); resuming from step-000000[2-6]0$" "$WORK/r.err" ||
  { cat "$WORK/r.err"; fail "no restart line naming the checkpoint"; }
grep -q "resumed from .*step-000000[2-6]0" "$WORK/r.txt" || { cat "$WORK/r.txt"; fail "the second run did not resume"; }
[ "$(json_field "$WORK/r.txt" steps)" = 60 ] || fail "the restarted job ended at step $(json_field "$WORK/r.txt" steps)"
run_np 1 ckpt merge "$WORK/ref" --out "$WORK/ref.h5" >/dev/null
run_np 1 ckpt merge "$WORK/r" --out "$WORK/r.h5" >/dev/null
/usr/bin/python3 "$(dirname "$0")/compare_ckpt.py" "$WORK/r.h5" "$WORK/ref.h5" --exact || fail "the restarted run differs from the uninterrupted one"
ok "rank 1 SIGKILLed at step >= 25: $(grep 'restart 1/1' "$WORK/r.err" | cut -c1-160); final model == uninterrupted run, bitwise"
# The restart record: the metrics file is continued (the failed run's records stay), one
# `restart` record with the resumed step, the steps lost and the recovery time; the summary counts it.
/usr/bin/python3 - "$WORK/r.jsonl" "$WORK/r.txt" <<'PY' || fail "restart record"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
summary = json.loads([l for l in open(sys.argv[2]) if l.startswith("{")][-1])
r = [x for x in recs if x["type"] == "restart"]
assert len(r) == 1, r
r = r[0]
assert [x["type"] for x in recs].count("config") == 2, "the failed run's records were not kept"
before = max(x["step"] for x in recs[: recs.index(r)] if x["type"] == "train")
assert r["restart"] == 1 and r["of"] == 1 and r["exit_code"] != 0 and r["resumed_step"] % 10 == 0, r
assert r["steps_lost"] == before - r["resumed_step"] >= 5, (r, before)
assert 0 < r["recovery_s"] < 60, r
assert summary["restarts"] == 1, summary
print(f"ok: restart record: resumed at step {r['resumed_step']}, {r['steps_lost']} steps lost, training again "
      f"{r['recovery_s']:.1f} s after the failure (exit {r['exit_code']}: {r['cause']}); summary restarts = 1")
PY
grep -q "hpctrain train: restart 1/1 after exit .*: resumed at step .* steps lost), training again" "$WORK/r.txt" ||
  { cat "$WORK/r.txt"; fail "no restart line from the trainer"; }
# The same record in TensorBoard: a "restart" text at its step, and its numbers as restart/* scalars.
"${HPCTRAIN_HOME:-$HOME/.cache/hpctrain}/venv/bin/python" - "$WORK/r-tb" "$WORK/r.jsonl" <<'PY' || fail "restart in TensorBoard"
import json, sys
from tensorboard.backend.event_processing import plugin_event_accumulator as pea
r = [json.loads(l) for l in open(sys.argv[2]) if '"restart"' in l][0]
acc = pea.EventAccumulator(sys.argv[1], size_guidance={"tensors": 0})
acc.Reload()
texts = acc.Tensors("restart")
assert [t.step for t in texts] == [r["step"]], [t.step for t in texts]
md = texts[0].tensor_proto.string_val[0].decode()
assert "| resumed_step | %d |" % r["resumed_step"] in md and "recovery_s" in md, md
ev = acc.Tensors("restart/recovery_s")
assert len(ev) == 1 and ev[0].step == r["step"], ev
print(f"ok: TensorBoard has the restart text at step {r['step']} and restart/recovery_s")
PY

# Without --max-restarts the same kill ends the job (exit != 0), as before.
L -- "${common[@]}" --ckpt-dir "$WORK/n" --metrics "$WORK/n.jsonl" >"$WORK/n.txt" 2>"$WORK/n.err" &
JOB=$!
wait_for_step "$WORK/n.jsonl" 15 120 || fail "no train record for step 15 (no restarts)"
signal_ranks KILL "$BIN train" 1
set +e; wait $JOB; RC=$?; set -e
[ "$RC" != 0 ] || fail "a killed rank without --max-restarts exited 0"
grep -q "restart" "$WORK/n.err" && fail "restarted without --max-restarts"
ok "without --max-restarts a killed rank ends the job (exit $RC), no restart"

# Bad input is never restarted; --resume other than auto is refused before launch.
set +e
L --max-restarts 3 -- train --data "$WORK/nope" >"$WORK/b.txt" 2>&1; RC=$?
set -e
[ "$RC" = 2 ] && ! grep -q "restart [0-9]" "$WORK/b.txt" && grep -q "^launch/local.sh: the job ended with exit 2 (bad input): not restarted$" "$WORK/b.txt" ||
  { cat "$WORK/b.txt"; fail "bad input: exit $RC or restarted"; }
set +e
L --max-restarts 1 -- "${common[@]}" --resume none >"$WORK/x.txt" 2>&1; RC=$?
set -e
[ "$RC" = 2 ] && grep -q "drop --resume none" "$WORK/x.txt" || { cat "$WORK/x.txt"; fail "--resume none: exit $RC"; }
ok "bad input (exit 2) not restarted; --max-restarts with --resume none refused (exit 2)"
