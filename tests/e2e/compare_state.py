"""Compares groups of two merged checkpoints (h5py) by per-tensor relative L2 norm,
||a - b|| / ||b||, the worst over tensors.
usage: compare_state.py A.h5 B.h5 [--group model] [--group optim ...] [--rtol 1e-6 | --exact]
                        [--skip-no-signal] [--noise-ref C.h5]
Exits 1 if a group's names differ or a tensor differs beyond the tolerance.
--skip-no-signal (AdamW runs of models with BatchNorm): leaves out parameters whose gradient is
rounding noise (B's exp_avg_sq has rms below 1e-8, e.g. a conv bias right before BatchNorm,
whose true gradient is 0), their optimizer state, and BatchNorm running means (which follow
those biases). AdamW divides by sqrt(exp_avg_sq), so it turns that noise into updates of
order lr whose sign depends on the order of the gradient sum: any change of reduction order
(another world size, another allreduce algorithm, reduce-scatter) moves them. They are named.
--noise-ref C.h5: C is B's run again with only the reduction order changed (another MPI
allreduce algorithm); each tensor's tolerance becomes max(rtol, 4 x its C-vs-B difference), so a
model that amplifies rounding (BatchNorm at batch 4 per rank) is held to how far the same
training drifts under another summation order, and well-conditioned tensors stay at rtol."""
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


skip = set()
if "--skip-no-signal" in args:
    ob = tensors(b, "optim")
    for n, v in ob.items():
        if n.endswith(".exp_avg_sq") and np.sqrt(np.mean(np.asarray(v, dtype=np.float64))) < 1e-8:
            skip.add(n[: -len(".exp_avg_sq")])
    skip |= {n for n in tensors(b, "model") if n.endswith("running_mean")}
    print("skipped (no gradient signal): " + ", ".join(sorted(skip)))


def skipped(n):
    return n in skip or any(n.startswith(p + ".") for p in skip)


ref = h5py.File(args[args.index("--noise-ref") + 1], "r") if "--noise-ref" in args else None


def rel(x, y):
    return np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-12)


for g in groups:
    ta, tb = tensors(a, g), tensors(b, g)
    tc = tensors(ref, g) if ref else {}
    ta = {n: v for n, v in ta.items() if not skipped(n)}
    tb = {n: v for n, v in tb.items() if not skipped(n)}
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
        d = rel(x, y)
        tol = max(rtol, 4 * rel(np.asarray(tc[n], dtype=np.float64), y)) if n in tc else rtol
        if d > tol:
            print(f"FAIL: {g}/{n} relative norm {d:.3e} > {tol:.3e}")
            sys.exit(1)
        if d / tol > worst:
            worst, where = d / tol, f"{n}: {d:.2e} <= {tol:.2e}"
    print(f"ok: {g}/ {len(ta)} tensors " + ("bitwise equal" if exact else f"closest to its tolerance: {where or 'all equal'}"))
