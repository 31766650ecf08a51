#!/usr/bin/env bash
# What --grad-comm-dtype costs in accuracy: the same Fashion-MNIST training with each gradient
# communication dtype (same seed, data order and schedule), interleaved, on 2 ranks of this host
# (launch/local.sh). Writes perf/comm/results/gradcomm-<model>-<dtype>-<date>.jsonl and prints a table
# of the final test accuracy and loss per dtype.
#   perf/comm/grad_comm_accuracy.sh [--model cnn] [--epochs 5] [--dtypes "fp32 bf16"] [--ranks 2] [-- TRAIN ARGS...]
# The training flags are README's reference run of the model: cnn (batch 64 per rank, SGD lr 0.05
# momentum 0.9, weight decay 5e-4, cosine) or resnet (lr 0.1 Nesterov, weight decay 5e-4, 200
# warm-up steps, cosine, augmentation); the schedule spans --epochs. HPCTRAIN_DATA: a dir with train.h5/test.h5 (default: Fashion-MNIST,
# converted once into ~/.cache/hpctrain/fashion-mnist).
set -euo pipefail
cd "$(dirname "$0")/../.."
model=cnn epochs=5 dtypes="fp32 bf16" ranks=2 extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --dtypes) dtypes=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "grad_comm_accuracy.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
BIN=${HPCTRAIN_BIN:-build/hpctrain}
[ -x "$BIN" ] || { echo "grad_comm_accuracy.sh: $BIN not built (bash launch/setup.sh)" >&2; exit 2; }
DATA=${HPCTRAIN_DATA:-$HOME/.cache/hpctrain/fashion-mnist}
[ -f "$DATA/train.h5" ] || "$BIN" data fashion-mnist --out "$DATA" >/dev/null
case "$model" in
  resnet) flags=(--lr 0.1 --nesterov true --weight-decay 5e-4 --warmup-steps 200 --schedule cosine --augment true) ;;
  *) flags=(--lr 0.05 --momentum 0.9 --weight-decay 5e-4 --schedule cosine) ;;
esac
stamp=$(date +%Y%m%d-%H%M)
out=()
for dt in $dtypes; do
  m=perf/comm/results/gradcomm-$model-$dt-$stamp.jsonl
  echo "=== $model, --grad-comm-dtype $dt, $ranks ranks, $epochs epochs ($(date +%H:%M:%S))"
  HPCTRAIN_BIN=$BIN launch/local.sh -n "$ranks" -- train --model "$model" --data "$DATA" --epochs "$epochs" \
    --batch-size 64 "${flags[@]}" --seed 0 --log-every 200 \
    --grad-comm-dtype "$dt" --metrics "$m" "${extra[@]}" | grep -v '^{' | tail -2
  out+=("$m")
done
/usr/bin/python3 - "${out[@]}" <<'PY'
import json, sys
print("| grad comm dtype | test accuracy | test loss | samples/s | wall s |")
print("|---|---|---|---|---|")
for p in sys.argv[1:]:
    rows = [json.loads(l) for l in open(p)]
    cfg = next(r["config"] for r in rows if r.get("type") == "config")
    ev = [r for r in rows if r.get("type") == "eval"][-1]
    s = [r["summary"] for r in rows if "summary" in r][-1]
    print(f"| {cfg['grad_comm_dtype']} | {ev['test_accuracy']:.4f} | {ev['test_loss']:.4f} | "
          f"{s['samples_per_s']:.0f} | {s['wall_s']:.0f} |")
PY
