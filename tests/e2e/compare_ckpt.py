"""Compares the model/ tensors of two merged checkpoints (h5py).
usage: compare_ckpt.py A.h5 B.h5 [--exact | --rtol X]; exits 1 if they differ beyond it.
Relative difference per tensor: max|a-b| / max(max|b|, 1e-12)."""
import sys
import h5py
import numpy as np

a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
exact = "--exact" in sys.argv
rtol = float(sys.argv[sys.argv.index("--rtol") + 1]) if "--rtol" in sys.argv else 1e-5
names = sorted(a["model"].keys())
assert names == sorted(b["model"].keys()), (names, sorted(b["model"].keys()))
worst, worst_name = 0.0, ""
for n in names:
    x, y = a["model"][n][()], b["model"][n][()]
    assert x.shape == y.shape, (n, x.shape, y.shape)
    if exact:
        if not np.array_equal(x, y):
            print(f"FAIL: {n} differs (max abs {np.abs(x.astype(np.float64) - y).max():.3e})")
            sys.exit(1)
        continue
    d = np.abs(x.astype(np.float64) - y).max() / max(np.abs(y.astype(np.float64)).max(), 1e-12)
    if d > worst:
        worst, worst_name = d, n
if exact:
    print(f"ok: {len(names)} tensors bitwise equal")
elif worst > rtol:
    print(f"FAIL: max relative difference {worst:.3e} at {worst_name} > {rtol}")
    sys.exit(1)
else:
    print(f"ok: {len(names)} tensors, max relative difference {worst:.3e} ({worst_name}) <= {rtol}")
