"""Turns the benchmarks' JSON lines into the CSV files that perf/plot.py and perf/report.py read.

    /usr/bin/python3 perf/to_csv.py scaling   RAW.jsonl OUT.csv   # ddp_bench lines from perf/train/scaling.sh
    /usr/bin/python3 perf/to_csv.py allreduce RAW.jsonl OUT.csv   # `hpctrain bench allreduce` lines

Scaling: rows keep the input order; speedup and efficiency are relative to the 1-rank row of the
same sweep (scaling_mode weak or strong), see perf/train/scaling.sh for the definitions. A sweep without
a 1-rank row gets empty speedup/efficiency cells rather than invented ones.
"""
import csv, json, sys

SCALING_COLS = ["model", "mode", "ranks", "batch_per_rank", "global_batch", "step_s", "samples_per_s", "speedup",
                "efficiency", "comm_blocked_s", "backward_s", "data_wait_s", "bucket_mb", "data"]
ALLREDUCE_COLS = ["world_size", "bytes", "iters", "time_us", "algbw_GBps", "busbw_GBps", "mpi_time_us",
                  "mpi_algbw_GBps", "mpi_busbw_GBps", "busbw_ratio"]


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip().startswith("{")]


def scaling_rows(lines):
    """One dict per ddp_bench line with the derived columns (speedup, efficiency)."""
    base = {}
    for j in lines:
        if j["world_size"] == 1:
            base.setdefault(j["scaling_mode"], j["samples_per_s"])
    rows = []
    for j in lines:
        n, tp, b1 = j["world_size"], j["samples_per_s"], base.get(j["scaling_mode"])
        rows.append({
            "model": j["model"], "mode": j["scaling_mode"], "ranks": n, "batch_per_rank": j["batch_per_rank"],
            "global_batch": n * j["batch_per_rank"], "step_s": "%.6f" % j["step_s"], "samples_per_s": "%.3f" % tp,
            "speedup": "%.4f" % (tp / b1) if b1 else "", "efficiency": "%.4f" % (tp / (n * b1)) if b1 else "",
            "comm_blocked_s": "%.6f" % j.get("finalize_wait_s", 0), "backward_s": "%.6f" % j.get("backward_s", 0),
            "data_wait_s": "%.6f" % j.get("data_wait_s", 0),
            "bucket_mb": ";".join("%.4f" % (x / 2**20) for x in j.get("bucket_bytes", [])),
            "data": j.get("data", "memory")})
    return rows


def write_csv(path, cols, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("scaling", "allreduce"):
        sys.exit("usage: to_csv.py scaling|allreduce RAW.jsonl OUT.csv")
    kind, raw, out = sys.argv[1:]
    lines = read_jsonl(raw)
    if not lines:
        sys.exit(f"to_csv.py: {raw} has no JSON lines")
    if kind == "scaling":
        write_csv(out, SCALING_COLS, scaling_rows(lines))
    else:
        missing = [c for c in ALLREDUCE_COLS if c not in lines[0]]
        if missing:
            sys.exit(f"to_csv.py: {raw}: first line lacks {', '.join(missing)} (not `hpctrain bench allreduce` output?)")
        write_csv(out, ALLREDUCE_COLS, lines)


if __name__ == "__main__":
    main()
