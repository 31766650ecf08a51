"""The hpctrain model zoo (`--model mlp|cnn|resnet`, src/model/models.cpp) in plain PyTorch, with
the same parameter and buffer names, so a merged checkpoint loads strictly:

    import torch, h5py, numpy as np
    from zoo_reference import make_model, preprocess
    net = make_model("cnn", (1, 28, 28), 10)                 # sample shape [C, H, W], classes
    net.load_state_dict(torch.load("w.pt"))                  # hpctrain ckpt merge CKPT --out w.pt
    net.eval()
    with h5py.File("test.h5") as f:                          # a data file hpctrain trained on
        x, y = preprocess(f["images"][()], f), f["labels"][()]
    acc = (net(x).argmax(1).numpy() == y).mean()             # == `hpctrain eval --ckpt CKPT`

Input preprocessing, as hpctrain's loader does it: uint8 images are divided by 255 (float
images are taken as stored), then each channel is normalized with the data file's `mean` and
`std` attributes (x - mean) / std (0 and 1 where the file has none). A network trained with
--sync-bn has the same names (SyncBatchNorm keeps BatchNorm2d's); load it into this plain
BatchNorm2d model. Only the classifier form (integer labels) is here; a regression run's
outputs are the same network with outputs = the number of target entries, reshaped.

Command line: `zoo_reference.py MODEL CKPT_FILE TEST_H5` prints the test accuracy of a merged
checkpoint (.pt, .safetensors or .h5) in eval mode, one number (tests/e2e/test_zoo_reference.sh).
"""
import sys

import numpy as np
import torch
import torch.nn as nn

__all__ = ["make_model", "preprocess", "load_state_dict_file", "ClassifierNet"]


class ClassifierNet(nn.Module):
    """`features` then `classifier`, as hpctrain's ClassifierNet (state_dict names features.N.*,
    classifier.N.*)."""

    def __init__(self, features, classifier):
        super().__init__()
        self.features = features
        self.classifier = classifier

    def forward(self, x):
        return self.classifier(self.features(x))


def conv3x3(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


class PreActBlock(nn.Module):
    """Pre-activation basic block: BN-ReLU-conv-BN-ReLU-conv plus shortcut (a strided 1x1 conv of
    the pre-activation when the shape changes, else the input itself)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        # Registered in the C++ order: bn1, conv1, bn2, conv2, shortcut.
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = conv3x3(cin, cout, stride)
        self.bn2 = nn.BatchNorm2d(cout)
        self.conv2 = conv3x3(cout, cout)
        self.shortcut = nn.Conv2d(cin, cout, 1, stride=stride, bias=False) if stride != 1 or cin != cout else None

    def forward(self, x):
        pre = torch.relu(self.bn1(x))
        skip = self.shortcut(pre) if self.shortcut is not None else x
        y = self.conv1(pre)
        y = self.conv2(torch.relu(self.bn2(y)))
        return y + skip


class GlobalAvgPool(nn.Module):
    def forward(self, x):
        return x.mean((2, 3))


def make_mlp(shape, classes):
    n = int(np.prod(shape))
    features = nn.Sequential(nn.Flatten(), nn.Linear(n, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU())
    return ClassifierNet(features, nn.Sequential(nn.Linear(256, classes)))


def make_cnn(shape, classes):
    c, h, w = shape
    features = nn.Sequential(
        nn.Conv2d(c, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten())
    flat = 64 * (h // 4) * (w // 4)
    return ClassifierNet(features, nn.Sequential(nn.Linear(flat, 256), nn.ReLU(), nn.Linear(256, classes)))


def make_resnet(shape, classes):
    features = nn.Sequential(
        conv3x3(shape[0], 48), PreActBlock(48, 48, 1), PreActBlock(48, 96, 2), PreActBlock(96, 192, 2),
        nn.BatchNorm2d(192), nn.ReLU(), GlobalAvgPool())
    return ClassifierNet(features, nn.Sequential(nn.Linear(192, classes)))


def make_model(name, shape, classes):
    """The zoo model `name` for samples of `shape` ([C, H, W]; mlp takes any shape) and
    `classes` outputs, with hpctrain's state_dict names."""
    shape = tuple(int(d) for d in shape)
    if name == "mlp":
        return make_mlp(shape, classes)
    if len(shape) != 3:
        raise ValueError(f"model {name} needs [C,H,W] samples, got {shape}")
    if name == "cnn":
        return make_cnn(shape, classes)
    if name == "resnet":
        return make_resnet(shape, classes)
    raise ValueError(f'unknown model "{name}" (allowed: mlp, cnn, resnet)')


def preprocess(images, h5file=None, mean=None, std=None):
    """hpctrain's loader input: uint8 / 255 (float data as stored), then (x - mean) / std per
    channel, with mean/std from the data file's attributes (h5py File) unless given."""
    x = np.asarray(images)
    x = x.astype(np.float32) / 255.0 if x.dtype == np.uint8 else x.astype(np.float32)
    c = x.shape[1] if x.ndim >= 2 else 1
    attrs = h5file.attrs if h5file is not None else {}
    mean = np.asarray(mean if mean is not None else attrs.get("mean", np.zeros(c)), np.float32)
    std = np.asarray(std if std is not None else attrs.get("std", np.ones(c)), np.float32)
    bshape = (1, -1) + (1,) * (x.ndim - 2)
    return torch.from_numpy((x - mean.reshape(bshape)) / std.reshape(bshape))


def load_state_dict_file(path):
    """A merged checkpoint as a state dict: .pt/.pth (torch.load), .safetensors, .h5 (group model/)."""
    if path.endswith(".safetensors"):
        from safetensors.torch import load_file
        return load_file(path)
    if path.endswith((".h5", ".hdf5")):
        import h5py
        with h5py.File(path, "r") as f:
            return {k: torch.from_numpy(np.array(f["model"][k][()])) for k in f["model"].keys()}
    return torch.load(path, map_location="cpu")


def main(argv):
    if len(argv) != 4:
        sys.exit("usage: zoo_reference.py mlp|cnn|resnet MERGED_CKPT TEST_H5")
    import h5py
    name, ckpt, test_h5 = argv[1:]
    with h5py.File(test_h5, "r") as f:
        images, labels = f["images"][()], f["labels"][()]
        x = preprocess(images, f)
        classes = int(f.attrs["num_classes"]) if "num_classes" in f.attrs else int(labels.max()) + 1
    net = make_model(name, x.shape[1:], classes)
    net.load_state_dict(load_state_dict_file(ckpt), strict=True)
    net.eval()
    with torch.no_grad():
        pred = net(x).argmax(1).numpy()
    print(float((pred == labels).sum()) / len(labels))


if __name__ == "__main__":
    main(sys.argv)
