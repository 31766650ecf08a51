#!/usr/bin/env bash
# e2e, the central invariant through the real CLI: 2 ranks x batch B end with the same
# parameters as 1 rank x batch 2B on the same samples (mlp; cnn with --sync-bn, running stats
# included). Final parameters are compared from merged checkpoints with h5py.
source "$(dirname "$0")/lib.sh"
D="$WORK/d"
run_np 1 data synthetic --out "$D" --n 1024 --test-n 128 --classes 4 --height 12 --width 12 --seed 5 --noise 200 >/dev/null
common=(--data "$D" --epochs 2 --max-steps 20 --lr 0.02 --seed 7 --log-every 1000)
final() { run_np 1 ckpt merge "$1" --out "$2" >/dev/null; }

for model in mlp "cnn --sync-bn"; do
  tag=${model%% *}
  # shellcheck disable=SC2086
  run_np 2 train --model $model --batch-size 16 --ckpt-dir "$WORK/$tag-np2" "${common[@]}" >"$WORK/$tag-np2.txt" 2>&1 || { tail "$WORK/$tag-np2.txt"; fail "$tag np2"; }
  # shellcheck disable=SC2086
  run_np 1 train --model $model --batch-size 32 --ckpt-dir "$WORK/$tag-np1" "${common[@]}" >"$WORK/$tag-np1.txt" 2>&1 || { tail "$WORK/$tag-np1.txt"; fail "$tag np1"; }
  final "$WORK/$tag-np2" "$WORK/$tag-np2.h5"
  final "$WORK/$tag-np1" "$WORK/$tag-np1.h5"
  /usr/bin/python3 "$(dirname "$0")/compare_ckpt.py" "$WORK/$tag-np2.h5" "$WORK/$tag-np1.h5" --rtol 1e-5 || fail "$tag: 2 ranks x 16 != 1 rank x 32"
  ok "$model: 2 ranks x 16 == 1 rank x 32 after 20 steps"
done
