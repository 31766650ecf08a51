#!/usr/bin/env bash
# e2e: `ckpt merge` streams one tensor at a time, so its memory does not grow with the model.
# A gpt of ~200 MB of fp32 parameters (n_layer 4, n_embd 1024, one SGD step, no optimizer
# state) is merged into .h5, .pt and .safetensors (and .safetensors with --dtype bf16, whose
# checksums take a first streaming pass) under /usr/bin/time; the peak RSS above a tiny
# checkpoint's merge (the process's baseline: LibTorch, MPI, HDF5) must stay below 0.25x the
# model's bytes (it is about the largest tensor, 16 MiB here, plus allocator slack). The
# TorchScript archive holds the whole model by design (LibTorch's writer takes a module): its
# figure is printed, not bounded. Prints every figure.
source "$(dirname "$0")/lib.sh"
[ -x /usr/bin/time ] || { echo "SKIPPED: no /usr/bin/time to measure the peak RSS"; exit 0; }
mkdir -p "$WORK/text"
head -c 6000 /usr/share/common-licenses/GPL-3 >"$WORK/text/a.txt"
run_np 1 data text --out "$WORK/t" --test-fraction 0.02 "$WORK/text" >/dev/null
ck() {  # NAME MODEL-CONFIG: one SGD step of a gpt, checkpointed into $WORK/NAME
  run_np 1 train --data "$WORK/t" --model gpt --model-config "$2" --seq-len 8 --batch-size 1 --max-steps 1 \
    --optimizer sgd --log-every 1000 --ckpt-dir "$WORK/$1" >"$WORK/$1.txt" 2>&1 || { tail -3 "$WORK/$1.txt"; fail "train $1"; }
}
ck tiny n_layer=1,n_head=1,n_embd=8,bias=false
ck big n_layer=4,n_head=4,n_embd=1024,bias=false
model_bytes=$("$BIN" ckpt inspect "$WORK/big" | awk '$1 ~ /^model\// {s += $NF} END {print s}')
largest=$("$BIN" ckpt inspect "$WORK/big" | awk '$1 ~ /^model\// && $NF > m {m = $NF} END {print m}')
[ "$model_bytes" -gt 150000000 ] || fail "the big model has $model_bytes bytes, fewer than planned"
peak_kb() {  # CKPT OUT ARGS...: peak RSS in KiB of one merge
  local ck=$1 out=$2; shift 2
  /usr/bin/time -f %M -o "$WORK/rss" "$BIN" ckpt merge "$WORK/$ck" --out "$WORK/$out" "$@" >/dev/null 2>"$WORK/merge.err" ||
    { cat "$WORK/merge.err"; fail "merge $ck -> $out"; }
  rm -f "$WORK/$out"
  tail -1 "$WORK/rss"
}
echo "model: $model_bytes bytes of parameters, largest tensor $largest bytes"
for case in "h5" "pt" "safetensors" "safetensors --dtype bf16" "ts.pt --format torchscript"; do
  set -- $case
  ext=$1; shift
  base=$(peak_kb tiny "m.$ext" "$@")
  big=$(peak_kb big "m.$ext" "$@")
  delta=$(((big - base) * 1024))
  line="$ext $*: peak RSS $big KiB, baseline $base KiB, +$((delta >> 20)) MiB for a $((model_bytes >> 20)) MiB model"
  if [ "$ext" = ts.pt ]; then
    ok "$line (the TorchScript archive holds the model: not bounded)"
  else
    [ $((delta * 4)) -lt "$model_bytes" ] || fail "$line: not below 0.25x the model"
    ok "$line (below 0.25x)"
  fi
done
echo "PASS test_ckpt_merge_memory"
