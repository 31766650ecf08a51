"""Analytical weak-scaling model for hpctrain's DDP, calibrated on this machine's measurements.

    /usr/bin/python3 perf/scaling_model.py --compute-s 0.031 --backward-s 0.020 --bucket-mb 0.011,3.135
    /usr/bin/python3 perf/scaling_model.py --from-bench perf/results/ddp_bench_np1.json

Ring allreduce of S bytes over n ranks with link bandwidth B (busbw) and latency alpha:
    t(S) = 2(n-1)/n * S/B + 2(n-1) * alpha
Buckets are launched in plan order as backward produces them (the first bucket after the first
~1/k of backward, ...); communication overlaps the rest of backward, so the exposed time is
what is left of the bucket pipeline after backward ends:
    exposed = max(0, finish_time_of_last_bucket - backward_s)
Efficiency = compute_s / (compute_s + exposed). Calibrate compute_s (a whole step), backward_s
and the bucket sizes with `build/perf/ddp_bench --mode ddp` at 1 rank (its JSON has step_s and
backward_s; the bucket plan is printed by `hpctrain train`).
"""
import argparse, json

LINKS = {"NVLink (370 GB/s busbw, intra-node)": (370e9, 3e-6), "InfiniBand NDR (48 GB/s per NIC)": (48e9, 6e-6)}


def efficiency(n, compute_s, backward_s, buckets, bw, alpha):
    if n == 1:
        return 1.0
    total = sum(buckets)
    t = 0.0  # time the comm stream is busy until
    produced = 0.0
    for b in buckets:  # bucket i is ready once its share of backward has run
        produced += b
        ready = backward_s * produced / total
        t = max(t, ready) + 2 * (n - 1) / n * b / bw + 2 * (n - 1) * alpha
    exposed = max(0.0, t - backward_s)
    return compute_s / (compute_s + exposed)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compute-s", type=float, help="single-rank step time (s)")
    ap.add_argument("--backward-s", type=float, help="single-rank backward time (s)")
    ap.add_argument("--bucket-mb", default="1,24", help="bucket sizes in MiB, launch order")
    ap.add_argument("--from-bench", help="a ddp_bench JSON line (1 rank) for compute/backward")
    ap.add_argument("--ranks", default="8,64,512")
    a = ap.parse_args()
    if a.from_bench:
        j = json.loads(open(a.from_bench).read().strip().splitlines()[-1])
        a.compute_s, a.backward_s = j["step_s"], j["backward_s"]
    buckets = [float(x) * 2**20 for x in a.bucket_mb.split(",")]
    print(f"model: step {a.compute_s*1e3:.1f} ms, backward {a.backward_s*1e3:.1f} ms, buckets {a.bucket_mb} MiB")
    print("| link | " + " | ".join(f"{n} GPUs" for n in a.ranks.split(",")) + " |")
    print("|---|" + "---|" * len(a.ranks.split(",")))
    for name, (bw, alpha) in LINKS.items():
        effs = [efficiency(int(n), a.compute_s, a.backward_s, buckets, bw, alpha) for n in a.ranks.split(",")]
        print(f"| {name} | " + " | ".join(f"{e:.3f}" for e in effs) + " |")


if __name__ == "__main__":
    main()
