"""Loads a merged checkpoint into the Python module by name (strict=True) and prints its test-set
accuracy in eval mode, computed as hpctrain computes it (uint8/255, then the file's mean/std).
usage: load_back.py MODELS_PY MERGED_FILE TEST_H5 FACTORY C H W CLASSES
MERGED_FILE: .h5 (group model/, via h5py), or .pt / .safetensors when those exports exist."""
import importlib.util
import sys
import warnings

import h5py
import numpy as np
import torch

warnings.filterwarnings("ignore", category=FutureWarning)
models_py, merged, test_h5, factory = sys.argv[1:5]
C, H, W, K = map(int, sys.argv[5:9])
sys.argv = [models_py, "/nonexistent", str(C), str(H), str(W), str(K)]
spec = importlib.util.spec_from_file_location("tsm", models_py)
tsm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tsm)
net = getattr(tsm, factory)()
if merged.endswith(".h5"):
    with h5py.File(merged, "r") as f:
        sd = {k: torch.from_numpy(np.array(f["model"][k][()])) for k in f["model"].keys()}
elif merged.endswith(".safetensors"):
    from safetensors.torch import load_file
    sd = load_file(merged)
else:
    sd = torch.load(merged, map_location="cpu")
net.load_state_dict(sd, strict=True)
net.eval()
with h5py.File(test_h5, "r") as f:
    x = f["images"][()].astype(np.float32) / 255.0
    y = f["labels"][()]
    mean = np.array(f.attrs.get("mean", np.zeros(C)), np.float32).reshape(1, -1, 1, 1)
    std = np.array(f.attrs.get("std", np.ones(C)), np.float32).reshape(1, -1, 1, 1)
x = torch.from_numpy((x - mean) / std)
with torch.no_grad():
    pred = net(x).argmax(1).numpy()
print(float((pred == y).sum()) / len(y))
