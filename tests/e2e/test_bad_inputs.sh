#!/usr/bin/env bash
# e2e: the bad-input battery ("no silent hangs, no lost work"). One table of cases in
# bad_inputs.py (config, CLI, data files, checkpoints, launch, disk), each run with 2 ranks
# under mpiexec: exit code, exactly one one-line "hpctrain:" error naming the cause, no rank
# left running, and no file written before the case damaged or replaced.
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 "$(dirname "$0")/bad_inputs.py" --bin "$BIN" --mpiexec "$MPIEXEC" --work "$WORK" \
  ${BAD_INPUTS_ONLY:+--only "$BAD_INPUTS_ONLY"} -- "${MPIFLAGS[@]}"
