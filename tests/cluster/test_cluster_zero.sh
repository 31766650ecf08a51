#!/usr/bin/env bash
# cluster (label `cluster`): fully sharded training across 2 namespace hosts x 2 ranks
# (docs/zero.md). The unit all-gathers and gradient reduce-scatters of --zero 3, and --zero 2's
# bucket reduce-scatters, take the hierarchical path across hosts (the log says so), and:
#   a. gpt (its blocks are the units), --zero 3 on 2 hosts x 2 ranks == 1 host x 4 ranks
#      --zero 3 == 1 host x 4 ranks --zero 0 (fp32, per-tensor relative norm 1e-5), AdamW +
#      clipping + weight decay;
#   b. cnn with --sync-bn (units: features, classifier), the same, with --zero 2 too (leaving out
#      the conv biases right before BatchNorm, whose gradient is rounding noise that AdamW turns
#      into lr-sized steps: compare_state.py --skip-no-signal names them);
#   c. a --zero 3 checkpoint of the 2 x 2 run resumes on 1 host x 2 ranks under --zero 0 and
#      ends as the uninterrupted 1 host x 4 run resumed the same way.
source "$(dirname "$0")/lib.sh"
cluster_start 2
HERE=$CLUSTER_TESTS_DIR/../e2e
T="$WORK/t" I="$WORK/i"
run_np 1 data text --out "$T" --test-fraction 0.1 /usr/share/common-licenses >/dev/null
run_np 1 data synthetic --out "$I" --n 512 --test-n 64 --classes 4 --height 8 --width 8 --seed 5 --noise 60 >/dev/null
hostfile "$WORK/hf22" node0:2 node1:2
export MN_FLAGS=--oversubscribe
common=(--device cpu --optimizer adamw --lr 3e-3 --weight-decay 0.1 --schedule constant --clip-grad-norm 0.5
  --seed 3 --log-every 1000 --epochs 1 --max-steps 8)
gpt_model=(--model gpt --model-config n_layer=2,n_head=2,n_embd=32,bias=false --data "$T" --seq-len 16)
gpt=("${gpt_model[@]}" --batch-size 4)
cnn=(--model cnn --sync-bn --data "$I" --batch-size 8)

# run NAME mn|np N ARGS...: trains into $WORK/NAME (8 steps), merged to $WORK/NAME.h5
run() {
  local name=$1 how=$2 where=$3; shift 3
  if [ "$how" = mn ]; then
    mn "$where" train "${common[@]}" --ckpt-dir "$WORK/$name" "$@" >"$WORK/$name.txt" 2>&1
  else
    run_np "$where" train "${common[@]}" --ckpt-dir "$WORK/$name" "$@" >"$WORK/$name.txt" 2>&1
  fi || { tail "$WORK/$name.txt"; fail "$name"; }
  [ "$(json_field "$WORK/$name.txt" steps)" = 8 ] || fail "$name: summary $(tail -1 "$WORK/$name.txt")"
  run_np 1 ckpt merge "$WORK/$name" --out "$WORK/$name.h5" --full >/dev/null || fail "merge $name"
}
same() {  # A B WHAT [compare_state.py flags]
  local a=$1 b=$2 what=$3; shift 3
  /usr/bin/python3 "$HERE/compare_state.py" "$WORK/$a.h5" "$WORK/$b.h5" --rtol 1e-5 "$@" >"$WORK/cmp.txt" ||
    { cat "$WORK/cmp.txt"; fail "$what"; }
  ok "$what ($(tail -1 "$WORK/cmp.txt" | cut -c5-))"
}
hierarchical() {  # NAME: the run's reduce-scatter and all-gather crossed the hosts hierarchically
  grep -q "hpctrain train: 4 rank(s) on 2 node(s)" "$WORK/$1.txt" || fail "$1: not 4 ranks on 2 nodes"
  grep -q "reduce_scatter: hierarchical" "$WORK/$1.txt" || { grep -i "scatter" "$WORK/$1.txt"; fail "$1: reduce_scatter not hierarchical"; }
}

# --- a. gpt ------------------------------------------------------------------------------------
run g22z3 mn "$WORK/hf22" "${gpt[@]}" --zero 3
grep -q "ZeRO-3: 2 unit(s) + the root" "$WORK/g22z3.txt" || fail "g22z3: no ZeRO-3 start-up line"
hierarchical g22z3
run g4z3 np 4 "${gpt[@]}" --zero 3
run g4z0 np 4 "${gpt[@]}" --zero 0
same g22z3 g4z3 "a. gpt --zero 3: 2 hosts x 2 ranks == 1 host x 4 ranks"
same g22z3 g4z0 "a. gpt --zero 3 on 2 hosts x 2 ranks == --zero 0 on 1 host x 4 ranks"

# --- b. cnn with SyncBatchNorm, stages 3 and 2 ------------------------------------------------------
run c22z3 mn "$WORK/hf22" "${cnn[@]}" --zero 3
hierarchical c22z3
run c22z2 mn "$WORK/hf22" "${cnn[@]}" --zero 2
hierarchical c22z2
run c4z3 np 4 "${cnn[@]}" --zero 3
run c4z0 np 4 "${cnn[@]}" --zero 0
same c22z3 c4z3 "b. cnn --sync-bn --zero 3: 2 hosts x 2 ranks == 1 host x 4 ranks" --skip-no-signal
same c22z3 c4z0 "b. cnn --sync-bn --zero 3 on 2 hosts x 2 ranks == --zero 0 on 1 host x 4 ranks" --skip-no-signal
same c22z2 c4z0 "b. cnn --sync-bn --zero 2 on 2 hosts x 2 ranks == --zero 0 on 1 host x 4 ranks" --skip-no-signal

# --- c. the 2 x 2 --zero 3 checkpoint resumes on 1 host x 2 ranks under --zero 0 -----------------
for src in g22z3 g4z3; do
  cp -r "$WORK/$src" "$WORK/$src-r"
  common[${#common[@]}-1]=12
  run_np 2 train "${common[@]}" "${gpt_model[@]}" --batch-size 8 --zero 0 --resume auto --ckpt-dir "$WORK/$src-r" >"$WORK/$src-r.txt" 2>&1 ||
    { tail "$WORK/$src-r.txt"; fail "$src-r: resume on 2 ranks"; }
  common[${#common[@]}-1]=8
  grep -q "resum" "$WORK/$src-r.txt" || fail "$src-r: did not resume"
  [ "$(json_field "$WORK/$src-r.txt" steps)" = 12 ] || fail "$src-r: summary $(tail -1 "$WORK/$src-r.txt")"
  run_np 1 ckpt merge "$WORK/$src-r" --out "$WORK/$src-r.h5" --full >/dev/null || fail "merge $src-r"
done
same g22z3-r g4z3-r "c. --zero 3 on 2 hosts x 2 ranks resumed as --zero 0 on 1 host x 2 ranks == the 1-host run resumed so"
