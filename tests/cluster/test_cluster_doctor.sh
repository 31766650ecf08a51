#!/usr/bin/env bash
# cluster (label `cluster`): `hpctrain doctor` through launch/multinode.sh on 2 namespace hosts
# x 2 ranks: 2 nodes, local ranks 0,1 on each host, every rank's host named, the collective
# self-test over TCP between the hosts passes, and the host-pair bandwidth line names both hosts;
# Open MPI runs with hpctrain's default of 2 TCP links per rank pair unless the user sets another.
# is torn down leaving nothing behind; launched from node1, rank 0 runs on node1.
source "$(dirname "$0")/lib.sh"
cluster_start 2
hostfile "$WORK/hf" node0:2 node1:2
t0=$SECONDS
mn "$WORK/hf" doctor >"$WORK/doctor.txt" 2>&1 || { cat "$WORK/doctor.txt"; fail "doctor on 2 hosts x 2 ranks"; }
grep -q '^hpctrain doctor: 4 rank(s) on 2 node(s)$' "$WORK/doctor.txt" || { cat "$WORK/doctor.txt"; fail "doctor did not report 4 ranks on 2 nodes"; }
rows=$(awk '$1 ~ /^[0-9]+$/ && $3 != "" {print $1 "/" $2 "/" $3}' "$WORK/doctor.txt" | sort | tr '\n' ' ')
[ "$rows" = "0/0/node0 1/1/node0 2/0/node1 3/1/node1 " ] || { cat "$WORK/doctor.txt"; fail "rank/local/host rows are '$rows'"; }
grep -q '^doctor: OK' "$WORK/doctor.txt" || { cat "$WORK/doctor.txt"; fail "self-test across hosts"; }
# The allreduce path it reports: hierarchical on 2 x 2 (auto), with why, and what 16 MiB reaches on the link.
grep -q '^collectives: allreduce: hierarchical: 2 hosts x 2 ranks.*\[several hosts with several ranks on some\]$' "$WORK/doctor.txt" \
  || { grep collectives "$WORK/doctor.txt"; fail "doctor does not report the hierarchical allreduce"; }
grep -Eq '^collectives: allreduce 16 MiB: [0-9]+ us, [0-9.]+ GB/s on each host.s link .*slowest host pair measured [0-9.]+ GB/s' "$WORK/doctor.txt" \
  || { grep collectives "$WORK/doctor.txt"; fail "doctor: no 16 MiB allreduce line next to the host-pair bandwidth"; }
grep -q '^network: MPI transport (rank 0): .*btl_tcp_links=2' "$WORK/doctor.txt" \
  || { grep network "$WORK/doctor.txt"; fail "Open MPI does not run with hpctrain's btl_tcp_links=2"; }
ok "doctor on 2 hosts x 2 ranks: 2 nodes, rank/local/host $rows, self-test OK, btl_tcp_links=2 ($((SECONDS - t0)) s)"

# A job started from node1 with node1 first in the hostfile has rank 0 on node1 (Open MPI puts
# the launching host first; test_cluster_train resumes this way).
# The user's own Open MPI setting wins over hpctrain's default.
hostfile "$WORK/hf-rev" node1:1 node0:1
OMPI_MCA_btl_tcp_links=1 MN_HOST=node1 mn "$WORK/hf-rev" doctor >"$WORK/rev.txt" 2>&1 || { cat "$WORK/rev.txt"; fail "doctor with node1 first"; }
grep -q '^network: MPI transport (rank 0): .*btl_tcp_links=1' "$WORK/rev.txt" \
  || { grep network "$WORK/rev.txt"; fail "OMPI_MCA_btl_tcp_links=1 from the user did not win"; }
rows=$(awk '$1 ~ /^[0-9]+$/ && $3 != "" {print $1 "/" $2 "/" $3}' "$WORK/rev.txt" | sort | tr '\n' ' ')
[ "$rows" = "0/0/node1 1/0/node0 " ] || { cat "$WORK/rev.txt"; fail "node1-first rows are '$rows'"; }
ok "launched from node1, node1 first: rank 0 on node1, rank 1 on node0; the user's btl_tcp_links=1 kept"

cluster_down
left=$(cluster_leftovers)
[ -z "$left" ] || fail "teardown left: $left"
ok "teardown: no namespace, link, hosts line or process left"
