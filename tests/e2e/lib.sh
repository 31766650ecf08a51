# Shared helpers for e2e tests (sourced). Each test: set -euo pipefail, a temp dir cleaned on
# exit, `run_np N ARGS...` to start the real CLI under mpirun, and `fail MSG` to stop.
set -euo pipefail
BIN=${HPCTRAIN_BIN:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/hpctrain}
MPIEXEC=${MPIEXEC:-mpiexec}
MPIFLAGS=()
if [ "$(id -u)" = 0 ]; then MPIFLAGS+=(--allow-run-as-root); fi
MPIFLAGS+=(--oversubscribe -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 -x MKL_NUM_THREADS=1)
export OMP_NUM_THREADS=1
WORK=$(mktemp -d /tmp/hpctrain-e2e.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
run_np() { local n=$1; shift; timeout 600 "$MPIEXEC" -np "$n" "${MPIFLAGS[@]}" "$BIN" "$@"; }
# The last stdout line of a run, parsed as JSON, field $2 of file $1 (python3 -c).
json_field() { /usr/bin/python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])[sys.argv[2]])" "$1" "$2"; }
# Sends signal $1 to the rank(s) of a running job whose command line starts with "$2" (the
# binary path and subcommand), rank $3 only when given (from OMPI_COMM_WORLD_RANK).
signal_ranks() {
  local sig=$1 pattern=$2 only=${3:-} pid
  for pid in $(pgrep -f "^$pattern"); do
    if [ -n "$only" ]; then
      tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$only" || continue
    fi
    kill "-$sig" "$pid"
  done
}
# wait_for SECONDS WHAT CMD...: poll CMD every 0.5 s until it succeeds, or fail naming WHAT.
wait_for() {
  local limit=$1 what=$2; shift 2
  local end=$((SECONDS + limit))
  until "$@"; do
    [ $SECONDS -lt $end ] || fail "timed out after ${limit}s waiting for $what"
    sleep 0.5
  done
}
# Waits (up to $3 s, default 120) until metrics file $1 has a train record with step >= $2.
wait_for_step() {
  local f=$1 n=$2 limit=${3:-120} i
  for ((i = 0; i < limit * 10; i++)); do
    if [ -f "$f" ] && /usr/bin/python3 -c "
import json,sys
steps=[json.loads(l).get('step',0) for l in open(sys.argv[1]) if '\"train\"' in l]
sys.exit(0 if steps and max(steps) >= int(sys.argv[2]) else 1)" "$f" "$n" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  return 1
}
# Installs the build into prefix $1 (cmake --install) once per test.
install_prefix() {
  cmake --install "${HPCTRAIN_BUILD_DIR:-$(dirname "$BIN")}" --prefix "$1" >/dev/null
}
# expect_error NAME REGEX ARGS...: `run_np 2 ARGS...` must exit 2 with exactly one
# "hpctrain: error:" line on stderr, and that line must match REGEX (grep).
expect_error() {
  local name=$1 key=$2 rc; shift 2
  set +e
  run_np 2 "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"; rc=$?
  set -e
  [ $rc = 2 ] || { cat "$WORK/$name.err"; fail "$name: exit $rc, expected 2"; }
  [ "$(grep -c '^hpctrain: error:' "$WORK/$name.err")" = 1 ] && grep -q "^hpctrain: error: .*$key" "$WORK/$name.err" ||
    { cat "$WORK/$name.err"; fail "$name: no single error line with '$key'"; }
  ok "$name: $(grep '^hpctrain: error:' "$WORK/$name.err" | cut -c1-220)"
}
# newest_slot DIRGLOB PATTERN: the newest of a snapshot directory's slots matching PATTERN ("").
newest_slot() { compgen -G "$1/$2" | sort | tail -1 || true; }
# stop_rank_mid_write RANK DIRGLOB: SIGSTOPs rank RANK of the running "$BIN train" job once its
# snapshot directory DIRGLOB holds a step-*.tmp newer than its newest whole slot (its write in
# flight; an older .tmp is a prune's: the rank is let go on), and sets STOPPED_PID. Fails (after
# SIGKILLing the job) when it never sees one while the rank runs (60 s at most).
stop_rank_mid_write() {
  local rank=$1 dir=$2 p t w end=$((SECONDS + 60))
  STOPPED_PID=""
  for p in $(pgrep -f "^$BIN train"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$rank" && STOPPED_PID=$p
  done
  [ -n "$STOPPED_PID" ] || fail "rank $rank not found"
  while [ $SECONDS -lt $end ] && kill -0 "$STOPPED_PID" 2>/dev/null; do
    if compgen -G "$dir/step-*.tmp" >/dev/null; then
      kill -STOP "$STOPPED_PID"
      t=$(newest_slot "$dir" 'step-*.tmp') w=$(newest_slot "$dir" 'step-*[0-9]')
      if [ -n "$t" ] && [ -n "$w" ] && [[ "$(basename "$t" .tmp)" > "$(basename "$w")" ]]; then return 0; fi
      kill -CONT "$STOPPED_PID"
    fi
  done
  signal_ranks KILL "$BIN train"
  fail "never saw rank $rank's snapshot being written"
}
# kill_rank1_mid_write JOB WHAT: stops rank 1 of the running 2-rank job JOB (a background pid)
# while it writes a snapshot, SIGKILLs every rank, waits for JOB, and checks that rank 1 is left
# a whole slot and a half-written .tmp one. Sets TMP_SLOT and WSTEP (the whole slot's step).
kill_rank1_mid_write() {
  local job=$1 what=$2 whole dir="$SHM/hpctrain-*/rank-00001"
  stop_rank_mid_write 1 "$dir"
  signal_ranks KILL "$BIN train"
  kill -CONT "$STOPPED_PID" 2>/dev/null || true
  set +e; wait "$job"; set -e
  TMP_SLOT=$(newest_slot "$dir" 'step-*.tmp')
  whole=$(newest_slot "$dir" 'step-*[0-9]')
  [ -n "$TMP_SLOT" ] && [ -n "$whole" ] || { ls -R "$SHM"; fail "$what: rank 1 killed mid-write: expected a whole slot and a .tmp one"; }
  WSTEP=$((10#$(basename "$whole" | sed 's/step-//')))
}
