"""Compares the model/ tensors of two merged checkpoints (h5py).
usage: compare_ckpt.py A.h5 B.h5 [--exact | --rtol X [--min-diff Y]]; exits 1 if they differ beyond it.
Relative difference per tensor: max|a-b| / max(max|b|, 1e-12).
--min-diff Y: exits 1 also when the worst tensor's difference is not above Y (a run that must
differ, e.g. gradients reduced in bf16 against fp32: a reduction that never rounds gives 0)."""
import sys
import h5py
import numpy as np

a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
exact = "--exact" in sys.argv
rtol = float(sys.argv[sys.argv.index("--rtol") + 1]) if "--rtol" in sys.argv else 1e-5
min_diff = float(sys.argv[sys.argv.index("--min-diff") + 1]) if "--min-diff" in sys.argv else None
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
elif min_diff is not None and worst <= min_diff:
    print(f"FAIL: max relative difference {worst:.3e} ({worst_name or 'all equal'}) <= {min_diff}: "
          "expected the runs to differ by more")
    sys.exit(1)
else:
    above = f", > {min_diff}" if min_diff is not None else ""
    print(f"ok: {len(names)} tensors, max relative difference {worst:.3e} ({worst_name}) <= {rtol}{above}")
