#!/usr/bin/env bash
# cluster (label `cluster`): the launcher probes the network MPI uses, not only the remote shell.
# 3 namespace hosts, each with a management network (eth0: names, the rsh agent) and a data
# network (eth1, 198.18.1.0/24: OMPI_MCA_oob_tcp_if_include and btl_tcp_if_include), as on
# clusters where ssh and MPI take different NICs. `launch/multinode.sh --spares 1 --max-restarts 2`:
# node0 and node1 run the job (1 rank each), node2 is the spare.
#   a. node1's DATA cable is pulled after the first checkpoint; its shell still answers. The
#      launcher finds node1's MPI address silent, replaces node1 by node2 at the first restart
#      (one restart line, naming why) and the job finishes from the checkpoint (resumed_step >=
#      10). (It used to relaunch on node0 + node1, fail to start mpirun's daemon there, and
#      again, until the restarts ran out: exit 1.)
#   b. node1 answers the shell and the data network, but its orted dies in two attempts (killed):
#      the first restart reuses the same hosts, the second treats node1 as lost (mpirun named it
#      lost twice) and puts the spare in its place; the job finishes.
source "$(dirname "$0")/lib.sh"
t_start=$SECONDS
NSCLUSTER_DATA_NET=1 cluster_start 3
export CLUSTER_MPI_NET=$NSCLUSTER_DATA_SUBNET
D="$WORK/d"
run_np 1 data synthetic --out "$D" --n 1024 --test-n 128 --classes 4 --height 12 --width 12 --seed 5 --noise 200 >/dev/null
hostfile "$WORK/hf" node0:1 node1:1 node2:1
common=(train --model cnn --device cpu --data "$D" --epochs 100 --max-steps 300 --batch-size 16 --lr 0.02
  --seed 3 --log-every 1 --ckpt-every 10 --collective-timeout 15)
export MN_FLAGS="--spares 1 --max-restarts 2 --oversubscribe"

# trained_in_attempt METRICS K: attempt K (1 = the first) has written a train record.
trained_in_attempt() { [ -f "$1" ] && awk -v k="$2" '/"type":"config"/ { c++ } c >= k && /"type":"train"/ { t = 1 } END { exit !t }' "$1"; }
kill_orted() {  # kill_orted HOST: SIGKILL the Open MPI daemon on HOST
  local p
  p=$(ip netns pids "$(_ns "$1")" | xargs -r ps -o pid=,comm= -p | awk '$2 == "orted" { print $1 }')
  [ -n "$p" ] || fail "no orted on $1"
  kill -KILL $p
}
finished() {  # finished TAG: the job's summary says 300 steps
  [ "$(json_field "$WORK/$1.txt" steps)" = 300 ] || fail "$1: the job ended at step $(json_field "$WORK/$1.txt" steps)"
}

# --- a. the data network of node1 down, its shell up ---------------------------------------------
mn "$WORK/hf" "${common[@]}" --ckpt-dir "$WORK/a" --metrics "$WORK/a.jsonl" >"$WORK/a.txt" 2>"$WORK/a.err" &
job=$!
wait_for 240 "the first checkpoint" ckpt_at_least "$WORK/a" 10
data_link_down node1
set +e; wait $job; rc=$?; set -e
on node0 "$NSCLUSTER_AGENT" node1 true || fail "a. node1's shell does not answer (the test meant it to)"
[ "$rc" = 0 ] || { tail -30 "$WORK/a.err"; fail "a. the job exited $rc after node1's data network went down (spare node2)"; }
line=$(grep '^multinode.sh: restart' "$WORK/a.err" || true)
want="^multinode.sh: restart 1/2: host node1 lost \(rank 1; node1's shell answers, its MPI address 198\.18\.1\.2 does not\), replaced by spare node2; resuming from step-[0-9]{8}$"
[ "$(grep -c '^multinode.sh: restart' "$WORK/a.err")" = 1 ] && [[ "$line" =~ $want ]] ||
  { cat "$WORK/a.err"; fail "a. not one restart line naming node1's silent MPI address and spare node2"; }
st=${line##*resuming from }
grep -q "resumed from .*$st at step $((10#${st#step-}))" "$WORK/a.txt" || { grep -i resum "$WORK/a.txt"; fail "a. the trainer did not resume from $st"; }
finished a
/usr/bin/python3 - "$WORK/a.jsonl" <<'PY' || fail "a. restart record"
import json, sys
r = [x for x in map(json.loads, open(sys.argv[1])) if x["type"] == "restart"]
assert len(r) == 1 and r[0]["lost_hosts"] == ["node1"] and r[0]["replaced_by"] == ["node2"], r
assert r[0]["resumed_step"] >= 10, r
PY
ok "a. node1's data network down, its shell up: $line; the trainer resumed from $st, finished at step 300"
data_link_up node1

# --- b. node1 answers, but mpirun loses its daemon twice ----------------------------------------
mn "$WORK/hf" "${common[@]}" --ckpt-dir "$WORK/b" --metrics "$WORK/b.jsonl" >"$WORK/b.txt" 2>"$WORK/b.err" &
job=$!
wait_for 240 "attempt 1 training" trained_in_attempt "$WORK/b.jsonl" 1
kill_orted node1
wait_for 240 "attempt 2 training" trained_in_attempt "$WORK/b.jsonl" 2
kill_orted node1
set +e; wait $job; rc=$?; set -e
[ "$rc" = 0 ] || { tail -30 "$WORK/b.err"; fail "b. the job exited $rc"; }
mapfile -t lines < <(grep '^multinode.sh: restart' "$WORK/b.err")
want1="^multinode.sh: restart 1/2: the job ended with exit [0-9]+ \(mpirun lost a remote daemon; reported: ([^)]*,)?node1(,[^)]*)?\), every host answers: same hosts; resuming from "
want2="^multinode.sh: restart 2/2: host node1 lost \(rank 1; mpirun named node1 lost in 2 attempts, though it answers\), replaced by spare node2; resuming from "
[ "${#lines[@]}" = 2 ] && [[ "${lines[0]}" =~ $want1 ]] && [[ "${lines[1]}" =~ $want2 ]] ||
  { cat "$WORK/b.err"; fail "b. not two restart lines: same hosts, then node1 lost (named twice) and replaced"; }
finished b
/usr/bin/python3 - "$WORK/b.jsonl" <<'PY' || fail "b. restart records"
import json, sys
recs = list(map(json.loads, open(sys.argv[1])))
r = [x for x in recs if x["type"] == "restart"]
assert [x["type"] for x in recs].count("config") == 3, "not three attempts"
assert len(r) == 2 and r[0]["lost_hosts"] == [] and r[1]["lost_hosts"] == ["node1"] and r[1]["replaced_by"] == ["node2"], r
assert all(x["cause"] == "mpirun lost a remote daemon" and x["resumed_step"] < 300 for x in r), r
PY
ok "b. node1's daemon lost twice while node1 answers: ${lines[1]}"
echo "test_cluster_mpi_path: total $((SECONDS - t_start)) s"
