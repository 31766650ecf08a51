#!/usr/bin/env bash
# e2e: the flight recorder (comm/guard/flight_recorder.h) when what is around it fails.
# 1. SIGUSR2 with the recorder off (`train --flight-records 0`, 2 ranks) and in `eval` (no
#    recorder; the signal lands while eval is held in a read of the test set by the preload
#    shim io_hang, so it surely runs): the process goes on (training: 10 more steps, then a
#    SIGTERM ends it, exit 75; eval: exit 0), each says once that it ignored the signal, and
#    nothing is dumped.
# 2. A dump that cannot be written (EIO on every write under flight/, preload shim write_eio),
#    asked for by SIGUSR2: one line per rank saying so, no temporary file left, training goes
#    on.
# 3. A fatal error on rank 1 (a plugin model that throws mid-run) while every write under
#    flight/ hangs (shim io_hang: a hung file system): the abort does not wait for the dump
#    beyond its deadline: the job ends with the error's exit code 1, rank 1 names the error and
#    says its dump did not finish. Without the deadline it hangs until `timeout 120` (exit 124).
# 4. The same hung dump on the watchdog's path: rank 1 stopped, rank 0's watchdog still aborts
#    the job (exit 3).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/flight_lib.sh"
TESTS=${HPCTRAIN_BUILD_DIR:-$(dirname "$BIN")}/tests
HANG=$TESTS/libpreload_io_hang.so
EIO=$TESTS/libpreload_write_eio.so
for f in "$HANG" "$EIO" "$TESTS/libflight_faults.so"; do [ -f "$f" ] || fail "$f not built"; done
"$BIN" data synthetic --out "$WORK/d" --n 4096 --height 28 --width 28 --classes 10 >/dev/null
common=(train --model mlp --data "$WORK/d" --batch-size 32 --log-every 5 --lr 0.01)

# 1a. --flight-records 0: SIGUSR2 is ignored, training goes on (until a SIGTERM: exit 75).
mkdir -p "$WORK/off"
timeout 300 "$MPIEXEC" -np 2 "${MPIFLAGS[@]}" "$BIN" "${common[@]}" --epochs 100 --flight-records 0 \
  --ckpt-dir "$WORK/off/ck" --metrics "$WORK/off/m.jsonl" >"$WORK/off.out" 2>"$WORK/off.err" &
JOB=$!
usr2_then_stop "$WORK/off/m.jsonl" "$WORK/off.err" "^hpctrain: SIGUSR2 ignored: no flight recorder in this process" 2
set +e; wait $JOB; RC=$?; set -e
[ "$RC" = 75 ] || { tail "$WORK/off.err"; fail "--flight-records 0: exit $RC, expected 75 (stopped by SIGTERM)"; }
[ -z "$(find "$WORK/off" -path '*flight*')" ] || fail "--flight-records 0: something was dumped"
ok "--flight-records 0: SIGUSR2 ignored by both ranks, training went on"

# 1b. eval: SIGUSR2 while it runs (held in its first read of test.h5).
set +e
LD_PRELOAD=$HANG PRELOAD_IO_HANG_PATH="$WORK/d/test.h5" PRELOAD_IO_HANG_MARK="$WORK/eval.held" \
  PRELOAD_IO_HANG_RELEASE="$WORK/eval.go" timeout 120 "$BIN" eval --ckpt "$WORK/off/ck" --data "$WORK/d" \
  >"$WORK/eval.out" 2>"$WORK/eval.err" &
JOB=$!
for ((i = 0; i < 600; i++)); do [ -e "$WORK/eval.held" ] && break; sleep 0.1; done
[ -e "$WORK/eval.held" ] || { cat "$WORK/eval.err"; fail "eval never read the test set"; }
signal_ranks USR2 "$BIN eval"
touch "$WORK/eval.go"
wait $JOB; RC=$?
set -e
[ "$RC" = 0 ] || { cat "$WORK/eval.err"; fail "eval: SIGUSR2 ended it (exit $RC)"; }
[ "$(grep -c "^hpctrain: SIGUSR2 ignored: no flight recorder in this process" "$WORK/eval.err")" = 1 ] ||
  { cat "$WORK/eval.err"; fail "eval: no single 'SIGUSR2 ignored' line"; }
grep -q accuracy "$WORK/eval.out" || { cat "$WORK/eval.out"; fail "eval: no result"; }
ok "eval: SIGUSR2 ignored, the result written, exit 0"

# 2. A dump that fails (EIO): one line per rank, no temporary file, training goes on.
mkdir -p "$WORK/eio"
timeout 300 "$MPIEXEC" -np 2 "${MPIFLAGS[@]}" -x LD_PRELOAD="$EIO" -x PRELOAD_WRITE_EIO_PATH="$WORK/eio/flight/" \
  "$BIN" "${common[@]}" --epochs 100 --metrics "$WORK/eio/m.jsonl" >"$WORK/eio.out" 2>"$WORK/eio.err" &
JOB=$!
usr2_then_stop "$WORK/eio/m.jsonl" "$WORK/eio.err" "^hpctrain: rank [01]: flight recorder" 2
set +e; wait $JOB; RC=$?; set -e
[ "$RC" = 75 ] || { tail "$WORK/eio.err"; fail "EIO: exit $RC, expected 75 (stopped by SIGTERM)"; }
for r in 0 1; do
  [ "$(grep -c "^hpctrain: rank $r: flight recorder: " "$WORK/eio.err")" = 1 ] &&
    grep -Eq "^hpctrain: rank $r: flight recorder: no dump \(SIGUSR2\): cannot write $WORK/eio/flight/[^/]+/rank-$r\.json\.tmp\.[0-9]+: Input/output error$" "$WORK/eio.err" ||
    { cat "$WORK/eio.err"; fail "EIO: rank $r does not say in one line that its dump failed"; }
done
grep -q "dumped to" "$WORK/eio.err" && fail "EIO: a dump reported as written"
left=$(find "$WORK/eio/flight" -type f)
[ -z "$left" ] || fail "EIO: files left behind: $left"
ok "EIO: $(grep -m1 'flight recorder: no dump' "$WORK/eio.err" | cut -c1-160)"

# 3. A fatal error while the dump hangs.
mkdir -p "$WORK/fatal"
set +e
timeout 120 "$MPIEXEC" -np 2 "${MPIFLAGS[@]}" -x LD_PRELOAD="$HANG" -x PRELOAD_IO_HANG_PATH="$WORK/fatal/flight/" \
  "$BIN" train --model fails_mid_run --model-lib "$TESTS/libflight_faults.so" --data "$WORK/d" --batch-size 32 \
  --max-steps 100 --metrics "$WORK/fatal/m.jsonl" >"$WORK/fatal.out" 2>"$WORK/fatal.err"
RC=$?
set -e
cat "$WORK/fatal.err"
[ "$RC" != 124 ] || fail "fatal error: the job hung in its flight dump (killed by timeout 120)"
[ "$RC" = 1 ] || fail "fatal error: exit $RC, expected 1"
grep -q "^hpctrain: rank 1: error: flight_faults: injected failure in training forward 12$" "$WORK/fatal.err" ||
  fail "fatal error: no error line from rank 1"
grep -Eq "^hpctrain: rank 1: flight recorder: the dump to $WORK/fatal/flight/[^/]+/rank-1\.json did not finish within [0-9]+ s" "$WORK/fatal.err" ||
  fail "fatal error: rank 1 does not say its dump did not finish"
ok "fatal error with a hung dump: the job ended (exit 1)"

# 4. The watchdog's dump hangs: the job still ends.
mkdir -p "$WORK/wd"
timeout 120 "$MPIEXEC" -np 2 "${MPIFLAGS[@]}" -x LD_PRELOAD="$HANG" -x PRELOAD_IO_HANG_PATH="$WORK/wd/flight/" \
  "$BIN" "${common[@]}" --epochs 100 --collective-timeout 4 --metrics "$WORK/wd/m.jsonl" \
  >"$WORK/wd.out" 2>"$WORK/wd.err" &
JOB=$!
wait_for_step "$WORK/wd/m.jsonl" 10 60 || fail "no train record for step 10 (watchdog)"
signal_ranks STOP "$BIN train" 1
set +e; wait $JOB; RC=$?; set -e
signal_ranks CONT "$BIN train" 1 2>/dev/null || true
cat "$WORK/wd.err"
[ "$RC" != 124 ] || fail "watchdog: the job hung in its flight dump (killed by timeout 120)"
[ "$RC" = 3 ] || fail "watchdog: exit $RC, expected 3"
grep -q "^hpctrain: rank 0: flight recorder: the dump to $WORK/wd/flight/.* did not finish" "$WORK/wd.err" ||
  fail "watchdog: rank 0 does not say its dump did not finish"
ok "watchdog with a hung dump: the job ended (exit 3)"
