#!/usr/bin/env bash
# e2e: preemption -> checkpoint -> resume. N steps + resume + M steps gives bitwise the same
# parameters (CPU) as N+M uninterrupted steps, with the stop mid-epoch; resuming on another
# world size (2 -> 1, same global batch) continues at the same global sample; eval of the
# final checkpoint reproduces the training run's accuracy exactly.
source "$(dirname "$0")/lib.sh"
D="$WORK/d"
run_np 1 data synthetic --out "$D" --n 1024 --test-n 128 --classes 4 --height 12 --width 12 --seed 5 --noise 200 >/dev/null
common=(--model cnn --sync-bn --data "$D" --epochs 2 --lr 0.02 --seed 3 --log-every 1 --ckpt-every 7)

run_np 2 train --batch-size 16 --ckpt-dir "$WORK/full" "${common[@]}" >"$WORK/full.txt" 2>&1 || { tail "$WORK/full.txt"; fail "uninterrupted run"; }

# A real SIGUSR1 to rank 0 alone, mid-training: the ranks are paused (SIGSTOP) once step 5 is
# logged, so the signal lands before the run can end; all ranks must agree, save, exit 75.
set +e
run_np 2 train --batch-size 16 --ckpt-dir "$WORK/pre" --metrics "$WORK/pre.jsonl" "${common[@]}" >"$WORK/pre1.txt" 2>&1 &
job=$!
set -e
wait_for_step "$WORK/pre.jsonl" 5 120 || { kill $job; fail "the run to preempt logged no step 5"; }
signal_ranks STOP "$BIN train"
signal_ranks USR1 "$BIN train" 0
signal_ranks CONT "$BIN train"
set +e
wait $job
rc=$?
set -e
[ $rc -eq 75 ] || { tail "$WORK/pre1.txt"; fail "preempted run exited $rc, expected 75"; }
stop=$(sed -n 's/.*preemption signal received (10 on rank 0); checkpointing at step \([0-9]*\).*/\1/p' "$WORK/pre1.txt")
[ -n "$stop" ] && [ "$stop" -ge 5 ] && [ "$stop" -lt 64 ] || { tail "$WORK/pre1.txt"; fail "no mid-training preemption checkpoint (step '$stop')"; }
[ "$(cat "$WORK/pre/latest")" = "$(printf 'step-%08d' "$stop")" ] || fail "latest is $(cat "$WORK/pre/latest"), expected step $stop"
cp -r "$WORK/pre" "$WORK/pre-copy"
ok "SIGUSR1 on rank 0 only -> every rank checkpointed step $stop and exited 75"

run_np 2 train --batch-size 16 --ckpt-dir "$WORK/pre" "${common[@]}" >"$WORK/pre2.txt" 2>&1 || { tail "$WORK/pre2.txt"; fail "resumed run"; }
grep -q "resumed from .*step-0*$stop at step $stop" "$WORK/pre2.txt" || { grep resumed "$WORK/pre2.txt"; fail "did not resume from step $stop"; }
run_np 1 ckpt merge "$WORK/full" --out "$WORK/full.h5" >/dev/null
run_np 1 ckpt merge "$WORK/pre" --out "$WORK/pre.h5" >/dev/null
/usr/bin/python3 "$(dirname "$0")/compare_ckpt.py" "$WORK/full.h5" "$WORK/pre.h5" --exact || fail "resume is not bitwise identical"
ok "$stop steps + resume == 64 uninterrupted steps, bitwise"

# World-size change: the preemption checkpoint resumed on 1 rank with batch 32 (global 32 as before).
# Not bitwise (SyncBN sums in another order), and this noisy problem amplifies that rounding
# chaotically: measured from a step-8 checkpoint, 2.2e-7 after 6 steps, 8.7e-4 after 13,
# 2e-2 after 56 (and 8.7e-4 at checkpoint 21 after a preemption between steps 14 and 20, in a run
# on a loaded machine), so a later checkpoint is no test of it. Compared instead two steps
# after the resume, against the same checkpoint resumed on its own 2 ranks for those two steps
# (which equals the uninterrupted run, bitwise, as checked above): rounding only, while a wrong
# sample position differs at once.
next=$((stop + 2))
cp -r "$WORK/pre-copy" "$WORK/np1-cont"
cp -r "$WORK/pre-copy" "$WORK/np2-cont"
run_np 1 train --batch-size 32 --ckpt-dir "$WORK/np1-cont" --max-steps "$next" "${common[@]}" >"$WORK/np1.txt" 2>&1 || { tail "$WORK/np1.txt"; fail "resume on 1 rank"; }
grep -q "saved with 2 rank(s); now 1, global batch 32" "$WORK/np1.txt" || { grep resumed "$WORK/np1.txt"; fail "world-size change not reported"; }
run_np 2 train --batch-size 16 --ckpt-dir "$WORK/np2-cont" --max-steps "$next" "${common[@]}" >"$WORK/np2.txt" 2>&1 || { tail "$WORK/np2.txt"; fail "resume on 2 ranks"; }
[ "$(cat "$WORK/np1-cont/latest")" = "$(printf 'step-%08d' "$next")" ] || fail "1-rank resume ended at $(cat "$WORK/np1-cont/latest"), expected step $next"
run_np 1 ckpt merge "$WORK/np2-cont" --out "$WORK/np2-next.h5" >/dev/null
run_np 1 ckpt merge "$WORK/np1-cont" --out "$WORK/np1.h5" >/dev/null
/usr/bin/python3 "$(dirname "$0")/compare_ckpt.py" "$WORK/np2-next.h5" "$WORK/np1.h5" --rtol 1e-5 || fail "2 -> 1 resume diverged by step $next"
ok "resume 2 -> 1 ranks at step $stop continues at the same global sample (step $next)"

# Eval of the final checkpoint (merged file, CPU, 1 rank) equals the training run's evaluation.
acc_train=$(json_field "$WORK/full.txt" test_accuracy)
run_np 1 eval --ckpt "$WORK/full.h5" --data "$D" --device cpu >"$WORK/eval.txt"
acc_eval=$(json_field "$WORK/eval.txt" test_accuracy)
[ "$acc_train" = "$acc_eval" ] || fail "eval accuracy $acc_eval != training $acc_train"
run_np 2 eval --ckpt "$WORK/full" --data "$D" >"$WORK/eval2.txt"
[ "$(json_field "$WORK/eval2.txt" test_accuracy)" = "$acc_train" ] || fail "2-rank eval differs"
ok "eval on 1 and 2 ranks reproduces accuracy $acc_train"
