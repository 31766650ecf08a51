#!/usr/bin/env bash
# cluster (label `cluster`): the hierarchical allreduce across 2 namespace hosts.
#   a. 2 hosts x 2 ranks picks it by itself (auto; the train log says so and why) and ends with
#      the parameters of 1 host x 4 ranks (fp32, 1e-5 per tensor), and of --allreduce flat on the
#      same hosts; ZeRO-1 too, whose reduce-scatter and allgather take their own hierarchical
#      path (each block's host sums sent once to its owner; each block once to each other host).
#   b. 2 hosts x 3 ranks == 1 host x 6 ranks; uneven 3 + 1 == 1 host x 4 ranks, DDP and ZeRO-1.
#   c. --grad-comm-dtype bf16 on 2 x 2, DDP and ZeRO-1: the log shows the hierarchical path with
#      16-bit sums across hosts and the reducer handing over bfloat16; the summary's
#      bytes_reduced is half the fp32 run's; the parameters differ from the fp32 run's (bf16
#      rounding of every averaged gradient) by more than 4e-4 and at most 4e-3 per tensor after
#      20 steps (measured 1.59e-3, DDP and ZeRO-1 alike: 1/4x..2.5x); train and test loss within 2%.
#   d. `hpctrain bench allreduce|reduce_scatter|allgather --link-gbit 1` on 2 x 2 and 3 + 1: the
#      hierarchical paths' results equal the bare MPI calls' at every size (`wrong` 0), and
#      link_limit_us = share x bytes x 8 / 1 Gbit/s (share 2(H-1)/H = 1 for allreduce, 1/2 for the
#      other two), link_frac = link_limit_us / time_us.
source "$(dirname "$0")/lib.sh"
cluster_start 2
D="$WORK/d"
run_np 1 data synthetic --out "$D" --n 1024 --test-n 128 --classes 4 --height 12 --width 12 --seed 5 --noise 200 >/dev/null
hostfile "$WORK/hf22" node0:2 node1:2
hostfile "$WORK/hf33" node0:3 node1:3
hostfile "$WORK/hf31" node0:3 node1:1
export MN_FLAGS=--oversubscribe
merged() { run_np 1 ckpt merge "$1" --out "$1.h5" >/dev/null; }
common=(--model mlp --device cpu --data "$D" --epochs 2 --max-steps 20 --lr 0.02 --seed 7 --log-every 1000
  --batch-size 8 --bucket-mb 0.05)
# one run: NAME, then "mn HOSTFILE" or "np N", then extra train flags
run() {
  local name=$1 how=$2 where=$3; shift 3
  if [ "$how" = mn ]; then
    mn "$where" train "${common[@]}" --ckpt-dir "$WORK/$name" "$@" >"$WORK/$name.txt" 2>&1
  else
    run_np "$where" train "${common[@]}" --ckpt-dir "$WORK/$name" "$@" >"$WORK/$name.txt" 2>&1
  fi || { tail "$WORK/$name.txt"; fail "$name"; }
  [ "$(json_field "$WORK/$name.txt" steps)" = 20 ] || fail "$name: summary $(tail -1 "$WORK/$name.txt")"
  merged "$WORK/$name"
}
same() { /usr/bin/python3 "$COMPARE" "$WORK/$1.h5" "$WORK/$2.h5" --rtol "${3:-1e-5}" || fail "$1 != $2"; }

# --- a. 2 x 2: auto picks hierarchical; == 1 host x 4; == flat -----------------------------------
run h22 mn "$WORK/hf22"
grep -q "allreduce: hierarchical: 2 hosts x 2 ranks.*\[several hosts with several ranks on some\]" "$WORK/h22.txt" \
  || { grep "allreduce" "$WORK/h22.txt"; fail "2 x 2 did not choose the hierarchical allreduce by itself"; }
run f22 mn "$WORK/hf22" --allreduce flat
grep -q "allreduce: flat: 2 hosts x 2 ranks; MPI_Allreduce" "$WORK/f22.txt" || { grep allreduce "$WORK/f22.txt"; fail "--allreduce flat not taken"; }
run one4 np 4
grep -q "allreduce: flat: 1 host x 4 ranks; shared memory" "$WORK/one4.txt" || { grep allreduce "$WORK/one4.txt"; fail "one host: not the shared-memory path"; }
same h22 one4
same h22 f22
ok "a. 2 hosts x 2 ranks: auto -> hierarchical; == 1 host x 4 ranks and == --allreduce flat (1e-5)"
run hz22 mn "$WORK/hf22" --zero 1
grep -q "reduce_scatter: hierarchical" "$WORK/hz22.txt" || { grep reduce_scatter "$WORK/hz22.txt"; fail "ZeRO-1 on 2 x 2: reduce_scatter not hierarchical"; }
run z4 np 4 --zero 1
same hz22 z4
ok "a. ZeRO-1 (reduce-scatter + allgather) hierarchical on 2 x 2 == 1 host x 4 ranks"

# --- b. 2 x 3 and uneven 3 + 1 -------------------------------------------------------------------
common[${#common[@]}-3]=4  # --batch-size 4 (6 ranks x 4 = global 24)
run h33 mn "$WORK/hf33"
grep -q "hierarchical: 2 hosts x 3 ranks" "$WORK/h33.txt" || fail "2 x 3 not hierarchical"
run one6 np 6
same h33 one6
ok "b. 2 hosts x 3 ranks == 1 host x 6 ranks (1e-5)"
run h31 mn "$WORK/hf31"
grep -q "hierarchical: 2 hosts (3+1 ranks)" "$WORK/h31.txt" || { grep allreduce "$WORK/h31.txt"; fail "3 + 1 not hierarchical"; }
run one4b np 4
same h31 one4b
ok "b. uneven 3 + 1 ranks == 1 host x 4 ranks (1e-5)"
run hz31 mn "$WORK/hf31" --zero 1
run z4b np 4 --zero 1
same hz31 z4b
ok "b. ZeRO-1 on uneven 3 + 1 ranks == 1 host x 4 ranks (1e-5)"

# --- c. bf16 gradient communication --------------------------------------------------------------
# Each bf16 run: the hierarchical path with 16-bit sums across hosts in its log, the reducer's
# own line and summary naming bfloat16 with half the fp32 run's bytes (grad_comm_check.py), and
# parameters that differ from fp32's (a bf16 that is never applied leaves them equal) within a
# band around what was measured (see the header).
common[${#common[@]}-3]=8
gcheck() {  # gcheck NAME REF LOW HIGH
  grep -q "hpctrain train: half types: bfloat16/float16 sums cross hosts as 16 bits" "$WORK/$1.txt" ||
    { grep "half types" "$WORK/$1.txt"; fail "$1: 16-bit sums do not cross hosts as 16 bits"; }
  /usr/bin/python3 "$CLUSTER_TESTS_DIR/../e2e/grad_comm_check.py" "$WORK/$1.txt" "$WORK/$2.txt" bfloat16 ||
    fail "$1: gradients not reduced as bfloat16"
  /usr/bin/python3 "$COMPARE" "$WORK/$1.h5" "$WORK/$2.h5" --rtol "$4" --min-diff "$3" || fail "$1 against $2"
}
run b22 mn "$WORK/hf22" --grad-comm-dtype bf16
grep -q "allreduce: hierarchical: 2 hosts x 2 ranks" "$WORK/b22.txt" || { grep allreduce "$WORK/b22.txt"; fail "b22: not hierarchical"; }
gcheck b22 h22 4e-4 4e-3
/usr/bin/python3 - "$WORK/b22.txt" "$WORK/h22.txt" <<'EOF' || fail "bf16 loss far from fp32's"
import json, sys
b, f = (json.loads(open(p).read().strip().splitlines()[-1]) for p in sys.argv[1:3])
for k in ("train_loss", "test_loss"):
    assert abs(b[k] - f[k]) <= 0.02 * abs(f[k]), (k, b[k], f[k])
print(f"bf16 train/test loss {b['train_loss']:.5f}/{b['test_loss']:.5f}, fp32 {f['train_loss']:.5f}/{f['test_loss']:.5f}")
EOF
ok "c. --grad-comm-dtype bf16 on 2 x 2: hierarchical, 16 bits across hosts, half the bytes; parameters (4e-4, 4e-3] from fp32's, losses within 2%"
run bz22 mn "$WORK/hf22" --grad-comm-dtype bf16 --zero 1
grep -q "reduce_scatter: hierarchical" "$WORK/bz22.txt" || { grep reduce_scatter "$WORK/bz22.txt"; fail "bz22: reduce_scatter not hierarchical"; }
gcheck bz22 hz22 4e-4 4e-3
ok "c. ZeRO-1 with --grad-comm-dtype bf16 on 2 x 2: hierarchical reduce-scatter, half the bytes; parameters (4e-4, 4e-3] from ZeRO-1 fp32's"

# --- d. the bench across hosts: results checked, link columns -------------------------------------
bench_check() {  # FILE OP
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
op = sys.argv[2]
share = 1.0 if op == "allreduce" else 0.5  # 2 hosts
assert [r["bytes"] for r in rows] == [3072 << i for i in range(11)], rows
for r in rows:
    assert r["wrong"] == 0, f"{op} {r['bytes']} bytes: {r['wrong']} elements differ from MPI's"
    lim = share * r["bytes"] * 8 / 1e9 * 1e6
    assert abs(r["link_limit_us"] - lim) <= 1e-9 * lim, (r, lim)
    assert abs(r["link_frac"] - lim / r["time_us"]) <= 1e-9 * r["link_frac"], r
    assert abs(r["mpi_link_frac"] - lim / r["mpi_time_us"]) <= 1e-9 * r["mpi_link_frac"], r
print(f"{op}: {[r['bytes'] for r in rows]} bytes, wrong 0, link_frac {[round(r['link_frac'], 2) for r in rows]}")
PY
}
for hf in hf22 hf31; do
  for op in allreduce reduce_scatter allgather; do
    mn "$WORK/$hf" bench "$op" --link-gbit 1 --min-bytes 3072 --max-bytes 3145728 --iters 2 \
      >"$WORK/bench-$hf-$op.jsonl" 2>"$WORK/bench-$hf-$op.err" || { tail "$WORK/bench-$hf-$op.err"; fail "bench $op on $hf"; }
    path=$op; [ "$op" = allgather ] && path=allgather_into
    grep -q "^bench: $path: hierarchical" "$WORK/bench-$hf-$op.err" \
      || { cat "$WORK/bench-$hf-$op.err"; fail "bench $op on $hf: not the hierarchical path"; }
    bench_check "$WORK/bench-$hf-$op.jsonl" "$op" || fail "bench $op on $hf"
  done
done
ok "d. bench allreduce/reduce_scatter/allgather --link-gbit 1 on 2 x 2 and 3 + 1: equal to MPI, link columns right"
