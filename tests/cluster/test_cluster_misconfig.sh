#!/usr/bin/env bash
# cluster (label `cluster`): misconfigured clusters end quickly with an error naming the cause,
# through launch/multinode.sh on namespace hosts.
#   a. a hostfile naming a host that does not exist: the launcher's own error, within 30 s;
#   b. a host that is off the network at start: the launcher's error, within 30 s;
#   c. btl_tcp_if_include matching no interface on one host (node1's NIC is called ib0): the MPI
#      library's error naming the unreachable pair, exit != 0, within 60 s;
#   d. one host running another hpctrain build at the same path: `doctor` and `train` stop at
#      set-up with one line naming that host and its ranks, exit 2;
#   e. doctor on 2 hosts shows every host's interfaces and the host pair's bandwidth.
source "$(dirname "$0")/lib.sh"
cluster_start 2
hostfile "$WORK/hf" node0:1 node1:1
D="$WORK/d"
run_np 1 data synthetic --out "$D" --n 256 --test-n 64 --classes 4 --height 12 --width 12 --seed 5 >/dev/null
train=(train --model mlp --device cpu --data "$D" --epochs 1 --max-steps 2 --batch-size 16)

# expect_fail TAG LIMIT_S PATTERN ARGS...: mn ARGS must fail within LIMIT_S, stderr matching
# PATTERN. Sets rc and took.
expect_fail() {
  local tag=$1 limit=$2 pattern=$3; shift 3
  local t0=$SECONDS
  rc=0
  MN_TIMEOUT=$((limit + 30)) mn "$@" >"$WORK/$tag.out" 2>"$WORK/$tag.err" || rc=$?
  took=$((SECONDS - t0))
  [ $rc != 0 ] || fail "$tag: exited 0"
  [ $rc != 124 ] && [ $took -le "$limit" ] || fail "$tag: took $took s (limit $limit s), rc $rc"
  grep -qE "$pattern" "$WORK/$tag.err" || { cat "$WORK/$tag.err"; fail "$tag: stderr does not match '$pattern'"; }
}

hostfile "$WORK/hf-ghost" node0:1 node7:1
expect_fail ghost 30 "Could not resolve hostname node7|ORTE was unable to reliably start" "$WORK/hf-ghost" doctor
ok "a. hostfile names node7, which does not exist: launcher error, exit $rc after $took s"

link_down node1
expect_fail offline 30 "ORTE (was unable to reliably start|has lost communication)|connection back to mpirun" "$WORK/hf" doctor
link_up node1
ok "b. node1 off the network at start: launcher error, exit $rc after $took s"

ns1=$(_ns node1)
ip -n "$ns1" link set eth0 down
ip -n "$ns1" link set eth0 name ib0
ip -n "$ns1" link set ib0 up
CLUSTER_BTL_IF=eth0 expect_fail ifname 60 "unable to reach each other|No network interfaces|btl_tcp_if_include" "$WORK/hf" doctor
ok "c. btl_tcp_if_include=eth0 matches nothing on node1 (ib0): MPI error, exit $rc after $took s"
ip -n "$ns1" link set ib0 down
ip -n "$ns1" link set ib0 name eth0
ip -n "$ns1" link set eth0 up

cp "$BIN" "$WORK/hpctrain-other"
printf 'another build' >>"$WORK/hpctrain-other"
hostfile "$WORK/hf22" node0:2 node1:2
export NSCLUSTER_BIND="node1=$WORK/hpctrain-other:$(readlink -f "$BIN")"
for cmd in doctor train; do
  args=(doctor); [ $cmd = train ] && args=("${train[@]}")
  rc=0
  mn "$WORK/hf22" "${args[@]}" >"$WORK/build-$cmd.out" 2>"$WORK/build-$cmd.err" || rc=$?
  [ $rc = 2 ] || { cat "$WORK/build-$cmd.err"; fail "d. $cmd with another build on node1 exited $rc, expected 2"; }
  lines=$(grep -c '^hpctrain: error: hosts run different hpctrain builds: node1 (ranks 2,3) has [0-9a-f]\{16\}; node0 (ranks 0,1) has [0-9a-f]\{16\} (rank 0.s)' "$WORK/build-$cmd.err" || true)
  [ "$lines" = 1 ] || { cat "$WORK/build-$cmd.err"; fail "d. $cmd: expected one line naming node1 (ranks 2,3)"; }
done
unset NSCLUSTER_BIND
ok "d. another build on node1: doctor and train exit 2 with one line naming node1 (ranks 2,3)"

mn "$WORK/hf" doctor >"$WORK/doctor.txt" 2>&1 || { cat "$WORK/doctor.txt"; fail "e. doctor"; }
grep -q "^network: node0 interfaces: eth0=198.18.0.1$" "$WORK/doctor.txt" && grep -q "^network: node1 interfaces: eth0=198.18.0.2$" "$WORK/doctor.txt" \
  || { cat "$WORK/doctor.txt"; fail "e. doctor does not list each host's interfaces"; }
# Open MPI resolves the subnet given in btl_tcp_if_include to the interface it matched.
grep -q "^network: MPI transport (rank 0): .*btl_tcp_if_include=eth0" "$WORK/doctor.txt" || { cat "$WORK/doctor.txt"; fail "e. doctor does not show the interface btl_tcp_if_include resolved to"; }
pair=$(grep "^network: node0 <-> node1: [0-9.]* GB/s" "$WORK/doctor.txt") || { cat "$WORK/doctor.txt"; fail "e. no host-pair bandwidth"; }
ok "e. doctor: interfaces per host, transport settings, ${pair#network: }"

[ -n "${KEEP_LOGS:-}" ] && cp -r "$WORK" "$KEEP_LOGS"
cluster_down
left=$(cluster_leftovers)
[ -z "$left" ] || fail "teardown left: $left"
ok "teardown: no namespace, link, hosts line or process left"
