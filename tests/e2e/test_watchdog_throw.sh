#!/usr/bin/env bash
# An exception on one rank: its one line comes first, the world is aborted, nobody hangs and no
# other rank adds an error of its own.
source "$(dirname "$0")/watchdog_common.sh"

HPCTRAIN_COLLECTIVE_TIMEOUT=30 probe 3 throw
check "job failed" failed
check "ended well before the collective timeout" faster_than 25
check "one line names the rank and the cause" count_is 1 \
  "hpctrain: rank 1: error: hang_probe: injected failure at step 2"
check "our line is the first line of stderr" \
  [ "$(head -n1 <<<"$ERR")" = "hpctrain: rank 1: error: hang_probe: injected failure at step 2" ]
check "no other hpctrain line (no cascade)" count_is 1 "hpctrain:"

# Every rank fails at once: one line per rank (each is a cause), and still no hang.
HPCTRAIN_COLLECTIVE_TIMEOUT=30 probe 3 throw_all
check "all fail at once: job failed" failed
check "all fail at once: ended well before the collective timeout" faster_than 25
check "all fail at once: no more than one line per rank" \
  [ "$(grep -c "^hpctrain: rank [0-2]: error: hang_probe: injected failure at step 2" <<<"$ERR")" -le 3 ]
check "all fail at once: at least one line" has "error: hang_probe: injected failure at step 2"
finish
