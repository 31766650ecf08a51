#!/usr/bin/env bash
# e2e, door 1: the INSTALLED library. Installs to a temporary prefix, builds
# examples/custom_model against it (find_package(hpctrain), not the build tree), trains its own
# model on 2 ranks x batch 16 and on 1 rank x batch 32 (same parameters, fp32 tolerance), then
# `hpctrain ckpt verify/merge` read its checkpoint and the example evaluates it through
# hpctrain::evaluate_checkpoint, reproducing the training run's accuracy.
source "$(dirname "$0")/lib.sh"
SRC=${HPCTRAIN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
P="$WORK/prefix"
install_prefix "$P"
[ -f "$P/lib/cmake/hpctrain/hpctrainConfig.cmake" ] || fail "no package config installed"
[ -f "$P/include/hpctrain/hpctrain.h" ] || fail "no umbrella header installed"
if find "$P/include" -name 'h5_*.h' | grep -q .; then fail "private HDF5 headers installed"; fi
ok "installed: bin, lib, include/hpctrain, lib/cmake/hpctrain"

cmake -S "$SRC/examples/custom_model" -B "$WORK/cm" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$P" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >"$WORK/cm-configure.txt" 2>&1 ||
  { tail -30 "$WORK/cm-configure.txt"; fail "configuring the example against the installed package"; }
cmake --build "$WORK/cm" >"$WORK/cm-build.txt" 2>&1 || { tail -30 "$WORK/cm-build.txt"; fail "building the example"; }
grep -q "$P/include" "$WORK/cm/compile_commands.json" || fail "the example does not compile against the prefix"
if grep -q "$SRC/src" "$WORK/cm/compile_commands.json"; then fail "the example compiles against the source tree"; fi
if grep -qiE "hdf5|tomlplusplus|xxhash" "$WORK/cm/compile_commands.json"; then fail "private dependencies leak into the user's compile line"; fi
ok "examples/custom_model built against $P (no HDF5/toml++/xxhash on its compile line)"

CM="$WORK/cm/custom_model"
D="$WORK/d"
"$BIN" data synthetic --out "$D" --n 512 --test-n 128 --classes 4 --height 12 --width 12 --seed 5 --noise 200 >/dev/null
common=(--data "$D" --epochs 2 --max-steps 12 --lr 0.05 --seed 7 --log-every 1000 --optimizer sgd)
timeout 600 "$MPIEXEC" -np 2 "${MPIFLAGS[@]}" "$CM" --batch-size 16 --ckpt-dir "$WORK/np2" "${common[@]}" >"$WORK/np2.txt" 2>&1 ||
  { tail "$WORK/np2.txt"; fail "custom_model on 2 ranks"; }
timeout 600 "$MPIEXEC" -np 1 "${MPIFLAGS[@]}" "$CM" --batch-size 32 --ckpt-dir "$WORK/np1" "${common[@]}" >"$WORK/np1.txt" 2>&1 ||
  { tail "$WORK/np1.txt"; fail "custom_model on 1 rank"; }
[ "$(json_field "$WORK/np2.txt" model)" = res_gn_net ] || fail "summary names model $(json_field "$WORK/np2.txt" model)"
[ "$(json_field "$WORK/np2.txt" steps)" = 12 ] || fail "expected 12 steps"

"$BIN" ckpt verify "$WORK/np2" >"$WORK/verify.txt" 2>&1 || { cat "$WORK/verify.txt"; fail "ckpt verify on the example's checkpoint"; }
"$BIN" ckpt merge "$WORK/np2" --out "$WORK/np2.h5" >/dev/null
"$BIN" ckpt merge "$WORK/np1" --out "$WORK/np1.h5" >/dev/null
/usr/bin/python3 - "$WORK/np2.h5" <<'PY' || fail "merged checkpoint lacks the model's own names"
import h5py, sys
names = set(h5py.File(sys.argv[1])["model"].keys())
need = {"stem.weight", "gn0.weight", "conv1.weight", "gn2.bias", "down.weight", "head.weight", "head.bias"}
sys.exit(0 if need <= names else f"missing {need - names} in {sorted(names)}")
PY
/usr/bin/python3 "$(dirname "$0")/compare_ckpt.py" "$WORK/np2.h5" "$WORK/np1.h5" --rtol 1e-5 || fail "2 ranks x 16 != 1 rank x 32"
ok "custom model: 2 ranks x 16 == 1 rank x 32 after 12 steps; ckpt verify + merge read it"

# A run long enough to learn: its checkpoint, evaluated by the program, gives the run's accuracy.
"$BIN" data synthetic --out "$D.easy" --n 512 --test-n 128 --classes 4 --height 12 --width 12 --seed 5 --noise 60 >/dev/null
timeout 600 "$MPIEXEC" -np 2 "${MPIFLAGS[@]}" "$CM" --data "$D.easy" --epochs 4 --batch-size 16 --lr 0.1 --seed 7 \
  --log-every 1000 --ckpt-dir "$WORK/long" >"$WORK/long.txt" 2>&1 || { tail "$WORK/long.txt"; fail "custom_model, 4 epochs"; }
acc=$(json_field "$WORK/long.txt" test_accuracy)
/usr/bin/python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0.5 else 1)" "$acc" || fail "custom_model did not learn (accuracy $acc, chance 0.25)"
timeout 300 "$MPIEXEC" -np 2 "${MPIFLAGS[@]}" "$CM" eval --ckpt "$WORK/long" --data "$D.easy" >"$WORK/eval.txt" 2>&1 || { tail "$WORK/eval.txt"; fail "custom_model eval"; }
[ "$(json_field "$WORK/eval.txt" test_accuracy)" = "$acc" ] || fail "eval accuracy $(json_field "$WORK/eval.txt" test_accuracy) != training $acc"
ok "custom_model eval (hpctrain::evaluate_checkpoint) reproduces accuracy $acc"

set +e
"$BIN" eval --ckpt "$WORK/long" --data "$D.easy" >"$WORK/cli-eval.txt" 2>&1
rc=$?
set -e
[ $rc = 2 ] && grep -q "built by a program's own factory" "$WORK/cli-eval.txt" || { cat "$WORK/cli-eval.txt"; fail "hpctrain eval on a program's checkpoint: rc $rc"; }
ok "hpctrain eval on it names the program as the model's source (exit 2)"
echo "PASS test_custom_model"
