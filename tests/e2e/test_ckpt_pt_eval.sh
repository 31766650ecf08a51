#!/usr/bin/env bash
# e2e: eval on every checkpoint format, and per-checkpoint metrics.
# - A 2-rank training run with checkpoints; eval of its final checkpoint as step dir, ROOT/latest,
#   merged .h5, .pt (a PyTorch state dict), .safetensors and TorchScript archive
#   (`--format torchscript`), each on 1 and 2 ranks, reproduces the test accuracy the training
#   summary reported, exactly.
# - A truncated .pt and a text file named .pt give a one-line error and exit != 0.
# - The metrics file has one checkpoint record per committed checkpoint: bytes equal the
#   manifest's total, async stall is bounded by the previous write (at most one in flight),
#   a sync run's stall covers its write, and sync and async runs save bitwise-equal models.
source "$(dirname "$0")/lib.sh"
D="$WORK/d"
run_np 1 data synthetic --out "$D" --n 512 --test-n 200 --classes 4 --height 12 --width 12 --seed 7 --noise 200 >/dev/null
common=(--model cnn --data "$D" --epochs 2 --batch-size 16 --lr 0.02 --seed 3 --log-every 1000 --ckpt-every 5)
run_np 2 train "${common[@]}" --ckpt-dir "$WORK/async" --metrics "$WORK/async.jsonl" >"$WORK/async.txt" 2>&1 ||
  { tail "$WORK/async.txt"; fail "async training run"; }
acc=$(json_field "$WORK/async.txt" test_accuracy)
loss=$(json_field "$WORK/async.txt" test_loss)
steps=$(json_field "$WORK/async.txt" steps)
[ "$steps" = 32 ] || fail "expected 32 steps, got $steps"

run_np 1 ckpt merge "$WORK/async" --out "$WORK/m.pt" --format pt >/dev/null
run_np 1 ckpt merge "$WORK/async/latest" --out "$WORK/m.safetensors" >/dev/null
run_np 1 ckpt merge "$WORK/async" --out "$WORK/ts.pt" --format torchscript >/dev/null
run_np 1 ckpt merge "$WORK/async" --out "$WORK/m.h5" >/dev/null
for ck in "$WORK/m.pt" "$WORK/m.safetensors" "$WORK/ts.pt" "$WORK/m.h5" "$WORK/async/step-00000032" "$WORK/async/latest"; do
  for np in 1 2; do
    run_np "$np" eval --ckpt "$ck" --data "$D" --device cpu >"$WORK/eval.txt" 2>&1 || { cat "$WORK/eval.txt"; fail "eval $ck on $np rank(s)"; }
    got=$(json_field "$WORK/eval.txt" test_accuracy)
    [ "$got" = "$acc" ] || fail "eval of $(basename "$ck") on $np rank(s): accuracy $got != training's $acc"
    # The loss too (1e-6 relative: only the order of the sums differs): training evaluates with
    # rank 0's BN statistics on every rank, the ones the checkpoint holds.
    got_loss=$(json_field "$WORK/eval.txt" test_loss)
    /usr/bin/python3 -c "import sys; a, b = map(float, sys.argv[1:]); assert abs(a - b) <= 1e-6 * abs(b), (a, b)" "$got_loss" "$loss" ||
      fail "eval of $(basename "$ck") on $np rank(s): loss $got_loss != training's $loss"
    [ "$(json_field "$WORK/eval.txt" step)" = 32 ] || fail "eval of $(basename "$ck") reports step $(json_field "$WORK/eval.txt" step)"
  done
done
ok "eval of the .pt, .safetensors, TorchScript, .h5, step dir and ROOT/latest on 1 and 2 ranks: accuracy $acc == training's, exactly; loss $loss"

head -c 2000 "$WORK/m.pt" >"$WORK/cut.pt"
echo "not an archive" >"$WORK/text.pt"
for bad in "$WORK/cut.pt" "$WORK/text.pt"; do
  set +e
  run_np 1 eval --ckpt "$bad" --data "$D" >"$WORK/bad.out" 2>"$WORK/bad.err"
  rc=$?
  set -e
  [ $rc -ne 0 ] || fail "eval of $bad exited 0"
  # hpctrain's own output is one line (mpiexec adds its job-abort banner around it).
  [ "$(grep -c '^hpctrain' "$WORK/bad.err")" -eq 1 ] || { cat "$WORK/bad.err"; fail "eval of $bad: not one error line"; }
  line=$(grep '^hpctrain' "$WORK/bad.err")
  grep -q "^hpctrain: error: $bad is not a readable PyTorch file" <<<"$line" || fail "eval of $bad: $line"
  ok "bad .pt -> exit $rc: $line"
done

run_np 2 train "${common[@]}" --ckpt-dir "$WORK/sync" --ckpt-async false --metrics "$WORK/sync.jsonl" >"$WORK/sync.txt" 2>&1 ||
  { tail "$WORK/sync.txt"; fail "sync training run"; }
run_np 1 ckpt merge "$WORK/sync" --out "$WORK/s.h5" >/dev/null
/usr/bin/python3 "$(dirname "$0")/compare_ckpt.py" "$WORK/m.h5" "$WORK/s.h5" --exact || fail "sync and async checkpoints differ"
ok "sync (no host copy) and async checkpoints are bitwise equal"

/usr/bin/python3 - "$WORK" <<'PY' || fail "checkpoint metrics"
import json, sys, os
work = sys.argv[1]
for mode in ("async", "sync"):
    recs = [json.loads(l) for l in open(f"{work}/{mode}.jsonl")]
    ck = [r for r in recs if r.get("type") == "checkpoint"]
    steps = [r["step"] for r in ck]
    assert steps == [5, 10, 15, 20, 25, 30, 32], (mode, steps)
    assert [r["final"] for r in ck] == [False] * 6 + [True], (mode, ck)
    for r in ck:
        man = json.load(open(f"{work}/{mode}/step-{r['step']:08d}/manifest.json"))
        total = sum(t["nbytes"] for t in man["tensors"])
        assert r["bytes"] == total, (mode, r, total)
        assert r["async"] == (mode == "async"), (mode, r)
        assert r["write_ms"] > 0, (mode, r)
        if mode == "sync":
            assert r["stall_ms"] >= r["write_ms"], ("sync stall must cover the write", r)
        # async: no time bound here (a loaded 2-core VM makes any bound flake); the stall
        # figures are measured by perf/ckpt/ckpt_bench.py. What holds by construction is checked:
        # the sync stall covers the write (same clock), and async records say async.
    if mode == "async":
        # A save that ran synchronously would stall for its whole write every time (as sync
        # does); the async one stalls at most for the rest of the previous write, so at least
        # one of the six mid-run checkpoints stalls less than its own write took.
        mid = [r for r in ck if not r["final"]]
        assert any(r["stall_ms"] < r["write_ms"] for r in mid), ("every async checkpoint stalled for its whole write", mid)
    print(f"{mode}: {len(ck)} checkpoint records, {ck[0]['bytes']} bytes each, stall ms",
          [round(r["stall_ms"], 1) for r in ck], "write ms", [round(r["write_ms"], 1) for r in ck])
PY
ok "one checkpoint metrics record per checkpoint; bytes == manifest total; sync stall covers the write; some async stall is shorter than its write"
echo "PASS test_ckpt_pt_eval"
