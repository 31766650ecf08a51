"""A/B of --activation-checkpointing on a long sequence: peak memory and step time, with and without.

    /usr/bin/python3 perf/lm/activation_checkpointing_bench.py [--bin build/hpctrain] [--data DIR]
        [--rounds 3] [--steps 12] [--seq-len 512] [--batch-size 8] [--model-config n_layer=4,...]
        [--amp off|bf16] [--raw OUT.jsonl]

Runs `hpctrain train --model gpt` on one rank (one compute thread, OMP_NUM_THREADS=1) in turns,
A (with --activation-checkpointing) then B (without), --rounds pairs, on the same token data, seed
and steps. Per run: peak memory (the summary's peak_mem_mb: peak RSS on CPU, the allocator's peak
on CUDA), step time (median of the metrics file's `train` records' step_s, 2-step intervals, the
first dropped) and the summary's recompute_s. Per pair: the ratios A/B; then their medians.
Data (--data): train.h5/test.h5 token files; default: `hpctrain data text` of
/usr/share/common-licenses into a temporary directory (bytes, vocab 256).
"""
import argparse, json, os, statistics, subprocess, sys, tempfile


def run(args, data, ckpt, work, i):
    metrics = os.path.join(work, f"{'A' if ckpt else 'B'}{i}.jsonl")
    cmd = [args.bin, "train", "--model", "gpt", "--model-config", args.model_config, "--data", data,
           "--seq-len", str(args.seq_len), "--batch-size", str(args.batch_size), "--max-steps", str(args.steps),
           "--optimizer", "adamw", "--lr", "1e-3", "--seed", "1", "--log-every", "2", "--metrics", metrics,
           "--amp", args.amp, "--straggler-threshold", "0"]
    if ckpt:
        cmd.append("--activation-checkpointing")
    out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if out.returncode != 0:
        sys.exit(f"run failed ({out.returncode}): {' '.join(cmd)}\n{out.stderr[-2000:]}")
    summary = json.loads([l for l in out.stdout.splitlines() if l.startswith("{")][-1])
    steps = [json.loads(l)["step_s"] for l in open(metrics) if '"train"' in l][1:]
    return {"checkpointing": ckpt, "peak_mem_mb": summary["peak_mem_mb"], "step_s": statistics.median(steps),
            "recompute_s": summary.get("recompute_s"), "steps": summary["steps"], "train_loss": summary["train_loss"]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default="build/hpctrain")
    p.add_argument("--data")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--model-config", default="n_layer=4,n_head=4,n_embd=128")
    p.add_argument("--amp", default="off")
    p.add_argument("--raw")
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="actckpt-bench.")
    data = args.data
    if not data:
        data = os.path.join(work, "d")
        subprocess.run([args.bin, "data", "text", "--out", data, "--test-fraction", "0.02", "/usr/share/common-licenses"],
                       check=True, capture_output=True)
    rows, mem, step = [], [], []
    for i in range(args.rounds):
        a, b = run(args, data, True, work, i), run(args, data, False, work, i)
        if a["train_loss"] != b["train_loss"]:
            print(f"note: round {i}: train loss {a['train_loss']} with, {b['train_loss']} without")
        rows += [a, b]
        mem.append(a["peak_mem_mb"] / b["peak_mem_mb"])
        step.append(a["step_s"] / b["step_s"])
        print(f"round {i}: peak {a['peak_mem_mb']:.0f} vs {b['peak_mem_mb']:.0f} MB ({mem[-1]:.2f}x), step "
              f"{a['step_s']:.3f} vs {b['step_s']:.3f} s ({step[-1]:.2f}x), recompute {a['recompute_s']:.2f} s "
              f"over {a['steps']} steps")
    print(f"median over {args.rounds} pairs (gpt {args.model_config}, T {args.seq_len}, batch {args.batch_size}, "
          f"amp {args.amp}): peak memory {statistics.median(mem):.2f}x, step time {statistics.median(step):.2f}x "
          "(with / without activation checkpointing)")
    if args.raw:
        with open(args.raw, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
