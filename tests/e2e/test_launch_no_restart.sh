#!/usr/bin/env bash
# e2e: `launch/local.sh --max-restarts 2` restarts only what a restart can cure. A plugin model
# (tests/plugins/test_models.cpp `throws`) fails on rank 1 (diverged: on every rank, as the
# trainer's verdict is) at its 5th training forward, with
#   error=runtime  std::runtime_error  -> exit 1 (an error in user code)
#   error=oom      std::bad_alloc      -> exit 4 (out of memory)
#   error=diverged DivergedError       -> exit 5
#   error=input    InputError          -> exit 2 (bad input found mid-run)
# each of which ends the job after ONE attempt: that exit code passes through mpirun and the
# launcher, no "restart" line, one line "the job ended with exit N (cause): not restarted",
# one `config` record in the metrics (one attempt), rank 1's one-line error. The control,
# error=comm (CommError: exit 6, curable), is restarted twice and then given up, so the same
# set-up does restart when it should.
source "$(dirname "$0")/lib.sh"
SRC=${HPCTRAIN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
TLIB="${HPCTRAIN_BUILD_DIR:-$(dirname "$BIN")}/tests/libtest_models.so"
[ -f "$TLIB" ] || fail "no $TLIB (build the test_models target)"
export HPCTRAIN_BIN="$BIN"
"$BIN" data synthetic --out "$WORK/d" --n 256 --test-n 64 --height 8 --width 8 --classes 4 --seed 3 >/dev/null
L() { timeout 300 "$SRC/launch/local.sh" -n 2 --oversubscribe --max-restarts 2 "$@"; }
attempt() {  # attempt NAME ERROR [RANK]: runs the job; sets rc
  set +e
  L -- train --device cpu --model-lib "$TLIB" --model throws --model-config "at=5,rank=${3:-1},error=$2" --data "$WORK/d" \
    --batch-size 8 --max-steps 20 --lr 0.01 --log-every 1 --ckpt-every 2 --ckpt-dir "$WORK/$1" --metrics "$WORK/$1.jsonl" \
    >"$WORK/$1.txt" 2>"$WORK/$1.err"
  rc=$?
  set -e
}
configs() { grep -c '"type":"config"' "$1" || true; }

for case in runtime:1:"an error a restart does not cure" oom:4:"out of memory" diverged:5:"training diverged" input:2:"bad input"; do
  IFS=: read -r err code cause <<<"$case"
  # A DivergedError is collective by contract (every rank reaches the verdict from the reduced
  # gradient): every rank throws it, and rank 0 alone prints it, as the trainer does.
  throwers=1 line='^hpctrain: rank 1: error: '
  [ "$err" = diverged ] && throwers=-1 line='^hpctrain: error: '
  attempt "$err" "$err" "$throwers"
  [ "$rc" = "$code" ] || { cat "$WORK/$err.err"; fail "error=$err: exit $rc, expected $code"; }
  ! grep -q "restart 1/2" "$WORK/$err.err" || { cat "$WORK/$err.err"; fail "error=$err (exit $code) was restarted"; }
  grep -q "^launch/local.sh: the job ended with exit $code ($cause.*): not restarted$" "$WORK/$err.err" ||
    { cat "$WORK/$err.err"; fail "error=$err: no line naming exit $code and its cause"; }
  [ "$(configs "$WORK/$err.jsonl")" = 1 ] || fail "error=$err: $(configs "$WORK/$err.jsonl") attempts, expected 1"
  [ "$(grep -c "$line" "$WORK/$err.err")" = 1 ] || { cat "$WORK/$err.err"; fail "error=$err: not one error line ($line)"; }
  ok "error=$err: exit $code after one attempt; $(grep 'not restarted' "$WORK/$err.err")"
done

# The control: a curable exit (6) under the same set-up is restarted, twice, then given up.
attempt comm comm
[ "$rc" = 6 ] || { cat "$WORK/comm.err"; fail "error=comm: exit $rc, expected 6"; }
grep -q "^launch/local.sh: restart 1/2: the job ended with exit 6 (MPI or NCCL reported an error" "$WORK/comm.err" &&
  grep -q "^launch/local.sh: restart 2/2: " "$WORK/comm.err" && grep -q "after 2 restart(s) (--max-restarts 2): giving up" "$WORK/comm.err" ||
  { cat "$WORK/comm.err"; fail "error=comm (exit 6) was not restarted twice"; }
[ "$(configs "$WORK/comm.jsonl")" = 3 ] || fail "error=comm: $(configs "$WORK/comm.jsonl") attempts, expected 3"
ok "control error=comm: exit 6 restarted 2 times (3 attempts), then given up"
