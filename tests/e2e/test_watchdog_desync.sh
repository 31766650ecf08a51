#!/usr/bin/env bash
# Rank 1 calls broadcast where the others call allreduce.
# With --debug-collectives (env): every rank raises the same error naming both fingerprints and
# the ranks; it is printed once and all ranks exit (code 2, no abort).
# Without: the collectives do not match and hang; the watchdog names the desynced rank's call.
source "$(dirname "$0")/watchdog_common.sh"

HPCTRAIN_DEBUG_COLLECTIVES=1 HPCTRAIN_COLLECTIVE_TIMEOUT=20 probe 3 desync
check "all ranks exited with 2 (a collective error, no abort)" [ "$RC" = 2 ]
check "ended in under 30 s (no timeout needed)" faster_than 30
check "one line names both fingerprints and the ranks" count_is 1 \
  "hpctrain: error: collective desync: ranks 0,2 called allreduce(float32, 1024) #8 from ddp.bucket[1]; rank 1 called broadcast(int64, 1) #8 from sampler"

HPCTRAIN_COLLECTIVE_TIMEOUT=3 probe 3 desync
check "without debug: the watchdog ended the job" [ "$RC" = 3 ]
check "ended in under 30 s" faster_than 30
check "one report" count_is 1 "timed out after 3 s"
# Whoever reports first: a rank in the allreduce names rank 1's broadcast, or rank 1 names the
# others' allreduce.
names_both() {
  { has "1 (broadcast(int64, 1) #8 from sampler)" && has "collective allreduce(float32, 1024) #8"; } ||
    { has "rank 1: collective broadcast(int64, 1) #8 from sampler" &&
      has "0 (allreduce(float32, 1024) #8 from ddp.bucket[1])"; }
}
check "the report names both calls and rank 1 as the odd one" names_both
finish
