#!/usr/bin/python3
"""The bad-input battery (issue "No silent hangs, no lost work"): one table of cases, each run
through the real CLI under mpiexec with 2 ranks. Every case asserts
  1. the exit code (!= 0; the documented code: 2 for bad input every rank sees, 1 for an error
     only one rank can see),
  2. exactly one line on stderr that starts with "hpctrain:" and carries "error:", containing
     every expected keyword (Open MPI's own abort banner may follow; no stack trace, no
     "terminate called"); a case whose documented outcome is a warning (exit 0) has exactly
     one "hpctrain: warning:" line instead,
  3. mpiexec returned before its timeout and no process of this battery is left running (the
     binary runs under a per-battery symlink name, so `pgrep -f` finds only ours),
  4. every file written before the case (data, a good checkpoint + `latest`, a metrics file,
     configs) still has its SHA-256 and mtime; the disk cases also re-verify the previous
     checkpoint with `hpctrain ckpt verify` and check that `latest` still names it.
Cases run WORKERS at a time, each worker's ranks under its own binary name (so check 3 sees only
its own processes); the disk cases (tmpfs mounts, a fault injected into the checkpoint writer)
run alone afterwards.
Usage: bad_inputs.py --bin BIN --mpiexec MPIEXEC --work DIR [-- MPIEXEC_FLAGS...]
Uses h5py/numpy from Debian's python3 (run with /usr/bin/python3)."""
import hashlib
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from bad_input_cases import *  # noqa: F401,F403  (CASES; harness and fixtures come with it)


# ---------------------------------------------------------------- protection: sha256 + mtime
def snapshot(root):
    snap = {}
    for dp, _, fs in os.walk(root):
        for fn in fs:
            p = os.path.join(dp, fn)
            st = os.stat(p)
            snap[p] = (hashlib.sha256(open(p, "rb").read()).hexdigest(), st.st_mtime_ns, st.st_size)
    return snap


def damaged(before):
    bad = []
    for p, (h, m, s) in before.items():
        if not os.path.exists(p):
            bad.append(f"{p} was removed")
            continue
        st = os.stat(p)
        if st.st_mtime_ns != m or st.st_size != s:
            bad.append(f"{p} was rewritten (mtime/size changed)")
        elif hashlib.sha256(open(p, "rb").read()).hexdigest() != h:
            bad.append(f"{p} changed content")
    return bad


def verify_ckpt(root, step_name):
    """The previous checkpoint still verifies and `latest` still names it."""
    latest = open(f"{root}/latest").read().strip()
    if latest != step_name:
        return f"latest is {latest!r}, expected {step_name!r}"
    rc, out, err, _ = run(["ckpt", "verify", root], np=1)
    if rc != 0 or not out.startswith("OK "):
        return f"ckpt verify {root} failed: {out}{err}"
    return None


WORKERS = 2
_worker = threading.local()


def worker_tag():
    """This thread's binary name: TAG-w<i>, made on first use."""
    if not hasattr(_worker, "tag"):
        with _LOCK:
            _worker.tag = f"{TAG}-w{len(_TAGS)}"
            _TAGS.append(_worker.tag)
        os.symlink(os.path.abspath(A.bin), _worker.tag)
    return _worker.tag


_LOCK = threading.Lock()
_TAGS = []


def check_case(name, argv, keys, env, want_rc, disk_root, tag=TAG):
    protect = [KEEP, BAD] + ([disk_root] if disk_root else [])
    before = {}
    for r in protect:
        before.update(snapshot(r))
    rc, out, err, wall = run(argv, env=env, tag=tag)
    problems = []
    if rc in (124, 137):
        problems.append(f"timed out after {CASE_TIMEOUT_S}s (a hang)")
    elif rc != want_rc:
        problems.append(f"exit code {rc}, expected {want_rc}")
    lines = err.splitlines()
    level = "warning:" if want_rc == 0 else "error:"
    ours = [l for l in lines if l.startswith("hpctrain:") and level in l]
    if len(ours) != 1:
        problems.append(f"{len(ours)} 'hpctrain: ... {level}' lines on stderr, expected exactly 1")
    if want_rc == 0 and any("error:" in l for l in lines):
        problems.append("an error line in a case that should only warn")
    elif len(ours) == 1:  # (none or several: already a problem above)
        missing = [k for k in keys if k not in ours[0]]
        if missing:
            problems.append(f"error line lacks {missing}")
    for junk in ("terminate called", "Exception raised from", "frame #", "Traceback", "what():",
                 "HDF5-DIAG"):
        if junk in err:
            problems.append(f"stderr contains {junk!r} (a crash or a multi-line error)")
    for _ in range(20):  # ranks may take a moment to be reaped after mpiexec returns
        left = subprocess.run(["pgrep", "-f", tag + "( |$)"], capture_output=True, text=True).stdout.split()
        if not left:
            break
        time.sleep(0.25)
    if left:
        problems.append(f"processes still running: {left}")
        subprocess.run(["pkill", "-9", "-f", tag + "( |$)"])
    problems += damaged(before)
    if disk_root:
        v = verify_ckpt(disk_root, "step-00000002")
        if v:
            problems.append(v)
    return problems, rc, (ours[0] if len(ours) == 1 else "\n".join(lines[-5:])), wall


def main():
    only = set(filter(None, A.only.split(",")))
    passed, failed, skipped = [], [], []
    t_all = time.time()

    def report(name, result):
        problems, rc, line, wall = result
        with _LOCK:
            if problems:
                failed.append(name)
                print(f"FAIL {name} ({wall:.1f}s, rc {rc}): {'; '.join(problems)}\n     stderr: {line}")
            else:
                passed.append(name)
                print(f"ok   {name} ({wall:.1f}s, rc {rc}): {line}")
            sys.stdout.flush()

    cases = [c for c in CASES if not only or c[0] in only]
    try:
        with ThreadPoolExecutor(WORKERS) as pool:
            def one(case):
                name, argv, keys, env, want_rc = case
                report(name, check_case(name, argv, keys, env, want_rc, None, tag=worker_tag()))
            for f in [pool.submit(one, c) for c in cases if not callable(c[1])]:
                f.result()
        for name, argv, keys, env, want_rc in [c for c in cases if callable(c[1])]:
            made = argv()
            if made is None:
                skipped.append(name)
                print(f"SKIP {name}: cannot mount a tmpfs here (needs CAP_SYS_ADMIN)")
                continue
            argv, disk_root = made
            report(name, check_case(name, argv, keys, env, want_rc, disk_root))
    finally:
        for m in MOUNTS:
            subprocess.run(["umount", m])
    print(f"bad-input battery: {len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped "
          f"in {time.time() - t_all:.0f}s")
    if failed:
        print("failed: " + ", ".join(failed))
        sys.exit(1)


main()
