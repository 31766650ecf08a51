"""Compares groups of two merged checkpoints (h5py) by per-tensor relative L2 norm,
||a - b|| / ||b||, the worst over tensors.
usage: compare_state.py A.h5 B.h5 [--group model] [--group optim ...] [--rtol 1e-6 | --exact]
Exits 1 if a group's names differ or a tensor differs beyond the tolerance."""
import sys
import h5py
import numpy as np

args = sys.argv[1:]
a, b = h5py.File(args[0], "r"), h5py.File(args[1], "r")
groups = [args[i + 1] for i, x in enumerate(args) if x == "--group"] or ["model"]
exact = "--exact" in args
rtol = float(args[args.index("--rtol") + 1]) if "--rtol" in args else 1e-6


def tensors(f, g):
    out = {}
    f[g].visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None)
    return out


for g in groups:
    ta, tb = tensors(a, g), tensors(b, g)
    if sorted(ta) != sorted(tb):
        print(f"FAIL: {g}/ names differ: only in A {sorted(set(ta) - set(tb))[:5]}, only in B {sorted(set(tb) - set(ta))[:5]}")
        sys.exit(1)
    worst, where = 0.0, ""
    for n in sorted(ta):
        x, y = np.asarray(ta[n], dtype=np.float64), np.asarray(tb[n], dtype=np.float64)
        if x.shape != y.shape:
            print(f"FAIL: {g}/{n} shapes {x.shape} vs {y.shape}")
            sys.exit(1)
        if exact:
            if not np.array_equal(x, y):
                print(f"FAIL: {g}/{n} differs (max abs {np.abs(x - y).max():.3e})")
                sys.exit(1)
            continue
        d = np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-12)
        if d > worst:
            worst, where = d, n
    if not exact and worst > rtol:
        print(f"FAIL: {g}/ worst relative norm {worst:.3e} at {where} > {rtol}")
        sys.exit(1)
    print(f"ok: {g}/ {len(ta)} tensors " + ("bitwise equal" if exact else f"worst relative norm {worst:.2e} ({where})"))
