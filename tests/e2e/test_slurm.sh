#!/usr/bin/env bash
# e2e (ctest label `slurm`): the real slurm/train.sbatch on a throwaway localhost Slurm
# (slurm/local-cluster.sh), CPU variant, 2 tasks.
#   a. `sbatch --wait` with HPCTRAIN_LAUNCHER=mpirun runs to the end: exit 0, the JSON summary in
#      the job log; inside the same kind of allocation, mpirun's 2 ranks are ranks 0 and 1 with
#      local ranks 0 and 1 (`hpctrain doctor`) although both inherit SLURM_PROCID=0.
#   b. the same run (srun launcher) signalled mid-training with `scancel --signal=USR1 --batch`:
#      it checkpoints, every rank exits 75, train.sbatch requeues the job on 75, the job restarts, resumes from that checkpoint
#      and finishes; its final parameters equal run a's bitwise.
#   c. slurm/scaling.sbatch sweeps 1 and 2 ranks (weak and strong) inside one allocation and writes the CSV, with
#      efficiency = throughput(2) / (2 * throughput(1)).
# Skips (exit 0, "SKIPPED: ...") when Slurm/munge are missing and cannot be installed.
source "$(dirname "$0")/lib.sh"
SRC=${HPCTRAIN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
CLUSTER="$SRC/slurm/local-cluster.sh"

source "$(dirname "$0")/slurm_lib.sh"
require_slurm "$CLUSTER"

# munged runs as user munge and must traverse the cluster directory: not under the 0700 $WORK.
SDIR=$(mktemp -d /tmp/hpctrain-e2e-slurm.XXXXXX)
chmod 755 "$SDIR"
# Ports of our own, so a user's cluster on the default ports is left alone.
export HPCTRAIN_SLURMCTLD_PORT=$((20000 + ($$ % 5000) * 2)) HPCTRAIN_SLURMD_PORT=$((20001 + ($$ % 5000) * 2))
export SLURM_CONF="$SDIR/slurm.conf"
JOBS=()
cleanup() {
  set +e
  for j in "${JOBS[@]}"; do scancel "$j" 2>/dev/null; done
  # Let slurmd end the job steps before it goes (bounded).
  for _ in $(seq 30); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.5; done
  "$CLUSTER" stop "$SDIR"
  rm -rf "$SDIR" "$WORK"
}
trap cleanup EXIT
t_start=$SECONDS
timeout 60 "$CLUSTER" start "$SDIR" >/dev/null || fail "local cluster did not start (logs were in $SDIR)"
ok "local Slurm up in $((SECONDS - t_start)) s ($(sinfo -h -o '%N %T %c CPUs'))"

slurm_train_setup 2 6
# The CPU variant: the header asks one GPU per task and 8 cores per task; a GPU-less 2-task job
# overrides both on the command line (Slurm 22.05 accepts --gpus-per-task=0).
SB=(--ntasks=2 --ntasks-per-node=2 --gpus-per-task=0 --cpus-per-task=1 --time=00:15:00)

# --- a. sbatch --wait, mpirun inside the allocation, uninterrupted -------------------------------
t0=$SECONDS
set +e
HPCTRAIN_LAUNCHER=mpirun HPCTRAIN_RUN_DIR="$WORK/runA" timeout 600 sbatch --wait --parsable "${SB[@]}" \
  --output="$WORK/a.log" "$SRC/slurm/train.sbatch" "${common[@]}" >"$WORK/a.id"
rc=$?
set -e
JOBS+=("$(cat "$WORK/a.id")")
[ $rc -eq 0 ] || { tail -20 "$WORK/a.log"; fail "sbatch --wait (job $(cat "$WORK/a.id")) exited $rc"; }
grep -q '^{.*"world_size":2' "$WORK/a.log" || { tail "$WORK/a.log"; fail "no JSON summary in the job log"; }
[ "$(summary_field "$WORK/a.log" steps)" = $TOTAL ] || fail "job a ran $(summary_field "$WORK/a.log" steps) steps, expected $TOTAL"
[ "$(summary_field "$WORK/a.log" device)" = cpu ] || fail "job a did not run on cpu"
[ -f "$WORK/runA/metrics.jsonl" ] && [ -f "$WORK/runA/ckpt/latest" ] || fail "job a wrote no metrics or checkpoint under HPCTRAIN_RUN_DIR"
ok "a. sbatch --wait (mpirun in the job): exit 0, summary world_size 2, $TOTAL steps, in $((SECONDS - t0)) s"

# Ranks under mpirun inside an allocation come from MPI, not SLURM_PROCID (0 for every process).
mpi=(mpirun -np 2 -x OMP_NUM_THREADS=1)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
timeout 120 sbatch --wait "${SB[@]}" --output="$WORK/m.log" \
  --wrap "${mpi[*]} printenv SLURM_PROCID | sed 's/^/procid=/'; ${mpi[*]} $BIN doctor" >/dev/null \
  || { cat "$WORK/m.log"; fail "doctor under mpirun inside sbatch failed"; }
[ "$(grep -c '^procid=0$' "$WORK/m.log")" = 2 ] || { cat "$WORK/m.log"; fail "expected SLURM_PROCID=0 in both mpirun processes"; }
rows=$(awk '$1 ~ /^[0-9]+$/ && $3 != "" {print $1 "/" $2}' "$WORK/m.log" | sort | tr '\n' ' ')
[ "$rows" = "0/0 1/1 " ] || { cat "$WORK/m.log"; fail "doctor rank/local rank rows are '$rows', expected '0/0 1/1'"; }
grep -q '^doctor: OK' "$WORK/m.log" || fail "doctor self-test did not pass"
ok "mpirun inside sbatch: SLURM_PROCID=0 in both processes, doctor shows rank/local 0/0 and 1/1"

# --- b. srun launcher, USR1 mid-training -> checkpoint, requeue, resume, finish ------------------
t0=$SECONDS
J=$(HPCTRAIN_RUN_DIR="$WORK/runB" sbatch --parsable "${SB[@]}" --output="$WORK/b.log" \
  "$SRC/slurm/train.sbatch" "${common[@]}")
JOBS+=("$J")
progress() { [ -f "$WORK/runB/metrics.jsonl" ] && grep -q '"type":"train"' "$WORK/runB/metrics.jsonl"; }
wait_for 180 "job $J to report training progress" progress
scancel --signal=USR1 --batch "$J"
requeued() { grep -q "exit 75 (checkpointed for preemption): scontrol requeue $J$" "$WORK/b.log" && [ "$(job_field "$J" JobState)" = PENDING ]; }
wait_for 120 "job $J to checkpoint and requeue itself" requeued
grep -q "USR1 received, forwarding to ranks" "$WORK/b.log" || fail "the batch shell did not forward USR1"
stop_step=$(sed -n 's/.*preemption signal received.*checkpointing at step \([0-9]*\).*/\1/p' "$WORK/b.log" | head -1)
[ -n "$stop_step" ] && [ "$stop_step" -lt $TOTAL ] || { tail -20 "$WORK/b.log"; fail "no mid-training preemption checkpoint (step '$stop_step' of $TOTAL)"; }
ok "b. USR1 to the batch shell -> checkpoint at step $stop_step of $TOTAL, exit 75, train.sbatch requeued job $J (pending, reason $(job_field "$J" Reason))"
# A requeued job waits ~2 min on BeginTime; release it now.
wait_for 60 "job $J's old steps to be cleaned up" job_steps_gone "$J"
scontrol update jobid="$J" StartTime=now
wait_for 400 "requeued job $J to finish" job_finished "$J"
[ "$(job_field "$J" JobState)" = COMPLETED ] || { tail -20 "$WORK/b.log"; fail "job $J ended $(job_field "$J" JobState) exit $(job_field "$J" ExitCode)"; }
[ "$(job_field "$J" Restarts)" = 1 ] || fail "job $J restarts = $(job_field "$J" Restarts), expected 1"
grep -q "restart 1 on" "$WORK/b.log" || fail "log shows no restart"
grep -q "resumed from .*step-0*$stop_step at step $stop_step" "$WORK/b.log" || { grep -i resum "$WORK/b.log"; fail "log shows no resume from step $stop_step"; }
[ "$(summary_field "$WORK/b.log" steps)" = $TOTAL ] || fail "resumed job ran to step $(summary_field "$WORK/b.log" steps), expected $TOTAL"
ok "b. requeued job restarted, resumed at step $stop_step and completed $TOTAL steps, in $((SECONDS - t0)) s"

run_np 1 ckpt merge "$WORK/runA/ckpt" --out "$WORK/a.h5" >/dev/null
run_np 1 ckpt merge "$WORK/runB/ckpt" --out "$WORK/b.h5" >/dev/null
/usr/bin/python3 "$(dirname "$0")/compare_ckpt.py" "$WORK/a.h5" "$WORK/b.h5" --exact || fail "preempted+resumed job differs from the uninterrupted one"
ok "b. preempted + requeued + resumed parameters == uninterrupted job's, bitwise (srun vs mpirun launcher)"

# --- c. scaling sweep inside one allocation --------------------------------------------------
t0=$SECONDS
HPCTRAIN_DDP_BENCH="$(dirname "$BIN")/perf/ddp_bench" HPCTRAIN_RANKS="1 2" HPCTRAIN_STEPS=5 \
  HPCTRAIN_SCALING_OUT="$WORK/scaling.csv" timeout 300 sbatch --wait "${SB[@]}" --output="$WORK/c.log" \
  "$SRC/slurm/scaling.sbatch" >/dev/null || { cat "$WORK/c.log"; fail "scaling.sbatch failed"; }
eff=$(/usr/bin/python3 - "$WORK/scaling.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [(r["mode"], r["ranks"]) for r in rows] == [("weak", "1"), ("weak", "2"), ("strong", "1"), ("strong", "2")], rows
tp = {(r["mode"], r["ranks"]): float(r["samples_per_s"]) for r in rows}
assert all(t > 0 for t in tp.values()), rows
assert rows[0]["efficiency"] == rows[2]["efficiency"] == "1.0000", rows
# weak: batch 64 on every rank; strong: global 128 = 2 x 64, split over the ranks
assert [int(r["batch_per_rank"]) for r in rows] == [64, 64, 128, 64], rows
for m, row in (("weak", rows[1]), ("strong", rows[3])):
    want = tp[(m, "2")] / (2 * tp[(m, "1")])
    assert abs(float(row["efficiency"]) - want) < 1e-3, (row, want)
    assert abs(float(row["speedup"]) - 2 * want) < 2e-3, (row, 2 * want)
print(rows[1]["efficiency"], rows[3]["efficiency"])
PY
) || { cat "$WORK/scaling.csv"; fail "scaling CSV"; }
ok "c. scaling.sbatch: CSV with weak and strong rows at ranks 1,2; efficiency(2) = tp(2)/(2 tp(1)) = $eff (weak, strong), in $((SECONDS - t0)) s"
echo "test_slurm: total $((SECONDS - t_start)) s"
