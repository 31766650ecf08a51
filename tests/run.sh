#!/usr/bin/env bash
# The README's test command: installs what is missing, builds into ./build, runs ctest
# (unit, MPI with 1/2/4 ranks, e2e). Extra arguments go to ctest (e.g. -L mpi, -R ddp).
set -euo pipefail
cd "$(dirname "$0")/.."
bash launch/setup.sh
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
cd build
ctest --output-on-failure --timeout 900 "$@"
