"""Product-level A/B of the language model: `hpctrain train --model gpt` vs PyTorch DDP (gloo).

    /usr/bin/python3 perf/lm/gpt_bench.py [--data DIR] [--rounds 3] [--steps 300] [--amp off|bf16]
                                       [--ranks 2] [--bin HPCTRAIN] [--raw OUT.jsonl]
                                       [--only hpctrain|torch] [--dry-run]
Alternates (A B A B ..., --rounds pairs) `hpctrain train --model gpt` against
perf/lm/torch_gpt_ddp.py on the same token data, the same GPT (L4 H4 E128, --seq-len 128, tied
head, GPT-2 init), the same per-rank batch (16 windows), steps, AdamW (lr 2e-3, weight decay 0.1
on wte and the Linear weights), 100 linear warmup steps then a constant lr, gradient clip 1.0;
--amp bf16 runs both halves under bf16 autocast. For each pair it prints both throughputs in
tokens/s (global batch x seq_len / step_s), their ratio hpctrain/PyTorch, and both test losses
(mean nats per token over every test window once, after the last step) with their relative
difference; then the medians. Every run's record goes to --raw (JSONL).

How each half is measured (as perf/train/train_bench.py does for the image models): hpctrain through
launch/local.sh -n N -- train (so `--bind-to core`, one compute thread per rank), metrics JSONL;
step_s is the median of its `train` records' step_s (10-step intervals, the first dropped) and
test_loss the summary's. PyTorch: `mpirun -np N --bind-to core --map-by slot`, one thread per
rank, the same interval statistic (perf/lm/torch_gpt_ddp.py's docstring).

Data (--data DIR: train.h5 and test.h5, or numbered -00000.h5 files, data/README.md "Token
data"): default data/fortunes (`bash data/prepare.sh`), else written to a temporary directory
by `hpctrain data text` from /usr/share/games/fortunes (Debian's fortunes package); where the
binary has no `data text` yet, the same format is written here in Python (bytes tokenizer,
vocab 256, the last 10% of each UTF-8 file to test). The train split should hold at least
--steps x ranks x 16 windows: hpctrain evaluates at the end of every epoch, so a run that
wraps around pays extra evaluations (a warning says so).
"""
import argparse, json, os, random, statistics, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("HPCTRAIN_BUILD_DIR", os.path.join(ROOT, "build"))
VENV_PY = os.path.join(os.environ.get("HPCTRAIN_HOME", os.path.expanduser("~/.cache/hpctrain")), "venv/bin/python")
ROOTFLAG = ["--allow-run-as-root"] if os.geteuid() == 0 else []
THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
FORTUNES = "/usr/share/games/fortunes"
# The one layout and recipe both halves train (per-rank batch in windows).
LAYOUT = {"n_layer": 4, "n_head": 4, "n_embd": 128}
SEQ, BATCH = 128, 16
RECIPE = {"lr": "2e-3", "weight_decay": "0.1", "warmup": "100", "clip": "1.0", "log_every": "10"}


def _env(extra=None):
    return dict(os.environ, **THREADS, **(extra or {}))


def _split_file(data, split):
    one = os.path.join(data, f"{split}.h5")
    return one if os.path.isfile(one) else data  # numbered files: torch_gpt_ddp.py takes the directory


# ---- the two halves -------------------------------------------------------------------------

def hp_cmd(n, data, steps, amp, seed, metrics, oversubscribe=False):
    args = ["train", "--model", "gpt", "--model-config", ",".join(f"{k}={v}" for k, v in LAYOUT.items()),
            "--seq-len", str(SEQ), "--batch-size", str(BATCH), "--optimizer", "adamw", "--lr", RECIPE["lr"],
            "--weight-decay", RECIPE["weight_decay"], "--warmup-steps", RECIPE["warmup"],
            "--clip-grad-norm", RECIPE["clip"], "--schedule", "constant", "--max-steps", str(steps),
            "--epochs", "1000", "--log-every", RECIPE["log_every"], "--seed", str(seed),
            "--metrics", metrics, "--data", data] + (["--amp", amp] if amp != "off" else [])
    return [os.path.join(ROOT, "launch/local.sh"), "-n", str(n)] + (["--oversubscribe"] if oversubscribe else []) + \
           ["--"] + args


def torch_cmd(n, data, steps, amp, seed, oversubscribe=False):
    return ["mpirun", "-np", str(n), "--bind-to", "none" if oversubscribe else "core", "--map-by", "slot"] + \
           ROOTFLAG + (["--oversubscribe"] if oversubscribe else []) + [x for v in THREADS for x in ("-x", v)] + \
           [VENV_PY, os.path.join(ROOT, "perf/lm/torch_gpt_ddp.py"), "--train", _split_file(data, "train"),
            "--test", _split_file(data, "test"), "--seq-len", str(SEQ)] + \
           [x for k, v in LAYOUT.items() for x in ("--" + k.replace("_", "-"), str(v))] + \
           ["--batch", str(BATCH), "--steps", str(steps), "--lr", RECIPE["lr"], "--warmup", RECIPE["warmup"],
            "--clip", RECIPE["clip"], "--weight-decay", RECIPE["weight_decay"], "--seed", str(seed),
            "--log-every", RECIPE["log_every"], "--warmup-intervals", "1", "--amp", amp,
            "--port", str(random.randint(20000, 40000))]


def _parse_metrics(path, n, stdout):
    recs = [json.loads(l) for l in open(path) if l.strip()]
    train = [r for r in recs if r.get("type") == "train"][1:]  # first interval: warm-up
    if not train:
        raise SystemExit(f"gpt_bench: {path}: fewer than 2 train intervals")
    summ = next((r["summary"] for r in recs if r.get("type") == "summary"), None)
    if summ is None:  # the summary is also the last JSON line on stdout
        summ = json.loads([l for l in stdout.splitlines() if l.startswith("{")][-1])
    evals = [r for r in recs if r.get("type") == "eval"]
    step = statistics.median(r["step_s"] for r in train)
    test_loss = summ.get("test_loss", evals[-1]["test_loss"] if evals else None)
    return {"impl": "hpctrain-train", "world_size": n, "step_s": step, "tokens_per_s": n * BATCH * SEQ / step,
            "samples_per_s": n * BATCH / step, "test_loss": test_loss, "evals": len(evals),
            "train_loss": summ.get("train_loss"), "parameters": summ.get("parameters"), "steps": summ.get("steps"),
            "summary_samples_per_s": summ.get("samples_per_s"), "summary_wall_s": summ.get("wall_s"),
            "comm_blocked_pct": statistics.median(r["comm_blocked_pct"] for r in train),
            "data_wait_pct": statistics.median(r["data_wait_pct"] for r in train)}


def hp_train(n, data, steps, amp, seed, raw, binary=None, oversubscribe=False):
    fd, metrics = tempfile.mkstemp(prefix="hpctrain_gpt_", suffix=".jsonl")
    os.close(fd)
    env = {"HPCTRAIN_BIN": binary} if binary else {}
    cmd = hp_cmd(n, data, steps, amp, seed, metrics, oversubscribe)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=_env(env), timeout=3600)
        if p.returncode != 0:
            raise SystemExit(f"gpt_bench: hpctrain exit {p.returncode}: {' '.join(cmd)}\n{p.stderr[-2000:]}")
        r = _parse_metrics(metrics, n, p.stdout)
    finally:
        os.unlink(metrics)
    raw.append({"cmd": " ".join(cmd), "amp": amp, **r})
    return r


def torch_train(n, data, steps, amp, seed, raw, oversubscribe=False):
    cmd = torch_cmd(n, data, steps, amp, seed, oversubscribe)
    p = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=3600)
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        raise SystemExit(f"gpt_bench: torch_gpt_ddp failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    raw.append({"cmd": " ".join(cmd), **lines[-1]})
    return lines[-1]


# ---- data -----------------------------------------------------------------------------------

def python_text_data(out, sources, test_fraction=0.1):
    """The files `hpctrain data text` writes (src/dataset/text_tokens.h), for a binary without
    it: each UTF-8 text file's bytes (no NUL, valid UTF-8), its last test_fraction to test.h5,
    the rest to train.h5, concatenated in order; a directory contributes its files recursively
    in sorted path order, skipping those that are not UTF-8 text and paths that resolve to a
    file already read."""
    import h5py
    import numpy as np
    seen, parts, files = set(), {"train": [], "test": []}, 0
    for s in sources:
        if os.path.isdir(s):
            paths = [os.path.join(d, f) for d, _, fs in os.walk(s) for f in fs]
            named = False
        else:
            paths, named = [s], True
        for f in sorted((p for p in paths if os.path.isfile(p)), key=lambda p: p.split(os.sep)):
            real = os.path.realpath(f)
            if real in seen:
                continue
            seen.add(real)
            b = open(real, "rb").read()
            try:
                b.decode("utf-8")
                text = b"\0" not in b
            except UnicodeDecodeError:
                text = False
            if not text:
                if named:
                    raise SystemExit(f"gpt_bench: {f} is not UTF-8 text")
                continue
            cut = len(b) - int(len(b) * test_fraction)
            parts["train"].append(b[:cut])
            parts["test"].append(b[cut:])
            files += 1
    os.makedirs(out, exist_ok=True)
    for split, chunks in parts.items():
        with h5py.File(os.path.join(out, f"{split}.h5"), "w") as h:
            h.create_dataset("tokens", data=np.frombuffer(b"".join(chunks), dtype=np.uint8))
            h.attrs["vocab_size"] = np.int64(256)
            h.attrs["tokenizer"] = "bytes"
            h.attrs["source"] = f"gpt_bench.py (as hpctrain data text): {files} file(s), last {test_fraction} of each to test"
    return out


def ensure_data(data, binary=None, dry=False):
    if data:
        return data
    default = os.path.join(ROOT, "data/fortunes")
    if os.path.isfile(os.path.join(default, "train.h5")):
        return default
    cmd = [binary or os.path.join(BUILD, "hpctrain"), "data", "text", "--out", None, FORTUNES]
    if dry:
        cmd[4] = "TMPDIR"
        print("# data: " + " ".join(cmd))
        return "TMPDIR"
    d = tempfile.mkdtemp(prefix="hpctrain_gpt_data_")
    cmd[4] = d
    if subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
        print(f"gpt_bench: `{' '.join(cmd)}` failed; writing the same format in Python", file=sys.stderr)
        python_text_data(d, [FORTUNES])
    return d


def check_epoch(data, n, steps):
    """Warns when --steps needs more than one pass over the train split."""
    try:
        import h5py
        files = [os.path.join(data, "train.h5")] if os.path.isfile(os.path.join(data, "train.h5")) else \
            sorted(os.path.join(data, f) for f in os.listdir(data) if f.startswith("train-") and f.endswith(".h5"))
        windows = 0
        for f in files:
            with h5py.File(f, "r") as h:
                windows += max((h["tokens"].shape[0] - 1) // SEQ, 0)
    except Exception as e:  # h5py missing, odd layout: the runs themselves will say
        print(f"gpt_bench: could not count the train windows of {data}: {e}", file=sys.stderr)
        return None
    per_epoch = -(-windows // (n * BATCH))
    if steps > per_epoch:
        print(f"gpt_bench: warning: {data} has {windows} train windows = {per_epoch} steps per epoch at "
              f"{n} x {BATCH}; {steps} steps span {-(-steps // per_epoch)} epochs (hpctrain evaluates after each)",
              file=sys.stderr)
    return windows


# ---- main -----------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.environ.get("HPCTRAIN_GPT_DATA", ""), help="token data directory")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved pairs")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--amp", default="off", choices=["off", "bf16"])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bin", default=None, help="the hpctrain binary (default build/hpctrain)")
    ap.add_argument("--raw", default="", help="write every run's record to this JSONL file")
    ap.add_argument("--only", choices=["hpctrain", "torch"], default=None, help="run one half only")
    ap.add_argument("--oversubscribe", action="store_true", help="more ranks than cores (binding left to the OS)")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    a = ap.parse_args()
    data = ensure_data(a.data, a.bin, a.dry_run)
    halves = [h for h in ("hpctrain", "torch") if a.only in (None, h)]
    if a.dry_run:
        if "hpctrain" in halves:
            print(("HPCTRAIN_BIN=" + a.bin + " " if a.bin else "") +
                  " ".join(hp_cmd(a.ranks, data, a.steps, a.amp, a.seed, "METRICS.jsonl", a.oversubscribe)))
        if "torch" in halves:
            print(" ".join(torch_cmd(a.ranks, data, a.steps, a.amp, a.seed, a.oversubscribe)))
        return 0
    check_epoch(data, a.ranks, a.steps)
    raw, pairs = [], []
    for i in range(a.rounds):
        hp = hp_train(a.ranks, data, a.steps, a.amp, a.seed, raw, a.bin, a.oversubscribe) if "hpctrain" in halves else None
        pt = torch_train(a.ranks, data, a.steps, a.amp, a.seed, raw, a.oversubscribe) if "torch" in halves else None
        pair = {"round": i}
        if hp:
            pair.update(hpctrain_tokens_per_s=hp["tokens_per_s"], hpctrain_test_loss=hp["test_loss"])
        if pt:
            pair.update(torch_tokens_per_s=pt["tokens_per_s"], torch_test_loss=pt["test_loss"])
        line = f"pair {i + 1}/{a.rounds}:"
        if hp:
            line += f" hpctrain {hp['tokens_per_s']:.0f} tokens/s (test loss {hp['test_loss']:.4f})"
        if pt:
            line += f" PyTorch {pt['tokens_per_s']:.0f} tokens/s (test loss {pt['test_loss']:.4f})"
        if hp and pt:
            pair["ratio"] = hp["tokens_per_s"] / pt["tokens_per_s"]
            pair["test_loss_rel_diff"] = (hp["test_loss"] - pt["test_loss"]) / pt["test_loss"]
            line += f" ratio {pair['ratio']:.3f}, test loss rel diff {pair['test_loss_rel_diff']:+.4f}"
        pairs.append(pair)
        print(line, flush=True)
    med = lambda k: statistics.median(p[k] for p in pairs) if pairs and k in pairs[0] else None
    out = {"data": data, "ranks": a.ranks, "steps": a.steps, "amp": a.amp, "rounds": a.rounds,
           "layout": dict(LAYOUT, seq_len=SEQ, batch_per_rank=BATCH),
           "median_hpctrain_tokens_per_s": med("hpctrain_tokens_per_s"),
           "median_torch_tokens_per_s": med("torch_tokens_per_s"), "median_ratio": med("ratio"),
           "median_hpctrain_test_loss": med("hpctrain_test_loss"), "median_torch_test_loss": med("torch_test_loss"),
           "median_test_loss_rel_diff": med("test_loss_rel_diff"), "pairs": pairs}
    if out["median_ratio"] is not None:
        print(f"median: hpctrain {out['median_hpctrain_tokens_per_s']:.0f} vs PyTorch "
              f"{out['median_torch_tokens_per_s']:.0f} tokens/s, ratio {out['median_ratio']:.3f}; test loss "
              f"{out['median_hpctrain_test_loss']:.4f} vs {out['median_torch_test_loss']:.4f} "
              f"(rel diff {out['median_test_loss_rel_diff']:+.4f})")
    else:
        for h, name in (("hpctrain", "hpctrain"), ("torch", "PyTorch")):
            if out[f"median_{h}_tokens_per_s"] is not None:
                print(f"median: {name} {out[f'median_{h}_tokens_per_s']:.0f} tokens/s, "
                      f"test loss {out[f'median_{h}_test_loss']:.4f}")
    print(json.dumps(out))
    if a.raw:
        with open(a.raw, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
