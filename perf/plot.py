"""PNG plots of the perf CSVs (matplotlib, Agg backend: no display needed).

    /usr/bin/python3 perf/plot.py scaling   perf/train/results/scaling-cnn-DATE.csv   [--out PNG]
    /usr/bin/python3 perf/plot.py allreduce perf/comm/results/allreduce-np2-DATE.csv [--out PNG]
    /usr/bin/python3 perf/plot.py metrics   RUN.jsonl [RUN2.jsonl ...]            [--out PNG]

scaling: for each sweep in the CSV (weak, strong), throughput against ranks with the ideal line
(N x the 1-rank throughput) and efficiency against ranks with the ideal 1.0; when
<csv>-model.csv from perf/scaling_model.py exists, its predicted efficiency is drawn too.
allreduce: bus bandwidth of ours and of bare MPI_Allreduce against message size (log x), and
the ring model that perf/scaling_model.py fits to our times (busbw B, latency alpha).
metrics: training curves of `train --metrics` files (perf/plot_metrics.py): loss, test accuracy,
samples/s and lr against step, one line per file (runs overlaid).
The PNG goes next to the (first) input (same name, .png) unless --out is given; its path is printed.
"""
import argparse, csv, os, sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after use("Agg"))

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scaling_model import fit_link  # noqa: E402
from plot_metrics import plot_metrics  # noqa: E402


def read_csv(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"plot.py: {path} has no rows")
    return rows


def plot_scaling(path, out):
    rows = read_csv(path)
    modes = [m for m in ("weak", "strong") if any(r["mode"] == m for r in rows)]
    pred = {}
    model_csv = path[:-4] + "-model.csv"
    if os.path.exists(model_csv):
        pred = {(r["mode"], int(r["ranks"])): float(r["predicted_efficiency"]) for r in read_csv(model_csv)}
    fig, axes = plt.subplots(len(modes), 2, figsize=(10, 3.6 * len(modes)), squeeze=False)
    for (ax_tp, ax_eff), mode in zip(axes, modes):
        rs = sorted((r for r in rows if r["mode"] == mode), key=lambda r: int(r["ranks"]))
        n = [int(r["ranks"]) for r in rs]
        tp = [float(r["samples_per_s"]) for r in rs]
        batch = ", ".join(f"{r['batch_per_rank']}" for r in rs)
        ax_tp.plot(n, tp, "o-", label="measured")
        one = next((float(r["samples_per_s"]) for r in rs if int(r["ranks"]) == 1), None)
        if one is not None:
            ax_tp.plot(n, [one * k for k in n], "--", color="gray", label="ideal (N x 1 rank)")
        ax_tp.set(xlabel="ranks", ylabel="samples/s", xticks=n,
                  title=f"{rs[0]['model']} {mode} scaling: throughput (batch/rank {batch})")
        ax_tp.legend()
        effs = [(k, float(r["efficiency"])) for k, r in zip(n, rs) if r["efficiency"]]
        if effs:
            ax_eff.plot([k for k, _ in effs], [e for _, e in effs], "o-", label="measured")
        ax_eff.axhline(1.0, ls="--", color="gray", label="ideal")
        p = [(k, pred[(mode, k)]) for k in n if (mode, k) in pred]
        if p:
            ax_eff.plot([k for k, _ in p], [e for _, e in p], "s:", label="model (communication only)")
        ax_eff.set(xlabel="ranks", ylabel="efficiency", xticks=n, ylim=(0, 1.15),
                   title=f"{rs[0]['model']} {mode} scaling: efficiency")
        ax_eff.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def plot_allreduce(path, out):
    rows = sorted(read_csv(path), key=lambda r: int(r["bytes"]))
    x = [int(r["bytes"]) for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot(x, [float(r["busbw_GBps"]) for r in rows], "o-", label="hpctrain allreduce")
    ax.plot(x, [float(r["mpi_busbw_GBps"]) for r in rows], "s--", label="bare MPI_Allreduce")
    link = fit_link(path)
    if link:
        n, bw, alpha = link
        f = 2 * (n - 1) / n  # busbw = algbw * 2(n-1)/n; t = f*S/B + 2(n-1)*alpha
        ax.plot(x, [f * s / (f * s / bw + 2 * (n - 1) * alpha) / 1e9 for s in x], ":", color="gray",
                label=f"ring model fit (B {bw/1e9:.1f} GB/s, alpha {alpha*1e6:.1f} us)")
    ax.set_xscale("log", base=2)
    ax.set(xlabel="message size (bytes)", ylabel="bus bandwidth (GB/s)",
           title=f"allreduce bus bandwidth, {rows[0]['world_size']} ranks")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["scaling", "allreduce", "metrics"])
    ap.add_argument("inputs", nargs="+", metavar="FILE", help="CSV (scaling, allreduce) or metrics JSONL files")
    ap.add_argument("--out")
    a = ap.parse_args()
    out = a.out or os.path.splitext(a.inputs[0])[0] + ".png"
    if a.kind == "metrics":
        plot_metrics(a.inputs, out, plt)
    elif len(a.inputs) != 1:
        ap.error(f"{a.kind} takes one CSV")
    else:
        {"scaling": plot_scaling, "allreduce": plot_allreduce}[a.kind](a.inputs[0], out)
    print(out)


if __name__ == "__main__":
    main()
