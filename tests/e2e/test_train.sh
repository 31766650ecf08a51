#!/usr/bin/env bash
# e2e: `hpctrain train` through the real CLI under mpirun with 2 ranks on synthetic data.
# Checks: exit 0, loss goes down, the summary (last stdout line) and metrics file parse, the
# bf16 CPU autocast path trains, and the summary counts every test sample once.
source "$(dirname "$0")/lib.sh"

run_np 1 data synthetic --out "$WORK/d" --n 1024 --test-n 250 --classes 4 --height 12 --width 12 --seed 3 >/dev/null

run_np 2 train --model mlp --data "$WORK/d" --epochs 3 --batch-size 32 --lr 0.05 --log-every 4 \
  --metrics "$WORK/m.jsonl" --trace "$WORK/t.json" >"$WORK/out.txt" 2>"$WORK/err.txt" || { cat "$WORK/err.txt"; fail "train exited non-zero"; }
/usr/bin/python3 - "$WORK" <<'PY' || exit 1
import json, sys
w = sys.argv[1]
lines = open(w + "/out.txt").read().strip().splitlines()
s = json.loads(lines[-1])
for k in ["world_size", "device", "steps", "epochs", "samples_per_s", "train_loss", "test_accuracy", "wall_s"]:
    assert k in s, f"summary lacks {k}: {s}"
assert s["world_size"] == 2 and s["device"] == "cpu", s
assert s["steps"] == 3 * (1024 // 64), s
assert s["parameters"] == 144 * 512 + 512 + 512 * 256 + 256 + 256 * 4 + 4, s  # mlp on 1x12x12, 4 classes
peaks = s["peak_mem_mb_per_rank"]  # every rank's peak, reported by rank 0
assert len(peaks) == 2 and all(p > 10 for p in peaks) and s["peak_mem_mb"] == max(peaks), s
recs = [json.loads(l) for l in open(w + "/m.jsonl")]
assert recs[0]["type"] == "config" and recs[0]["config"]["batch_size"] == 32, recs[0]
train = [r for r in recs if r["type"] == "train"]
evals = [r for r in recs if r["type"] == "eval"]
assert len(evals) == 3 and all(e["samples"] == 250 for e in evals), evals
assert train[-1]["loss"] < 0.5 * train[0]["loss"], (train[0]["loss"], train[-1]["loss"])
assert s["test_accuracy"] > 0.9, s
trace = json.load(open(w + "/t.json"))
names = {e["name"] for e in trace["traceEvents"]}
pids = {e["pid"] for e in trace["traceEvents"]}
assert {"forward", "backward", "optimizer", "eval", "ddp.bucket[0]"} <= names and pids == {0, 1}, (names, pids)
print(f"ok: loss {train[0]['loss']:.3f} -> {train[-1]['loss']:.3f}, accuracy {s['test_accuracy']:.3f}, 250 test samples counted once, trace has both ranks")
PY

# bf16 autocast on CPU runs and trains.
run_np 2 train --model cnn --data "$WORK/d" --epochs 2 --batch-size 16 --lr 0.05 --amp bf16 >"$WORK/bf16.txt" 2>&1 || { cat "$WORK/bf16.txt"; fail "bf16 train failed"; }
acc=$(json_field "$WORK/bf16.txt" test_accuracy)
/usr/bin/python3 -c "import sys; assert float(sys.argv[1]) > 0.6, sys.argv[1]" "$acc" || fail "bf16 accuracy $acc"
ok "bf16 CPU autocast trains (accuracy $acc)"

# fp16 on CPU is refused with a reason.
if run_np 2 train --model mlp --data "$WORK/d" --amp fp16 >"$WORK/fp16.txt" 2>&1; then fail "fp16 on CPU was accepted"; fi
grep -q "fp16 needs a CUDA device" "$WORK/fp16.txt" || { cat "$WORK/fp16.txt"; fail "fp16 error message"; }
ok "fp16 on CPU refused with its reason"
