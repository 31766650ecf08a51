#!/usr/bin/env bash
# `hpctrain bench allreduce|reduce_scatter|allgather` on one host: one JSON line per size, sizes
# doubling; every size checked against the bare MPI call's result (`wrong` = 0); times, algbw and
# busbw consistent (busbw = algbw x 2(n-1)/n for allreduce, (n-1)/n for the other two); no link
# columns on one host even with --link-gbit; bad arguments end in one error line and exit 2; a
# collective whose result is really wrong (an LD_PRELOAD shim corrupts MPI_Allreduce's output)
# gives `wrong` > 0 at every size and exit status 1. (Across hosts and link_frac:
# tests/cluster/test_cluster_hier.sh.)
source "$(dirname "$0")/lib.sh"
check() {  # FILE OP RANKS DTYPE MIN MAX
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
path, op, n, dtype, lo, hi = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
rows = [json.loads(l) for l in open(path) if l.startswith("{")]
want, b = [], lo
while b <= hi:
    want.append(b); b *= 2
assert [r["bytes"] for r in rows] == want, ([r["bytes"] for r in rows], want)
bus = (2.0 if op == "allreduce" else 1.0) * (n - 1) / n
for r in rows:
    assert r["op"] == op and r["world_size"] == n and r["dtype"] == dtype, r
    assert r["wrong"] == 0, f"{r['bytes']} bytes: {r['wrong']} elements differ from MPI's"
    for side in ("", "mpi_"):
        t = r[side + "time_us"]
        assert t > 0, r
        assert abs(r[side + "algbw_GBps"] - r["bytes"] / t / 1e3) <= 1e-9 * r[side + "algbw_GBps"], r
        assert abs(r[side + "busbw_GBps"] - bus * r[side + "algbw_GBps"]) <= 1e-9 * r[side + "busbw_GBps"], r
    assert abs(r["busbw_ratio"] - r["busbw_GBps"] / r["mpi_busbw_GBps"]) <= 1e-9, r
    assert "link_frac" not in r and "link_limit_us" not in r, r
print(f"{op} {dtype} {n} ranks: {len(rows)} sizes {lo}..{hi} bytes, wrong 0")
PY
}
run_np 2 bench allreduce --min-bytes 4096 --max-bytes 1048576 --iters 3 --link-gbit 1 >"$WORK/ar.jsonl" 2>"$WORK/ar.err"
check "$WORK/ar.jsonl" allreduce 2 fp32 4096 1048576
grep -q "bench: allreduce: flat: 1 host x 2 ranks; shared memory" "$WORK/ar.err" || { cat "$WORK/ar.err"; fail "allreduce path not described"; }
grep -q "no link to cross" "$WORK/ar.err" || fail "--link-gbit on one host: no note"
ok "allreduce fp32, 2 ranks: 9 sizes, results equal MPI_Allreduce's, bandwidths consistent"
run_np 2 bench allreduce --dtype bf16 --min-bytes 4096 --max-bytes 262144 --iters 3 >"$WORK/bf.jsonl"
check "$WORK/bf.jsonl" allreduce 2 bf16 4096 262144
ok "allreduce bf16, 2 ranks: results equal MPI_Allreduce's with the same 16-bit sum"
# 3 ranks: blocks of a third; sizes from 12 bytes (one float per rank) to 3 MiB.
run_np 3 bench allreduce --min-bytes 12 --max-bytes 3145728 --iters 2 >"$WORK/ar3.jsonl"
check "$WORK/ar3.jsonl" allreduce 3 fp32 12 3145728
for op in reduce_scatter allgather; do
  run_np 3 bench "$op" --min-bytes 12 --max-bytes 3145728 --iters 2 >"$WORK/$op.jsonl"
  check "$WORK/$op.jsonl" "$op" 3 fp32 12 3145728
done
ok "3 ranks: allreduce, reduce_scatter, allgather from 12 bytes to 3 MiB equal the bare MPI calls"

# A wrong result, made from outside: the shim adds 1 to the first float of rank 0's MPI_Allreduce
# result (the bare MPI call's; hpctrain's own allreduce on one host goes through shared memory).
SHIM="${HPCTRAIN_BUILD_DIR:-$(dirname "$BIN")}/tests/libpreload_allreduce_corrupt.so"
[ -f "$SHIM" ] || fail "$SHIM is not built"
set +e
timeout 600 "$MPIEXEC" -np 2 "${MPIFLAGS[@]}" -x LD_PRELOAD="$SHIM" "$BIN" bench allreduce --min-bytes 4096 \
  --max-bytes 65536 --iters 2 >"$WORK/wrong.jsonl" 2>"$WORK/wrong.err"
rc=$?
set -e
[ "$rc" = 1 ] || { cat "$WORK/wrong.err"; fail "a wrong allreduce result: exit $rc, expected 1"; }
/usr/bin/python3 - "$WORK/wrong.jsonl" <<'PY' || fail "a wrong allreduce result is not counted"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
assert [r["bytes"] for r in rows] == [4096, 8192, 16384, 32768, 65536], rows
assert all(r["wrong"] == 1 for r in rows), [(r["bytes"], r["wrong"]) for r in rows]
PY
grep -q '^hpctrain bench allreduce: WRONG results at 5 sizes' "$WORK/wrong.err" || { cat "$WORK/wrong.err"; fail "no WRONG line"; }
ok "a corrupted MPI_Allreduce result (LD_PRELOAD shim): wrong = 1 at each of 5 sizes, exit 1"
expect_error bench_min "min-bytes" bench allreduce --min-bytes 0
expect_error bench_order "min-bytes" bench reduce_scatter --min-bytes 8192 --max-bytes 4096
expect_error bench_iters "iters" bench allgather --iters 0
expect_error bench_dtype "dtype" bench allreduce --dtype fp16
expect_error bench_link "link-gbit" bench allreduce --link-gbit -1
