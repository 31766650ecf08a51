# Shared by tests/e2e/test_watchdog_*.sh (sourced; not a test itself).
# `VAR=value probe NP SCENARIO [MPIEXEC ARGS...]` runs build/tests/hang_probe under mpiexec,
# bounded by `timeout 120`; it sets RC, ELAPSED (seconds), OUT and ERR and prints them.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
set +e  # probe records each exit status; check counts the failed checks
PROBE=${HPCTRAIN_BUILD_DIR:?set HPCTRAIN_BUILD_DIR to the build directory}/tests/hang_probe
MPIEXEC_FLAGS=${MPIEXEC_FLAGS:---oversubscribe}
MPIEXEC_FLAGS=${MPIEXEC_FLAGS//;/ }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
FAILS=0

probe() {
  local np=$1 scenario=$2; shift 2
  local t0; t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  timeout 120 "$MPIEXEC" -n "$np" $MPIEXEC_FLAGS "$@" "$PROBE" "$scenario" >"$WORK/out" 2>"$WORK/err"
  RC=$?
  ELAPSED=$(echo "$(date +%s.%N) - $t0" | bc)
  ERR=$(cat "$WORK/err")
  OUT=$(cat "$WORK/out")
  echo "--- hang_probe $scenario on $np ranks $*: rc=$RC after ${ELAPSED}s; stderr:"
  sed 's/^/    /' "$WORK/err"
}

check() {  # check DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; FAILS=$((FAILS + 1)); fi
}
has() { grep -qF -- "$1" <<<"$ERR"; }
count_is() { [ "$(grep -cF -- "$2" <<<"$ERR")" = "$1" ]; }
faster_than() { [ "$(echo "$ELAPSED < $1" | bc)" = 1 ]; }
failed() { [ "$RC" != 0 ] && [ "$RC" != 124 ]; }  # 124: our own `timeout` fired (a hang)
finish() { echo "$FAILS failed checks"; [ "$FAILS" = 0 ]; }
