#!/usr/bin/env bash
# cluster (label `cluster`): the real slurm/train.sbatch on a Slurm of 2 namespace hosts
# (slurm/local-cluster.sh with HPCTRAIN_SLURM_NODES="node0 node1": slurmctld on node0, one
# slurmd per host, one munged), CPU variant.
#   a. `sbatch --wait --nodes=2 --ntasks-per-node=2` runs `srun --mpi=pmix` across both hosts:
#      4 ranks on 2 nodes, local ranks 0,1 on each host, exit 0, the JSON summary in the log.
#   b. the same job signalled mid-training (`scancel --signal=USR1 --batch`): it checkpoints,
#      every rank exits 75, train.sbatch requeues it, it restarts on both hosts, resumes and finishes with bitwise the
#      parameters of job a.
# Skips (exit 0, "SKIPPED: ...") when Slurm/munge are missing and cannot be installed, or netns
# is unavailable.
source "$(dirname "$0")/lib.sh"
t_start=$SECONDS
slurm_cluster_start 2
ok "Slurm on node0 + node1 up in $((SECONDS - t_start)) s ($($SLURM_RUN sinfo -h -N -o '%N %T' | tr '\n' ' '))"

slurm_train_setup 4 3
SB=(--nodes=2 --ntasks-per-node=2 --gpus-per-task=0 --cpus-per-task=1 --time=00:10:00)

# --- a. sbatch --nodes=2, srun --mpi=pmix across both hosts ---------------------------------------
t0=$SECONDS
rc=0
HPCTRAIN_RUN_DIR="$WORK/runA" $SLURM_RUN timeout 300 sbatch --wait --parsable "${SB[@]}" --output="$WORK/a.log" \
  "$SRC/slurm/train.sbatch" "${common[@]}" >"$WORK/a.id" || rc=$?
SLURM_JOBS+=("$(cat "$WORK/a.id")")
[ $rc -eq 0 ] || { tail -20 "$WORK/a.log"; fail "sbatch --nodes=2 --wait exited $rc"; }
grep -q "hpctrain train: 4 rank(s) on 2 node(s)" "$WORK/a.log" || { tail "$WORK/a.log"; fail "job a did not run 4 ranks on 2 nodes"; }
grep -q "on node\[0-1\]" "$WORK/a.log" || { head -3 "$WORK/a.log"; fail "job a's node list is not node[0-1]"; }
[ "$(summary_field "$WORK/a.log" steps)" = $TOTAL ] || fail "job a ran $(summary_field "$WORK/a.log" steps) steps, expected $TOTAL"
ok "a. sbatch --nodes=2 --ntasks-per-node=2 (srun --mpi=pmix): 4 ranks on node[0-1], $TOTAL steps, in $((SECONDS - t0)) s"
# Where each rank ran, from the ranks themselves (doctor inside the same kind of allocation).
$SLURM_RUN timeout 120 sbatch --wait "${SB[@]}" --output="$WORK/d.log" --wrap "srun --mpi=pmix $BIN doctor" >/dev/null \
  || { cat "$WORK/d.log"; fail "doctor under srun on 2 nodes"; }
rows=$(awk '$1 ~ /^[0-9]+$/ && $3 != "" {print $1 "/" $2 "/" $3}' "$WORK/d.log" | sort | tr '\n' ' ')
[ "$rows" = "0/0/node0 1/1/node0 2/0/node1 3/1/node1 " ] || { cat "$WORK/d.log"; fail "srun doctor rows '$rows'"; }
ok "a. srun doctor on 2 nodes: rank/local/host $rows"

# --- b. USR1 -> checkpoint, requeue, restart on both hosts, resume, finish --------------------
t0=$SECONDS
J=$(HPCTRAIN_RUN_DIR="$WORK/runB" $SLURM_RUN sbatch --parsable "${SB[@]}" --output="$WORK/b.log" "$SRC/slurm/train.sbatch" "${common[@]}")
SLURM_JOBS+=("$J")
progress() { [ -f "$WORK/runB/metrics.jsonl" ] && grep -q '"type":"train"' "$WORK/runB/metrics.jsonl"; }
wait_for 180 "job $J to report training progress" progress
$SLURM_RUN scancel --signal=USR1 --batch "$J"
requeued() { grep -q "exit 75 (checkpointed for preemption): scontrol requeue $J$" "$WORK/b.log" && [ "$(job_field "$J" JobState)" = PENDING ]; }
wait_for 120 "job $J to checkpoint and requeue itself" requeued
stop_step=$(sed -n 's/.*preemption signal received.*checkpointing at step \([0-9]*\).*/\1/p' "$WORK/b.log" | head -1)
[ -n "$stop_step" ] && [ "$stop_step" -lt $TOTAL ] || { tail -20 "$WORK/b.log"; fail "no mid-training preemption checkpoint (step '$stop_step' of $TOTAL)"; }
wait_for 60 "job $J's old steps to be cleaned up" job_steps_gone "$J"
$SLURM_RUN scontrol update jobid="$J" StartTime=now
wait_for 300 "requeued job $J to finish" job_finished "$J"
[ "$(job_field "$J" JobState)" = COMPLETED ] || { tail -20 "$WORK/b.log"; fail "job $J ended $(job_field "$J" JobState)"; }
[ "$(grep -c "hpctrain train: 4 rank(s) on 2 node(s)" "$WORK/b.log")" = 2 ] || fail "job $J did not run on 2 nodes both times"
grep -q "resumed from .*step-0*$stop_step at step $stop_step" "$WORK/b.log" || { grep -i resum "$WORK/b.log"; fail "no resume from step $stop_step"; }
run_np 1 ckpt merge "$WORK/runA/ckpt" --out "$WORK/a.h5" >/dev/null
run_np 1 ckpt merge "$WORK/runB/ckpt" --out "$WORK/b.h5" >/dev/null
/usr/bin/python3 "$COMPARE" "$WORK/a.h5" "$WORK/b.h5" --exact || fail "preempted+requeued job differs from job a"
ok "b. USR1 at step $stop_step -> requeue -> restart on node[0-1] -> resume -> $TOTAL steps, == job a bitwise, in $((SECONDS - t0)) s"
echo "test_cluster_slurm: total $((SECONDS - t_start)) s"
