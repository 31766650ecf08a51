#!/usr/bin/env bash
# cluster (label `cluster`): training across 2 namespace hosts through launch/multinode.sh.
#   a. The central invariant across hosts: 2 hosts x 1 rank x batch 16 == 1 host x 2 ranks x
#      batch 16 (the same run on one machine, shared memory) and == 1 rank x batch 32, for mlp and
#      for cnn with --sync-bn (running stats included): fp32, max relative difference per tensor.
#   b. A checkpoint written by rank 0 on node0 resumes with the host order reversed (rank 0 now on
#      node1) and continues exactly (bitwise) as the same stop + resume on one host; and the same
#      checkpoint resumes on 3 ranks over 2 hosts (2 + 1) at the same global sample (global batch
#      48 = 2 x 24 = 3 x 16), matching that one-host resume (fp32).
source "$(dirname "$0")/lib.sh"
cluster_start 2
D="$WORK/d"
run_np 1 data synthetic --out "$D" --n 1024 --test-n 128 --classes 4 --height 12 --width 12 --seed 5 --noise 200 >/dev/null
hostfile "$WORK/hf11" node0:1 node1:1
hostfile "$WORK/hf10" node1:1 node0:1
hostfile "$WORK/hf21" node0:2 node1:1
merged() { run_np 1 ckpt merge "$1" --out "$1.h5" >/dev/null; }
common=(--device cpu --data "$D" --epochs 2 --max-steps 20 --lr 0.02 --seed 7 --log-every 1000)

# --- a. equivalence ------------------------------------------------------------------------------
for model in mlp "cnn --sync-bn"; do
  tag=${model%% *} t0=$SECONDS
  # shellcheck disable=SC2086
  mn "$WORK/hf11" train --model $model --batch-size 16 --ckpt-dir "$WORK/$tag-2h" "${common[@]}" >"$WORK/$tag-2h.txt" 2>&1 \
    || { tail "$WORK/$tag-2h.txt"; fail "$tag on 2 hosts"; }
  grep -q "hpctrain train: 2 rank(s) on 2 node(s)" "$WORK/$tag-2h.txt" || fail "$tag: the 2-host run was not on 2 nodes"
  t_2h=$((SECONDS - t0))
  # shellcheck disable=SC2086
  run_np 2 train --model $model --batch-size 16 --ckpt-dir "$WORK/$tag-1h" "${common[@]}" >"$WORK/$tag-1h.txt" 2>&1 || { tail "$WORK/$tag-1h.txt"; fail "$tag np2 on one host"; }
  # shellcheck disable=SC2086
  run_np 1 train --model $model --batch-size 32 --ckpt-dir "$WORK/$tag-np1" "${common[@]}" >"$WORK/$tag-np1.txt" 2>&1 || { tail "$WORK/$tag-np1.txt"; fail "$tag np1"; }
  [ "$(json_field "$WORK/$tag-2h.txt" world_size)" = 2 ] && [ "$(json_field "$WORK/$tag-2h.txt" steps)" = 20 ] \
    || fail "$tag on 2 hosts: summary $(tail -1 "$WORK/$tag-2h.txt")"
  merged "$WORK/$tag-2h"; merged "$WORK/$tag-1h"; merged "$WORK/$tag-np1"
  /usr/bin/python3 "$COMPARE" "$WORK/$tag-2h.h5" "$WORK/$tag-1h.h5" --rtol 1e-6 || fail "$tag: 2 hosts x 1 rank != 1 host x 2 ranks"
  /usr/bin/python3 "$COMPARE" "$WORK/$tag-2h.h5" "$WORK/$tag-np1.h5" --rtol 1e-5 || fail "$tag: 2 hosts x 1 rank x 16 != 1 rank x 32"
  ok "a. $model: 2 hosts x 1 rank x 16 == 1 host x 2 ranks x 16 == 1 rank x 32 after 20 steps (2-host run $t_2h s)"
done

# --- b. checkpoint on node0's rank 0, resume reversed and on 3 ranks ------------------------------
ck=(--model cnn --sync-bn --device cpu --data "$D" --epochs 1 --lr 0.02 --seed 3 --log-every 1000 --ckpt-every 7)
# One-host reference: 7 steps + resume to 14 (2 ranks x 24).
run_np 2 train "${ck[@]}" --batch-size 24 --max-steps 7 --ckpt-dir "$WORK/ref-r" >"$WORK/ref-r1.txt" 2>&1 || { tail "$WORK/ref-r1.txt"; fail "reference stop"; }
run_np 2 train "${ck[@]}" --batch-size 24 --max-steps 14 --ckpt-dir "$WORK/ref-r" >"$WORK/ref-r2.txt" 2>&1 || { tail "$WORK/ref-r2.txt"; fail "reference resume"; }
# Two hosts: rank 0 on node0 writes step 7 ...
mn "$WORK/hf11" train "${ck[@]}" --batch-size 24 --max-steps 7 --ckpt-dir "$WORK/x" >"$WORK/x1.txt" 2>&1 || { tail "$WORK/x1.txt"; fail "2-host run to step 7"; }
[ "$(cat "$WORK/x/latest")" = step-00000007 ] || fail "latest after the 2-host run is $(cat "$WORK/x/latest")"
cp -r "$WORK/x" "$WORK/x3"
run_np 1 ckpt verify "$WORK/x" >/dev/null || fail "the 2-host checkpoint does not verify"
# ... and the job resumes from node1, node1 first: rank 0 (which reads `latest` and leads) is on
# node1 (test_cluster_doctor checks that placement).
MN_HOST=node1 mn "$WORK/hf10" train "${ck[@]}" --batch-size 24 --max-steps 14 --ckpt-dir "$WORK/x" >"$WORK/x2.txt" 2>&1 || { tail "$WORK/x2.txt"; fail "resume reversed"; }
grep -q "resumed from .*step-00000007 at step 7" "$WORK/x2.txt" || { grep -i resum "$WORK/x2.txt"; fail "reversed run did not resume from step 7"; }
merged "$WORK/ref-r"; merged "$WORK/x"
/usr/bin/python3 "$COMPARE" "$WORK/x.h5" "$WORK/ref-r.h5" --exact || fail "reversed-host resume differs from the same resume on one host"
ok "b. step 7 written on node0, resumed with node1 first: step 14 bitwise == the same stop + resume on one host"
# 3 ranks over 2 hosts (node0: 2, node1: 1), global batch 48 as before.
mn "$WORK/hf21" train "${ck[@]}" --batch-size 16 --max-steps 14 --ckpt-dir "$WORK/x3" >"$WORK/x3.txt" 2>&1 || { tail "$WORK/x3.txt"; fail "resume on 3 ranks"; }
grep -q "hpctrain train: 3 rank(s) on 2 node(s)" "$WORK/x3.txt" || fail "3-rank run not on 2 nodes"
grep -q "saved with 2 rank(s); now 3, global batch 48" "$WORK/x3.txt" || { grep -i resum "$WORK/x3.txt"; fail "3-rank resume: world-size change not reported"; }
[ "$(json_field "$WORK/x3.txt" steps)" = 14 ] || fail "3-rank resume ran to step $(json_field "$WORK/x3.txt" steps)"
merged "$WORK/x3"
/usr/bin/python3 "$COMPARE" "$WORK/x3.h5" "$WORK/ref-r.h5" --rtol 1e-5 || fail "resume on 3 ranks over 2 hosts diverged from the one-host resume"
ok "b. the same checkpoint resumed on 3 ranks over 2 hosts continues at the same global sample (== one host, fp32)"
