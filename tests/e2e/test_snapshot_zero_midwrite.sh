#!/usr/bin/env bash
# e2e: a rank SIGKILLed while writing its ZeRO shard snapshot (README "Snapshots in host
# memory"), under --zero 1 (cnn) and --zero 3 (gpt), 2 ranks: rank 1 is stopped once its newer
# slot is being written (step-M.tmp beside its whole step-N), then every rank is SIGKILLed. Rank
# 1's step M is incomplete, so no step-M state exists; the restarted job must find the newest
# step every rank's shard exists for (its previous slot, N: rank 0 keeps its own step N until it
# begins a later snapshot, which the ranks only do together), resume from the shards of N and
# end bitwise equal to an uninterrupted run.
source "$(dirname "$0")/lib.sh"
SRC=${HPCTRAIN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
SHM=$(mktemp -d /dev/shm/hpctrain-e2e-snapw.XXXXXX)
trap 'rm -rf "$WORK" "$SHM"' EXIT
run_np 1 data text --out "$WORK/t" --test-fraction 0.1 /usr/share/common-licenses >/dev/null
"$BIN" data synthetic --out "$WORK/d" --n 2048 --height 28 --width 28 --classes 4 --seed 3 --noise 200 >/dev/null
common=(train --device cpu --epochs 100 --optimizer adamw --schedule constant --seed 4 --log-every 1 --max-steps 60
  --ckpt-every 1000 --snapshot-every 2 --snapshot-dir "$SHM")
cnn=(--model cnn --data "$WORK/d" --batch-size 32 --lr 0.02 --zero 1)
gpt=(--model gpt --model-config n_layer=2,n_head=2,n_embd=64,bias=false --data "$WORK/t" --seq-len 32 --batch-size 8
  --lr 3e-3 --weight-decay 0.1 --zero 3)

# midwrite NAME STAGE-ARGS...: the uninterrupted run, the run killed mid-write, its resume.
midwrite() {
  local name=$1; shift
  run_np 2 "${common[@]}" "$@" --ckpt-dir "$WORK/$name-ref" >"$WORK/$name-ref.txt" 2>&1 ||
    { tail "$WORK/$name-ref.txt"; fail "$name: uninterrupted run"; }
  run_np 2 "${common[@]}" "$@" --ckpt-dir "$WORK/$name" --metrics "$WORK/$name.jsonl" >"$WORK/$name.txt" 2>&1 &
  local job=$!
  wait_for_step "$WORK/$name.jsonl" 16 120 || fail "$name: no train record for step 16"
  kill_rank1_mid_write "$job" "$name"
  run_np 2 "${common[@]}" "$@" --ckpt-dir "$WORK/$name" >"$WORK/$name-2.txt" 2>&1 ||
    { tail "$WORK/$name-2.txt"; fail "$name: resume after the mid-write kill"; }
  grep -q "hpctrain train: resumed from snapshot step $WSTEP: rank 0's shard from host [^ ]*'s memory, rank 1's shard from host [^ ]*'s memory" "$WORK/$name-2.txt" ||
    { cat "$WORK/$name-2.txt"; ls -R "$SHM"; fail "$name: not resumed from rank 1's previous slot (step $WSTEP)"; }
  run_np 1 ckpt merge "$WORK/$name-ref" --out "$WORK/$name-ref.h5" >/dev/null
  run_np 1 ckpt merge "$WORK/$name" --out "$WORK/$name.h5" >/dev/null
  /usr/bin/python3 "$(dirname "$0")/compare_ckpt.py" "$WORK/$name.h5" "$WORK/$name-ref.h5" --exact ||
    fail "$name: mid-write kill: differs from the uninterrupted run"
  ok "$name: rank 1 SIGKILLed while writing $(basename "$TMP_SLOT"): resumed from the shards of its previous slot, step $WSTEP; final model == uninterrupted run, bitwise"
  [ -z "$(ls -A "$SHM")" ] || { ls -R "$SHM"; fail "$name: a clean finish left snapshots behind"; }
}

midwrite zero1 "${cnn[@]}"
midwrite zero3 "${gpt[@]}"
