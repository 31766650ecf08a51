#!/usr/bin/env bash
# e2e: --tensorboard under mpirun with 2 ranks, read back with PyPI tensorboard's
# EventAccumulator (tests/e2e/tb_check.py checks framing/CRCs and scalars == metrics JSONL).
# 1. A 150-step run, then a resumed run to 256 steps in the same directory: a second event file,
#    steps continue, every scalar of both JSONLs is there exactly once.
# 2. A run killed with SIGKILL mid-training, resumed from its last checkpoint: what it flushed
#    before the kill is there (flushed per interval), and what it logged after that checkpoint
#    is dropped by TensorBoard (SessionLog START), so the resumed curve joins without overlap.
# 3. A full disk (tmpfs) during training: one warning line, training completes, exit 0.
# 4. A directory that cannot be created: one-line error, exit 2, before any training, and an
#    earlier metrics file is intact.
source "$(dirname "$0")/lib.sh"
PY=${HPCTRAIN_HOME:-$HOME/.cache/hpctrain}/venv/bin/python
"$PY" -c "import tensorboard" || fail "$PY lacks tensorboard (bash launch/setup.sh installs it)"
CHECK=("$PY" "$(dirname "$0")/tb_check.py")
D="$WORK/d"
run_np 1 data synthetic --out "$D" --n 2048 --test-n 200 --classes 4 --height 12 --width 12 --seed 5 >/dev/null
common=(--model mlp --data "$D" --epochs 2 --batch-size 8 --lr 0.02 --log-every 10 --ckpt-every 50)

# 1. run + resume in one directory (the first run takes the directory from its TOML file)
printf 'tensorboard = "%s"\n' "$WORK/tb" >"$WORK/tb.toml"
run_np 2 train --config "$WORK/tb.toml" "${common[@]}" --max-steps 150 --ckpt-dir "$WORK/ck" \
  --metrics "$WORK/m1.jsonl" >"$WORK/r1.txt" 2>&1 || { tail "$WORK/r1.txt"; fail "first run"; }
grep -q "TensorBoard events go to $WORK/tb/events.out.tfevents." "$WORK/r1.txt" || fail "no TensorBoard line on stdout"
"${CHECK[@]}" "$WORK/tb" "$WORK/m1.jsonl" --files 1 || fail "first run's event file"
sleep 1  # a new second: the resumed run's file gets its own time stamp (a suffix otherwise)
run_np 2 train "${common[@]}" --ckpt-dir "$WORK/ck" --tensorboard "$WORK/tb" \
  --metrics "$WORK/m2.jsonl" >"$WORK/r2.txt" 2>&1 || { tail "$WORK/r2.txt"; fail "resumed run"; }
grep -q "resumed from .* at step 150" "$WORK/r2.txt" || { head "$WORK/r2.txt"; fail "did not resume at 150"; }
first=$(grep -m1 '"type":"train"' "$WORK/m2.jsonl" | sed 's/.*"step":\([0-9]*\).*/\1/')
[ "$first" = 160 ] || fail "the resumed run's first interval is at step $first, expected 160"
"${CHECK[@]}" "$WORK/tb" "$WORK/m1.jsonl" "$WORK/m2.jsonl" --files 2 || fail "resumed run's curves"
ok "run + resume: two event files, steps continue, scalars equal the metrics JSONL"

# Without --metrics, TensorBoard still gets every record, the config text included.
run_np 2 train "${common[@]}" --max-steps 30 --tensorboard "$WORK/tb0" >"$WORK/r0.txt" 2>&1 || { tail "$WORK/r0.txt"; fail "run without --metrics"; }
"$PY" - "$WORK/tb0" <<'PY' 2>/dev/null || fail "run without --metrics: TensorBoard lacks records"
import sys
from tensorboard.backend.event_processing import plugin_event_accumulator as pea
a = pea.EventAccumulator(sys.argv[1]); a.Reload()
assert set(a.PluginTagToContent("text")) == {"config", "summary"}, a.PluginTagToContent("text")
assert [e.step for e in a.Tensors("train/loss")] == [10, 20, 30], a.Tensors("train/loss")
PY
ok "without --metrics: config and summary texts, train/loss at 10, 20, 30"

# 2. SIGKILL mid-run, then resume from the last checkpoint
long=(--model mlp --data "$D" --epochs 200 --batch-size 8 --lr 0.02 --log-every 10 --ckpt-every 300 --ckpt-async false)
"$MPIEXEC" -np 2 "${MPIFLAGS[@]}" "$BIN" train "${long[@]}" --ckpt-dir "$WORK/ck2" \
  --tensorboard "$WORK/tb2" --metrics "$WORK/k1.jsonl" >"$WORK/k1.txt" 2>&1 &
mpi_pid=$!
# Kill once a checkpoint is committed and 20 more steps are logged (280 steps before the next).
"$PY" - "$WORK/k1.jsonl" <<'PY' || { kill $mpi_pid; fail "killed run: no checkpoint + later interval logged in time"; }
import json, sys, time
deadline = time.time() + 240
while time.time() < deadline:
    try:
        recs = [json.loads(l) for l in open(sys.argv[1]) if l.endswith("\n")]
    except FileNotFoundError:
        recs = []
    ck = [r["step"] for r in recs if r["type"] == "checkpoint"]
    tr = [r["step"] for r in recs if r["type"] == "train"]
    if ck and tr and tr[-1] >= ck[-1] + 20:
        sys.exit(0)
    time.sleep(0.05)
sys.exit(1)
PY
ranks=$(pgrep -P $mpi_pid || true)
[ -n "$ranks" ] || fail "no rank processes under mpiexec $mpi_pid"
kill -KILL $ranks
wait $mpi_pid 2>/dev/null || true
resume_at=$(sed 's/step-0*//' "$WORK/ck2/latest")
last=$(tail -1 "$WORK/k1.jsonl" | sed 's/.*"step":\([0-9]*\).*/\1/')
[ "$last" -gt $((resume_at + 10)) ] || fail "the killed run logged nothing after its checkpoint ($last <= $resume_at + 10)"
# Everything the killed run logged before its last record is in its event file.
"${CHECK[@]}" "$WORK/tb2" "$WORK/k1.jsonl" --files 1 --upto $((last - 1)) || fail "killed run's event file lacks what it logged"
sleep 1
run_np 2 train "${long[@]}" --max-steps $((resume_at + 40)) --ckpt-dir "$WORK/ck2" --tensorboard "$WORK/tb2" \
  --metrics "$WORK/k2.jsonl" >"$WORK/k2.txt" 2>&1 || { tail "$WORK/k2.txt"; fail "resume after kill"; }
"${CHECK[@]}" "$WORK/tb2" "$WORK/k1.jsonl:$resume_at" "$WORK/k2.jsonl" --files 2 || fail "curves after kill + resume"
ok "SIGKILL after step $last, resumed at $resume_at: orphaned steps dropped, curves join"

# 3. full disk: logging stops with one warning, training goes on
if mkdir -p "$WORK/full" && mount -t tmpfs -o size=64k tmpfs "$WORK/full" 2>/dev/null; then
  trap 'umount "$WORK/full" 2>/dev/null || true; rm -rf "$WORK"' EXIT
  head -c $((64 * 1024 - 8 * 1024)) /dev/zero >"$WORK/full/filler" 2>/dev/null || true
  run_np 2 train --model mlp --data "$D" --epochs 2 --batch-size 8 --lr 0.02 --log-every 1 \
    --tensorboard "$WORK/full/tb" --metrics "$WORK/f.jsonl" \
    >"$WORK/f.txt" 2>"$WORK/f.err" || { grep hpctrain: "$WORK/f.err"; fail "full disk ended the run"; }
  n=$(grep -c "warning: TensorBoard logging stopped" "$WORK/f.err" || true)
  [ "$n" = 1 ] || { cat "$WORK/f.err"; fail "expected one warning line, got $n"; }
  grep -q "No space left on device" "$WORK/f.err" || { cat "$WORK/f.err"; fail "warning lacks the cause"; }
  steps=$(json_field "$WORK/f.txt" steps)
  [ "$steps" = 256 ] || fail "full disk: $steps steps, expected 256"
  [ "$(grep -c '"type":"train"' "$WORK/f.jsonl")" = 256 ] || fail "full disk: the metrics file lost records"
  # What was written before the disk filled reads back, equal to the JSONL.
  "${CHECK[@]}" "$WORK/full/tb" "$WORK/f.jsonl" --files 1 --cut || fail "full disk: the event file before the failure"
  ok "full disk: one warning ($(grep warning "$WORK/f.err" | head -c 160)), training completed"
  umount "$WORK/full"
else
  echo "skip: cannot mount a tmpfs here (needs root): full-disk case not run"
fi

# 4. an uncreatable directory: one-line error at set-up, exit 2, old metrics intact
touch "$WORK/a-file"
cp "$WORK/m1.jsonl" "$WORK/keep.jsonl"
rc=0
run_np 2 train "${common[@]}" --tensorboard "$WORK/a-file/tb" --metrics "$WORK/keep.jsonl" \
  >"$WORK/b.txt" 2>"$WORK/b.err" || rc=$?
[ "$rc" = 2 ] || { cat "$WORK/b.err"; fail "bad --tensorboard: exit $rc, expected 2"; }
[ "$(grep -c '^hpctrain:' "$WORK/b.err")" = 1 ] && grep -q "^hpctrain: error: .*a-file/tb" "$WORK/b.err" ||
  { cat "$WORK/b.err"; fail "bad --tensorboard: expected one error line naming the path"; }
cmp -s "$WORK/m1.jsonl" "$WORK/keep.jsonl" || fail "bad --tensorboard replaced the metrics file"
! grep -q "epoch 1/" "$WORK/b.txt" || fail "bad --tensorboard: training started"
ok "bad --tensorboard: $(cat "$WORK/b.err" | head -1)"
