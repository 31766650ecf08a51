"""Writes the TorchScript models and helpers of test_torchscript.sh with the pinned torch wheel.
usage: torchscript_models.py OUT_DIR C H W CLASSES
  OUT_DIR/resnorm.pt   scripted: nested submodules, GroupNorm + LayerNorm, Dropout(p=0), a
                       registered buffer, a residual connection, no BatchNorm
  OUT_DIR/bnnet.pt     scripted: conv-BatchNorm-ReLU, for loading back by name (scripted, since
                       tracing bakes BatchNorm's train/eval mode into the graph)
  OUT_DIR/traced.pt    traced: a perceptron with a skip connection
  OUT_DIR/statedict.pt a pickled state_dict (torch.save), not a TorchScript module
  OUT_DIR/two_args.pt  forward(x, y)        OUT_DIR/tuple_out.pt  forward returns a tuple
  OUT_DIR/wrong_out.pt outputs CLASSES + 1 logits   OUT_DIR/wrong_in.pt  fails on the input's shape"""
import sys
import warnings

import torch
import torch.nn as nn

warnings.filterwarnings("ignore", category=FutureWarning)  # torch.jit.* is deprecated in 2.15
out, C, H, W, K = sys.argv[1], *map(int, sys.argv[2:6])


class Block(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.conv = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.norm = nn.GroupNorm(4, ch)

    def forward(self, x):
        return torch.relu(x + self.norm(self.conv(x)))  # residual


class ResNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(C, 8, 3, padding=1), nn.GroupNorm(4, 8), nn.ReLU())
        self.body = nn.ModuleList([Block(8), Block(8)])
        self.head = nn.Sequential(nn.Flatten(), nn.LayerNorm(8 * H * W), nn.Dropout(p=0.0), nn.Linear(8 * H * W, K))
        self.register_buffer("scale", torch.full((1,), 0.5))

    def forward(self, x):
        h = self.stem(x)
        for b in self.body:
            h = b(h)
        return self.head(h) * self.scale


def bnnet():
    return nn.Sequential(nn.Conv2d(C, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(8 * (H // 2) * (W // 2), K))


class Traced(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(C * H * W, 32)
        self.fc2 = nn.Linear(32, 32)
        self.out = nn.Linear(32, K)

    def forward(self, x):
        h = torch.relu(self.fc1(x.flatten(1)))
        return self.out(h + torch.tanh(self.fc2(h)))


class TwoArgs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(C * H * W, K)

    def forward(self, x, y):
        return self.fc(x.flatten(1)) + y


class TupleOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(C * H * W, K)

    def forward(self, x):
        return self.fc(x.flatten(1)), x


if __name__ == "__main__":
    torch.manual_seed(0)
    torch.jit.script(ResNorm()).save(f"{out}/resnorm.pt")
    torch.jit.script(bnnet()).save(f"{out}/bnnet.pt")
    torch.jit.trace(Traced(), torch.zeros(2, C, H, W)).save(f"{out}/traced.pt")
    torch.save(ResNorm().state_dict(), f"{out}/statedict.pt")
    torch.jit.script(TwoArgs()).save(f"{out}/two_args.pt")
    torch.jit.script(TupleOut()).save(f"{out}/tuple_out.pt")
    torch.jit.script(nn.Sequential(nn.Flatten(), nn.Linear(C * H * W, K + 1))).save(f"{out}/wrong_out.pt")
    torch.jit.script(nn.Sequential(nn.Flatten(), nn.Linear(2 * C * H * W, K))).save(f"{out}/wrong_in.pt")
