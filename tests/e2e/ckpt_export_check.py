"""Loads `hpctrain ckpt merge` exports in Python the way a user would, into a Python replica of
the zoo model, strict, and evaluates it on the test set (run with the torch wheel's Python).

usage: ckpt_export_check.py MODEL TEST.npz FILE [FILE...]
  MODEL: cnn or mlp (src/model/models.cpp's layers and names: features.N / classifier.N)
  TEST.npz: images (uint8 [N,C,H,W]), labels, mean, std (from test.h5, by Debian's h5py)
  FILE: .pt (torch.load, default weights_only=True) or .safetensors (safetensors.torch.load_file)
Prints one JSON line per file: {"file", "accuracy", "tensors", "dtypes"}. Exits 1 on any error.
"""
import json
import sys
import zipfile

import numpy as np
import torch
from torch import nn
import safetensors.torch


def replica(model, shape, classes):
    c, h, w = shape
    if model == "mlp":
        features = nn.Sequential(nn.Flatten(), nn.Linear(c * h * w, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU())
        classifier = nn.Sequential(nn.Linear(256, classes))
    elif model == "cnn":
        features = nn.Sequential(nn.Conv2d(c, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Flatten())
        classifier = nn.Sequential(nn.Linear(64 * (h // 4) * (w // 4), 256), nn.ReLU(), nn.Linear(256, classes))
    else:
        sys.exit(f"unknown model {model}")
    net = nn.Module()
    net.features, net.classifier = features, classifier
    net.forward = lambda x: classifier(features(x))
    return net


def load(path):
    if path.endswith(".safetensors"):
        return safetensors.torch.load_file(path)
    # The default is weights_only=True since PyTorch 2.6; say it anyway so older wheels test it too.
    sd = torch.load(path, map_location="cpu", weights_only=True)
    assert type(sd).__name__ == "OrderedDict", type(sd)
    pkl = next(n for n in zipfile.ZipFile(path).namelist() if n.endswith("data.pkl"))
    raw = zipfile.ZipFile(path).read(pkl)
    assert b"restore_type_tag" not in raw and b"torch.jit" not in raw, "type tags in data.pkl"
    return sd


def main():
    model, npz, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    d = np.load(npz)
    images, labels = d["images"], d["labels"].astype(np.int64)
    mean, std = d["mean"].astype(np.float32), d["std"].astype(np.float32)
    # hpctrain's loader: (x * (1/255) - mean) * (1/std) in float32, per channel.
    scale = np.float32(1) / np.float32(255)
    x = images.astype(np.float32)
    for ch in range(x.shape[1]):
        inv = np.float32(1) / std[ch]
        x[:, ch] = (x[:, ch] * scale - mean[ch]) * inv
    classes = int(d["classes"])
    torch.set_num_threads(1)
    for path in files:
        sd = load(path)
        net = replica(model, list(x.shape[1:]), classes)
        dtypes = sorted({str(t.dtype) for t in sd.values()})
        if any(t.dtype in (torch.float16, torch.bfloat16) for t in sd.values()):
            net = net.to(next(t.dtype for t in sd.values() if t.is_floating_point()))
        net.load_state_dict(sd, strict=True)  # raises on any missing or unexpected key
        net.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, len(x), 256):  # hpctrain eval's batch size
                xb = torch.from_numpy(x[i:i + 256])
                p = next(net.parameters())
                out = net.forward(xb.to(p.dtype))
                correct += int((out.argmax(1) == torch.from_numpy(labels[i:i + 256])).sum())
        print(json.dumps({"file": path, "accuracy": correct / len(x), "tensors": len(sd), "dtypes": dtypes}))


main()
