#!/usr/bin/env bash
# The watchdog's timeout report is followed by the last log interval's per-rank split (#20):
# rank 1 is stopped (SIGSTOP) mid-run; rank 0's watchdog reports the overdue collective and
# prints "last log interval, step/data-wait/compute/comm-blocked/collective-wait ms per step:
# r0 ..., r1 ...", then the job ends with exit 3.
source "$(dirname "$0")/lib.sh"
"$BIN" data synthetic --out "$WORK/d" --n 4096 --height 28 --width 28 --classes 10 >/dev/null
timeout 120 "$MPIEXEC" -np 2 "${MPIFLAGS[@]}" "$BIN" train --model mlp --data "$WORK/d" --epochs 100 \
  --batch-size 32 --log-every 5 --collective-timeout 4 --metrics "$WORK/m.jsonl" >"$WORK/out.txt" 2>"$WORK/err.txt" &
JOB=$!
wait_for_step "$WORK/m.jsonl" 10 60 || fail "no train record for step 10"
signal_ranks STOP "$BIN train" 1
set +e; wait $JOB; RC=$?; set -e
signal_ranks CONT "$BIN train" 1 2>/dev/null || true
# 3 is the watchdog's exit code (MPI_Abort); 124 would be our own timeout (a hang).
[ "$RC" = 3 ] || { tail -20 "$WORK/err.txt"; fail "exit $RC, expected 3 (the watchdog's abort; 124: hung until timeout)"; }
grep -q "timed out after 4 s" "$WORK/err.txt" || { cat "$WORK/err.txt"; fail "no watchdog report"; }
grep -Eq "^hpctrain: rank [01]: last log interval, step/data-wait/compute/comm-blocked/collective-wait ms per step: r0 [0-9.]+/[0-9.]+/[0-9.]+/[0-9.]+/[0-9.]+, r1 [0-9.]+/" "$WORK/err.txt" ||
  { cat "$WORK/err.txt"; fail "no per-rank split after the report"; }
ok "exit $RC; $(grep -m1 'last log interval' "$WORK/err.txt")"
