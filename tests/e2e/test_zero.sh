#!/usr/bin/env bash
# e2e, ZeRO-1 through the real CLI (--zero 1): equivalence with DDP (--zero 0) for mlp, cnn and
# resnet with SGD and AdamW at 1/2 ranks (cnn both and resnet AdamW at 4), plus clipping, grad accumulation, --amp bf16 and
# --sync-bn; resharding resumes (4 -> 2, 2 -> 3, 3 -> 1, ZeRO <-> DDP, same world bitwise) against
# uninterrupted runs; merge --full unshards the optimizer state; writers=all; the summary's
# optimizer-state bytes; bad input. Final states compared from merged checkpoints (h5py).
source "$(dirname "$0")/lib.sh"
HERE=$(dirname "$0")
D="$WORK/d"
run_np 1 data synthetic --out "$D" --n 768 --test-n 64 --classes 4 --height 12 --width 12 --seed 5 --noise 200 >/dev/null
common=(--data "$D" --epochs 1 --seed 7 --log-every 1000 --weight-decay 1e-3)
merged() { run_np 1 ckpt merge "$1" --out "$2" --full >/dev/null; }
cmp_state() { /usr/bin/python3 "$HERE/compare_state.py" "$@"; }
train() {  # train NAME NP ARGS...: a run into $WORK/NAME, merged to $WORK/NAME.h5
  local name=$1 np=$2; shift 2
  run_np "$np" train "${common[@]}" --ckpt-dir "$WORK/$name" --metrics "$WORK/$name.jsonl" "$@" \
    >"$WORK/$name.txt" 2>&1 || { tail -5 "$WORK/$name.txt"; fail "$name"; }
  merged "$WORK/$name" "$WORK/$name.h5"
}
zero_and_ddp() {  # zero_and_ddp NAME NP ARGS...: NAME-z0 trained with --zero 0, NAME-z1 with --zero 1
  local name=$1 np=$2; shift 2
  train "$name-z0" "$np" "$@" --zero 0
  train "$name-z1" "$np" "$@" --zero 1
}

# 1. Equivalence: --zero 1 == --zero 0, 30 steps, per-tensor relative norm <= 1e-6. Every model
#    and optimizer on 2 ranks; on 4 ranks (oversubscribed, the slowest runs) cnn with both
#    optimizers and resnet with AdamW (mlp's 4-rank ZeRO == DDP is section 2's DDP -> ZeRO resume).
for np in 2 4; do
  for model in mlp cnn resnet; do
    for opt in sgd adamw; do
      if [ "$np" = 4 ] && { [ "$model" = mlp ] || [ "$model-$opt" = resnet-sgd ]; }; then continue; fi
      a=(--model "$model" --optimizer "$opt" --batch-size $((16 / np)) --max-steps 30)
      if [ "$opt" = adamw ]; then a+=(--lr 0.002); else a+=(--lr 0.02); fi
      zero_and_ddp "$model-$opt-np$np" "$np" "${a[@]}"
      noise=()
      if [ "$np" = 4 ]; then  # DDP again, summed in another order (MPI's ring, not shared memory)
        HPCTRAIN_SHM_ALLREDUCE=0 OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=4 \
          train "$model-$opt-np$np-ring" "$np" "${a[@]}" --zero 0
        noise=(--noise-ref "$WORK/$model-$opt-np$np-ring.h5")
      fi
      cmp_state "$WORK/$model-$opt-np$np-z1.h5" "$WORK/$model-$opt-np$np-z0.h5" --rtol 1e-6 "${noise[@]}" >"$WORK/cmp.txt" ||
        { cat "$WORK/cmp.txt"; fail "$model $opt np$np: zero 1 != zero 0"; }
      ok "$model $opt $np ranks: --zero 1 == --zero 0 ($(grep '^ok' "$WORK/cmp.txt" | cut -c5-))"
    done
  done
done
zero_and_ddp mlp-np1 1 --model mlp --optimizer adamw --lr 0.002 --batch-size 16 --max-steps 30
cmp_state "$WORK/mlp-np1-z1.h5" "$WORK/mlp-np1-z0.h5" --group model --group optim --rtol 1e-6 || fail "1 rank"
ok "mlp adamw 1 rank: --zero 1 == --zero 0, model and optimizer state"
# The whole optimizer state from merge --full equals DDP's, per parameter.
cmp_state "$WORK/cnn-adamw-np4-z1.h5" "$WORK/cnn-adamw-np4-z0.h5" --group optim --rtol 1e-6 --noise-ref "$WORK/cnn-adamw-np4-ring.h5" || fail "optim state"
ok "merge --full of a 4-rank ZeRO checkpoint: optimizer state per parameter == DDP's"
for extra in "--clip-grad-norm 0.05" "--grad-accum 2" "--amp bf16" "--sync-bn"; do
  tag=$(echo "$extra" | tr -d ' -' | cut -c1-12)
  # shellcheck disable=SC2086
  zero_and_ddp "x-$tag" 2 --model cnn --optimizer adamw --lr 0.002 --batch-size 8 --max-steps 30 $extra
  cmp_state "$WORK/x-$tag-z1.h5" "$WORK/x-$tag-z0.h5" --rtol 1e-6 --skip-no-signal || fail "$extra"
  ok "cnn adamw 2 ranks $extra: --zero 1 == --zero 0"
done

# 2. Resharding. Uninterrupted runs with checkpoints every 10 steps; resumes from step 10 or 20
#    on another world size with the same global batch continue the same trajectory. The model
#    has no BatchNorm: per-rank batch statistics would make 4 x 4 a different computation than
#    2 x 8 (cnn with --sync-bn is the equivalence test's business).
r=(--model mlp --optimizer adamw --lr 0.002 --max-steps 30 --ckpt-every 10)
train u4 4 "${r[@]}" --batch-size 4 --zero 1         # global 16, saved by 4 ranks
train u2 2 "${r[@]}" --batch-size 6 --zero 1         # global 12, saved by 2 ranks
train ud 2 "${r[@]}" --batch-size 8 --zero 0         # global 16, DDP
resume() {  # resume NAME NP FROM ARGS...
  local name=$1 np=$2 from=$3; shift 3
  train "$name" "$np" "${r[@]}" --resume "$from" "$@"
  grep -q "resumed from $from" "$WORK/$name.txt" || fail "$name did not resume"
}
continues() {  # continues WHAT NAME NP FROM REF ARGS...: resume NAME; it ends within 1e-5 of uninterrupted REF
  local what=$1 name=$2 np=$3 from=$4 ref=$5; shift 5
  resume "$name" "$np" "$from" "$@"
  cmp_state "$WORK/$name.h5" "$WORK/$ref.h5" --group model --group optim --rtol 1e-5 --skip-no-signal || fail "$what"
  ok "$what continues as the uninterrupted run"
}
resume same4 4 "$WORK/u4/step-00000010" --batch-size 4 --zero 1
cmp_state "$WORK/same4.h5" "$WORK/u4.h5" --group model --group optim --exact || fail "same world not bitwise"
ok "ZeRO 4 ranks -> 4 ranks: bitwise equal to the uninterrupted run"
continues "ZeRO 4 -> 2 ranks" r42 2 "$WORK/u4/step-00000010" u4 --batch-size 8 --zero 1
continues "ZeRO 2 -> 3 ranks" r23 3 "$WORK/u2/step-00000010" u2 --batch-size 4 --zero 1
continues "ZeRO 3 -> 1 rank" r31 1 "$WORK/r23/step-00000020" u2 --batch-size 12 --zero 1
continues "ZeRO (4 ranks) -> DDP (2 ranks)" zd 2 "$WORK/u4/step-00000010" u4 --batch-size 8 --zero 0
continues "DDP (2 ranks) -> ZeRO (4 ranks)" dz 4 "$WORK/ud/step-00000010" ud --batch-size 4 --zero 1

# 3. Every rank writes (ckpt_writers=all): the same checkpoint content, and it verifies.
train w4 4 "${r[@]}" --batch-size 4 --zero 1 --ckpt-writers all
run_np 1 ckpt verify "$WORK/w4" >/dev/null || fail "writers=all checkpoint does not verify"
cmp_state "$WORK/w4.h5" "$WORK/u4.h5" --group model --group optim --exact || fail "writers=all differs"
ok "--ckpt-writers all with --zero 1: verifies, bitwise equal to rank-0 writing"

# 4. Optimizer state per rank: AdamW at 4 ranks is a quarter of DDP's (+ padding).
/usr/bin/python3 - "$WORK/cnn-adamw-np4-z1.jsonl" "$WORK/cnn-adamw-np4-z0.jsonl" <<'PY' || fail "optimizer state bytes"
import json, sys
def summary(p):
    return [json.loads(l) for l in open(p) if '"summary"' in l][-1]["summary"]
z, d = summary(sys.argv[1]), summary(sys.argv[2])
ratio = z["optim_state_bytes_per_rank"] / d["optim_state_bytes_per_rank"]
assert z["zero"] == 1 and d["zero"] == 0, (z["zero"], d["zero"])
assert 0.25 <= ratio <= 0.25 * 1.05, ratio
print(f"ok: AdamW state per rank, 4 ranks: ZeRO {z['optim_state_bytes_per_rank']} B / DDP {d['optim_state_bytes_per_rank']} B = {ratio:.4f}")
PY
grep -q "state .* MiB per rank (ZeRO-1: 1/4" "$WORK/cnn-adamw-np4-z1.txt" || fail "config line lacks the optimizer state"

# 5. Bad input: one line, exit 2.
# --zero 2: test_zero2.sh; --zero 3: test_zero3.sh
bad="$WORK/bad"
cp -r "$WORK/u2" "$bad"
/usr/bin/python3 - "$bad/step-00000010/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["meta"]["zero"]["world_size"] = 3   # the shards were written by 2 ranks
json.dump(m, open(sys.argv[1], "w"))
PY
expect_error partition "partition" train "${common[@]}" --model mlp --optimizer adamw --batch-size 6 --zero 1 --resume "$bad/step-00000010"
