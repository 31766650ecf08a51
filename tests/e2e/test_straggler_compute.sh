#!/usr/bin/env bash
# A real compute straggler (#20): 2 ranks with --bind-to core, a CPU hog pinned to rank 1's
# core (taskset), from outside the process. Within two log intervals the progress line and the
# metrics name rank 1 with cause compute, and the summary names it as slowest most often.
source "$(dirname "$0")/lib.sh"
command -v taskset >/dev/null || { echo "SKIPPED: taskset missing"; exit 0; }
[ "$(getconf _NPROCESSORS_ONLN)" -ge 2 ] || { echo "SKIPPED: needs 2 cores"; exit 0; }
"$BIN" data synthetic --out "$WORK/d" --n 2048 --height 28 --width 28 --classes 10 >/dev/null
# --bind-to core maps rank r to core r (checked below from --report-bindings).
taskset -c 1 sh -c 'while :; do :; done' &
HOG=$!
trap 'kill $HOG 2>/dev/null; rm -rf "$WORK"' EXIT
timeout 300 "$MPIEXEC" -np 2 "${MPIFLAGS[@]}" --bind-to core --report-bindings "$BIN" train --model cnn \
  --data "$WORK/d" --epochs 1 --max-steps 45 --batch-size 32 --log-every 15 \
  --metrics "$WORK/m.jsonl" --trace "$WORK/t.json" >"$WORK/out.txt" 2>"$WORK/err.txt" || { cat "$WORK/err.txt"; fail "train exited non-zero"; }
grep -q "rank 1 bound to .*core 1\[" "$WORK/err.txt" || { grep bound "$WORK/err.txt"; fail "rank 1 is not bound to core 1"; }
/usr/bin/python3 "$(dirname "$0")/straggler_check.py" "$WORK/m.jsonl" "$WORK/out.txt" --rank 1 --cause compute --within 2
# --trace: each rank's waits are marked, and the straggler's row carries a "straggler: ..." span.
/usr/bin/python3 - "$WORK/t.json" <<'PY' || fail "trace marks"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
cats = {(e.get("pid"), e.get("cat")) for e in ev}
for r in (0, 1):
    assert (r, "comm.wait") in cats and (r, "wait") in cats, ("rank %d has no wait spans" % r, sorted(cats))
marks = [e for e in ev if e.get("name", "").startswith("straggler: rank 1 ")]
assert marks and all(e["pid"] == 1 for e in marks), marks
print("ok: trace: comm.wait and wait spans on both ranks; %d straggler span(s) on rank 1: %s" % (len(marks), marks[0]["name"]))
PY
