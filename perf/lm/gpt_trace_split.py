"""Where `hpctrain train --model gpt`'s step time goes, from its own Chrome trace (--trace).

    /usr/bin/python3 perf/lm/gpt_trace_split.py [--data data/fortunes] [--steps 60] [--skip 10] [-- EXTRA TRAIN FLAGS]

Runs launch/local.sh -n 2 -- train --model gpt (L4 H4 E128 T128, batch 16 per rank, AdamW,
as perf/lm/gpt_bench.py) with --trace, then sums each rank's spans per step after the first --skip
steps: forward, backward (autograd; the bucket allreduces overlap it on the comm thread),
optimizer (clip + AdamW), data_wait, and the comm thread's comm.wait (time inside collectives,
tid 1), plus the wall time per step. Prints one JSON line.
"""
import argparse, json, os, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "fortunes"))
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--skip", type=int, default=10)
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gpt-trace-")
    trace = os.path.join(tmp, "trace.json")
    cmd = [os.path.join(ROOT, "launch", "local.sh"), "-n", "2", "--", "train", "--model", "gpt", "--model-config",
           "n_layer=4,n_head=4,n_embd=128", "--seq-len", "128", "--batch-size", "16", "--optimizer", "adamw",
           "--lr", "2e-3", "--weight-decay", "0.1", "--warmup-steps", "100", "--clip-grad-norm", "1.0",
           "--schedule", "constant", "--max-steps", str(a.steps), "--log-every", "10", "--data", a.data,
           "--trace", trace] + a.extra
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ev = json.load(open(trace))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    out = {"what": "hpctrain train --model gpt step split from its trace, ms per step (mean of ranks)",
           "steps": a.steps - a.skip}
    for rank in sorted({e.get("pid") for e in ev if e.get("ph") == "X"}):
        mine = sorted((e for e in ev if e.get("ph") == "X" and e.get("pid") == rank), key=lambda e: e["ts"])
        fwd = [e for e in mine if e["name"] == "forward"]
        if len(fwd) <= a.skip:
            continue
        t0 = fwd[a.skip]["ts"]
        t1 = fwd[-1]["ts"]
        n = len(fwd) - 1 - a.skip  # steps in [t0, t1)
        sums = {}
        for e in mine:
            if t0 <= e["ts"] < t1:
                key = e["name"] if e.get("tid", 0) != 1 else "comm.wait (comm thread)"
                if e.get("cat") == "comm.wait":
                    key = "comm.wait (comm thread)"
                sums[key] = sums.get(key, 0) + e["dur"] / 1000.0
        out[f"rank{rank}"] = {k: round(v / n, 2) for k, v in sorted(sums.items()) if v / n >= 0.05}
        out[f"rank{rank}"]["wall"] = round((t1 - t0) / 1000.0 / n, 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
