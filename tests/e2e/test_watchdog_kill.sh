#!/usr/bin/env bash
# SIGKILL of one rank mid-loop, over shared memory (vader) and TCP.
# - Default mpirun: Open MPI itself ends the job at once and names the dead rank.
# - mpirun --enable-recovery (the launcher keeps the job alive, as srun without
#   --kill-on-bad-exit does): the survivors hang in the collective; our watchdog ends the job
#   within the timeout and names the rank that no longer answers.
source "$(dirname "$0")/watchdog_common.sh"

for btl in self,vader self,tcp; do
  net=(--mca btl "$btl")
  [ "$btl" = self,tcp ] && net+=(--mca btl_tcp_if_include lo)
  HPCTRAIN_COLLECTIVE_TIMEOUT=3 probe 3 kill "${net[@]}"
  check "$btl, default launcher: job failed" failed
  check "$btl, default launcher: ended in under 60 s" faster_than 60
  check "$btl, default launcher: the dead rank is named" has "rank 2 with PID"

  HPCTRAIN_COLLECTIVE_TIMEOUT=3 probe 3 kill "${net[@]}" --enable-recovery
  # With --enable-recovery, mpirun exits 0 even after MPI_Abort: check that our `timeout`
  # did not fire instead, and rely on the report.
  check "$btl, recovery: job ended by itself" [ "$RC" != 124 ]
  check "$btl, recovery: ended in under 60 s" faster_than 60
  check "$btl, recovery: one watchdog report for the stuck op" count_is 1 \
    "collective allreduce(float32, 1024) #8 from ddp.bucket[1] at step 2 timed out after 3 s"
  check "$btl, recovery: the dead rank is named" \
    has "ranks that did not answer (dead, or hung with their watchdog): 2"
done
finish
