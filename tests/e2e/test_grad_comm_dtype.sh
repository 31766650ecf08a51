#!/usr/bin/env bash
# e2e, --grad-comm-dtype bf16|fp16 on one host, 2 ranks (across hosts: tests/cluster/
# test_cluster_hier.sh c): the same 20 SGD steps of mlp with gradients reduced in fp32, bf16 and
# fp16, and fp32 and bf16 under ZeRO-1. Each 16-bit run must
#   1. say in its log that the buckets travel in that dtype, cast from float32, and report that
#      dtype and exactly half the fp32 run's bytes_reduced in its summary (grad_comm_check.py);
#   2. end with parameters that differ from the fp32 run's (a cast that never happens, or fp32
#      sent under a bf16 label, leaves them equal) by no more than that dtype's rounding: the
#      per-tensor max relative difference (compare_ckpt.py) within a band around what was
#      measured here, bf16 1.46e-3 (DDP and ZeRO-1 alike), fp16 5.4e-4 (only 2.7x below bf16's,
#      not the 8x of its 3 more mantissa bits: no loss scaling keeps the smallest gradients in
#      fp16's normal range); lower bound ~1/3.6x, upper ~2.4x. Which dtype was applied is
#      checked by 1 (the bands are too close to tell bf16 from fp16 apart).
# fp16 runs without --amp fp16 (LibTorch's CPU autocast has no fp16); its gradients stay finite
# (far below fp16's largest value), so a check for non-finite gradients after the reduction
# does not stop it.
source "$(dirname "$0")/lib.sh"
HERE=$(dirname "$0")
D="$WORK/d"
run_np 1 data synthetic --out "$D" --n 512 --test-n 64 --classes 4 --height 12 --width 12 --seed 5 --noise 200 >/dev/null
common=(--model mlp --device cpu --data "$D" --epochs 1 --max-steps 20 --lr 0.02 --seed 7 --log-every 1000
  --batch-size 8 --bucket-mb 0.05)
train() {  # train NAME ARGS...: 2 ranks into $WORK/NAME, log $WORK/NAME.txt, merged to $WORK/NAME.h5
  local name=$1; shift
  run_np 2 train "${common[@]}" --ckpt-dir "$WORK/$name" "$@" >"$WORK/$name.txt" 2>&1 ||
    { tail -5 "$WORK/$name.txt"; fail "$name"; }
  [ "$(json_field "$WORK/$name.txt" steps)" = 20 ] || fail "$name: summary $(tail -1 "$WORK/$name.txt")"
  run_np 1 ckpt merge "$WORK/$name" --out "$WORK/$name.h5" >/dev/null
}
# check NAME REF DTYPE LOW HIGH: NAME's log and bytes against REF's, its parameters (LOW, HIGH]
check() {
  /usr/bin/python3 "$HERE/grad_comm_check.py" "$WORK/$1.txt" "$WORK/$2.txt" "$3" >"$WORK/cmp.txt" ||
    { cat "$WORK/cmp.txt"; fail "$1: not reduced as $3"; }
  local bytes; bytes=$(cut -c5- "$WORK/cmp.txt")
  /usr/bin/python3 "$HERE/compare_ckpt.py" "$WORK/$1.h5" "$WORK/$2.h5" --rtol "$5" --min-diff "$4" >"$WORK/cmp.txt" ||
    { cat "$WORK/cmp.txt"; fail "$1: parameters against $2's"; }
  ok "$1: $bytes; against $2: $(cut -c5- "$WORK/cmp.txt")"
}

train f32
grep -q "^hpctrain train: allreduce: flat: 1 host x 2 ranks; shared memory" "$WORK/f32.txt" ||
  { grep allreduce "$WORK/f32.txt"; fail "f32: not the shared-memory allreduce"; }
train b16 --grad-comm-dtype bf16
grep -q "^hpctrain train: half types: " "$WORK/b16.txt" || fail "b16: the half types' path is not logged"
check b16 f32 bfloat16 4e-4 3.5e-3
train h16 --grad-comm-dtype fp16
check h16 f32 float16 1.5e-4 1.3e-3
train z32 --zero 1
train zb16 --zero 1 --grad-comm-dtype bf16
grep -q "^hpctrain train: reduce_scatter: " "$WORK/zb16.txt" || fail "zb16: no reduce_scatter path logged"
check zb16 z32 bfloat16 4e-4 3.5e-3
