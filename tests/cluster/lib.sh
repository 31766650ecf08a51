# Shared set-up for the cluster tests (ctest label `cluster`; sourced). Builds on
# tests/e2e/lib.sh (BIN, WORK, fail, ok, run_np, json_field) and tests/cluster/nscluster.sh.
#   cluster_start N          N hosts node0..node(N-1); skips the test (exit 0, "SKIPPED: ...")
#                            only when network namespaces are unavailable here
#   hostfile FILE H:S ...    writes an Open MPI hostfile, e.g. hostfile "$WORK/hf" node0:2 node1:1
#   mn HOSTFILE ARGS...      launch/multinode.sh on node0 (MN_HOST=H: on H), exactly as a cluster user runs it,
#                            with only the rsh agent swapped in (bounded by `timeout`), and the
#                            network variables a user sets on a real cluster set for the subnet
#   ckpt_at_least DIR STEP   DIR/latest is at STEP or later (with wait_for, tests/e2e/lib.sh)
#   lost_host_start, lose_node1, one_restart   a host lost mid-run (test_cluster_spare/shrink.sh)
CLUSTER_TESTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$CLUSTER_TESTS_DIR/../e2e/lib.sh"
source "$CLUSTER_TESTS_DIR/nscluster.sh"
SRC=${HPCTRAIN_SOURCE_DIR:-$(cd "$CLUSTER_TESTS_DIR/../.." && pwd)}
COMPARE="$CLUSTER_TESTS_DIR/../e2e/compare_ckpt.py"

cluster_user_cleanup() { rm -rf "$WORK"; }

cluster_start() {
  local why
  if ! why=$(netns_available); then
    echo "SKIPPED: network namespaces are unavailable here ($why); the cluster tests need root and netns"
    exit 0
  fi
  cluster_up "$1"
  export HPCTRAIN_BIN=$BIN
}

hostfile() {
  local f=$1; shift
  : >"$f"
  for hs in "$@"; do echo "${hs%%:*} slots=${hs##*:}" >>"$f"; done
}

# Only multinode.sh runs get the network variables (run_np's one-host runs stay as they are).
# CLUSTER_MPI_NET is the subnet MPI uses (oob and btl; default the hosts' one network,
# NSCLUSTER_SUBNET; NSCLUSTER_DATA_SUBNET for hosts with a data network);
# CLUSTER_BTL_IF overrides btl_tcp_if_include (a misconfiguration test); MN_FLAGS are more
# multinode.sh flags (--oversubscribe: no core binding, as every namespace host has the same cores).
# mpi_yield_when_idle: a namespace host's veth delivers packets in softirq context on the same
# 2 vCPUs the ranks run on; ranks that busy-poll (Open MPI's default when not oversubscribed)
# starve ksoftirqd, and every message then waits for a scheduler tick: a 4 KiB ping-pong took
# 8 ms, 256 KiB 16 ms (0.25-0.3 ms yielding). A real NIC has its own interrupts.
mn() {
  local hf=$1; shift
  local net=${CLUSTER_MPI_NET:-$NSCLUSTER_SUBNET}
  on "${MN_HOST:-node0}" env OMPI_MCA_plm_rsh_agent="$NSCLUSTER_AGENT" OMPI_MCA_oob_tcp_if_include="$net" \
    OMPI_MCA_mpi_yield_when_idle=1 \
    OMPI_MCA_btl_tcp_if_include="${CLUSTER_BTL_IF:-$net}" \
    timeout "${MN_TIMEOUT:-300}" "$SRC/launch/multinode.sh" --hostfile "$hf" ${MN_FLAGS:-} -- "$@"
}

# Every process of the cluster, one per line, with its age and command (for failure messages).
show_cluster_procs() {
  local p
  p=$(cluster_procs | tr '\n' ' ')
  [ -n "${p// /}" ] && ps -o pid,etimes,args -p "$p" | cut -c1-160 || true
}

# slurm_cluster_start N: N hosts (cluster_start) running Slurm through slurm/local-cluster.sh:
# slurmctld on node0, one slurmd per host, one munged. Skips (exit 0) without Slurm. Sets
# SLURM_RUN ("on node0": where client commands run) and SLURM_CONF; job ids appended to
# SLURM_JOBS are cancelled at exit, before the daemons stop and the hosts go.
slurm_cluster_start() {
  SLURM_CLUSTER="$SRC/slurm/local-cluster.sh"
  source "$SRC/tests/e2e/slurm_lib.sh"
  require_slurm "$SLURM_CLUSTER"
  cluster_start "$1"
  SLURM_RUN="on node0"
  SLURM_JOBS=()
  SDIR=$(mktemp -d /tmp/hpctrain-cluster-slurm.XXXXXX)
  chmod 755 "$SDIR"  # munged runs as user munge and must reach its socket
  export SLURM_CONF="$SDIR/slurm.conf"
  cluster_user_cleanup() {
    for j in "${SLURM_JOBS[@]}"; do $SLURM_RUN scancel "$j" 2>/dev/null; done
    "$SLURM_CLUSTER" stop "$SDIR"
    rm -rf "$SDIR" "$WORK"
  }
  HPCTRAIN_SLURM_NODES="${NSCLUSTER_HOSTS[*]}" HPCTRAIN_SLURM_ON=$NSCLUSTER_AGENT timeout 60 "$SLURM_CLUSTER" start "$SDIR" >/dev/null \
    || { tail -5 "$SDIR"/*.log; fail "Slurm on ${NSCLUSTER_HOSTS[*]} did not start"; }
}

# ckpt_at_least DIR STEP: DIR/latest names a checkpoint at STEP or later.
ckpt_at_least() { [ -f "$1/latest" ] && [ "$(sed 's/step-0*//' "$1/latest")" -ge "$2" ]; }

# The lost-host tests (test_cluster_spare.sh, test_cluster_shrink.sh). lost_host_start: 3 hosts,
# the synthetic data set $D, hostfile $WORK/hf with node0..node2 one slot each.
lost_host_start() {
  cluster_start 3
  D="$WORK/d"
  run_np 1 data synthetic --out "$D" --n 1024 --test-n 128 --classes 4 --height 12 --width 12 --seed 5 --noise 200 >/dev/null
  hostfile "$WORK/hf" node0:1 node1:1 node2:1
}
# lose_node1 WHAT ARGS...: `mn $WORK/hf ARGS...` in the background (checkpoints $WORK/ck,
# metrics $WORK/m.jsonl, output $WORK/job.txt and job.err); node1's cable is pulled once step 10
# is saved (t_cut: when), and the job must then exit 0 (else fail naming WHAT).
lose_node1() {
  local what=$1 job rc; shift
  mn "$WORK/hf" "$@" --ckpt-dir "$WORK/ck" --metrics "$WORK/m.jsonl" >"$WORK/job.txt" 2>"$WORK/job.err" &
  job=$!
  wait_for 240 "the first checkpoint" ckpt_at_least "$WORK/ck" 10
  link_down node1
  t_cut=$(date +%s.%N)
  set +e; wait $job; rc=$?; set -e
  [ "$rc" = 0 ] || { tail -30 "$WORK/job.err"; fail "the job exited $rc after losing node1 ($what)"; }
}
# one_restart REGEX WHAT: job.err holds exactly one launcher restart line, matching REGEX (else
# fail naming WHAT); sets line, st (the step-NNNNNNNN it resumed from) and n (its step).
one_restart() {
  line=$(grep '^multinode.sh: restart' "$WORK/job.err" || true)
  [ "$(grep -c '^multinode.sh: restart' "$WORK/job.err")" = 1 ] && [[ "$line" =~ $1 ]] ||
    { cat "$WORK/job.err"; fail "not one restart line naming $2"; }
  st=${line##*resuming from }
  n=$((10#${st#step-}))
}
