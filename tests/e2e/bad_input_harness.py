"""The bad-input battery's harness (see bad_inputs.py): command line, the binary under a
per-battery name, and running the CLI under mpiexec."""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import h5py
import numpy as np


CASE_TIMEOUT_S = 90
ap = argparse.ArgumentParser()
ap.add_argument("--bin", required=True)
ap.add_argument("--mpiexec", default="mpiexec")
ap.add_argument("--work", required=True)
ap.add_argument("--only", default="", help="comma-separated case names")
ap.add_argument("mpiflags", nargs="*")
A = ap.parse_args()
W = A.work
KEEP = f"{W}/keep"     # files that must survive every case
BAD = f"{W}/bad"       # crafted bad inputs
# The binary under a name unique to this battery: `pgrep -f TAG` then finds only our ranks.
TAG = f"{W}/bin/hpctrain-battery-{os.getpid()}"
os.makedirs(os.path.dirname(TAG), exist_ok=True)
os.symlink(os.path.abspath(A.bin), TAG)
MPI = [A.mpiexec, "-np", "2"] + A.mpiflags


def run(args, env=None, np=2, timeout=CASE_TIMEOUT_S, tag=TAG):
    """The CLI under mpiexec as `tag` (TAG, or a worker's own name: see bad_inputs.py)."""
    e = dict(os.environ, **(env or {}))
    cmd = ["timeout", "-k", "5", str(timeout)] + MPI[:1] + ["-np", str(np)] + MPI[3:]
    for k in (env or {}):
        cmd += ["-x", k]
    t0 = time.time()
    p = subprocess.run(cmd + [tag] + args, env=e, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr, time.time() - t0


def must(args, **kw):
    rc, out, err, _ = run(args, **kw)
    if rc != 0:
        sys.exit(f"FAIL: fixture command {' '.join(args)} exited {rc}:\n{out[-2000:]}\n{err[-2000:]}")
    return out
