#!/usr/bin/env bash
# Measures what a lost host costs under Slurm: slurm/train.sbatch (srun --mpi=pmix
# --kill-on-bad-exit=1) on a 2-host Slurm of namespace hosts, 1 rank per host; node1's cable is
# pulled after the first checkpoint. Prints when the job left RUNNING, when every job process on
# node0 (srun, slurmstepd, ranks) was gone, the job log's tail and the node states.
#   perf/train/cluster_srun_lost_node.sh [COLLECTIVE_TIMEOUT_S (default 8)]
# Needs root, network namespaces and Slurm (as `ctest -L cluster`). The multinode.sh launcher's
# times are measured by tests/cluster/test_cluster_faults.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
T=${1:-8}
export HPCTRAIN_BIN=${HPCTRAIN_BIN:-$PWD/build/hpctrain}
source tests/cluster/lib.sh
slurm_cluster_start 2
slurm_train_setup 2 1000
J=$(HPCTRAIN_RUN_DIR="$WORK/run" $SLURM_RUN sbatch --parsable --nodes=2 --ntasks-per-node=1 --gpus-per-task=0 \
  --cpus-per-task=1 --time=00:10:00 --output="$WORK/j.log" "$SRC/slurm/train.sbatch" "${common[@]}" \
  --ckpt-every 5 --collective-timeout "$T")
wait_for 240 "the first checkpoint" test -f "$WORK/run/ckpt/latest"
sleep 2
link_down node1
t0=$SECONDS
job_running() { [ "$(job_field "$J" JobState)" = RUNNING ]; }
node0_job_procs() { (ip netns pids "$(_ns node0)" | xargs -r ps -o comm= -p | grep -E '^(srun|slurmstepd|hpctrain)$' || true) | tr '\n' ' '; }
while job_running && [ $((SECONDS - t0)) -lt 300 ]; do sleep 1; done
echo "collective-timeout $T s: job state $(job_field "$J" JobState) after $((SECONDS - t0)) s"
while [ -n "$(node0_job_procs)" ] && [ $((SECONDS - t0)) -lt 300 ]; do sleep 1; done
echo "every job process on node0 gone after $((SECONDS - t0)) s (left: $(node0_job_procs))"
tail -8 "$WORK/j.log"
$SLURM_RUN sinfo -N
