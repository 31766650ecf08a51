#!/usr/bin/env bash
# SyncBatchNorm vs BatchNorm2d forward+backward on a [64,32,28,28] local batch, per world size.
# Prints one JSON line per world size (median of 10 steps, ms, rank 0). Usage:
#   perf/syncbn_bench.sh [build-dir] [world sizes...]     (default: build 1 2)
set -euo pipefail
BUILD=${1:-build}; shift || true
SIZES=${*:-1 2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
for n in $SIZES; do
  mpiexec -n "$n" --oversubscribe "$BUILD/tests/mpi_ddp" \
    --gtest_also_run_disabled_tests --gtest_filter='SyncBnBench.*' | grep '^{"world_size"'
done
