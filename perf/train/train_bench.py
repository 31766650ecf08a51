"""End-to-end figures of what users run: `hpctrain train` vs PyTorch DDP (gloo).

Used by perf/train/run_perf.py (section `train`); alone:
    /usr/bin/python3 perf/train/train_bench.py figures [--quick] [--data DIR] [--bin HPCTRAIN] [--env K=V ...] [--raw OUT.jsonl]
    /usr/bin/python3 perf/train/train_bench.py weak [--impl hpctrain] [--impl torch] [--model cnn] [--rounds 3] [--steps 300]
                                            [--data DIR] [--raw OUT.jsonl]
    /usr/bin/python3 perf/train/train_bench.py ab --a-bin BIN_A --b-bin BIN_B [--a-env K=V ...] [--b-env K=V ...]
                                          [--ranks 2] [--model cnn] [--rounds 5] [--steps 300]
`ab` alternates two builds/settings of `hpctrain train` (A B A B ...) and prints the median of
the per-pair throughput ratios A/B: how a change is kept or dropped.

How hpctrain is measured: launch/local.sh -n N -- train (so `--bind-to core`, one compute
thread per rank, as a user on a CPU node gets it), --max-steps S, --log-every 10, same SGD as the
PyTorch script (lr 0.01, momentum 0.9, no weight decay, constant schedule), metrics JSONL.
Throughput = global batch / step_s, where step_s is the median of the `train` records' step_s
(mean wall time per step of each 10-step interval, rank 0's interval clock, which waits for the
slowest rank at every allreduce); the first interval (warm-up) is dropped. The summary's
samples_per_s (whole run incl. start-up, data open, final eval) is kept in the raw record.
PyTorch: perf/train/torch_ddp.py with the same interval statistic (see its docstring).
Weak scaling: T(2 ranks) / (T(1 rank on core 0) + T(1 rank on core 1)), the two 1-rank runs
started together, each pinned to its core (taskset), so both figures pay the same shared-machine
costs (memory bandwidth, clocks) and the ratio shows only what 2-rank training adds.
`weak` splits the issue-#34 figure T(2 ranks) / (2 x T(1 rank alone on the slower core)) into the
machine's part (two independent 1-rank runs at once against each alone) and the product's part
(2 ranks against the two runs at once), each round running: core 0 alone, core 1 alone, both at
once, the 2-rank job; `--impl torch` runs the same four with perf/train/torch_ddp.py (PyTorch DDP gloo,
same train.h5), interleaved with hpctrain's round by round: what a synchronous trainer gets on
this machine.
"""
import argparse, json, os, random, statistics, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("HPCTRAIN_BUILD_DIR", os.path.join(ROOT, "build"))
VENV_PY = os.path.join(os.environ.get("HPCTRAIN_HOME", os.path.expanduser("~/.cache/hpctrain")), "venv/bin/python")
ROOTFLAG = ["--allow-run-as-root"] if os.geteuid() == 0 else []
THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
SGD = ["--lr", "0.01", "--momentum", "0.9", "--weight-decay", "0", "--schedule", "constant"]


def _env(extra):
    return dict(os.environ, **THREADS, **(extra or {}))


def _train_args(model, data, steps, metrics):
    return ["train", "--model", model, "--data", data, "--batch-size", "64", "--max-steps", str(steps),
            "--log-every", "10", "--metrics", metrics] + SGD


def _parse_metrics(path, n):
    recs = [json.loads(l) for l in open(path) if l.strip()]
    train = [r for r in recs if r.get("type") == "train"][1:]  # first interval: warm-up
    summ = next(r["summary"] for r in recs if r.get("type") == "summary")
    if not train:
        raise SystemExit(f"train_bench: {path}: fewer than 2 train intervals")
    step = statistics.median(r["step_s"] for r in train)
    return {"impl": "hpctrain-train", "world_size": n, "step_s": step, "samples_per_s": 64 * n / step,
            "summary_samples_per_s": summ["samples_per_s"], "summary_wall_s": summ["wall_s"],
            "comm_blocked_pct": statistics.median(r["comm_blocked_pct"] for r in train),
            "data_wait_pct": statistics.median(r["data_wait_pct"] for r in train)}


def _start_train(n, model, data, steps, binary=None, env=None, cpu=None):
    """Starts `hpctrain train` (launch/local.sh for n ranks; one pinned rank for cpu=K)."""
    fd, metrics = tempfile.mkstemp(prefix="hpctrain_tb_", suffix=".jsonl")
    os.close(fd)
    e = _env(env)
    if binary:
        e["HPCTRAIN_BIN"] = binary
    args = _train_args(model, data, steps, metrics)
    if cpu is None:
        cmd = [os.path.join(ROOT, "launch/local.sh"), "-n", str(n), "--"] + args
    else:  # one of two independent runs: its own core, like one rank of a 2-rank job
        cmd = ["taskset", "-c", str(cpu), "mpirun", "-np", "1", "--bind-to", "none"] + ROOTFLAG + \
              [x for v in THREADS for x in ("-x", v)] + [binary or os.path.join(BUILD, "hpctrain")] + args
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
    return p, metrics, cmd


def _finish(started, n, raw, env=None):
    p, metrics, cmd = started
    out, err = p.communicate(timeout=1800)
    try:
        if p.returncode != 0:
            raise SystemExit(f"train_bench: exit {p.returncode}: {' '.join(cmd)}\n{err[-2000:]}")
        r = _parse_metrics(metrics, n)
    finally:
        os.unlink(metrics)
    if raw is not None:
        raw.append({"cmd": " ".join(cmd), "env": env or {}, **r})
    return r


def hp_train(n, model, data, steps, raw=None, binary=None, env=None):
    return _finish(_start_train(n, model, data, steps, binary, env), n, raw, env)


def hp_two_solo(model, data, steps, raw=None, binary=None, env=None):
    """Two independent 1-rank runs at once (cores 0 and 1); returns their summed throughput."""
    s = [_start_train(1, model, data, steps, binary, env, cpu=c) for c in (0, 1)]
    rs = [_finish(x, 1, raw, env) for x in s]
    return {"samples_per_s": sum(r["samples_per_s"] for r in rs), "step_s": statistics.fmean(r["step_s"] for r in rs)}


def _start_torch(n, model, steps, h5=None, cpu=None):
    """Starts perf/train/torch_ddp.py (n ranks bound to cores; one rank pinned to core `cpu`)."""
    bind = ["--bind-to", "core", "--map-by", "slot"] if cpu is None else ["--bind-to", "none"]
    cmd = (["taskset", "-c", str(cpu)] if cpu is not None else []) + ["mpirun", "-np", str(n)] + bind + ROOTFLAG + \
          [x for v in THREADS for x in ("-x", v)] + \
          [VENV_PY, os.path.join(ROOT, "perf/train/torch_ddp.py"), "--model", model, "--batch", "64", "--steps", str(steps),
           "--port", str(random.randint(20000, 40000))] + (["--data", h5] if h5 else [])
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(None)), cmd


def _finish_torch(started, raw=None):
    p, cmd = started
    out, err = p.communicate(timeout=1800)
    lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    if not lines:
        raise SystemExit(f"train_bench: torch_ddp failed ({p.returncode}): {' '.join(cmd)}\n{err[-2000:]}")
    if raw is not None:
        raw.append({"cmd": " ".join(cmd), **lines[-1]})
    return lines[-1]


def torch_ddp(n, model, steps, h5=None, raw=None, cpu=None):
    return _finish_torch(_start_torch(n, model, steps, h5, cpu), raw)


def torch_two_solo(model, steps, h5, raw=None):
    """Two independent 1-rank PyTorch runs at once (cores 0 and 1); their summed throughput."""
    s = [_start_torch(1, model, steps, h5, cpu=c) for c in (0, 1)]
    rs = [_finish_torch(x, raw) for x in s]
    return {"samples_per_s": sum(r["samples_per_s"] for r in rs)}


def interleave(fa, fb, rounds, key="samples_per_s"):
    """A B A B ...; returns (median A `key`, median B `key`, median of the A/B ratios)."""
    a, b = [], []
    for _ in range(rounds):
        a.append(fa()[key])
        b.append(fb()[key])
    return statistics.median(a), statistics.median(b), statistics.median(x / y for x, y in zip(a, b))


def ensure_data(data):
    if data:
        return data
    d = tempfile.mkdtemp(prefix="hpctrain_perf_data_")
    subprocess.run([os.path.join(BUILD, "hpctrain"), "data", "fashion-mnist", "--out", d], check=True,
                   stdout=subprocess.DEVNULL)
    return d


def figures(data, quick=False, raw=None, binary=None, env=None):
    """Yields the table rows (figure, value, goal, detail)."""
    data = ensure_data(data)
    h5 = os.path.join(data, "train.h5")
    rounds, steps = (2, 100) if quick else (3, 300)
    a, b, r = interleave(lambda: hp_train(2, "cnn", data, steps, raw, binary, env), lambda: torch_ddp(2, "cnn", steps, h5, raw), rounds)
    yield ("`hpctrain train` / PyTorch DDP gloo, same train.h5 (cnn, 2 ranks)", f"{r:.2f}", ">= 1.10",
           f"{a:.0f} vs {b:.0f} samples/s")
    a, b, r = interleave(lambda: hp_train(2, "cnn", data, steps, raw, binary, env), lambda: torch_ddp(2, "cnn", steps, None, raw), rounds)
    yield ("`hpctrain train` / PyTorch DDP gloo on one fixed in-memory batch (cnn, 2 ranks)", f"{r:.2f}", ">= 1.00",
           f"{a:.0f} vs {b:.0f} samples/s (PyTorch pays no data cost)")
    a, b, r = interleave(lambda: hp_train(2, "cnn", data, steps, raw, binary, env), lambda: hp_two_solo("cnn", data, steps, raw, binary, env), rounds)
    yield ("weak scaling, `hpctrain train` cnn: 2 ranks / (2 x 1 rank at once)", f"{r:.3f}", ">= 0.97",
           f"{a:.0f} vs {b:.0f} samples/s")
    a, b, r = interleave(lambda: hp_train(2, "mlp", data, steps, raw, binary, env), lambda: torch_ddp(2, "mlp", steps, h5, raw), rounds)
    yield ("`hpctrain train` / PyTorch DDP gloo, same train.h5 (mlp, 2 ranks)", f"{r:.2f}", ">= 1.9",
           f"{a:.0f} vs {b:.0f} samples/s")


def weak(model, data, steps, rounds, raw=None, impls=("hpctrain",)):
    """Per round and implementation (hpctrain, torch: PyTorch DDP gloo from the same train.h5):
    1 rank alone on core 0, alone on core 1, both at once, 2 ranks; medians of the ratios."""
    data = ensure_data(data)
    h5 = os.path.join(data, "train.h5")
    runs = {
        "hpctrain": (lambda c: _finish(_start_train(1, model, data, steps, cpu=c), 1, raw)["samples_per_s"],
                     lambda: hp_two_solo(model, data, steps, raw)["samples_per_s"],
                     lambda: hp_train(2, model, data, steps, raw)["samples_per_s"]),
        "torch": (lambda c: torch_ddp(1, model, steps, h5, raw, cpu=c)["samples_per_s"],
                  lambda: torch_two_solo(model, steps, h5, raw)["samples_per_s"],
                  lambda: torch_ddp(2, model, steps, h5, raw)["samples_per_s"]),
    }
    rows = {i: [] for i in impls}
    for _ in range(rounds):
        for impl in impls:  # interleaved: each round measures every implementation
            alone, both_fn, two_fn = runs[impl]
            c0, c1 = alone(0), alone(1)
            both, two = both_fn(), two_fn()
            rows[impl].append({"impl": impl, "core0": c0, "core1": c1, "both_at_once": both, "two_ranks": two,
                               "weak_vs_slower_alone": two / (2 * min(c0, c1)), "machine": both / (c0 + c1),
                               "product": two / both})
            print(json.dumps(rows[impl][-1]), flush=True)
    return {i: {k: (statistics.median(r[k] for r in rows[i]) if k != "impl" else i) for k in rows[i][0]}
            for i in impls}


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("figures")
    f.add_argument("--quick", action="store_true")
    f.add_argument("--data", default=os.environ.get("HPCTRAIN_DATA", ""))
    f.add_argument("--bin", default=None, help="the hpctrain binary (default build/hpctrain)")
    f.add_argument("--env", action="append", default=[], help="K=V for every hpctrain run (e.g. HPCTRAIN_SHM_ALLREDUCE=0)")
    f.add_argument("--raw", default="", help="write every measurement to this JSONL file")
    x = sub.add_parser("ab")
    x.add_argument("--a-bin"), x.add_argument("--b-bin")
    x.add_argument("--a-env", action="append", default=[]), x.add_argument("--b-env", action="append", default=[])
    x.add_argument("--ranks", type=int, default=2)
    x.add_argument("--model", default="cnn")
    x.add_argument("--rounds", type=int, default=5)
    x.add_argument("--steps", type=int, default=300)
    x.add_argument("--data", default=os.environ.get("HPCTRAIN_DATA", ""))
    w = sub.add_parser("weak")
    w.add_argument("--model", default="cnn")
    w.add_argument("--rounds", type=int, default=3)
    w.add_argument("--steps", type=int, default=300)
    w.add_argument("--data", default=os.environ.get("HPCTRAIN_DATA", ""))
    w.add_argument("--raw", default="")
    w.add_argument("--impl", action="append", choices=["hpctrain", "torch"], default=[],
                   help="measure this implementation (repeatable; default hpctrain)")
    a = ap.parse_args()
    raw = []
    if a.cmd == "weak":
        print(json.dumps({"median": weak(a.model, a.data, a.steps, a.rounds, raw, tuple(a.impl) or ("hpctrain",))}))
        if a.raw:
            with open(a.raw, "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in raw)
    elif a.cmd == "figures":
        for row in figures(a.data, a.quick, raw, a.bin, dict(s.split("=", 1) for s in a.env)):
            print("| " + " | ".join(row) + " |", flush=True)
        if a.raw:
            with open(a.raw, "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in raw)
    else:
        data = ensure_data(a.data)
        kv = lambda l: dict(s.split("=", 1) for s in l)
        ea, eb = kv(a.a_env), kv(a.b_env)
        ma, mb, r = interleave(lambda: hp_train(a.ranks, a.model, data, a.steps, raw, a.a_bin, ea),
                               lambda: hp_train(a.ranks, a.model, data, a.steps, raw, a.b_bin, eb), a.rounds)
        pairs = [(raw[i]["samples_per_s"], raw[i + 1]["samples_per_s"]) for i in range(0, len(raw), 2)]
        print(json.dumps({"a": {"bin": a.a_bin, "env": ea, "median_samples_per_s": ma},
                          "b": {"bin": a.b_bin, "env": eb, "median_samples_per_s": mb},
                          "median_ratio_a_over_b": r, "pairs": pairs, "runs": raw}))


if __name__ == "__main__":
    sys.exit(main())
