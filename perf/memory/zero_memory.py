"""Memory per GPU of model state under DDP and ZeRO-1 (--zero 1), to size a job.

    /usr/bin/python3 perf/memory/zero_memory.py                       # 1B and 7B, 8/64/512 GPUs
    /usr/bin/python3 perf/memory/zero_memory.py --params 13e9 --gpus 16,128 --optimizer sgd

What hpctrain holds per rank for P trained parameters (fp32, as the trainer keeps parameters
and gradients; --amp changes activations, not these):
    parameters            4P
    gradient buckets      4P        (DDP and ZeRO-1: backward writes the full local gradient)
    gradient shard        4P/N      (ZeRO-1 only: this rank's reduce-scattered block)
    optimizer state       kP x 4    (DDP)   or  kP x 4 / N  (ZeRO-1)
with k = 2 for AdamW (exp_avg, exp_avg_sq), 1 for SGD with momentum, 0 without. Padding adds
fewer than N elements per bucket (negligible). Activations and the allocator's slack come on
top: measure them with one rank (`peak_mem_mb` in the summary) and add.
"""
import argparse


def per_rank(p, n, k, zero):
    params, grads = 4 * p, 4 * p
    shard = 4 * p / n if zero else 0
    optim = k * 4 * p / (n if zero else 1)
    return params + grads + shard + optim, optim


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", default="1e9,7e9", help="parameter counts, comma-separated")
    ap.add_argument("--gpus", default="8,64,512")
    ap.add_argument("--optimizer", default="adamw", choices=["adamw", "sgd", "sgd-nomomentum"])
    a = ap.parse_args()
    k = {"adamw": 2, "sgd": 1, "sgd-nomomentum": 0}[a.optimizer]
    gib = 1024 ** 3
    print(f"| parameters | GPUs | DDP GiB/GPU (optimizer) | ZeRO-1 GiB/GPU (optimizer) | saved |")
    print(f"|---|---|---|---|---|")
    for p in [float(x) for x in a.params.split(",")]:
        for n in [int(x) for x in a.gpus.split(",")]:
            d, do = per_rank(p, n, k, False)
            z, zo = per_rank(p, n, k, True)
            print(f"| {p / 1e9:g}B | {n} | {d / gib:.1f} ({do / gib:.1f}) | {z / gib:.1f} ({zo / gib:.2f}) | "
                  f"{(d - z) / gib:.1f} GiB ({1 - z / d:.0%}) |")


if __name__ == "__main__":
    main()
