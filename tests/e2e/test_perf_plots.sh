#!/usr/bin/env bash
# perf/ tooling on hand-made inputs (runs no benchmark):
#   to_csv.py      scaling speedup/efficiency (weak and strong) and the allreduce CSV from JSON lines
#   scaling_model  --from-scaling: the link fitted back from exact ring-model times, and the
#                  predicted efficiency against the closed form for one bucket
#   plot.py        both PNGs written (PNG magic, non-trivial size) with no display
#   report.py      render replaces only the marked region: the input numbers appear as rows,
#                  found in the folders' results/ below --results (as perf/train/results),
#                  images are linked relative to the README, hand-written prose is kept
#   error paths    README without markers, allreduce lines of the wrong shape
source "$(dirname "$0")/lib.sh"
SRC=${HPCTRAIN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
PY=/usr/bin/python3
$PY -c "import matplotlib" 2>/dev/null || fail "python3-matplotlib missing (bash launch/setup.sh installs it)"
unset DISPLAY
# As in perf/: each benchmark folder keeps its results/, report.py searches below --results.
R=$WORK/perf T=$WORK/perf/train/results C=$WORK/perf/comm/results
mkdir -p "$T" "$C"

# --- inputs ---------------------------------------------------------------------------------
# ddp_bench lines as perf/train/scaling.sh tags them. weak: 640 -> 1024 samples/s on 2 ranks (eff 0.8);
# strong (global 128): 640 -> 1024 (speedup 1.6, eff 0.8). One 1 MiB bucket.
line() {  # mode ranks batch step_s samples_per_s finalize_wait_s data_wait_s backward_s
  echo "{\"scaling_mode\":\"$1\",\"world_size\":$2,\"batch_per_rank\":$3,\"step_s\":$4,\"samples_per_s\":$5,\"finalize_wait_s\":$6,\"data_wait_s\":$7,\"backward_s\":$8,\"model\":\"cnn\",\"mode\":\"ddp\",\"bucket_bytes\":[1048576],\"data\":\"/d/train.h5\"}"
}
{
  line weak 1 64 0.1 640.0 0.0 0.0005 0.05
  line weak 2 64 0.125 1024.0 0.0025 0.001 0.06
  line strong 1 128 0.2 640.0 0.0 0.0005 0.1
  line strong 2 64 0.125 1024.0 0.0025 0.001 0.06
} >"$T/scaling-cnn-20260101-000000.jsonl"
# Allreduce on 2 ranks timed exactly by the ring model with B = 2 GB/s, alpha = 5 us:
# t = 2(n-1)/n S/B + 2(n-1) alpha = S/B + 10 us. Bare MPI is 10% faster.
$PY - "$C/allreduce-np2-20260101-000000.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for k in range(12, 25, 2):
        s = 2 ** k
        t = s / 2e9 + 10e-6
        bw = s / t / 1e9
        f.write(json.dumps({"world_size": 2, "bytes": s, "iters": 5, "time_us": t * 1e6, "algbw_GBps": bw, "busbw_GBps": bw,
                            "mpi_time_us": t * 0.9e6, "mpi_algbw_GBps": bw / 0.9, "mpi_busbw_GBps": bw / 0.9,
                            "busbw_ratio": 0.9}) + "\n")
PY
printf 'Measured 20260101-0000 on 2 cores\n\n| figure | value | goal | detail |\n|---|---|---|---|\n| DDP tax at world size 1 (cnn, b64) | 1.234 | <= 1.02 | x |\n' \
  >"$T/perf-20260101-0000.md"
echo '{"world_size":1,"batch_size":128,"prefetch":2,"samples_per_s":4321.5,"data_wait_s":0.0125}' >"$T/loader.jsonl"
echo '{"cpu_model":"Test CPU 9000","cpus":"2","threads_per_core":"1","cores_per_socket":"2","sockets":"1","hypervisor":"","mem_gib":4.0,"os":"Debian 12","libraries":"LibTorch 9.9.9 | Open MPI v4.1.4 | HDF5 1.10.8","threads_per_rank":"1"}' >"$R/machine.json"
cat >"$R/README.md" <<'EOF'
# perf
Hand-written intro 4711.
<!-- generated:begin -->
STALE TABLE
<!-- generated:end -->
## Reading the numbers
Hand-written prose 0815 stays.
EOF

# --- CSVs and the model ---------------------------------------------------------------------
S=$T/scaling-cnn-20260101-000000.csv A=$C/allreduce-np2-20260101-000000.csv
$PY "$SRC/perf/to_csv.py" scaling "${S%.csv}.jsonl" "$S"
$PY "$SRC/perf/to_csv.py" allreduce "${A%.csv}.jsonl" "$A"
$PY "$SRC/perf/scaling_model.py" --from-scaling "$S" --allreduce "$A" >"$WORK/model.out"
$PY - "$S" "${S%.csv}-model.csv" "${S%.csv}-model.md" "$A" <<'PY' || fail "CSV or model values"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
got = [(r["mode"], r["ranks"], r["batch_per_rank"], r["global_batch"], r["speedup"], r["efficiency"]) for r in rows]
assert got == [("weak", "1", "64", "64", "1.0000", "1.0000"), ("weak", "2", "64", "128", "1.6000", "0.8000"),
               ("strong", "1", "128", "128", "1.0000", "1.0000"), ("strong", "2", "64", "128", "1.6000", "0.8000")], got
assert rows[1]["comm_blocked_s"] == "0.002500" and rows[1]["data_wait_s"] == "0.001000" and rows[1]["bucket_mb"] == "1.0000", rows[1]
# Closed form, one bucket ready when backward ends (0.05 s): exposed = S/B + 2(n-1) alpha.
want = 0.1 / (0.1 + 2**20 / 2e9 + 2 * 5e-6)
pred = {(r["mode"], r["ranks"]): float(r["predicted_efficiency"]) for r in csv.DictReader(open(sys.argv[2]))}
assert abs(pred[("weak", "2")] - want) < 1e-4, (pred, want)
assert abs(pred[("strong", "2")] - want) < 1e-4 and pred[("weak", "1")] == pred[("strong", "1")] == 1.0, pred
md = open(sys.argv[3]).read()
assert "busbw 2.00 GB/s, alpha 5.0 us" in md, md   # the link fitted back from the exact times
ar = list(csv.DictReader(open(sys.argv[4])))
assert [int(r["bytes"]) for r in ar] == [2**k for k in range(12, 25, 2)] and float(ar[0]["busbw_ratio"]) == 0.9, ar[0]
print(f"checked: weak/strong speedup 1.6 efficiency 0.8; model {pred[('weak', '2')]:.4f} == closed form {want:.4f}; link fit B=2 GB/s alpha=5 us")
PY
ok "to_csv + scaling_model values"

# --- plots ----------------------------------------------------------------------------------
$PY "$SRC/perf/plot.py" scaling "$S" >/dev/null
$PY "$SRC/perf/plot.py" allreduce "$A" >/dev/null
for p in "${S%.csv}.png" "${A%.csv}.png"; do
  [ -s "$p" ] || fail "$p not written"
  [ "$(head -c 8 "$p" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$p is not a PNG"
  [ "$(stat -c %s "$p")" -gt 10000 ] || fail "$p is only $(stat -c %s "$p") bytes"
done
ok "plot.py wrote both PNGs (PNG magic, > 10 kB) without a display"

# --- report ---------------------------------------------------------------------------------
$PY "$SRC/perf/report.py" render --results "$R" --readme "$R/README.md" >/dev/null
$PY - "$R/README.md" <<'PY' || { cat "$R/README.md"; fail "report content"; }
import sys
t = open(sys.argv[1]).read()
want = [
    "Hand-written intro 4711.", "## Reading the numbers\nHand-written prose 0815 stays.",
    "Test CPU 9000", "LibTorch 9.9.9 | Open MPI v4.1.4 | HDF5 1.10.8",
    "| DDP tax at world size 1 (cnn, b64) | 1.234 | <= 1.02 | x |",
    "| weak | 2 | 64 | 128 | 1024.000 | 125.00 | 1.6000 | 0.8000 | 2.50 | 1.00 | train.h5 |",
    "| strong | 1 | 128 | 128 | 640.000 | 200.00 | 1.0000 | 1.0000 | 0.00 | 0.50 | train.h5 |",
    "| 1048576 | 1.963 | 2.181 | 0.900 |",   # 2^20 / (2^20/2e9 + 10 us) = 1.963 GB/s; MPI / 0.9
    "| 1 | 128 | 2 | 4322 | 0.0125 |",
    "![scaling-cnn-20260101-000000](train/results/scaling-cnn-20260101-000000.png)",
    "![allreduce-np2-20260101-000000](comm/results/allreduce-np2-20260101-000000.png)",
]
missing = [w for w in want if w not in t]
assert not missing, missing
assert "STALE TABLE" not in t and t.count("<!-- generated:begin -->") == 1 and t.count("<!-- generated:end -->") == 1
assert t.index("Hand-written intro") < t.index("<!-- generated:begin -->") < t.index("<!-- generated:end -->") < t.index("## Reading the numbers")
print(f"checked: {len(want)} expected lines (rows with the input numbers, image links, prose kept), stale text gone")
PY
ok "report.py render"
# Rendering twice gives the same text (only the marked region is owned by the generator).
cp "$R/README.md" "$WORK/once.md"
$PY "$SRC/perf/report.py" render --results "$R" --readme "$R/README.md" >/dev/null
cmp -s "$R/README.md" "$WORK/once.md" || fail "second render changed the README"
ok "render is idempotent"

# --- error paths ----------------------------------------------------------------------------
printf '# no markers\n' >"$WORK/bad.md"
if $PY "$SRC/perf/report.py" render --results "$R" --readme "$WORK/bad.md" 2>"$WORK/err"; then fail "render without markers succeeded"; fi
grep -q "generated:begin" "$WORK/err" || fail "marker error does not name the markers: $(cat "$WORK/err")"
[ "$(cat "$WORK/bad.md")" = "# no markers" ] || fail "README without markers was modified"
echo '{"bytes": 4}' >"$WORK/bad.jsonl"
if $PY "$SRC/perf/to_csv.py" allreduce "$WORK/bad.jsonl" "$WORK/bad.csv" 2>"$WORK/err"; then fail "bad allreduce lines accepted"; fi
grep -q "lacks" "$WORK/err" || fail "bad allreduce error unclear: $(cat "$WORK/err")"
ok "errors: README without markers untouched (exit != 0), allreduce lines missing fields rejected"
