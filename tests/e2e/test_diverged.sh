#!/usr/bin/env bash
# e2e: training never goes silently to inf/NaN. 2 ranks, a learning rate that blows up:
# - --zero 0 and --zero 1: the run stops with exit 5 and exactly one hpctrain line on stderr naming the step
#   and the first parameter whose reduced gradient is not finite; the checkpoints written before
#   (every step) are all complete and verify, the newest is older than the failing step, and no
#   .tmp is left; the metrics file has no non-finite loss;
# - --grad-comm-dtype fp16 without --amp fp16 (no loss scaler): a reduction that overflows fp16
#   stops the run the same way, with the hint to use bf16 or --amp fp16, at a step where the
#   fp32-communicating run of the same settings is still finite (checked: it gets further).
source "$(dirname "$0")/lib.sh"
D="$WORK/d"
run_np 1 data synthetic --out "$D" --n 256 --test-n 32 --classes 4 --height 8 --width 8 --seed 3 >/dev/null
blowup=(train --model mlp --data "$D" --batch-size 16 --optimizer sgd --momentum 0 --lr 40 --schedule constant
  --epochs 50 --log-every 1 --seed 2)

expect_diverged() {  # NAME ARGS...: exit 5, one error line; prints the step it names
  local name=$1 rc; shift
  set +e
  run_np 2 "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"; rc=$?
  set -e
  [ "$rc" = 5 ] || { tail -5 "$WORK/$name.out" "$WORK/$name.err"; fail "$name: exit $rc, want 5 (diverged)"; }
  local lines  # our lines; Open MPI's banner about the non-zero exit may follow
  lines=$(grep -c "^hpctrain" "$WORK/$name.err" || true)
  [ "$lines" = 1 ] || { cat "$WORK/$name.err"; fail "$name: $lines hpctrain lines on stderr, want 1"; }
  grep -Eq "^hpctrain: error: training diverged at step [0-9]+: the gradient norm is (inf|nan|-nan).*first non-finite gradient: [a-z0-9_.]+(weight|bias)" \
    "$WORK/$name.err" || { cat "$WORK/$name.err"; fail "$name: the line does not name the step and the gradient"; }
  sed -n 's/.*diverged at step \([0-9]*\):.*/\1/p' "$WORK/$name.err"
}

for zero in 0 1; do
  name=z$zero
  step=$(expect_diverged "$name" "${blowup[@]}" --zero "$zero" --ckpt-dir "$WORK/$name.ck" --ckpt-every 1 \
    --metrics "$WORK/$name.jsonl")
  [ "$step" -gt 1 ] || fail "$name: diverged at step $step: the test needs a few finite steps first"
  ls -d "$WORK/$name.ck"/*.tmp >/dev/null 2>&1 && fail "$name: a .tmp was left in the checkpoint directory"
  newest=$(cat "$WORK/$name.ck/latest")
  [ "$((10#${newest#step-}))" -lt "$step" ] || fail "$name: the newest checkpoint $newest is not older than the diverged step $step"
  grep -q "the newest checkpoint .*$newest is untouched" "$WORK/$name.err" || { cat "$WORK/$name.err"; fail "$name: the line does not name $newest"; }
  run_np 1 ckpt verify "$WORK/$name.ck" >"$WORK/$name.verify" 2>&1 || { cat "$WORK/$name.verify"; fail "$name: the newest checkpoint does not verify"; }
  /usr/bin/python3 - "$WORK/$name.jsonl" <<'PY' || fail "$name: a non-finite loss reached the metrics file"
import json, math, sys
losses = [json.loads(l)["loss"] for l in open(sys.argv[1]) if '"train"' in l]
assert losses and all(isinstance(x, float) and math.isfinite(x) for x in losses), losses
PY
  ok "--zero $zero: stopped at step $step with exit 5 and one line; $newest verifies: $(cut -c1-220 "$WORK/$name.err")"
done

# fp16 gradient communication without a loss scaler: an overflow in the reduction.
gentle=(train --model mlp --data "$D" --batch-size 16 --optimizer sgd --momentum 0 --lr 2 --schedule constant
  --epochs 50 --log-every 1 --seed 2)
step16=$(expect_diverged fp16 "${gentle[@]}" --grad-comm-dtype fp16 --metrics "$WORK/fp16.jsonl")
grep -q "grad-comm-dtype fp16 without --amp fp16 .*use --grad-comm-dtype bf16, or --amp fp16" "$WORK/fp16.err" ||
  { cat "$WORK/fp16.err"; fail "fp16: no hint about the missing loss scaler"; }
set +e
run_np 2 "${gentle[@]}" --max-steps "$step16" --metrics "$WORK/fp32.jsonl" >"$WORK/fp32.out" 2>"$WORK/fp32.err"
rc=$?
set -e
[ "$rc" = 0 ] || { tail -3 "$WORK/fp32.err"; fail "fp32 communication: exit $rc within the $step16 steps where fp16 overflowed"; }
ok "--grad-comm-dtype fp16 (no --amp fp16): stopped at step $step16 with the hint; fp32 communication is finite through step $step16"
