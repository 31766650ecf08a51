"""Checks that a `hpctrain train` run reduced its gradients in the dtype asked for, from what the
run itself reports (log and summary), against a float32 run of the same job.
usage: grad_comm_check.py RUN.txt REF.txt DTYPE   (DTYPE bfloat16|float16; each .txt is a run's
stdout+stderr, its last line the summary JSON)
- RUN's log says "gradient communication: DTYPE (float32 gradients cast per bucket, ...), N
  bytes per step", REF's "gradient communication: float32, M bytes per step", and M == 2 N;
- each summary names its dtype (grad_comm_dtype) and bytes_reduced == steps x its bytes per
  step, so RUN's is half of REF's: the bytes counted as the reducer hands each bucket over,
  not derived from the flag.
Exits 1 naming the first check that fails."""
import json
import re
import sys

run_path, ref_path, dtype = sys.argv[1:4]


def read(path, want):
    text = open(path).read()
    summary = json.loads(text.strip().splitlines()[-1])
    m = re.search(r"^hpctrain train: gradient communication: (\S+?)[ ,].*?(\d+) bytes per step$", text, re.M)
    if not m:
        sys.exit(f"FAIL: {path}: no 'gradient communication' line")
    line = m.group(0)
    if m.group(1) != want:
        sys.exit(f"FAIL: {path}: gradients travel as {m.group(1)}, expected {want}: {line}")
    if want != "float32" and f"(float32 gradients cast per bucket, the average rounded to {want})" not in line:
        sys.exit(f"FAIL: {path}: no cast named: {line}")
    if summary.get("grad_comm_dtype") != want:
        sys.exit(f"FAIL: {path}: summary grad_comm_dtype {summary.get('grad_comm_dtype')!r}, expected {want}")
    per_step, steps, total = int(m.group(2)), summary["steps"], summary["bytes_reduced"]
    if per_step <= 0 or total != steps * per_step:
        sys.exit(f"FAIL: {path}: bytes_reduced {total} != {steps} steps x {per_step} bytes per step")
    return per_step, total


run_step, run_total = read(run_path, dtype)
ref_step, ref_total = read(ref_path, "float32")
if 2 * run_step != ref_step or 2 * run_total != ref_total:
    sys.exit(f"FAIL: {dtype} run handed over {run_total} bytes ({run_step} per step), float32 run {ref_total} "
             f"({ref_step}): not half")
print(f"ok: {dtype}: {run_total} bytes reduced ({run_step} per step), half of float32's {ref_total}")
