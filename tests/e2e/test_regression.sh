#!/usr/bin/env bash
# e2e: data beyond 28x28 classification. A synthetic regression data set written with h5py in
# several numbered files (float32 inputs [N,6], float32 targets [N,2] = a fixed nonlinear map +
# noise): zoo mlp with --loss mse learns well below the predict-the-mean baseline, and 2 ranks x
# 16 == 1 rank x 32 (the files are one data set, sampled globally). Also float16 inputs and
# bad multi-file sets (dtype/shape disagreement, a gap in the numbering, a loss that does not fit
# the targets): one-line errors, exit 2.
source "$(dirname "$0")/lib.sh"
D="$WORK/reg"
/usr/bin/python3 - "$D" <<'PY'
import os, sys
import h5py, numpy as np
d = sys.argv[1]; os.makedirs(d)
rng = np.random.default_rng(0)
W = rng.normal(size=(6, 2)).astype(np.float32)
def make(n):
    x = rng.normal(size=(n, 6)).astype(np.float32)
    y = (np.tanh(x @ W) + 0.05 * rng.normal(size=(n, 2))).astype(np.float32)
    return x, y
for split, sizes in (("train", (300, 212, 256)), ("test", (100, 92))):
    for i, n in enumerate(sizes):
        x, y = make(n)
        with h5py.File(f"{d}/{split}-{i:05d}.h5", "w") as f:
            f["images"] = x; f["targets"] = y
# predict-the-mean baseline on the test set (mean of the training targets)
ytr = np.concatenate([h5py.File(f"{d}/train-{i:05d}.h5")["targets"][()] for i in range(3)])
yte = np.concatenate([h5py.File(f"{d}/test-{i:05d}.h5")["targets"][()] for i in range(2)])
open(f"{d}/baseline.txt", "w").write(str(float(((yte - ytr.mean(0)) ** 2).mean())))
# float16 inputs, one file
os.makedirs(f"{d}16")
for split in ("train", "test"):
    x, y = make(256)
    with h5py.File(f"{d}16/{split}.h5", "w") as f:
        f["images"] = x.astype(np.float16); f["targets"] = y
# bad sets: a file with another sample shape; a gap in the numbering
import shutil
shutil.copytree(d, f"{d}_shape")
with h5py.File(f"{d}_shape/train-00001.h5", "w") as f:
    f["images"] = np.zeros((10, 7), np.float32); f["targets"] = np.zeros((10, 2), np.float32)
shutil.copytree(d, f"{d}_gap")
os.remove(f"{d}_gap/train-00001.h5")
shutil.copytree(d, f"{d}_dtype")
with h5py.File(f"{d}_dtype/train-00002.h5", "w") as f:
    f["images"] = np.zeros((10, 6), np.uint8); f["targets"] = np.zeros((10, 2), np.float32)
PY
base=$(cat "$D/baseline.txt")
common=(--model mlp --loss mse --epochs 4 --lr 0.05 --seed 3 --log-every 1000 --optimizer adamw --weight-decay 0)
run_np 2 train --batch-size 16 --ckpt-dir "$WORK/np2" --data "$D" "${common[@]}" >"$WORK/np2.txt" 2>&1 || { tail "$WORK/np2.txt"; fail "regression on 2 ranks"; }
run_np 1 train --batch-size 32 --ckpt-dir "$WORK/np1" --data "$D" "${common[@]}" >"$WORK/np1.txt" 2>&1 || { tail "$WORK/np1.txt"; fail "regression on 1 rank"; }
loss=$(json_field "$WORK/np2.txt" test_loss)
/usr/bin/python3 -c "import sys; l,b=map(float,sys.argv[1:]); sys.exit(0 if l < 0.2*b else 1)" "$loss" "$base" ||
  fail "test mse $loss is not below 0.2 x the predict-the-mean baseline $base"
[ "$(json_field "$WORK/np2.txt" test_accuracy)" = None ] || fail "regression reports an accuracy"
run_np 1 ckpt merge "$WORK/np2" --out "$WORK/np2.h5" >/dev/null
run_np 1 ckpt merge "$WORK/np1" --out "$WORK/np1.h5" >/dev/null
/usr/bin/python3 "$(dirname "$0")/compare_ckpt.py" "$WORK/np2.h5" "$WORK/np1.h5" --rtol 1e-4 || fail "regression: 2 ranks x 16 != 1 rank x 32"
run_np 2 eval --ckpt "$WORK/np2" --data "$D" >"$WORK/eval.txt" 2>&1 || { tail "$WORK/eval.txt"; fail "eval of the regression model"; }
/usr/bin/python3 -c "import sys; a,b=map(float,sys.argv[1:]); sys.exit(0 if abs(a-b) <= 1e-6*abs(b) else 1)" "$(json_field "$WORK/eval.txt" test_loss)" "$loss" ||
  fail "eval test loss $(json_field "$WORK/eval.txt" test_loss) != training $loss (rel 1e-6: eval batches are 256, training's 16)"
ok "mse regression over 3+2 files: test loss $loss < 0.2 x baseline $base; 2 ranks == 1 rank; eval reproduces it"

run_np 2 train --model mlp --loss mse --data "${D}16" --max-steps 5 >"$WORK/f16.txt" 2>&1 || { tail "$WORK/f16.txt"; fail "float16 inputs"; }
ok "float16 inputs train"

run_np 1 data synthetic --out "$WORK/cls" --n 64 --test-n 32 --classes 4 --height 8 --width 8 >/dev/null
"${HPCTRAIN_PYTHON:-$HOME/.cache/hpctrain/venv/bin/python}" -W ignore -c "
import torch, sys
torch.jit.script(torch.nn.Sequential(torch.nn.Linear(6, 3))).save(sys.argv[1])" "$WORK/out3.pt"
expect_error multi_shape "train-00001.h5 has sample shape \[7\] but .*train-00000.h5 has \[6\]" train "${common[@]}" --data "${D}_shape"
expect_error multi_gap "train-00001.h5 is missing (files must be numbered from 00000 without gaps" train "${common[@]}" --data "${D}_gap"
expect_error multi_dtype "train-00002.h5 has input dtype uint8 but .*train-00000.h5 has float32" train "${common[@]}" --data "${D}_dtype"
expect_error mse_on_labels "dataset 'targets' not found (it has integer 'labels': use --loss cross_entropy)" train --model mlp --loss mse --data "$WORK/cls" --max-steps 2
expect_error ce_on_targets "dataset 'labels' not found (it has 'targets': use --loss mse for float targets)" train --model mlp --data "$D" --max-steps 2
expect_error target_shape "model output \[16,3\] does not fit targets \[16,2\]: mse needs the targets' shape" train --model "$WORK/out3.pt" --loss mse --data "$D" --batch-size 16 --max-steps 2
echo "PASS test_regression"
