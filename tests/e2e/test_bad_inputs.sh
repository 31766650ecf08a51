#!/usr/bin/env bash
# e2e: the bad-input battery ("no silent hangs, no lost work"). One table of cases in
# bad_inputs.py (config, CLI, data files, checkpoints, launch, disk), each run with 2 ranks
# under mpiexec: exit code, exactly one one-line "hpctrain:" error naming the cause, no rank
# left running, and no file written before the case damaged or replaced.
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 "$(dirname "$0")/bad_inputs.py" --bin "$BIN" --mpiexec "$MPIEXEC" --work "$WORK" \
  ${BAD_INPUTS_ONLY:+--only "$BAD_INPUTS_ONLY"} -- "${MPIFLAGS[@]}"

# A bad input that only one rank sees (MPMD: rank 1 gets another --data): no collective error
# is possible, so rank 1 names its cause, rank 0 names rank 1, and the job is aborted (code 1)
# instead of rank 0 waiting for rank 1 forever.
"$BIN" data synthetic --out "$WORK/one" --n 64 --test-n 32 --classes 4 --height 8 --width 8 >/dev/null
common=(train --model mlp --batch-size 8 --max-steps 2 --lr 0.01)
set +e
timeout -k 5 90 "$MPIEXEC" "${MPIFLAGS[@]}" -np 1 "$BIN" "${common[@]}" --data "$WORK/one" : \
  -np 1 "$BIN" "${common[@]}" --data "$WORK/only-rank1-misses-this" >"$WORK/mpmd.out" 2>"$WORK/mpmd.err"
rc=$?
set -e
[ "$rc" = 1 ] || { cat "$WORK/mpmd.err"; fail "one rank's bad input: exit $rc, expected 1 (abort)"; }
grep -q "^hpctrain: rank 1: error: data file $WORK/only-rank1-misses-this/train.h5 does not exist$" "$WORK/mpmd.err" ||
  { cat "$WORK/mpmd.err"; fail "rank 1 does not name its missing file"; }
grep -q "^hpctrain: rank 0: error: rank(s) 1 failed where this rank succeeded" "$WORK/mpmd.err" ||
  { cat "$WORK/mpmd.err"; fail "rank 0 does not name rank 1"; }
ok "a bad input on one rank only: rank 1 names the file, rank 0 names rank 1, job aborted (exit 1)"

# Two ranks that build different models through a plugin (built differently on one node; here
# the plugin reads its width from the environment): DDP's parameter check names the parameter
# and both ranks, every rank exits 2.
TLIB="${HPCTRAIN_BUILD_DIR:-$(dirname "$BIN")}/tests/libtest_models.so"
pcommon=(train --model-lib "$TLIB" --model env_width --data "$WORK/one" --batch-size 8 --max-steps 2 --lr 0.01)
set +e
timeout -k 5 90 "$MPIEXEC" "${MPIFLAGS[@]}" -np 1 -x TEST_PLUGIN_WIDTH=16 "$BIN" "${pcommon[@]}" : \
  -np 1 -x TEST_PLUGIN_WIDTH=24 "$BIN" "${pcommon[@]}" >"$WORK/differ.out" 2>"$WORK/differ.err"
rc=$?
set -e
[ "$rc" = 2 ] || { cat "$WORK/differ.err"; fail "ranks with different plugin models: exit $rc, expected 2"; }
[ "$(grep -c '^hpctrain: error: DDP: models differ between ranks: parameter #0 is "1.weight Float \[24,64\]" on rank 1 but "1.weight Float \[16,64\]" on rank 0$' "$WORK/differ.err")" = 1 ] ||
  { cat "$WORK/differ.err"; fail "the DDP parameter check does not name the plugin model's parameter once"; }
ok "ranks whose plugin builds different models: DDP names 1.weight on ranks 0 and 1 (exit 2)"
echo "PASS test_bad_inputs"
