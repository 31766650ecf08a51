"""--zero 3 --amp bf16 (units all-gathered in bf16 over fp32 masters, ddp/fsdp.h "Mixed precision")
against --zero 3 gathering fp32: gpt L4 H4 E128, T128, batch 16 per rank, AdamW, 2 ranks,
--bind-to core, `hpctrain train` end to end, runs interleaved (A B [C] A B [C] ...), ratios per
round and their median. The summary gives tokens/s, peak RSS per rank and bytes_gathered_per_step.

    /usr/bin/python3 perf/memory/zero3_bf16_bench.py [--rounds 3] [--steps 60] [--base-bin PATH]

A: --zero 3 --amp bf16 (this build). B: --zero 3 in fp32 (this build: fp32 gather, fp32
compute). C (with --base-bin, a build from before the bf16 gather): --zero 3 --amp bf16 of that
build, which gathered fp32 and let autocast cast: the same compute as A, only the gather differs.
Writes perf/memory/results/zero3-bf16-<date>.jsonl (raw) and prints the table.
"""
import argparse, datetime, json, os, statistics, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(os.environ.get("HPCTRAIN_BUILD_DIR", os.path.join(ROOT, "build")), "hpctrain")
MPI = ["mpirun", "--oversubscribe", "-x", "OMP_NUM_THREADS=1", "-x", "MKL_NUM_THREADS=1"] + \
      (["--allow-run-as-root"] if os.geteuid() == 0 else [])
RAW = []


def train(binary, args, work):
    metrics = os.path.join(work, "m.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = MPI + ["--bind-to", "core", "-np", "2", binary, "train", "--metrics", metrics, "--log-every", "1000"] + args
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if out.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{out.stderr[-2000:]}")
    s = [json.loads(l) for l in open(metrics) if '"summary"' in l][-1]["summary"]
    RAW.append({"cmd": " ".join(cmd), "summary": s})
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--base-bin", default="")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="hpctrain-zero3bf16-")
    text = os.path.join(work, "text.txt")
    with open(text, "w") as f:
        for doc in ("README.md", "docs/zero.md", "docs/architecture.md"):
            f.write(open(os.path.join(ROOT, doc)).read())
    tok = os.path.join(work, "tok")
    subprocess.run([BIN, "data", "text", "--out", tok, "--test-fraction", "0.1", text], check=True, capture_output=True)
    common = ["--model", "gpt", "--model-config", "n_layer=4,n_head=4,n_embd=128,bias=false", "--seq-len", "128",
              "--data", tok, "--batch-size", "16", "--optimizer", "adamw", "--lr", "0.002", "--epochs", "100",
              "--max-steps", str(a.steps), "--zero", "3"]
    runs = {"A": (BIN, ["--amp", "bf16"]), "B": (BIN, [])}
    if a.base_bin:
        runs["C"] = (a.base_bin, ["--amp", "bf16"])
    got = {k: [] for k in runs}
    for _ in range(a.rounds):
        for k, (binary, extra) in runs.items():
            got[k].append(train(binary, common + extra, work))
    med = lambda xs: statistics.median(xs)
    tps = {k: [s["tokens_per_s"] for s in v] for k, v in got.items()}
    rss = {k: [max(s["peak_mem_mb_per_rank"]) for s in v] for k, v in got.items()}
    print(f"| figure | A: --zero 3 --amp bf16 | B: --zero 3 fp32 |" + (" C: base --amp bf16 (fp32 gather) |" if a.base_bin else ""))
    print("|---|---|---|" + ("---|" if a.base_bin else ""))
    row = lambda name, f: print(f"| {name} | " + " | ".join(f(k) for k in runs) + " |")
    row("tokens/s (median)", lambda k: f"{med(tps[k]):,.0f}")
    row("tokens/s per round", lambda k: ", ".join(f"{x:,.0f}" for x in tps[k]))
    row("peak RSS per rank, MiB (median)", lambda k: f"{med(rss[k]):.0f}")
    row("bytes gathered per step", lambda k: str(got[k][-1].get("bytes_gathered_per_step", "n/a")))
    row("largest gathered unit, bytes", lambda k: str(got[k][-1]["model_state_bytes_per_rank"]["largest_unit"]))
    for k in runs:
        if k == "A":
            continue
        ratios = [x / y for x, y in zip(tps["A"], tps[k])]
        print(f"tokens/s A / {k}: median {med(ratios):.3f} (rounds: {', '.join(f'{r:.3f}' for r in ratios)}); "
              f"peak RSS A / {k}: {med(rss['A']) / med(rss[k]):.3f}")
    date = datetime.date.today().isoformat()
    os.makedirs(os.path.join(ROOT, "perf/memory/results"), exist_ok=True)
    with open(os.path.join(ROOT, f"perf/memory/results/zero3-bf16-{date}.jsonl"), "w") as f:
        for r in RAW:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
