# Slurm helpers shared by tests/e2e/test_slurm.sh and tests/cluster/test_cluster_slurm.sh (sourced;
# needs fail and wait_for from tests/e2e/lib.sh). Client commands go through $SLURM_RUN (empty: run here; the
# cluster test sets it to `on node0`, the namespace host that runs slurmctld).
SLURM_RUN=${SLURM_RUN:-}
have_slurm() { for b in munged slurmctld slurmd sbatch scontrol; do command -v "$b" >/dev/null || return 1; done; }
# Installs Slurm when missing and possible; else exits 0 with "SKIPPED: ...".
require_slurm() {
  if ! have_slurm; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      echo "Slurm not installed; trying: $1 install"
      timeout 300 "$1" install || true
    fi
    have_slurm || { echo "SKIPPED: slurmctld/slurmd/munge not installed and not installable here (bash launch/setup.sh installs them)"; exit 0; }
  fi
}
job_field() { $SLURM_RUN scontrol show job -o "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p"; }
# The JSON summary (last line starting with '{') of job log $1, field $2.
summary_field() { /usr/bin/python3 -c "
import json,sys
lines=[l for l in open(sys.argv[1]) if l.startswith('{')]
print(json.loads(lines[-1])[sys.argv[2]])" "$1" "$2"; }
# No slurmstepd of job $1 is left (its steps of the last run have been cleaned up). A requeued
# job normally waits ~2 min on BeginTime; a test that releases it at once must first wait for
# this, or the new run's step $1.0 collides with the old one's ("aborted before step completely
# launched").
job_steps_gone() { ! pgrep -f "slurmstepd: \[$1\." >/dev/null; }
job_finished() { local s; s=$(job_field "$1" JobState); [ "$s" = COMPLETED ] || [ "$s" = FAILED ] || [ "$s" = CANCELLED ] || [ -z "$s" ]; }
# slurm_train_setup RANKS EPOCHS: the data set and `train` flags of both Slurm tests (cnn with
# --sync-bn, 16 per rank); sets D, TOTAL (steps) and common, exports what train.sbatch reads.
slurm_train_setup() {
  D="$WORK/d"
  run_np 1 data synthetic --out "$D" --n 1024 --test-n 128 --classes 4 --height 12 --width 12 --seed 5 --noise 200 >/dev/null
  TOTAL=$(($2 * 1024 / ($1 * 16)))
  common=(--model cnn --sync-bn --data "$D" --epochs "$2" --batch-size 16 --lr 0.02 --seed 3 --log-every 4)
  export HPCTRAIN_CPU=1 HPCTRAIN_BIN="$BIN" HPCTRAIN_REPO="$SRC"
}
