#!/usr/bin/env bash
# e2e, door 3: TorchScript models written in Python with the pinned torch wheel and trained with
# `hpctrain train --model net.pt`:
# - a scripted module with nested submodules, GroupNorm/LayerNorm, Dropout(p=0), a buffer and a
#   residual connection: 2 ranks x 16 == 1 rank x 32 (fp32 tolerance);
# - a scripted BatchNorm model: trained on 2 ranks, merged, loaded back into the Python module
#   by name (strict), whose eval-mode test accuracy equals hpctrain eval's;
# - a traced module: trains, resumes from its checkpoint, and is evaluated from the checkpoint
#   alone after the original .pt is deleted;
# - bad TorchScript inputs: one-line errors, exit 2.
source "$(dirname "$0")/lib.sh"
PY=${HPCTRAIN_PYTHON:-$HOME/.cache/hpctrain/venv/bin/python}
E=$(dirname "$0")
D="$WORK/d" M="$WORK/m"
mkdir -p "$M"
run_np 1 data synthetic --out "$D" --n 512 --test-n 256 --classes 4 --height 8 --width 8 --seed 5 --noise 60 >/dev/null
"$PY" "$E/torchscript_models.py" "$M" 1 8 8 4 || fail "writing the TorchScript models"
common=(--data "$D" --epochs 2 --lr 0.05 --seed 7 --log-every 1000)

run_np 2 train --model "$M/resnorm.pt" --batch-size 16 --ckpt-dir "$WORK/rn2" "${common[@]}" --max-steps 12 >"$WORK/rn2.txt" 2>&1 || { tail "$WORK/rn2.txt"; fail "resnorm on 2 ranks"; }
run_np 1 train --model "$M/resnorm.pt" --batch-size 32 --ckpt-dir "$WORK/rn1" "${common[@]}" --max-steps 12 >"$WORK/rn1.txt" 2>&1 || { tail "$WORK/rn1.txt"; fail "resnorm on 1 rank"; }
run_np 1 ckpt merge "$WORK/rn2" --out "$WORK/rn2.h5" >/dev/null
run_np 1 ckpt merge "$WORK/rn1" --out "$WORK/rn1.h5" >/dev/null
/usr/bin/python3 - "$WORK/rn2.h5" <<'PY' || fail "checkpoint names are not the Python state_dict names"
import h5py, sys
names = set(h5py.File(sys.argv[1])["model"].keys())
need = {"scale", "stem.0.weight", "stem.1.weight", "body.0.conv.weight", "body.1.norm.bias", "head.1.weight", "head.3.bias"}
sys.exit(0 if need <= names else f"missing {need - names}: {sorted(names)}")
PY
/usr/bin/python3 "$E/compare_ckpt.py" "$WORK/rn2.h5" "$WORK/rn1.h5" --rtol 1e-5 || fail "TorchScript: 2 ranks x 16 != 1 rank x 32"
ok "scripted resnorm.pt: 2 ranks x 16 == 1 rank x 32; names are the module's state_dict names"

run_np 2 train --model "$M/bnnet.pt" --batch-size 16 --ckpt-dir "$WORK/bn" "${common[@]}" --max-steps 30 >"$WORK/bn.txt" 2>&1 || { tail "$WORK/bn.txt"; fail "bnnet on 2 ranks"; }
run_np 1 ckpt merge "$WORK/bn" --out "$WORK/bn.h5" >/dev/null
run_np 2 eval --ckpt "$WORK/bn" --data "$D" >"$WORK/bn-eval.txt" 2>&1 || { tail "$WORK/bn-eval.txt"; fail "eval bnnet"; }
acc_h=$(json_field "$WORK/bn-eval.txt" test_accuracy)
acc_p=$("$PY" "$E/load_back.py" "$E/torchscript_models.py" "$WORK/bn.h5" "$D/test.h5" bnnet 1 8 8 4) || fail "loading back into Python"
/usr/bin/python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) == float(sys.argv[2]) else 1)" "$acc_h" "$acc_p" ||
  fail "Python accuracy $acc_p != hpctrain eval $acc_h"
for ext in pt safetensors; do  # the one-line loads: torch.load(...) / safetensors.torch.load_file(...)
  run_np 1 ckpt merge "$WORK/bn" --out "$WORK/bn.$ext" >/dev/null
  acc_x=$("$PY" "$E/load_back.py" "$E/torchscript_models.py" "$WORK/bn.$ext" "$D/test.h5" bnnet 1 8 8 4) || fail "loading bn.$ext into Python"
  [ "$acc_x" = "$acc_p" ] || fail "bn.$ext: Python accuracy $acc_x != $acc_p"
done
ok "scripted BatchNorm model: merged (.h5, .pt, .safetensors), loaded into Python by name (strict): accuracy $acc_p == hpctrain eval $acc_h"

cp "$M/traced.pt" "$WORK/traced.pt"
run_np 2 train --model "$WORK/traced.pt" --batch-size 16 --ckpt-dir "$WORK/tr" "${common[@]}" --max-steps 8 >"$WORK/tr1.txt" 2>&1 || { tail "$WORK/tr1.txt"; fail "traced, first part"; }
run_np 2 train --model "$WORK/traced.pt" --batch-size 16 --ckpt-dir "$WORK/tr" "${common[@]}" --max-steps 16 >"$WORK/tr2.txt" 2>&1 || { tail "$WORK/tr2.txt"; fail "traced, resumed"; }
grep -q "resumed from .*step-00000008 at step 8" "$WORK/tr2.txt" || { grep resumed "$WORK/tr2.txt"; fail "traced model did not resume"; }
acc_t=$(json_field "$WORK/tr2.txt" test_accuracy)
rm "$WORK/traced.pt"
run_np 2 eval --ckpt "$WORK/tr" --data "$D" >"$WORK/tr-eval.txt" 2>&1 || { tail "$WORK/tr-eval.txt"; fail "eval after deleting the .pt"; }
[ "$(json_field "$WORK/tr-eval.txt" test_accuracy)" = "$acc_t" ] || fail "eval from the checkpoint alone: $(json_field "$WORK/tr-eval.txt" test_accuracy) != $acc_t"
ok "traced module: resumed at step 8; evaluated from the checkpoint alone after rm traced.pt (accuracy $acc_t)"

expect_error ts_state_dict "pickled object saved with torch.save (a state_dict?), not a TorchScript module: save the model itself with torch.jit.script" train --model "$M/statedict.pt" "${common[@]}"
expect_error ts_two_args "forward(Tensor x, Tensor y) -> Tensor; hpctrain needs one tensor in, one tensor out" train --model "$M/two_args.pt" "${common[@]}"
expect_error ts_tuple_out "forward(Tensor x) -> Tuple\[Tensor, Tensor\]; hpctrain needs one tensor in, one tensor out" train --model "$M/tuple_out.pt" "${common[@]}"
expect_error ts_wrong_output "model output \[8,5\] does not fit targets \[8\] with 4 classes" train --model "$M/wrong_out.pt" "${common[@]}" --batch-size 8
expect_error ts_fails_on_shape "wrong_in.pt fails on a batch of this data (input \[8,1,8,8\], targets \[8\]): .*mat1 and mat2 shapes cannot be multiplied" train --model "$M/wrong_in.pt" "${common[@]}" --batch-size 8
expect_error ts_sync_bn "--sync-bn cannot convert the BatchNorm layers of the TorchScript module" train --model "$M/bnnet.pt" --sync-bn "${common[@]}"
expect_error ts_missing "--model $WORK/nope.pt: does not exist" train --model "$WORK/nope.pt" "${common[@]}"
echo "PASS test_torchscript"
