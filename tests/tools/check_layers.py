#!/usr/bin/env python3
"""The tree's arrows: every `#include "stage/..."` in src/ must point down the layers.

    cli -> train -> optim/eval -> ckpt/ddp/model/metrics -> dataset/io/comm/diag -> runtime

A stage may include its own files and any stage of a lower layer. Inside a layer only the
arrows in SAME_LAYER are allowed (each names why), so no two stages of a layer can include each
other. A stage folder this script does not know fails too: a new stage must be placed here (and in
the README's layout section and docs/architecture.md) first.

Usage: check_layers.py SRC_DIR    (exit 0: clean; 1: lists every offending include)
"""
import os
import re
import sys

LAYERS = [
    ["runtime"],
    ["io", "comm", "diag", "dataset"],
    ["ddp", "model", "metrics", "ckpt"],
    ["optim", "eval"],
    ["train"],
    ["cli"],
]
SAME_LAYER = {
    ("dataset", "io"): "the readers and writers use the one HDF5 layer",
    ("diag", "comm"): "doctor's diagnostics run over the communicators",
    ("model", "ddp"): "zoo models build SyncBatchNorm layers (ddp/sync_batchnorm.h)",
    ("metrics", "ddp"): "step statistics read DDP's per-step wait figures",
    ("ckpt", "ddp"): "ZeRO-1 checkpoints reshard with ddp/zero_partition.h",
    ("eval", "optim"): "evaluation computes the training loss under the run's autocast (optim/loss.h, optim/amp.h)",
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_0-9]+)/')


def layer_of(stage):
    for i, names in enumerate(LAYERS):
        if stage in names:
            return i
    return None


def main(src):
    bad = []
    for stage in sorted(os.listdir(src)):
        if not os.path.isdir(os.path.join(src, stage)):
            continue
        if layer_of(stage) is None:
            bad.append(f"src/{stage}/: a stage folder that tests/tools/check_layers.py does not place in a layer")
            continue
        for root, _, files in os.walk(os.path.join(src, stage)):
            for name in sorted(files):
                if not name.endswith((".h", ".cpp", ".cu", ".in")):
                    continue
                path = os.path.join(root, name)
                rel = os.path.relpath(path, os.path.dirname(src))
                with open(path, encoding="utf-8") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or m.group(1) == stage:
                            continue
                        to = m.group(1)
                        lt, ls = layer_of(to), layer_of(stage)
                        if lt is None:
                            if os.path.isdir(os.path.join(src, to)):
                                continue  # reported above
                            continue  # not a stage: a generated header such as hpctrain_version.h
                        if lt < ls or (stage, to) in SAME_LAYER:
                            continue
                        why = "upward" if lt > ls else "sideways inside a layer"
                        bad.append(f"{rel}:{lineno}: {stage} -> {to} points {why}: {line.strip()}")
    # The same-layer arrows must themselves be one-way (no pair in both directions).
    for (a, b) in SAME_LAYER:
        if (b, a) in SAME_LAYER:
            bad.append(f"SAME_LAYER allows both {a} -> {b} and {b} -> {a}")
        if layer_of(a) != layer_of(b):
            bad.append(f"SAME_LAYER lists {a} -> {b}, which are not in one layer")
    for line in bad:
        print(line)
    n = sum(1 for _ in bad)
    print(f"check_layers: {n} offending include(s)" if n else "check_layers: every include points down the layers")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "src")))
