#!/usr/bin/env bash
# e2e, door 2: a model plugin built against the INSTALLED package (examples/model_plugin) and
# loaded by the installed CLI with --model-lib: `hpctrain models` lists it; tiny_vgg with
# --sync-bn (its Sequential-held BatchNorms converted by the trainer) on 2 ranks x 16 ends with
# the parameters and running statistics of 1 rank x 32 (the 1-rank run takes model_lib from a
# TOML config); a real SIGUSR1 mid-run checkpoints and exits 75, and --resume auto continues
# bitwise as if never interrupted; eval and merge work, and without --model-lib eval and
# resume name the missing library.
source "$(dirname "$0")/lib.sh"
SRC=${HPCTRAIN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
P="$WORK/prefix"
install_prefix "$P"
cmake -S "$SRC/examples/model_plugin" -B "$WORK/pl" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$P" >"$WORK/pl-configure.txt" 2>&1 || { tail -30 "$WORK/pl-configure.txt"; fail "configuring the plugin"; }
cmake --build "$WORK/pl" >"$WORK/pl-build.txt" 2>&1 || { tail -30 "$WORK/pl-build.txt"; fail "building the plugin"; }
LIB="$WORK/pl/libmynets.so"
H="$P/bin/hpctrain"  # the installed CLI
run_h() { local n=$1; shift; timeout 600 "$MPIEXEC" -np "$n" "${MPIFLAGS[@]}" "$H" "$@"; }

run_h 1 models --model-lib "$LIB" >"$WORK/models.txt" 2>&1 || { cat "$WORK/models.txt"; fail "hpctrain models"; }
for m in mlp cnn resnet tiny_vgg gelu_mlp; do grep -q "^$m " "$WORK/models.txt" || { cat "$WORK/models.txt"; fail "models lacks $m"; }; done
grep -q "^tiny_vgg .*\[$(readlink -f "$LIB")\]$" "$WORK/models.txt" || { cat "$WORK/models.txt"; fail "tiny_vgg's origin"; }
ok "hpctrain models lists the zoo and the plugin's two models"

D="$WORK/d"
"$H" data synthetic --out "$D" --n 512 --test-n 128 --classes 4 --height 12 --width 12 --seed 5 --noise 200 >/dev/null
common=(--data "$D" --epochs 2 --max-steps 16 --lr 0.05 --seed 3 --log-every 1000)
run_h 2 train --model-lib "$LIB" --model tiny_vgg --sync-bn --batch-size 16 --ckpt-dir "$WORK/np2" "${common[@]}" >"$WORK/np2.txt" 2>&1 ||
  { tail "$WORK/np2.txt"; fail "tiny_vgg on 2 ranks"; }
printf 'model_lib = ["%s"]\nmodel = "tiny_vgg"\nsync_bn = true\n' "$LIB" >"$WORK/plugin.toml"
run_h 1 train --config "$WORK/plugin.toml" --batch-size 32 --ckpt-dir "$WORK/np1" "${common[@]}" >"$WORK/np1.txt" 2>&1 ||
  { tail "$WORK/np1.txt"; fail "tiny_vgg on 1 rank from a TOML config"; }
run_h 1 ckpt verify "$WORK/np2" >/dev/null || fail "ckpt verify"
run_h 1 ckpt merge "$WORK/np2" --out "$WORK/np2.h5" >/dev/null
run_h 1 ckpt merge "$WORK/np1" --out "$WORK/np1.h5" >/dev/null
/usr/bin/python3 - "$WORK/np2.h5" <<'PY' || fail "merged plugin checkpoint lacks BatchNorm statistics"
import h5py, sys
names = set(h5py.File(sys.argv[1])["model"].keys())
sys.exit(0 if {"1.running_mean", "1.running_var", "5.weight", "11.bias"} <= names else f"names: {sorted(names)}")
PY
/usr/bin/python3 "$(dirname "$0")/compare_ckpt.py" "$WORK/np2.h5" "$WORK/np1.h5" --rtol 1e-5 || fail "plugin: 2 ranks x 16 != 1 rank x 32"
ok "plugin tiny_vgg --sync-bn: 2 ranks x 16 == 1 rank x 32 (running stats included)"

acc=$(json_field "$WORK/np2.txt" test_accuracy)
run_h 2 eval --model-lib "$LIB" --ckpt "$WORK/np2" --data "$D" >"$WORK/eval.txt" 2>&1 || { tail "$WORK/eval.txt"; fail "eval with --model-lib"; }
[ "$(json_field "$WORK/eval.txt" test_accuracy)" = "$acc" ] || fail "eval $(json_field "$WORK/eval.txt" test_accuracy) != training $acc"
set +e
run_h 2 eval --ckpt "$WORK/np2" --data "$D" >"$WORK/eval-nolib.txt" 2>&1; rc=$?
set -e
[ $rc = 2 ] && grep -q "^hpctrain: error: .*tiny_vgg.*from the plugin $(readlink -f "$LIB"), which is not loaded: pass --model-lib" "$WORK/eval-nolib.txt" ||
  { cat "$WORK/eval-nolib.txt"; fail "eval without the plugin: rc $rc"; }
set +e
run_h 2 train --model tiny_vgg --batch-size 16 --ckpt-dir "$WORK/np2" "${common[@]}" >"$WORK/resume-nolib.txt" 2>&1; rc=$?
set -e
[ $rc = 2 ] && grep -q "^hpctrain: error: .*tiny_vgg.*$(readlink -f "$LIB")" "$WORK/resume-nolib.txt" ||
  { cat "$WORK/resume-nolib.txt"; fail "resume without the plugin: rc $rc"; }
ok "eval reproduces accuracy $acc; eval and resume without --model-lib name the library (exit 2)"

# Preemption by a real signal (SIGUSR1 to rank 0 only, as Slurm's --signal would reach one
# task first), then --resume auto; compared bitwise with an uninterrupted run.
long=(--model-lib "$LIB" --model gelu_mlp --data "$D" --epochs 40 --batch-size 8 --lr 0.02 --seed 4
      --log-every 1 --ckpt-every 25)
run_h 2 train "${long[@]}" --ckpt-dir "$WORK/full" >"$WORK/full.txt" 2>&1 || { tail "$WORK/full.txt"; fail "uninterrupted run"; }
set +e
run_h 2 train "${long[@]}" --ckpt-dir "$WORK/pre" --metrics "$WORK/pre.jsonl" >"$WORK/pre1.txt" 2>&1 &
job=$!
wait_for_step "$WORK/pre.jsonl" 30 || fail "the run never reached step 30"
signal_ranks USR1 "$H train" 0
wait $job; rc=$?
set -e
[ $rc = 75 ] || { tail "$WORK/pre1.txt"; fail "preempted run exited $rc, expected 75"; }
stopped=$(sed -n 's/.*checkpointing at step \([0-9]*\).*/\1/p' "$WORK/pre1.txt")
[ -n "$stopped" ] && [ "$stopped" -lt 1280 ] || { tail "$WORK/pre1.txt"; fail "no mid-run preemption checkpoint"; }
run_h 2 train "${long[@]}" --ckpt-dir "$WORK/pre" --resume auto >"$WORK/pre2.txt" 2>&1 || { tail "$WORK/pre2.txt"; fail "resumed run"; }
grep -q "resumed from .*at step $stopped" "$WORK/pre2.txt" || { grep resumed "$WORK/pre2.txt"; fail "did not resume from step $stopped"; }
run_h 1 ckpt merge "$WORK/full" --out "$WORK/full.h5" >/dev/null
run_h 1 ckpt merge "$WORK/pre" --out "$WORK/pre.h5" >/dev/null
/usr/bin/python3 "$(dirname "$0")/compare_ckpt.py" "$WORK/full.h5" "$WORK/pre.h5" --exact || fail "resume is not bitwise identical"
ok "SIGUSR1 at step $stopped -> exit 75 -> --resume auto == uninterrupted, bitwise"
echo "PASS test_model_plugin"
