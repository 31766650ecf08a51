#!/usr/bin/env bash
# Checkpoint write throughput against dd on the same filesystem (goal: ratio >= 0.85).
# Usage: perf/ckpt_write_bench.sh [MiB (default 1024)] [DIR (default a fresh dir under /tmp)]
# The checkpoint time covers host copy, XXH3 checksums, HDF5 writes, fsyncs, manifest, renames.
set -euo pipefail
MB=${1:-1024}
BUILD=${HPCTRAIN_BUILD_DIR:-$(cd "$(dirname "$0")/.." && pwd)/build}
UNIT=$(find "$BUILD" -name unit_ckpt -type f -perm -u+x | head -1)
BASE=${2:-$(mktemp -d /tmp/hpctrain_ckpt_bench_XXXXXX)}
mkdir -p "$BASE"; trap 'rm -rf "$BASE/ck" "$BASE/dd.bin"' EXIT
sync
ck=$(HPCTRAIN_CKPT_FIXTURE_DIR=$BASE/ck HPCTRAIN_CKPT_BENCH_MB=$MB OMP_NUM_THREADS=1 "$UNIT" \
  --gtest_also_run_disabled_tests --gtest_filter=Bench.DISABLED_SyncWriteThroughput | grep '^{"bytes"')
sync
t0=$(date +%s.%N)
dd if=/dev/zero of="$BASE/dd.bin" bs=1M count="$MB" conv=fdatasync status=none
t1=$(date +%s.%N)
/usr/bin/python3 - "$ck" "$t0" "$t1" "$MB" <<'PY'
import json, sys
c = json.loads(sys.argv[1]); dd_s = float(sys.argv[3]) - float(sys.argv[2]); mb = int(sys.argv[4])
ck_mbs = c["bytes"] / 2**20 / c["seconds"]; dd_mbs = mb / dd_s
print(json.dumps({"mib": mb, "ckpt_s": round(c["seconds"], 3), "ckpt_MiBps": round(ck_mbs, 1),
                  "dd_s": round(dd_s, 3), "dd_MiBps": round(dd_mbs, 1), "ratio": round(ck_mbs / dd_mbs, 3)}))
PY
