"""Analytical weak-scaling model for hpctrain's DDP, calibrated on this machine's measurements.

    /usr/bin/python3 perf/scaling_model.py --compute-s 0.031 --backward-s 0.020 --bucket-mb 0.011,3.135
    /usr/bin/python3 perf/scaling_model.py --from-bench perf/train/results/ddp_bench_np1.json
    /usr/bin/python3 perf/scaling_model.py --from-scaling perf/train/results/scaling-cnn-DATE.csv \
        --allreduce perf/comm/results/allreduce-np2-DATE.csv     # measured vs predicted, this machine

Ring allreduce of S bytes over n ranks with link bandwidth B (busbw) and latency alpha:
    t(S) = 2(n-1)/n * S/B + 2(n-1) * alpha
Buckets are launched in plan order as backward produces them (the first bucket after the first
~1/k of backward, ...); communication overlaps the rest of backward, so the exposed time is
what is left of the bucket pipeline after backward ends:
    exposed = max(0, finish_time_of_last_bucket - backward_s)
Efficiency = compute_s / (compute_s + exposed). Calibrate compute_s (a whole step), backward_s
and the bucket sizes with `build/perf/ddp_bench --mode ddp` at 1 rank (its JSON has step_s and
backward_s; the bucket plan is printed by `hpctrain train`).

--from-scaling takes a perf/train/scaling.sh CSV: compute, backward and buckets come from its 1-rank
weak row, and the link of THIS machine is fitted to a perf/comm/allreduce_sweep.sh CSV (least squares,
on relative error, of our allreduce time against bytes: t = 2(n-1)alpha + 2(n-1)/n * S/B; the
fit is at the sweep's rank count and is used for every N). It writes
<csv>-model.csv (measured against predicted efficiency per row; strong rows assume compute and
backward shrink as 1/N) and <csv>-model.md (that table plus the 8/64/512-GPU table).
The model only charges communication: a measured efficiency below the prediction is time the
model does not know about (ranks contending for cores and memory bandwidth, stragglers).
"""
import argparse, csv, json, os

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


def fit_link(allreduce_csv):
    """(n, B bytes/s, alpha s) fitted to our allreduce times, ring model; None without data."""
    rows = list(csv.DictReader(open(allreduce_csv)))
    if len(rows) < 2:
        return None
    n = int(rows[0]["world_size"])
    xs = [float(r["bytes"]) for r in rows]
    ys = [float(r["time_us"]) * 1e-6 for r in rows]
    # Least squares on RELATIVE error (weights 1/t^2): small messages fix alpha, large ones B,
    # instead of the largest sizes dominating both.
    w = [1 / y**2 for y in ys]
    sw, sx, sy = sum(w), sum(wi * x for wi, x in zip(w, xs)), sum(wi * y for wi, y in zip(w, ys))
    sxx, sxy = sum(wi * x * x for wi, x in zip(w, xs)), sum(wi * x * y for wi, x, y in zip(w, xs, ys))
    slope = (sw * sxy - sx * sy) / (sw * sxx - sx * sx)
    icpt = (sy - slope * sx) / sw
    if n < 2 or slope <= 0:
        return None
    return n, 2 * (n - 1) / n / slope, max(icpt, 0.0) / (2 * (n - 1))


def predict_scaling(scaling_csv, link):
    """Rows of measured vs predicted efficiency for a perf/train/scaling.sh CSV."""
    rows = list(csv.DictReader(open(scaling_csv)))
    base = next((r for r in rows if r["mode"] == "weak" and r["ranks"] == "1"), None)
    if base is None:
        raise SystemExit(f"scaling_model.py: {scaling_csv} has no 1-rank weak row to calibrate on")
    c, bw_s = float(base["step_s"]), float(base["backward_s"])
    b1 = int(base["batch_per_rank"])
    buckets = [float(x) * 2**20 for x in base["bucket_mb"].split(";") if x]
    out = []
    for r in rows:
        n, b = int(r["ranks"]), int(r["batch_per_rank"])
        k = b / b1  # compute scales with the per-rank batch (strong: 1/N of the global batch)
        pred = efficiency(n, c * k, bw_s * k, buckets, link[1], link[2]) if buckets else 1.0
        out.append({"model": r["model"], "mode": r["mode"], "ranks": n, "batch_per_rank": b,
                    "measured_efficiency": r["efficiency"], "predicted_efficiency": "%.4f" % pred})
    return out, c, bw_s, buckets


def from_scaling(a):
    link = fit_link(a.allreduce) if a.allreduce else None
    if link is None:
        raise SystemExit("scaling_model.py: --from-scaling needs --allreduce CSV with >= 2 sizes on >= 2 ranks")
    rows, c, bw_s, buckets = predict_scaling(a.from_scaling, link)
    stem = a.from_scaling[:-4] if a.from_scaling.endswith(".csv") else a.from_scaling
    with open(stem + "-model.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    mb = ",".join("%.3f" % (b / 2**20) for b in buckets)
    md = [f"Calibration: 1-rank step {c*1e3:.1f} ms, backward {bw_s*1e3:.1f} ms, buckets {mb} MiB; "
          f"this machine's link fitted to {os.path.basename(a.allreduce)}: busbw {link[1]/1e9:.2f} GB/s, "
          f"alpha {link[2]*1e6:.1f} us.", "",
          "| mode | ranks | batch/rank | measured efficiency | predicted (communication only) |", "|---|---|---|---|---|"]
    md += [f"| {r['mode']} | {r['ranks']} | {r['batch_per_rank']} | {r['measured_efficiency']} | {r['predicted_efficiency']} |"
           for r in rows]
    md += ["", "Weak scaling beyond this machine (same calibration):", "", table(a.ranks, c, bw_s, buckets)]
    open(stem + "-model.md", "w").write("\n".join(md) + "\n")
    print("\n".join(md))


def table(ranks, compute_s, backward_s, buckets):
    lines = ["| link | " + " | ".join(f"{n} GPUs" for n in ranks.split(",")) + " |",
             "|---|" + "---|" * len(ranks.split(","))]
    for name, (bw, alpha) in LINKS.items():
        effs = [efficiency(int(n), compute_s, backward_s, buckets, bw, alpha) for n in ranks.split(",")]
        lines.append(f"| {name} | " + " | ".join(f"{e:.3f}" for e in effs) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compute-s", type=float, help="single-rank step time (s)")
    ap.add_argument("--backward-s", type=float, help="single-rank backward time (s)")
    ap.add_argument("--bucket-mb", default="1,24", help="bucket sizes in MiB, launch order")
    ap.add_argument("--from-bench", help="a ddp_bench JSON line (1 rank) for compute/backward")
    ap.add_argument("--from-scaling", help="a perf/train/scaling.sh CSV: measured vs predicted (needs --allreduce)")
    ap.add_argument("--allreduce", help="a perf/comm/allreduce_sweep.sh CSV: this machine's link")
    ap.add_argument("--ranks", default="8,64,512")
    a = ap.parse_args()
    if a.from_scaling:
        return from_scaling(a)
    if a.from_bench:
        j = json.loads(open(a.from_bench).read().strip().splitlines()[-1])
        a.compute_s, a.backward_s = j["step_s"], j["backward_s"]
    buckets = [float(x) * 2**20 for x in a.bucket_mb.split(",")]
    print(f"model: step {a.compute_s*1e3:.1f} ms, backward {a.backward_s*1e3:.1f} ms, buckets {a.bucket_mb} MiB")
    print(table(a.ranks, a.compute_s, a.backward_s, buckets))


if __name__ == "__main__":
    main()
