#!/usr/bin/env bash
# No false alarm (#20): a balanced 2-rank run of 500 steps names no straggler (no metrics
# "straggler" object, no "slowest:" in the progress lines, summary "straggler": null).
source "$(dirname "$0")/lib.sh"
"$BIN" data synthetic --out "$WORK/d" --n 2048 --height 28 --width 28 --classes 10 >/dev/null
run_np 2 train --model mlp --data "$WORK/d" --epochs 100 --max-steps 500 --batch-size 32 --log-every 50 \
  --metrics "$WORK/m.jsonl" >"$WORK/out.txt" 2>"$WORK/err.txt" || { cat "$WORK/err.txt"; fail "train exited non-zero"; }
/usr/bin/python3 "$(dirname "$0")/straggler_check.py" "$WORK/m.jsonl" "$WORK/out.txt" --none
# --straggler-threshold 0 turns detection off (the cost benchmark's "off" arm) and is accepted.
run_np 2 train --model mlp --data "$WORK/d" --max-steps 20 --batch-size 32 --log-every 10 --straggler-threshold 0 \
  --metrics "$WORK/off.jsonl" >"$WORK/off.txt" 2>"$WORK/err.txt" || { cat "$WORK/err.txt"; fail "threshold 0 run failed"; }
grep -q '"straggler_threshold":0.0' "$WORK/off.jsonl" || fail "threshold 0 not in the config record"
ok "--straggler-threshold 0 accepted"
