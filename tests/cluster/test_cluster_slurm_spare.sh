#!/usr/bin/env bash
# cluster (label `cluster`): a hot spare node under Slurm. The real slurm/train.sbatch with
# HPCTRAIN_SPARE_NODES=1 on a Slurm of 3 namespace hosts (slurmctld on node0, a slurmd per host),
# `sbatch --nodes=3 --ntasks-per-node=1`: srun runs the job on node0 + node1, node2 is held. After
# the first checkpoint node1's cable is pulled (--collective-timeout 15). The batch script ends
# the failed step, probes the nodes (a short srun step each), excludes node1, and runs srun again
# inside the same allocation (`--exclude=node1`, --resume auto): a rank runs on node2, the job
# finishes all its steps, exit 0, with the same job id and no requeue (Restarts=0), and the
# restart record names node1.
source "$(dirname "$0")/lib.sh"
t_start=$SECONDS
slurm_cluster_start 3
ok "Slurm on node0..node2 up in $((SECONDS - t_start)) s ($($SLURM_RUN sinfo -h -N -o '%N %T' | tr '\n' ' '))"
slurm_train_setup 2 8
J=$(HPCTRAIN_SPARE_NODES=1 HPCTRAIN_RUN_DIR="$WORK/run" $SLURM_RUN sbatch --parsable --nodes=3 --ntasks-per-node=1 \
  --gpus-per-task=0 --cpus-per-task=1 --time=00:10:00 --output="$WORK/j.log" "$SRC/slurm/train.sbatch" "${common[@]}" \
  --ckpt-every 10 --collective-timeout 15)
SLURM_JOBS+=("$J")
wait_for 180 "job $J's first checkpoint" ckpt_at_least "$WORK/run/ckpt" 10
grep -q "hpctrain: 2 of 3 nodes run the job, 1 spare(s)" "$WORK/j.log" || { cat "$WORK/j.log"; fail "no spare held"; }
link_down node1
t0=$SECONDS t_cut=$(date +%s.%N)
restarted() { grep -q "^hpctrain: restart 1/1: node(s) node1 lost" "$WORK/j.log"; }
wait_for 120 "the batch script to restart without node1" restarted
t_restart=$((SECONDS - t0))
on_spare() { ip netns pids "$(_ns node2)" | xargs -r ps -o comm= -p 2>/dev/null | grep -qx hpctrain; }
wait_for 60 "a rank on the spare node2" on_spare
summary_in_log() { [ "$(grep -c '^{' "$WORK/j.log")" -ge 1 ]; }
wait_for 240 "job $J to finish on node0 + node2" summary_in_log
[ "$(summary_field "$WORK/j.log" steps)" = "$TOTAL" ] || { tail -20 "$WORK/j.log"; fail "job $J ran $(summary_field "$WORK/j.log" steps) steps, expected $TOTAL"; }
grep -q "resumed from .*step-[0-9]* at step" "$WORK/j.log" || { grep -i resum "$WORK/j.log"; fail "the second step did not resume"; }
[ "$(grep -c 'rank(s) on 2 node(s)' "$WORK/j.log")" = 2 ] || fail "not two steps of 2 ranks on 2 nodes"
[ "$(grep -c "^hpctrain: job $J restart" "$WORK/j.log")" = 1 ] && [ "$(job_field "$J" Restarts)" = 0 ] ||
  fail "job $J was requeued ($(job_field "$J" Restarts) restarts)"
# COMPLETING: Slurm still waits for node1 (the failed step's node) to confirm the end.
ended() { state=$(job_field "$J" JobState); [ "$state" = COMPLETED ] || [ "$state" = COMPLETING ]; }
wait_for 60 "job $J to end (state COMPLETED or COMPLETING)" ended
[ "$(job_field "$J" ExitCode)" = 0:0 ] || fail "job $J exit code $(job_field "$J" ExitCode)"
/usr/bin/python3 - "$WORK/run/metrics.jsonl" "$t_cut" <<'PY' || fail "restart record"
import json, sys
r = [x for x in map(json.loads, open(sys.argv[1])) if x["type"] == "restart"]
assert len(r) == 1 and r[0]["lost_hosts"] == ["node1"] and r[0]["excluded"] == ["node1"], r
r0, cut = r[0], float(sys.argv[2])
print(f"measured: training again {r0['failed_at'] + r0['recovery_s'] - cut:.1f} s after the cut (the failed step ended "
      f"{r0['failed_at'] - cut:.1f} s after it, recovery_s {r0['recovery_s']:.1f}); resumed at step "
      f"{r[0]['resumed_step']}, {r[0]['steps_lost']} steps lost")
PY
ok "node1 cut: $(grep '^hpctrain: restart 1/1' "$WORK/j.log" | cut -c1-200)"
ok "restart $t_restart s after the cut; a rank on spare node2; job $J finished $TOTAL steps in the same allocation (state $state, Restarts=0)"
link_up node1  # lets Slurm finish the job's old step on node1 before the daemons stop
echo "test_cluster_slurm_spare: total $((SECONDS - t_start)) s"
