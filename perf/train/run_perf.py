"""Regenerates hpctrain's performance numbers on this machine, as ratios measured in one run.

    /usr/bin/python3 perf/train/run_perf.py [--quick] [--only train,ddp,torch,allreduce] [--data DIR]

Every comparison alternates A and B (A B A B ...) and reports the ratio of medians, so drift
of a shared machine cancels. Writes perf/train/results/perf-<date>.jsonl (every raw measurement)
and perf/train/results/perf-<date>.md (the table), and prints the table.
Figures:
  train  THE PRODUCT (perf/train/train_bench.py): `hpctrain train` end to end, as launched by
         launch/local.sh, its throughput read from its own per-step metrics JSONL (and summary),
         vs perf/train/torch_ddp.py training from the same train.h5 (TensorDataset +
         DistributedSampler + DataLoader) and on one fixed in-memory batch; weak scaling 2 ranks
         vs two independent 1-rank runs at once; mlp vs PyTorch with the same data.
  ddp    DDP tax at world 1 (ddp/plain), 2-rank weak-scaling efficiency, bucket-cap sweep with
         comm-blocked time and the fraction of allreduce hidden behind backward, SyncBN tax,
         watchdog tax (HPCTRAIN_COLLECTIVE_TIMEOUT=0 vs default) -- cnn, batch 64 per rank
  torch  MICROBENCHMARK perf/ddp_bench (no loader, trainer, metrics) vs PyTorch DDP (gloo) from the same torch wheel, cnn and mlp, 1 and 2 ranks
  allreduce  our busbw / bare MPI busbw for sizes >= 4 MiB
"""
import argparse, datetime, json, os, random, statistics, subprocess, sys

import train_bench  # perf/train/train_bench.py: the product rows and the interleaving

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("HPCTRAIN_BUILD_DIR", os.path.join(ROOT, "build"))
VENV_PY = os.path.join(os.environ.get("HPCTRAIN_HOME", os.path.expanduser("~/.cache/hpctrain")), "venv/bin/python")
MPI = ["mpirun", "--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1", "-x", "MKL_NUM_THREADS=1",
       "-x", "OPENBLAS_NUM_THREADS=1"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
RAW = []


def run_json(cmd, env=None):
    e = dict(os.environ, OMP_NUM_THREADS="1", **(env or {}))
    out = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=900)
    lines = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
    if out.returncode != 0 and not lines:
        sys.exit(f"command failed ({out.returncode}): {' '.join(cmd)}\n{out.stderr[-2000:]}")
    if out.returncode != 0:  # gloo sometimes aborts in teardown after printing its result
        print(f"warning: exit {out.returncode} after a result from {' '.join(cmd[-8:])}", file=sys.stderr)
    for l in lines:
        RAW.append({"cmd": " ".join(cmd), "env": env or {}, **l})
    return lines


def ddp_bench(n, *args, env=None):
    return run_json(MPI + ["-np", str(n), os.path.join(BUILD, "perf/ddp_bench")] + list(args), env)[-1]


def paired(fa, fb, rounds):
    """Alternates fa, fb; returns (median of fa's step_s, median of fb's, median of ratios)."""
    return train_bench.interleave(fa, fb, rounds, key="step_s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="train,ddp,torch,allreduce")
    ap.add_argument("--data", default=os.environ.get("HPCTRAIN_DATA", ""),
                    help="dir with train.h5/test.h5 for `train` (default: Fashion-MNIST converted into a temp dir)")
    args = ap.parse_args()
    rounds = 3 if args.quick else 5
    steps = "20" if args.quick else "40"
    class Rows(list):  # each row tagged with what it measures: the product or a microbenchmark
        kind = ""
        def append(self, r):
            r = (self.kind,) + tuple(r)
            print("| " + " | ".join(r) + " |", flush=True)
            super().append(r)
    rows = Rows()
    only = args.only.split(",")
    if "train" in only:
        rows.kind = "product: `hpctrain train`"
        for row in train_bench.figures(args.data, quick=args.quick, raw=RAW):
            rows.append(row)
    rows.kind = "microbenchmark: perf/ddp_bench"
    if "ddp" in only:
        base = ["--model", "cnn", "--batch", "64", "--steps", steps]
        d, p, r = paired(lambda: ddp_bench(1, *base, "--mode", "ddp"), lambda: ddp_bench(1, *base, "--mode", "plain"), rounds)
        rows.append(("DDP tax at world size 1 (cnn, b64)", f"{r:.3f}", "<= 1.02", f"ddp {d*1e3:.1f} ms vs plain {p*1e3:.1f} ms"))
        s2, s1, r = paired(lambda: ddp_bench(2, *base), lambda: ddp_bench(1, *base), rounds)
        rows.append(("2-rank weak-scaling efficiency (cnn, b64/rank)", f"{1/r:.3f}", ">= 0.97", f"step {s2*1e3:.1f} ms at 2 ranks vs {s1*1e3:.1f} ms at 1"))
        mb = ["--model", "mlp", "--batch", "64", "--steps", steps]
        s2, s1, r = paired(lambda: ddp_bench(2, *mb), lambda: ddp_bench(1, *mb), rounds)
        rows.append(("2-rank weak-scaling efficiency (mlp, b64/rank)", f"{1/r:.3f}", ">= 0.85", f"step {s2*1e3:.2f} ms vs {s1*1e3:.2f} ms"))
        for cap in ["0.25", "1", "4", "25", "100"]:
            res = [ddp_bench(2, *base, "--bucket-mb", cap) for _ in range(max(1, rounds // 2))]
            m = lambda k: statistics.median(x[k] for x in res)
            rows.append((f"bucket cap {cap} MiB, 2 ranks", f"{m('step_s')*1e3:.1f} ms", "-",
                         f"{res[0]['buckets']} buckets, comm-blocked {m('finalize_wait_s')*1e3:.2f} ms, serial allreduce {m('serial_comm_s')*1e3:.2f} ms, hidden {m('hidden_fraction'):.2f}"))
        a, b, r = paired(lambda: ddp_bench(2, *base, "--sync-bn"), lambda: ddp_bench(2, *base), rounds)
        rows.append(("SyncBN tax (cnn, 2 ranks)", f"{r:.3f}", "<= 1.05", f"{a*1e3:.1f} ms vs {b*1e3:.1f} ms"))
        a, b, r = paired(lambda: ddp_bench(2, *base), lambda: ddp_bench(2, *base, env={"HPCTRAIN_COLLECTIVE_TIMEOUT": "0"}), rounds)
        rows.append(("watchdog tax (cnn, 2 ranks)", f"{r:.3f}", "<= 1.01", f"on {a*1e3:.1f} ms vs off {b*1e3:.1f} ms"))
    if "torch" in only:
        for model in ["cnn", "mlp"]:
            for n in [1, 2]:
                ours = lambda: ddp_bench(n, "--model", model, "--batch", "64", "--steps", steps)
                theirs = lambda: run_json(MPI + ["-np", str(n), VENV_PY, os.path.join(ROOT, "perf/train/torch_ddp.py"),
                                                 "--model", model, "--batch", "64", "--steps", steps,
                                                 "--port", str(random.randint(20000, 40000))])[-1]
                a, b, r = paired(ours, theirs, rounds)
                goal = {"cnn": ">= 1.10", "mlp": ">= 2.0"}[model] if n == 2 else "-"
                rows.append((f"microbenchmark ddp_bench / PyTorch DDP gloo, fixed batch ({model}, {n} rank{'s' if n > 1 else ''})", f"{1/r:.2f}", goal,
                             f"step {a*1e3:.2f} ms vs {b*1e3:.2f} ms"))
    if "allreduce" in only:
        rows.kind = "microbenchmark: `hpctrain bench allreduce`"
        ratios = []
        for _ in range(2):
            for l in run_json(MPI + ["-np", "2", os.path.join(BUILD, "hpctrain"), "bench", "allreduce", "--min-bytes", str(4 << 20)]):
                ratios.append(l["busbw_ratio"])
        rows.append(("allreduce busbw / bare MPI (>= 4 MiB, 2 ranks)", f"{statistics.median(ratios):.3f}", ">= 0.95",
                     f"min {min(ratios):.3f}, max {max(ratios):.3f} over sizes 4-256 MiB, 2 runs"))
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M")
    out = os.path.join(ROOT, "perf/train/results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"perf-{stamp}.jsonl"), "w") as f:
        for r in RAW:
            f.write(json.dumps(r) + "\n")
    md = ["| measures | figure | value | goal | detail |", "|---|---|---|---|---|"] + ["| " + " | ".join(r) + " |" for r in rows]
    text = f"Measured {stamp} on {os.cpu_count()} cores, 1 thread per rank, torch {subprocess.run([VENV_PY, '-c', 'import torch;print(torch.__version__)'], capture_output=True, text=True).stdout.strip()}\n\n" + "\n".join(md) + "\n"
    open(os.path.join(out, f"perf-{stamp}.md"), "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
