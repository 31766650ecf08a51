#!/usr/bin/env bash
# e2e: loading a checkpoint in PyTorch takes one line. A 2-rank cnn (and an mlp) is trained on
# synthetic data, its checkpoint merged (via ROOT/latest) to .pt and .safetensors; the torch
# wheel's Python loads each with torch.load (weights_only=True) / safetensors.torch.load_file
# into a Python replica of the model with strict=True, and its test accuracy equals
# `hpctrain eval`'s on the same file, exactly. --dtype bf16/fp16 exports load as bf16/fp16 and
# name the non-floating tensors they keep. `ckpt merge --out x.pt` says "(pt, ...)".
source "$(dirname "$0")/lib.sh"
BUILD=${HPCTRAIN_BUILD_DIR:-$(dirname "$BIN")}
PY=$(sed -n 's/^Python3_EXECUTABLE:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)
[ -x "${PY:-}" ] || PY=${HPCTRAIN_HOME:-$HOME/.cache/hpctrain}/venv/bin/python
"$PY" -c "import torch, safetensors" || fail "$PY lacks torch or safetensors (bash launch/setup.sh installs them)"
D="$WORK/d"
run_np 1 data synthetic --out "$D" --n 512 --test-n 300 --classes 4 --height 12 --width 12 --seed 7 --noise 200 >/dev/null
/usr/bin/python3 - "$D/test.h5" "$WORK/test.npz" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
np.savez(sys.argv[2], images=f["images"][()], labels=f["labels"][()], mean=f.attrs["mean"], std=f.attrs["std"],
         classes=int(f.attrs["num_classes"]))
PY

for model in cnn mlp; do
  ck="$WORK/ck-$model"
  run_np 2 train --model "$model" --data "$D" --epochs 2 --batch-size 16 --lr 0.02 --seed 3 --log-every 1000 \
    --ckpt-dir "$ck" --ckpt-every 10 >"$WORK/train-$model.txt" 2>&1 || { tail "$WORK/train-$model.txt"; fail "train $model"; }
  run_np 1 ckpt merge "$ck/latest" --out "$WORK/$model.pt" >"$WORK/merge.txt" || fail "merge $model .pt"
  grep -q "^wrote $WORK/$model.pt (pt, " "$WORK/merge.txt" || fail "merge output: $(cat "$WORK/merge.txt")"
  run_np 1 ckpt merge "$ck" --out "$WORK/$model.safetensors" >/dev/null || fail "merge $model .safetensors"
  "$PY" "$(dirname "$0")/ckpt_export_check.py" "$model" "$WORK/test.npz" "$WORK/$model.pt" "$WORK/$model.safetensors" \
    >"$WORK/py-$model.txt" || fail "Python could not load the $model exports"
  for f in "$model.pt" "$model.safetensors"; do
    run_np 1 eval --ckpt "$WORK/$f" --data "$D" --device cpu >"$WORK/eval.txt" 2>&1 || { cat "$WORK/eval.txt"; fail "eval $f"; }
    want=$(json_field "$WORK/eval.txt" test_accuracy)
    got=$(grep "\"$WORK/$f\"" "$WORK/py-$model.txt" | /usr/bin/python3 -c "import json,sys; print(json.loads(sys.stdin.read())['accuracy'])")
    /usr/bin/python3 -c "import sys; a, b = map(float, sys.argv[1:]); sys.exit(a != b)" "$got" "$want" ||
      fail "$f: Python accuracy $got != hpctrain eval's $want"
    ok "$f: torch loads it strict into a Python $model; accuracy $got == hpctrain eval's $want"
  done
done

set +e
run_np 1 ckpt merge "$WORK/ck-cnn" --out "$WORK/cnn-bf16.safetensors" --dtype bf16 >"$WORK/m.out" 2>"$WORK/m.err"
rc=$?
set -e
[ $rc = 0 ] || { cat "$WORK/m.err"; fail "merge --dtype bf16 exited $rc"; }
[ "$(grep -c '^hpctrain' "$WORK/m.err")" = 1 ] || { cat "$WORK/m.err"; fail "--dtype: not one warning line"; }
grep -q "^hpctrain: warning: ckpt merge --dtype bf16: 2 tensor(s) are not floating point and were kept as they are: model/features.1.num_batches_tracked (int64), model/features.5.num_batches_tracked (int64)$" "$WORK/m.err" ||
  fail "--dtype warning: $(cat "$WORK/m.err")"
run_np 1 ckpt merge "$WORK/ck-cnn" --out "$WORK/cnn-fp16.pt" --dtype fp16 >/dev/null 2>&1
"$PY" - "$WORK/cnn-bf16.safetensors" "$WORK/cnn-fp16.pt" <<'PY' || fail "cast exports"
import sys, torch, safetensors.torch
b = safetensors.torch.load_file(sys.argv[1])
h = torch.load(sys.argv[2], weights_only=True)
assert b["features.0.weight"].dtype == torch.bfloat16 and h["classifier.2.bias"].dtype == torch.float16
assert b["features.1.num_batches_tracked"].dtype == torch.int64 == h["features.5.num_batches_tracked"].dtype
print("bf16 .safetensors and fp16 .pt: floating tensors cast, counters kept int64")
PY
ok "--dtype bf16|fp16: one warning line names the int64 counters kept; Python loads the cast files"
echo "PASS test_ckpt_export"
