"""Training curves from `hpctrain train --metrics FILE.jsonl` files (used by plot.py metrics).

Four panels against the optimizer step, one line per file, so several runs overlay:
loss (train per log interval, test per eval, log y), test accuracy, samples/s, learning rate.
A run resumed with the same --metrics file only holds its own part; pass every part (they
overlay as separate lines) or give each part its own file.
"""
import json
import os
import sys


def read_metrics(path):
    recs = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                recs.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"plot.py: {path}:{n}: not JSON ({e.msg})")
    train = [r for r in recs if r.get("type") == "train"]
    if not train:
        sys.exit(f"plot.py: {path} has no train records (is it a --metrics file?)")
    evals = [r for r in recs if r.get("type") == "eval"]
    cfg = next((r["config"] for r in recs if r.get("type") == "config"), {})
    return train, evals, cfg


def label_of(path, cfg):
    name = os.path.splitext(os.path.basename(path))[0]
    model = cfg.get("model")
    return f"{name} ({model})" if model and model not in name else name


def plot_metrics(paths, out, plt):
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    (ax_loss, ax_acc), (ax_tp, ax_lr) = axes
    for i, path in enumerate(paths):
        train, evals, cfg = read_metrics(path)
        color = f"C{i}"
        label = label_of(path, cfg)
        steps = [r["step"] for r in train]
        ax_loss.plot(steps, [r["loss"] for r in train], "-", color=color, label=f"{label} train")
        if evals:
            es = [r["step"] for r in evals]
            ax_loss.plot(es, [r["test_loss"] for r in evals], "o--", ms=3, color=color, label=f"{label} test")
            ax_acc.plot(es, [r["test_accuracy"] for r in evals], "o-", ms=3, color=color, label=label)
        ax_tp.plot(steps, [r["samples_per_s"] for r in train], "-", color=color, label=label)
        ax_lr.plot(steps, [r["lr"] for r in train], "-", color=color, label=label)
    ax_loss.set(xlabel="step", ylabel="loss", title="loss (train per interval, test per eval)", yscale="log")
    ax_acc.set(xlabel="step", ylabel="test accuracy", title="test accuracy")
    ax_tp.set(xlabel="step", ylabel="samples/s", title="throughput (all ranks)")
    ax_lr.set(xlabel="step", ylabel="learning rate", title="learning rate")
    for ax in axes.flat:
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
