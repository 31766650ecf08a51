#!/usr/bin/env bash
# A rank that skips a collective (and then sits outside MPI): the watchdog of a rank that
# reached it reports op, seq, tag, step and the missing rank once, and the job ends well within
# the bound. Also: a slow-but-live run with the same short timeout completes untouched.
source "$(dirname "$0")/watchdog_common.sh"

HPCTRAIN_COLLECTIVE_TIMEOUT=3 probe 3 skip
check "job failed with the watchdog's exit code 3" [ "$RC" = 3 ]
check "ended in under 30 s" faster_than 30
check "one report, naming op, seq, tag and step" count_is 1 \
  "collective allreduce(float32, 1024) #8 from ddp.bucket[1] at step 2 timed out after 3 s"
check "the report is the first line of stderr (before MPI_Abort's banner)" \
  grep -q "^hpctrain: rank [01]: collective" <<<"$(head -n1 <<<"$ERR")"
check "ranks 0 and 1 reached it" has "ranks that reached it: 0,1;"
check "rank 2 did not, and its last op is named" \
  has "ranks that did not: 2 (last op allreduce(float32, 1024) #7 from ddp.bucket[0], finished, step 2)"

HPCTRAIN_COLLECTIVE_TIMEOUT=3 probe 3 ok
check "a rank slower by 40% of the timeout is no hang" [ "$RC" = 0 ]
check "the run completed" grep -q "hang_probe: ok" <<<"$OUT"
check "no report" count_is 0 "timed out"
finish
