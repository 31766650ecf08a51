#!/usr/bin/env bash
# cluster (label `cluster`): `hpctrain doctor` through launch/multinode.sh on 2 namespace hosts
# x 2 ranks: 2 nodes, local ranks 0,1 on each host, every rank's host named, the collective
# self-test over TCP between the hosts passes, and the host-pair bandwidth line names both hosts.
# Then the mpirun flags that multinode.sh adds for multi-host runs are checked, and the cluster
# is torn down leaving nothing behind.
source "$(dirname "$0")/lib.sh"
cluster_start 2
hostfile "$WORK/hf" node0:2 node1:2
t0=$SECONDS
mn "$WORK/hf" doctor >"$WORK/doctor.txt" 2>&1 || { cat "$WORK/doctor.txt"; fail "doctor on 2 hosts x 2 ranks"; }
grep -q '^hpctrain doctor: 4 rank(s) on 2 node(s)$' "$WORK/doctor.txt" || { cat "$WORK/doctor.txt"; fail "doctor did not report 4 ranks on 2 nodes"; }
rows=$(awk '$1 ~ /^[0-9]+$/ && $3 != "" {print $1 "/" $2 "/" $3}' "$WORK/doctor.txt" | sort | tr '\n' ' ')
[ "$rows" = "0/0/node0 1/1/node0 2/0/node1 3/1/node1 " ] || { cat "$WORK/doctor.txt"; fail "rank/local/host rows are '$rows'"; }
grep -q '^doctor: OK' "$WORK/doctor.txt" || { cat "$WORK/doctor.txt"; fail "self-test across hosts"; }
ok "doctor on 2 hosts x 2 ranks: 2 nodes, rank/local/host $rows, self-test OK ($((SECONDS - t0)) s)"
