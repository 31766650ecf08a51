# shellcheck shell=bash
# Sourced by perf/*.sh: `launch N CMD...` starts CMD on N ranks.
# Inside a Slurm allocation (SLURM_JOB_ID set): `srun --mpi=pmix -n N`; else `mpirun -np N`,
# adding --oversubscribe when N exceeds this host's cores (mpirun refuses otherwise). Never
# automatic inside Slurm, where the allocation decides. HPCTRAIN_LAUNCHER=mpirun forces mpirun;
# HPCTRAIN_OVERSUBSCRIBE=1 always adds --oversubscribe. OMP_NUM_THREADS is passed to every rank.
launch() {
  local n=$1; shift
  if [ -n "${SLURM_JOB_ID:-}" ] && [ "${HPCTRAIN_LAUNCHER:-srun}" != mpirun ]; then
    srun --mpi=pmix -n "$n" --kill-on-bad-exit=1 "$@"
  else
    local f=(-np "$n" -x OMP_NUM_THREADS)
    [ "$(id -u)" = 0 ] && f+=(--allow-run-as-root)
    if [ "${HPCTRAIN_OVERSUBSCRIBE:-0}" = 1 ] || { [ -z "${SLURM_JOB_ID:-}" ] && [ "$n" -gt "$(nproc)" ]; }; then
      f+=(--oversubscribe)
    fi
    mpirun "${f[@]}" "$@"
  fi
}
