#!/usr/bin/env bash
# e2e: the flight recorder (`--flight-records`, comm/guard/flight_recorder.h) and `hpctrain flight`.
# - rank 1 stopped (SIGSTOP) mid-run: the watchdog fires (exit 3), rank 0 dumps, and the report
#   names the op rank 0 is stuck in, rank 1 (its dump missing, or never entering the op when
#   mpirun's SIGCONT on the abort let it dump) and how long rank 0 has waited;
# - desync (rank 1 with another --bucket-mb, --debug-collectives): every rank dumps, exit 2, and
#   the report names the first sequence number at which the ranks disagree and both calls;
# - SIGUSR2 dumps every rank while training goes on (stopped by SIGTERM, exit 75);
# - a restarted, shrunk attempt (1 rank, HPCTRAIN_RESTART as a launcher sets it) dumps into a
#   directory of its own: `hpctrain flight` reports the newest attempt and names the older one,
#   `--job ID` reports that one;
# - `hpctrain flight` on a directory without dumps, on dumps of two jobs in one directory, and
#   with an unknown --job: one line, exit 2.
# Dump failures, SIGUSR2 without a recorder and a hung dump: test_flight_faults.sh.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/flight_lib.sh"
"$BIN" data synthetic --out "$WORK/d" --n 4096 --height 28 --width 28 --classes 10 >/dev/null
common=(train --model mlp --data "$WORK/d" --batch-size 32 --log-every 5 --lr 0.01)

# 1. A stopped rank.
mkdir -p "$WORK/stop"
timeout 120 "$MPIEXEC" -np 2 "${MPIFLAGS[@]}" "$BIN" "${common[@]}" --epochs 100 --collective-timeout 4 \
  --metrics "$WORK/stop/m.jsonl" >"$WORK/stop.out" 2>"$WORK/stop.err" &
JOB=$!
wait_for_step "$WORK/stop/m.jsonl" 10 60 || fail "no train record for step 10"
signal_ranks STOP "$BIN train" 1
set +e; wait $JOB; RC=$?; set -e
signal_ranks CONT "$BIN train" 1 2>/dev/null || true
[ "$RC" = 3 ] || { tail -20 "$WORK/stop.err"; fail "exit $RC, expected 3 (the watchdog's abort)"; }
grep -q "^hpctrain: rank 0: flight recorder dumped to $WORK/stop/flight/[^/]*/rank-0.json" "$WORK/stop.err" ||
  { cat "$WORK/stop.err"; fail "the watchdog's report does not name the dump"; }
run_np 1 flight "$WORK/stop" >"$WORK/stop.report" || { cat "$WORK/stop.report"; fail "flight (stopped rank)"; }
cat "$WORK/stop.report"
# Rank 1 either left no dump, or (mpirun continues a stopped rank with SIGCONT before it kills
# it on the abort) dumped when its watchdog thread ran again: then it never entered the op, or,
# stopped inside the op, it finished it after the SIGCONT, which the report (states as of the
# first dump) shows as both ranks in the op.
op_re="#[0-9]+ allreduce\([a-z0-9]+, [0-9]+\) from [a-z.]+(\[[0-9]+\])?"
if grep -q "^flight: job .*, 2 rank(s); dumps from rank 0; missing: rank 1 (its host is gone" "$WORK/stop.report"; then
  grep -Eq "^flight: \[cpu\] stuck in $op_re: entered by rank 0; never entered by none; unknown \(no dump\): rank 1$" "$WORK/stop.report" ||
    fail "the report does not name the allreduce rank 0 is stuck in"
else
  grep -q "dumps from ranks 0,1; missing: none" "$WORK/stop.report" || fail "the report names neither dump"
  if grep -Eq "^flight: \[cpu\] stuck in $op_re: entered by ranks 0,1; never entered by none$" "$WORK/stop.report"; then
    # Rank 1 is inside #n; rank 0 too, or (when rank 1 was stopped after its part of #n, so that
    # rank 0 could finish it) in a later op.
    n=$(grep -o "stuck in #[0-9]*" "$WORK/stop.report" | tr -dc 0-9)
    grep -Eq "^flight: \[cpu\] stuck for: rank 0 [0-9.]+ s in #[0-9]+; rank 1 [0-9.]+ s in #$n$" "$WORK/stop.report" ||
      fail "rank 1 stopped inside #$n: the report does not show it in there"
  else
    grep -Eq "^flight: \[cpu\] stuck in $op_re: entered by rank 0; never entered by rank 1$" "$WORK/stop.report" ||
      fail "the report does not name the op rank 0 is stuck in and rank 1 as never entering it"
  fi
fi
# Rank 0 is stuck in the op the report names or a later one, for at least the watchdog's 4 s (it
# fires only then; no upper bound: a loaded host fires later). 3.95: the report rounds to 0.1 s.
n=$(grep -o "stuck in #[0-9]*" "$WORK/stop.report" | tr -dc 0-9)
read -r secs m < <(sed -En "s/^flight: \[cpu\] stuck for: rank 0 ([0-9.]+) s in #([0-9]+)(;.*)?$/\1 \2/p" "$WORK/stop.report") || true
[ -n "${m:-}" ] && [ "$m" -ge "$n" ] || fail "the report does not show rank 0 stuck in #$n or a later op"
[ "$(echo "$secs >= 3.95" | bc)" = 1 ] || fail "rank 0 stuck for $secs s, less than the watchdog's 4 s"
ok "stopped rank: $(grep 'stuck in' "$WORK/stop.report")"

# 2. A desync: rank 1 buckets its gradients differently.
mkdir -p "$WORK/desync"
set +e
timeout -k 5 120 "$MPIEXEC" "${MPIFLAGS[@]}" -np 1 "$BIN" "${common[@]}" --max-steps 5 --debug-collectives \
  --metrics "$WORK/desync/m.jsonl" : -np 1 "$BIN" "${common[@]}" --max-steps 5 --debug-collectives --bucket-mb 0.2 \
  --metrics "$WORK/desync/m.jsonl" >"$WORK/desync.out" 2>"$WORK/desync.err"
RC=$?
set -e
[ "$RC" = 2 ] || { cat "$WORK/desync.err"; fail "desync: exit $RC, expected 2"; }
grep -q "^hpctrain: error: collective desync" "$WORK/desync.err" || { cat "$WORK/desync.err"; fail "no desync error"; }
run_np 1 flight "$WORK/desync" >"$WORK/desync.report" || { cat "$WORK/desync.report"; fail "flight (desync)"; }
cat "$WORK/desync.report"
grep -q "dumps from ranks 0,1; missing: none" "$WORK/desync.report" || fail "desync: not both ranks dumped"
grep -Eq "^flight: \[cpu\] ranks disagree first at #[0-9]+: rank 0 called allreduce\(float32, [0-9]+\); rank 1 called allreduce\(float32, [0-9]+\)$" "$WORK/desync.report" ||
  fail "the report does not name the first differing sequence number"
seq_report=$(grep -o "disagree first at #[0-9]*" "$WORK/desync.report" | tr -dc 0-9)
grep -q "#$seq_report from" "$WORK/desync.err" || { cat "$WORK/desync.err"; fail "the desync error names another op than #$seq_report"; }
ok "desync: $(grep 'disagree first' "$WORK/desync.report")"

# 3. SIGUSR2: a dump on every rank, training goes on (until a SIGTERM stops it: exit 75).
mkdir -p "$WORK/usr2"
timeout 300 "$MPIEXEC" -np 2 "${MPIFLAGS[@]}" "$BIN" "${common[@]}" --epochs 100 --metrics "$WORK/usr2/m.jsonl" \
  >"$WORK/usr2.out" 2>"$WORK/usr2.err" &
JOB=$!
usr2_then_stop "$WORK/usr2/m.jsonl" "$WORK/usr2.err" "^hpctrain: rank [01]: flight recorder" 2
set +e; wait $JOB; RC=$?; set -e
[ "$RC" = 75 ] || { tail "$WORK/usr2.err"; fail "SIGUSR2: exit $RC, expected 75 (stopped by SIGTERM)"; }
[ "$(grep -c "flight recorder dumped to $WORK/usr2/flight/[^/]*/rank-[01].json" "$WORK/usr2.err")" = 2 ] ||
  { cat "$WORK/usr2.err"; fail "SIGUSR2: not one dump line per rank"; }
run_np 1 flight "$WORK/usr2" >"$WORK/usr2.report" || fail "flight (SIGUSR2)"
grep -q "missing: none" "$WORK/usr2.report" && grep -q "dumped: SIGUSR2" "$WORK/usr2.report" || { cat "$WORK/usr2.report"; fail "SIGUSR2 report"; }
ok "SIGUSR2: both ranks dumped, training went on"

first=$(basename "$(dirname "$(ls "$WORK"/usr2/flight/*/rank-1.json)")")

# 4. A restart of that job on 1 rank (a shrink) with the same directories: its dumps go to a
#    directory of its own; the report is of the newest job unless --job names another.
HPCTRAIN_RESTART='{"restart": 1, "of": 2, "exit_code": 3, "cause": "test", "failed_at": 0}' \
  timeout 300 "$MPIEXEC" -np 1 "${MPIFLAGS[@]}" -x HPCTRAIN_RESTART "$BIN" "${common[@]}" --epochs 100 \
  --metrics "$WORK/usr2/m2.jsonl" >"$WORK/restart.out" 2>"$WORK/restart.err" &
JOB=$!
usr2_then_stop "$WORK/usr2/m2.jsonl" "$WORK/restart.err" "^hpctrain: rank 0: flight recorder dumped" 1
set +e; wait $JOB; RC=$?; set -e
[ "$RC" = 75 ] || { tail "$WORK/restart.err"; fail "restart: exit $RC, expected 75 (stopped by SIGTERM)"; }
second=$(basename "$(dirname "$(ls "$WORK"/usr2/flight/*/rank-0.json | grep -v "/$first/")")")
[ -n "$second" ] && [ "$second" != "$first" ] || { ls -R "$WORK/usr2/flight"; fail "the restart did not dump into a directory of its own"; }
run_np 1 flight "$WORK/usr2" >"$WORK/restart.report" || { cat "$WORK/restart.report"; fail "flight after a restart"; }
cat "$WORK/restart.report"
grep -q "^flight: job $second (restart 1), 1 rank(s); dumps from rank 0; missing: none$" "$WORK/restart.report" ||
  fail "the report is not of the newest job (the restart)"
grep -q "^flight: other jobs in $WORK/usr2/flight (newest first): $first; read one with: hpctrain flight $WORK/usr2/flight --job ID$" "$WORK/restart.report" ||
  fail "the report does not name the older job"
run_np 1 flight "$WORK/usr2" --job "$first" >"$WORK/first.report" || { cat "$WORK/first.report"; fail "flight --job"; }
grep -q "^flight: job $first, 2 rank(s); dumps from ranks 0,1; missing: none$" "$WORK/first.report" ||
  { cat "$WORK/first.report"; fail "--job $first: not the first job's report"; }
ok "restart: report of the newest job ($second), --job $first reports the first"

# 5. Bad input.
mkdir -p "$WORK/empty" "$WORK/mixed/flight"
expect_error flight_no_dumps "no flight recorder dumps" flight "$WORK/empty"
cp "$WORK"/stop/flight/*/rank-0.json "$WORK/mixed/flight/rank-0.json"
cp "$WORK/usr2/flight/$first/rank-1.json" "$WORK/mixed/flight/rank-1.json"
expect_error flight_two_jobs "dumps are of two different jobs" flight "$WORK/mixed"
expect_error flight_unknown_job "--job nope: no dumps of that job in $WORK/usr2/flight" flight "$WORK/usr2" --job nope
