#!/usr/bin/env bash
# e2e: `ckpt merge` streams one tensor at a time, so its memory does not grow with the model.
# A gpt of ~200 MB of fp32 parameters (n_layer 4, n_embd 1024, one SGD step, no optimizer
# state) is merged into .h5, .pt and .safetensors (and .safetensors with --dtype bf16, whose
# checksums take a first streaming pass), and a 2-rank ZeRO-1 AdamW checkpoint of a smaller gpt
# (n_embd 768, 342 MB with its sharded optimizer state) with --full (the state unsharded per
# parameter), under /usr/bin/time; the peak RSS above a tiny checkpoint's merge (the process's
# baseline: LibTorch, MPI, HDF5) must stay below 0.1x the bytes merged. The baseline's peak is
# a transient of ~100 MiB at exit (the merge itself runs ~100 MiB lower), so a merge that held
# the whole 193 MiB model would still exceed it by ~80 MiB, but a tensor of up to ~100 MiB
# would go unseen: the figures bound the growth with the model, not the largest tensor. The
# TorchScript archive holds the whole model by design (LibTorch's writer takes a module): its
# figure is printed, not bounded. Prints every figure.
source "$(dirname "$0")/lib.sh"
[ -x /usr/bin/time ] || { echo "SKIPPED: no /usr/bin/time to measure the peak RSS"; exit 0; }
mkdir -p "$WORK/text"
head -c 6000 /usr/share/common-licenses/GPL-3 >"$WORK/text/a.txt"
run_np 1 data text --out "$WORK/t" --test-fraction 0.02 "$WORK/text" >/dev/null
ck() {  # NAME NP MODEL-CONFIG ARGS...: one step of a gpt on NP ranks, checkpointed into $WORK/NAME
  local name=$1 np=$2 cfg=$3; shift 3
  run_np "$np" train --data "$WORK/t" --model gpt --model-config "$cfg" --seq-len 8 --batch-size 1 --max-steps 1 \
    --log-every 1000 --ckpt-dir "$WORK/$name" "$@" >"$WORK/$name.txt" 2>&1 || { tail -3 "$WORK/$name.txt"; fail "train $name"; }
}
ck tiny 1 n_layer=1,n_head=1,n_embd=8,bias=false --optimizer sgd
ck big 1 n_layer=4,n_head=4,n_embd=1024,bias=false --optimizer sgd
ck zero 2 n_layer=4,n_head=4,n_embd=768,bias=false --optimizer adamw --zero 1
ck tinyzero 2 n_layer=1,n_head=1,n_embd=8,bias=false --optimizer adamw --zero 1
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
for case in "h5" "pt" "safetensors" "safetensors --dtype bf16" "h5 --full" "ts.pt --format torchscript"; do
  set -- $case
  ext=$1; shift
  small=tiny large=big bytes=$model_bytes
  if [ "${1:-}" = --full ]; then
    small=tinyzero large=zero
    bytes=$("$BIN" ckpt inspect "$WORK/zero" | awk '/^[0-9]+ tensors, / {print $(NF-1)}')
  fi
  base=$(peak_kb "$small" "m.$ext" "$@")
  big=$(peak_kb "$large" "m.$ext" "$@")
  delta=$(((big - base) * 1024))
  line="$large -> $ext $*: peak RSS $big KiB, baseline $base KiB, +$((delta >> 20)) MiB for $((bytes >> 20)) MiB"
  if [ "$ext" = ts.pt ]; then
    ok "$line (the TorchScript archive holds the model: not bounded)"
  else
    [ $((delta * 10)) -lt "$bytes" ] || fail "$line: not below 0.1x"
    ok "$line (below 0.1x)"
  fi
done
echo "PASS test_ckpt_merge_memory"
