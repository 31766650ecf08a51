# Shared by tests/e2e/test_flight*.sh (sourced after lib.sh; not a test itself).
# usr2_then_stop METRICS ERR REGEX N: a `train --epochs 100` job is running (its ranks' command
# lines start with "$BIN train"). Once METRICS logs step 10, every rank gets SIGUSR2; then waits
# (up to 120 s) until ERR holds N lines matching REGEX (grep -E), checks that training goes on
# (10 more steps logged), and stops the job with SIGTERM (a preemption: the job exits 75). Events,
# not times: the job cannot end before the signal is answered.
last_step() {
  /usr/bin/python3 -c "
import json,sys
print(max([json.loads(l).get('step',0) for l in open(sys.argv[1]) if '\"train\"' in l] or [0]))" "$1"
}
usr2_then_stop() {
  local metrics=$1 err=$2 re=$3 n=$4 i s
  wait_for_step "$metrics" 10 120 || fail "no train record for step 10 in $metrics"
  signal_ranks USR2 "$BIN train"
  for ((i = 0; i < 1200; i++)); do
    [ "$(grep -cE "$re" "$err")" -ge "$n" ] && break
    sleep 0.1
  done
  [ "$(grep -cE "$re" "$err")" = "$n" ] || { cat "$err"; fail "after SIGUSR2: not $n line(s) matching '$re'"; }
  s=$(last_step "$metrics")
  wait_for_step "$metrics" $((s + 10)) 120 || fail "training did not go on after SIGUSR2 (step $s)"
  signal_ranks TERM "$BIN train"
}
