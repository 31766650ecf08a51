"""ZeRO-1 benchmark of what users run: `hpctrain train --zero 1` against `--zero 0` (DDP),
end to end, same command otherwise, interleaved runs (A B A B ...), ratios of medians.

    /usr/bin/python3 perf/memory/zero_bench.py [--rounds 3] [--steps 100] [--only memory,speed]

memory  AdamW optimizer state per rank (the summary's optim_state_bytes_per_rank) at 2 and 4
        ranks, ZeRO-1 / DDP (goal <= 1/N + 5%), and peak memory per rank (peak RSS on CPU): the
        drop against the bytes ZeRO-1 should save, (1 - 1/N) x state - the gradient shard.
        Model: a TorchScript MLP 784-4096-4096-10 (20.0M parameters, 160 MB of AdamW state),
        so that the saving stands out of the allocator's noise.
speed   step time (1 / samples_per_s of the summary) --zero 1 / --zero 0 at 2 ranks, cnn and
        resnet, batch 64 per rank, --bind-to core (goal <= 1.05).
stages  gpt (L4 H4 E128, T128, batch 16 per rank, AdamW), 2 ranks, --bind-to core: tokens/s of
        --zero 2 and --zero 3 against --zero 0 (goals >= 0.97 and >= 0.90), rounds interleaved
        (0 2 3 0 2 3 ...); and the model state per rank (the summary's model_state_bytes_per_rank:
        parameters, gradients, optimizer state, largest gathered unit) for stages 0-3 at 1, 2 and
        4 ranks, a table like the ZeRO paper's figure 1 measured from the runs.
Writes perf/memory/results/zero-<date>.jsonl (raw) and .md (the table) and prints the table.
"""
import argparse, datetime, json, os, statistics, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("HPCTRAIN_BUILD_DIR", os.path.join(ROOT, "build"))
BIN = os.path.join(BUILD, "hpctrain")
VENV_PY = os.path.join(os.environ.get("HPCTRAIN_HOME", os.path.expanduser("~/.cache/hpctrain")), "venv/bin/python")
MPI = ["mpirun", "--oversubscribe", "-x", "OMP_NUM_THREADS=1", "-x", "MKL_NUM_THREADS=1"] + \
      (["--allow-run-as-root"] if os.geteuid() == 0 else [])
RAW = []


def train(np_, args, work, bind="none"):
    metrics = os.path.join(work, "m.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = MPI + ["--bind-to", bind, "-np", str(np_), BIN, "train", "--metrics", metrics, "--log-every", "1000"] + args
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if out.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{out.stderr[-2000:]}")
    s = [json.loads(l) for l in open(metrics) if '"summary"' in l][-1]["summary"]
    RAW.append({"cmd": " ".join(cmd), "summary": s})
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--only", default="memory,speed,stages")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="hpctrain-zero-")
    data = os.path.join(work, "data")
    subprocess.run([BIN, "data", "synthetic", "--out", data, "--n", "8192", "--test-n", "256", "--classes", "10",
                    "--height", "28", "--width", "28", "--seed", "1"], check=True, capture_output=True)
    rows = []
    if "memory" in a.only:
        net = os.path.join(work, "mlp4096.pt")
        subprocess.run([VENV_PY, "-c", f"""
import torch, torch.nn as nn
m = nn.Sequential(nn.Flatten(), nn.Linear(784, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 10))
torch.jit.script(m).save({net!r})"""], check=True)
        common = ["--model", net, "--data", data, "--optimizer", "adamw", "--lr", "0.0001", "--batch-size", "16",
                  "--max-steps", "5"]
        for n in (2, 4):
            z, d, peaks_z, peaks_d = [], [], [], []
            for _ in range(a.rounds):
                sz = train(n, common + ["--zero", "1"], work)
                sd = train(n, common + ["--zero", "0"], work)
                z.append(sz["optim_state_bytes_per_rank"]), d.append(sd["optim_state_bytes_per_rank"])
                peaks_z.append(max(sz["peak_mem_mb_per_rank"])), peaks_d.append(max(sd["peak_mem_mb_per_rank"]))
            params = sz["parameters"]
            ratio = statistics.median(z) / statistics.median(d)
            expect_mb = ((1 - 1 / n) * 8 * params - 4 * params / n) / 2**20
            drop = statistics.median(peaks_d) - statistics.median(peaks_z)
            rows.append([f"AdamW state per rank, {n} ranks, ZeRO-1 / DDP ({params / 1e6:.1f}M params)",
                         f"{ratio:.4f}", f"<= {1 / n * 1.05:.4f}",
                         f"{statistics.median(z) / 2**20:.1f} vs {statistics.median(d) / 2**20:.1f} MiB"])
            rows.append([f"peak memory per rank drop, {n} ranks (DDP - ZeRO-1)", f"{drop:.0f} MiB",
                         f"~{expect_mb:.0f} MiB expected",
                         f"peak {statistics.median(peaks_z):.0f} vs {statistics.median(peaks_d):.0f} MiB"])
    if "speed" in a.only:
        for model in ("cnn", "resnet"):
            common = ["--model", model, "--data", data, "--batch-size", "64", "--max-steps", str(a.steps),
                      "--optimizer", "adamw", "--lr", "0.001"]
            ratios, tz, td = [], [], []
            for _ in range(a.rounds):
                sz = train(2, common + ["--zero", "1"], work, bind="core")
                sd = train(2, common + ["--zero", "0"], work, bind="core")
                # summary samples_per_s is the global throughput: a step is global_batch samples
                tz.append(sz["global_batch"] / sz["samples_per_s"]), td.append(sd["global_batch"] / sd["samples_per_s"])
                ratios.append(tz[-1] / td[-1])
            rows.append([f"step time --zero 1 / --zero 0, {model}, 2 ranks", f"{statistics.median(ratios):.3f}",
                         "<= 1.05", f"{statistics.median(tz) * 1e3:.1f} vs {statistics.median(td) * 1e3:.1f} ms/step"])
    if "stages" in a.only:
        text = os.path.join(work, "text.txt")
        with open(text, "w") as f:
            for doc in ("README.md", "docs/zero.md", "docs/architecture.md"):
                f.write(open(os.path.join(ROOT, doc)).read())
        tok = os.path.join(work, "tok")
        subprocess.run([BIN, "data", "text", "--out", tok, "--test-fraction", "0.1", text], check=True,
                       capture_output=True)
        common = ["--model", "gpt", "--model-config", "n_layer=4,n_head=4,n_embd=128,bias=false", "--seq-len", "128",
                  "--data", tok, "--batch-size", "16", "--optimizer", "adamw", "--lr", "0.002", "--epochs", "100"]
        tps = {0: [], 2: [], 3: []}
        for _ in range(a.rounds):
            for z in (0, 2, 3):
                tps[z].append(train(2, common + ["--max-steps", str(a.steps), "--zero", str(z)], work,
                                    bind="core")["tokens_per_s"])
        for z, goal in ((2, ">= 0.97"), (3, ">= 0.90")):
            ratios = [x / y for x, y in zip(tps[z], tps[0])]
            rows.append([f"tokens/s --zero {z} / --zero 0, gpt L4 E128 T128, 2 ranks", f"{statistics.median(ratios):.3f}",
                         goal, f"{statistics.median(tps[z]):,.0f} vs {statistics.median(tps[0]):,.0f} tokens/s"])
        mib = lambda b: f"{b / 2**20:.2f}"
        for n in (1, 2, 4):
            for z in (0, 1, 2, 3):
                m = train(n, common + ["--max-steps", "3", "--zero", str(z)], work)["model_state_bytes_per_rank"]
                rows.append([f"model state per rank, gpt L4 E128 (MiB), {n} rank(s), --zero {z}", mib(m["total"]),
                             "", f"parameters {mib(m['parameters'])}, gradients {mib(m['gradients'])}, optimizer "
                             f"{mib(m['optimizer_state'])}, largest unit {mib(m['largest_unit'])}"])
    date = datetime.date.today().isoformat()
    os.makedirs(os.path.join(ROOT, "perf/memory/results"), exist_ok=True)
    with open(os.path.join(ROOT, f"perf/memory/results/zero-{date}.jsonl"), "w") as f:
        for r in RAW:
            f.write(json.dumps(r) + "\n")
    table = ["| figure | measured | goal | detail |", "|---|---|---|---|"] + ["| " + " | ".join(r) + " |" for r in rows]
    open(os.path.join(ROOT, f"perf/memory/results/zero-{date}.md"), "w").write("\n".join(table) + "\n")
    print("\n".join(table))


if __name__ == "__main__":
    main()
