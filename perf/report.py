"""Regenerates the measured part of perf/README.md from the results files under perf/ (each
benchmark's folder keeps its own results/: perf/train/results, perf/comm/results, ...).

    /usr/bin/python3 perf/report.py probe  [--bin build/hpctrain] [--out perf/machine.json]
    /usr/bin/python3 perf/report.py render [--results perf] [--readme perf/README.md]

probe records the machine (lscpu, memory, OS, `hpctrain doctor`'s library line, threads per rank).
render replaces ONLY the text between the markers
    <!-- generated:begin -->  ...  <!-- generated:end -->
in the README (hand-written sections around them stay as they are) with: the machine, the newest
perf/train/run_perf.py table, per model the newest perf/train/scaling.sh CSV and its perf/scaling_model.py
comparison, the newest allreduce sweep, the loader and checkpoint benchmarks, the Fashion-MNIST
run summary, and a Plots section linking every PNG that belongs to those files (paths relative
to the README). A file that is missing is left out, never invented. --results is searched with
its subfolders; files are told apart by name, so a name must not stand in two folders.
"""
import argparse, csv, datetime, glob, json, os, re, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- generated:begin -->", "<!-- generated:end -->"
LOADER_RUN_LINES = 6  # perf/train/loader_bench.sh appends 6 lines per run to loader.jsonl
STAMP = r"(\d{8}-\d{4,6})"


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def probe(a):
    lscpu = dict(l.split(":", 1) for l in sh(["lscpu"]).splitlines() if ":" in l)
    lscpu = {k.strip(): v.strip() for k, v in lscpu.items()}
    mem = re.search(r"MemTotal:\s+(\d+) kB", open("/proc/meminfo").read())
    osname = re.search(r'PRETTY_NAME="([^"]+)"', open("/etc/os-release").read())
    doctor = sh([a.bin, "doctor"])
    libs = re.search(r"libraries \(rank 0\): (.*)", doctor)
    m = {"cpu_model": lscpu.get("Model name", "?"), "cpus": lscpu.get("CPU(s)", "?"),
         "threads_per_core": lscpu.get("Thread(s) per core", "?"), "cores_per_socket": lscpu.get("Core(s) per socket", "?"),
         "sockets": lscpu.get("Socket(s)", "?"), "hypervisor": lscpu.get("Hypervisor vendor", ""),
         "mem_gib": round(int(mem.group(1)) / 2**20, 1) if mem else None, "os": osname.group(1) if osname else "?",
         "libraries": libs.group(1).strip() if libs else "unknown (hpctrain doctor failed)",
         "threads_per_rank": os.environ.get("OMP_NUM_THREADS", "1")}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    json.dump(m, open(a.out, "w"), indent=1)
    print(json.dumps(m))


def found(results, name):
    """Files named `name` (a glob) in results or any folder below it, in name order."""
    return sorted(glob.glob(os.path.join(results, "**", name), recursive=True), key=os.path.basename)


def newest(results, pattern):
    """{key: path} of the newest file per key; pattern's groups are (key, stamp)."""
    best = {}
    for p in found(results, "*"):
        mt = re.fullmatch(pattern, os.path.basename(p))
        if mt and (mt.group(1) not in best or mt.group(2) > best[mt.group(1)][0]):
            best[mt.group(1)] = (mt.group(2), p)
    return {k: v[1] for k, v in sorted(best.items())}


def jsonl(path):
    return [json.loads(l) for l in open(path) if l.strip().startswith("{")]


def md_table(header, rows):
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] +
                     ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def ms(x):
    return f"{float(x) * 1e3:.2f}"


def machine_text(results):
    p = found(results, "machine.json")
    if not p:
        return "Machine: not recorded (run `perf/report.py probe`)."
    m = json.load(open(p[-1]))
    vm = f", {m['hypervisor']} VM" if m.get("hypervisor") else ""
    return (f"Machine: {m['cpus']} CPUs ({m['cpu_model']}{vm}; {m['sockets']} socket x {m['cores_per_socket']} cores x "
            f"{m['threads_per_core']} thread per core), {m['mem_gib']} GiB, {m['os']}; {m['libraries']}; "
            f"{m['threads_per_rank']} compute thread per rank (OMP_NUM_THREADS; ddp_bench also sets at::set_num_threads(1)).")


def scaling_section(model, path):
    rows = list(csv.DictReader(open(path)))
    out = [f"### Scaling: {model} ([csv]({rel(path)}), {measured(path)})", "",
           md_table(["mode", "ranks", "batch/rank", "global batch", "samples/s", "step ms", "speedup", "efficiency",
                     "comm-blocked ms", "data-wait ms", "data"],
                    [[r["mode"], r["ranks"], r["batch_per_rank"], r["global_batch"], r["samples_per_s"], ms(r["step_s"]),
                      r["speedup"], r["efficiency"], ms(r["comm_blocked_s"]), ms(r["data_wait_s"]),
                      os.path.basename(r["data"])] for r in rows])]
    model_md = path[:-4] + "-model.md"
    if os.path.exists(model_md):
        out += ["", f"Analytical model next to the measurement (`perf/scaling_model.py --from-scaling`):", "",
                open(model_md).read().strip()]
    return out


def allreduce_section(n, path):
    rows = list(csv.DictReader(open(path)))
    return [f"### Allreduce, {n} ranks ([csv]({rel(path)}), {measured(path)}; `hpctrain bench allreduce` "
            f"via perf/comm/allreduce_sweep.sh)", "",
            md_table(["bytes", "ours busbw GB/s", "bare MPI busbw GB/s", "ours / MPI"],
                     [[r["bytes"], f"{float(r['busbw_GBps']):.3f}", f"{float(r['mpi_busbw_GBps']):.3f}",
                       f"{float(r['busbw_ratio']):.3f}"] for r in rows])]


def cell(v):
    if isinstance(v, float):
        return f"{v:.0f}" if abs(v) >= 1000 else f"{v:.4g}"
    return str(v)


def generic_jsonl_section(title, path, last=None):
    """A table of the file's JSON lines (the last `last` of them), its # comment lines as notes."""
    lines = jsonl(path)
    lines = lines[-last:] if last else lines
    if not lines:
        return []
    keys = list(dict.fromkeys(k for l in lines for k in l))
    notes = [l.strip().lstrip("#").strip() for l in open(path) if l.startswith("#")] if not last else []
    which = f"last {len(lines)} line{'s' if len(lines) > 1 else ''}" if last else "all lines"
    return ([f"### {title} ([raw]({rel(path)}), {which})", ""] + [f"> {n}" for n in notes] + ([""] if notes else []) +
            [md_table(keys, [[cell(l.get(k, "")) for k in keys] for l in lines])])


def measured(path):
    """'measured YYYY-MM-DD HH:MM' from the file name's stamp (every results file carries one)."""
    mt = re.search(STAMP, os.path.basename(path))
    if not mt:
        return "date not recorded"
    d, t = mt.group(1).split("-")
    return f"measured {d[:4]}-{d[4:6]}-{d[6:]} {t[:2]}:{t[2:4]}"


def rel(path):
    return os.path.relpath(path, REL_BASE)


def render(a):
    global REL_BASE
    REL_BASE = os.path.dirname(os.path.abspath(a.readme))
    res = a.results
    text = open(a.readme).read()
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        sys.exit(f"report.py: {a.readme} needs exactly one {BEGIN} followed by one {END}")
    perf = newest(res, r"perf-()" + STAMP + r"\.md")
    scaling = newest(res, r"scaling-([a-z0-9]+)-" + STAMP + r"\.csv")
    allred = newest(res, r"allreduce-np(\d+)-" + STAMP + r"\.csv")
    out = [f"## Latest table (generated {datetime.date.today()})", "", machine_text(res), ""]
    if perf:
        p = perf[""]
        body = open(p).read().strip().splitlines()
        out += [f"From `perf/train/run_perf.py` ([raw]({rel(p)})): {body[0]}", ""] + "\n".join(body[1:]).strip().splitlines() + [""]
    for model, p in scaling.items():
        out += scaling_section(model, p) + [""]
    for n, p in allred.items():
        out += allreduce_section(n, p) + [""]
    for title, name, last in [("Data loader (`perf/train/loader_bench.sh`)", "loader.jsonl", LOADER_RUN_LINES)]:
        for p in found(res, name)[-1:]:
            out += generic_jsonl_section(title, p, last) + [""]
    for p in found(res, "ckpt-*.md")[-1:]:
        out += [f"### Checkpoints (`perf/ckpt/ckpt_bench.py`) ([raw]({rel(p)}), {measured(p)}; each row names its run)", "",
                open(p).read().strip(), ""]
    rows, links = [], []
    for fm in found(res, "fmnist-*.jsonl"):
        summ = [l["summary"] for l in jsonl(fm) if l.get("type") == "summary"]
        if not summ:
            continue
        s, cfg = summ[-1], next((l["config"] for l in jsonl(fm) if "config" in l), {})
        params = s.get("parameters")
        log = fm[:-len(".jsonl")] + ".log"
        if params is None and os.path.exists(log):  # runs from before the summary had the count
            m = re.search(r"\((\d+) parameters\)", open(log).read())
            params = int(m.group(1)) if m else None
        rows.append([s["model"], f"{params:,}" if params else "-", s["world_size"], s["epochs"], cfg.get("batch_size", "-"), cfg.get("augment", "-"),
                     s["test_accuracy"], f"{s['wall_s']:.0f}", f"{s['samples_per_s']:.1f}",
                     f"{s['data_wait_pct']:.2f}", f"{s['comm_blocked_pct']:.2f}"])
        links.append(f"[{os.path.basename(fm)}]({rel(fm)})")
    if rows:
        out += [f"### Fashion-MNIST training (metrics: {', '.join(links)})", "",
                md_table(["model", "parameters", "ranks", "epochs", "batch/rank", "augment", "test accuracy", "wall s", "samples/s",
                          "data wait %", "comm blocked %"], rows), ""]
    pngs = [p[:-4] + ".png" for p in list(scaling.values()) + list(allred.values())]
    pngs = [p for p in pngs if os.path.exists(p)]
    if pngs:
        out += ["## Plots", ""] + [f"![{os.path.basename(p)[:-4]}]({rel(p)})\n" for p in pngs]
    pre, rest = text.split(BEGIN, 1)
    post = rest.split(END, 1)[1]
    body = "\n".join(out).rstrip() + "\n"
    open(a.readme, "w").write(pre + BEGIN + "\n" + body + END + post)
    print(f"report.py: regenerated {a.readme} ({len(out)} lines from {res})")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("probe")
    p.add_argument("--bin", default=os.path.join(ROOT, "build/hpctrain"))
    p.add_argument("--out", default=os.path.join(ROOT, "perf/machine.json"))
    r = sub.add_parser("render")
    r.add_argument("--results", default=os.path.join(ROOT, "perf"))
    r.add_argument("--readme", default=os.path.join(ROOT, "perf/README.md"))
    a = ap.parse_args()
    {"probe": probe, "render": render}[a.cmd](a)


if __name__ == "__main__":
    main()
