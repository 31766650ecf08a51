"""The largest GPT that trains under a per-rank memory cap, for each ZeRO stage (issue #47).

    /usr/bin/python3 perf/memory/zero_cap.py [--cap-mb 1024] [--world 4] [--embd 512] [--layers 2,4,...]

Every rank of `mpirun -np WORLD hpctrain train --model gpt --zero S` runs in its own cgroup v1
memory group capped at CAP (memory.limit_in_bytes, and memsw where present), the limit a
Slurm --mem-per-cpu or a container gives each rank. For each stage, the GPT grows in layers
(n_embd and n_head fixed) until a run fails; a run passes when it trains --steps steps and exits
0, and fails when the kernel's OOM killer ends a rank (memory.oom_control's oom_kill > 0; any
other failure stops the script). Each row gives `hpctrain plan`'s model state per rank for that
size beside the peak the cgroup measured (memory.max_usage_in_bytes: RSS and page cache the
rank touched, the LibTorch runtime and activations included).

Needs root and a writable /sys/fs/cgroup/memory. Writes perf/memory/results/zero-cap-<date>.jsonl
and prints a Markdown table.
"""
import argparse, datetime, json, os, shutil, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(os.environ.get("HPCTRAIN_BUILD_DIR", os.path.join(ROOT, "build")), "hpctrain")
CG = "/sys/fs/cgroup/memory"

# The program mpirun starts: joins its rank's group, then becomes hpctrain.
WRAPPER = """#!/bin/sh
g="$1/rank$OMPI_COMM_WORLD_RANK"; shift
echo $$ > "$g/cgroup.procs" || exit 97
exec "$@"
"""


def cg_read(path, name):
    with open(os.path.join(path, name)) as f:
        return f.read()


def oom_kills(path):
    for line in cg_read(path, "memory.oom_control").splitlines():
        if line.startswith("oom_kill "):
            return int(line.split()[1])
    return 0


def plan(world, cfg, seq_len, stage):
    out = subprocess.run([BIN, "plan", "--model", "gpt", "--model-config", cfg, "--seq-len", str(seq_len),
                          "--vocab-size", "256", "--world", str(world), "--zero", str(stage), "--json"],
                         capture_output=True, text=True, check=True).stdout
    return [json.loads(l) for l in out.splitlines() if '"stage"' in l][0]


def run(a, work, data, stage, layers):
    cfg = f"n_layer={layers},n_head={a.heads},n_embd={a.embd},bias=false"
    top = os.path.join(CG, f"hpctrain-cap-{os.getpid()}-z{stage}-l{layers}")
    groups = []
    try:
        for r in range(a.world):
            g = os.path.join(top, f"rank{r}")
            os.makedirs(g)
            groups.append(g)
            with open(os.path.join(g, "memory.limit_in_bytes"), "w") as f:
                f.write(str(a.cap_mb << 20))
            if os.path.exists(os.path.join(g, "memory.memsw.limit_in_bytes")):
                with open(os.path.join(g, "memory.memsw.limit_in_bytes"), "w") as f:
                    f.write(str(a.cap_mb << 20))
        cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-x", "OMP_NUM_THREADS=1", "-np", str(a.world),
               "sh", os.path.join(work, "wrap.sh"), top, BIN, "train", "--model", "gpt", "--model-config", cfg,
               "--data", data, "--seq-len", str(a.seq_len), "--batch-size", str(a.batch), "--max-steps", str(a.steps),
               "--zero", str(stage), "--optimizer", "adamw", "--lr", "1e-3", "--log-every", "1000", "--epochs", "1",
               "--resume", "none"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        peak = max(int(cg_read(g, "memory.max_usage_in_bytes")) for g in groups)
        killed = sum(oom_kills(g) for g in groups)
        if p.returncode != 0 and killed == 0:
            sys.exit(f"stage {stage}, {layers} layers failed without an OOM kill (rc {p.returncode}):\n{p.stderr[-2000:]}")
        pl = plan(a.world, cfg, a.seq_len, stage)
        return {"stage": stage, "n_layer": layers, "config": cfg, "ok": p.returncode == 0, "oom_kills": killed,
                "peak_mb_per_rank_max": round(peak / 2**20, 1), "plan_model_state_mb": round(pl["total"] / 2**20, 1),
                "cap_mb": a.cap_mb, "world": a.world}
    finally:
        for g in groups:
            for _ in range(50):
                try:
                    os.rmdir(g)
                    break
                except OSError:  # its processes are still leaving
                    subprocess.run(["sleep", "0.1"])
        if os.path.isdir(top):
            os.rmdir(top)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cap-mb", type=int, default=1024)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--embd", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--layers", default="2,4,6,8,12,16,24,32,48")
    ap.add_argument("--stages", default="0,1,2,3")
    a = ap.parse_args()
    if not os.access(CG, os.W_OK):
        sys.exit(f"{CG} is not writable (cgroup v1 memory as root is needed)")
    work = tempfile.mkdtemp(prefix="hpctrain-cap-")
    rows = []
    try:
        with open(os.path.join(work, "wrap.sh"), "w") as f:
            f.write(WRAPPER)
        data = os.path.join(work, "data")
        subprocess.run([BIN, "data", "text", "--out", data, "--test-fraction", "0.05", "/usr/share/common-licenses"],
                       check=True, capture_output=True)
        for stage in [int(s) for s in a.stages.split(",")]:
            for layers in [int(x) for x in a.layers.split(",")]:
                r = run(a, work, data, stage, layers)
                rows.append(r)
                print(json.dumps(r), flush=True)
                if not r["ok"]:
                    break
    finally:
        shutil.rmtree(work, ignore_errors=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M")
    out = os.path.join(ROOT, "perf", "memory", "results", f"zero-cap-{stamp}.jsonl")
    with open(out, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(f"\n| stage | largest GPT that trains ({a.world} ranks, cap {a.cap_mb} MiB per rank, n_embd {a.embd}) "
          f"| its plan model state / rank | its measured peak / rank | next size up |")
    print("|---|---|---|---|---|")
    for stage in sorted({r["stage"] for r in rows}):
        ok = [r for r in rows if r["stage"] == stage and r["ok"]]
        bad = [r for r in rows if r["stage"] == stage and not r["ok"]]
        best = ok[-1] if ok else None
        nxt = f"{bad[0]['n_layer']} layers: OOM-killed (plan {bad[0]['plan_model_state_mb']} MiB)" if bad else "not reached"
        if best:
            print(f"| {stage} | {best['n_layer']} layers | {best['plan_model_state_mb']} MiB | "
                  f"{best['peak_mb_per_rank_max']} MiB | {nxt} |")
        else:
            print(f"| {stage} | none | | | {nxt} |")
    print(f"\nraw: {out}")


if __name__ == "__main__":
    main()
