#!/usr/bin/env bash
# A throwaway multi-host cluster on this one machine, made of Linux network namespaces.
# Source it (tests) or run it (by hand):
#   source tests/cluster/nscluster.sh; cluster_up 2       # hosts node0, node1
#   tests/cluster/nscluster.sh shell 2                     # by hand: a shell on node0, torn down on exit
#
# What a host is: a network namespace with its own loopback, one veth `eth0` with an address in
# 198.18.0.0/24 (RFC 2544's benchmark range: routed nowhere) plugged into a bridge that lives in a
# "switch" namespace of its own, and its own hostname (a UTS namespace per command, set by `on`).
# Names resolve through /etc/netns/<ns>/hosts, which `on` (and the agent) bind-mount over
# /etc/hosts in a private mount namespace of each command (as `ip netns exec` would): the
# machine's own /etc/hosts, links and routes are never touched. The filesystem is shared, as a
# cluster's parallel filesystem is, except /dev/shm: each host has its own (a tmpfs of its own at
# /etc/netns/<ns>/shm, NSCLUSTER_SHM_SIZE, default 2g, bind-mounted over /dev/shm in the same
# private mount namespace, by `on` and the agent),
# as real hosts have their own memory: what a rank leaves in /dev/shm (a snapshot, a shared-memory
# segment) is seen by that host's processes only, and goes with the host at cluster_down.
# The port name limit (15 characters) allows owner pids up to 10 digits.
#
# NSCLUSTER_DATA_NET=1 before cluster_up gives every host a second veth `eth1` at 198.18.1.<i+1>
# on a second switch (NSCLUSTER_DATA_SUBNET): a data network for MPI next to the management
# network that names and the rsh agent use, as on clusters where ssh and MPI take different NICs.
#
# Functions (after cluster_up):
#   on HOST CMD...            run CMD on HOST (in its namespace, with its hostname)
#   link_down HOST / link_up HOST   pull / replug HOST's cable at the switch
#   data_link_down HOST / data_link_up HOST   the same for HOST's data-network cable (eth1)
#   slow_link HOST            a slow link on HOST (tc netem delay 5ms, or tbf 100 Mbit/s)
#   cluster_procs             pids of every process inside the cluster's namespaces
#   cluster_down              kill everything inside, delete namespaces and files (idempotent)
#   cluster_leftovers         prints what cluster_down left behind (empty = clean)
# cluster_up installs an EXIT/INT/TERM/HUP trap that calls the caller's own cleanup (if it
# defined a function `cluster_user_cleanup`), then cluster_down. Namespaces of earlier runs whose
# owning shell is gone (killed with SIGKILL, where no trap runs) are reaped at cluster_up.
#
# For Open MPI: NSCLUSTER_AGENT is the rsh agent (tests/cluster/nsrsh), which enters the named
# host's namespace; NSCLUSTER_SUBNET is the subnet for btl_tcp_if_include/oob_tcp_if_include.
NSCLUSTER_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NSCLUSTER_AGENT=$NSCLUSTER_DIR/nsrsh
NSCLUSTER_SUBNET=198.18.0.0/24
NSCLUSTER_DATA_SUBNET=198.18.1.0/24
NSCLUSTER_HOSTS=()

# Namespace names: hpctc-<owner pid>-<host>; the owner pid lets a later run reap orphans.
_ns() { echo "hpctc-$NSCLUSTER_OWNER-$1"; }
# Switch-side link names carry the owner too (<= 15 characters), so a leftover is recognisable.
_port() { echo "hc${NSCLUSTER_OWNER}p$1"; }
_dport() { echo "hc${NSCLUSTER_OWNER}d$1"; }

netns_available() {
  [ "$(id -u)" = 0 ] || { echo "not root"; return 1; }
  for b in ip unshare nsenter tc; do command -v "$b" >/dev/null || { echo "$b not installed"; return 1; }; done
  local probe="hpctc-probe-$$"
  ip netns add "$probe" 2>/dev/null || { echo "ip netns add failed (no CAP_SYS_ADMIN or no netns support)"; return 1; }
  local ok=0
  nsenter --net="/var/run/netns/$probe" unshare --mount --uts true 2>/dev/null && ok=1
  ip -n "$probe" link add t0 type veth peer name t1 2>/dev/null || ok=0
  ip netns del "$probe"
  [ $ok = 1 ] || { echo "mount/UTS namespaces or veth links are unavailable"; return 1; }
}

_reap_orphans() {
  local ns owner
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^hpctc-[0-9]*-' || true); do
    owner=${ns#hpctc-}; owner=${owner%%-*}
    kill -0 "$owner" 2>/dev/null && continue
    NSCLUSTER_OWNER=$owner _teardown_ns "$ns"
  done
}

_teardown_ns() {
  local ns=$1 pids
  for _ in $(seq 50); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -z "$pids" ] && break
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null || true
    sleep 0.1
  done
  ip netns del "$ns" 2>/dev/null || true
  umount -l "/etc/netns/$ns/shm" 2>/dev/null || true
  rm -rf "/etc/netns/$ns"
}

# cluster_up N: hosts node0..node(N-1) at 198.18.0.1..N, joined by a bridge.
cluster_up() {
  local n=$1 i h ns sw
  NSCLUSTER_OWNER=$$
  _reap_orphans
  trap 'set +e; declare -F cluster_user_cleanup >/dev/null && cluster_user_cleanup; cluster_down' EXIT
  trap 'exit 130' INT; trap 'exit 143' TERM; trap 'exit 129' HUP
  sw=$(_ns sw)
  ip netns add "$sw"
  ip -n "$sw" link add "$(_port br)" type bridge
  ip -n "$sw" link set "$(_port br)" up
  if [ "${NSCLUSTER_DATA_NET:-0}" = 1 ]; then
    ip -n "$sw" link add "$(_dport br)" type bridge
    ip -n "$sw" link set "$(_dport br)" up
  fi
  local hosts="127.0.0.1 localhost"$'\n'
  for ((i = 0; i < n; i++)); do hosts+="198.18.0.$((i + 1)) node$i"$'\n'; done
  for ((i = 0; i < n; i++)); do
    h=node$i ns=$(_ns "$h")
    NSCLUSTER_HOSTS+=("$h")
    ip netns add "$ns"
    # Both ends are created inside namespaces, so no link ever exists in the machine's own.
    ip -n "$sw" link add "$(_port "$i")" type veth peer name eth0 netns "$ns"
    ip -n "$sw" link set "$(_port "$i")" master "$(_port br)" up
    ip -n "$ns" addr add "198.18.0.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    if [ "${NSCLUSTER_DATA_NET:-0}" = 1 ]; then
      ip -n "$sw" link add "$(_dport "$i")" type veth peer name eth1 netns "$ns"
      ip -n "$sw" link set "$(_dport "$i")" master "$(_dport br)" up
      ip -n "$ns" addr add "198.18.1.$((i + 1))/24" dev eth1
      ip -n "$ns" link set eth1 up
    fi
    mkdir -p "/etc/netns/$ns/shm"
    mount -t tmpfs -o "size=${NSCLUSTER_SHM_SIZE:-2g},mode=1777" "tmpfs-$ns" "/etc/netns/$ns/shm"
    printf '%s' "$hosts" >"/etc/netns/$ns/hosts"
  done
  export NSCLUSTER_OWNER NSCLUSTER_AGENT NSCLUSTER_SUBNET NSCLUSTER_DATA_SUBNET
}

on() {
  local h=$1 ns; shift
  ns=$(_ns "$h")
  nsenter --net="/var/run/netns/$ns" unshare --mount --uts \
    sh -c 'mount --bind "$1" /etc/hosts && mount --bind "$2" /dev/shm && hostname "$0" && shift 2 && exec "$@"' \
    "$h" "/etc/netns/$ns/hosts" "/etc/netns/$ns/shm" "$@"
}

link_down() { ip -n "$(_ns sw)" link set "$(_port "${1#node}")" down; }
# link_up HOST: plugs HOST back in and waits (up to 10 s) until node0 reaches it again, so a
# launch right after it does not race the bridge port and ARP (seen once: orted could not
# connect back to mpirun right after the link came up).
link_up() {
  local i=${1#node} k
  ip -n "$(_ns sw)" link set "$(_port "$i")" up
  for ((k = 0; k < 100; k++)); do
    ip netns exec "$(_ns node0)" ping -c 1 -W 1 "198.18.0.$((i + 1))" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "nscluster: node$i not reachable 10 s after its link came up" >&2
}
data_link_down() { ip -n "$(_ns sw)" link set "$(_dport "${1#node}")" down; }
data_link_up() {
  local i=${1#node} k
  ip -n "$(_ns sw)" link set "$(_dport "$i")" up
  for ((k = 0; k < 100; k++)); do
    ip netns exec "$(_ns node0)" ping -c 1 -W 1 "198.18.1.$((i + 1))" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "nscluster: node$i's data network not reachable 10 s after its link came up" >&2
}
# slow_link HOST: 5 ms more latency on HOST's eth0 (tc netem), or, on kernels without sch_netem
# (some VMs), a 100 Mbit/s bandwidth limit (tc tbf). Prints what it applied.
slow_link() {
  local ns; ns=$(_ns "$1")
  if ip netns exec "$ns" tc qdisc replace dev eth0 root netem delay 5ms 2>/dev/null; then
    echo "netem delay 5ms"
  else
    ip netns exec "$ns" tc qdisc replace dev eth0 root tbf rate 100mbit burst 64kb latency 200ms
    echo "tbf rate 100mbit (no sch_netem in this kernel)"
  fi
}

cluster_procs() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^hpctc-$NSCLUSTER_OWNER-" || true); do
    ip netns pids "$ns" 2>/dev/null || true
  done
}

cluster_down() {
  [ -n "${NSCLUSTER_OWNER:-}" ] || return 0
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^hpctc-$NSCLUSTER_OWNER-" || true); do
    _teardown_ns "$ns"
  done
  rmdir /etc/netns 2>/dev/null || true  # only if empty: other users' entries stay
}

cluster_leftovers() {
  ip netns list 2>/dev/null | awk '{print "namespace " $1}' | grep "hpctc-$NSCLUSTER_OWNER-" || true
  ls -d /etc/netns/hpctc-"$NSCLUSTER_OWNER"-* 2>/dev/null | sed 's/^/file /' || true
  grep " /etc/netns/hpctc-$NSCLUSTER_OWNER-" /proc/mounts | sed 's/^/mount /' || true
  ip -o link show 2>/dev/null | grep "hc${NSCLUSTER_OWNER}[pd]" | sed 's/^/link in the machine namespace: /' || true
  local p; p=$(cluster_procs); [ -z "$p" ] || echo "processes $p"
  grep -n '198\.18\.' /etc/hosts | sed 's/^/\/etc\/hosts line /' || true
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  case "${1:-}" in
    shell)
      cluster_up "${2:-2}"
      echo "hosts: ${NSCLUSTER_HOSTS[*]}; agent $NSCLUSTER_AGENT; subnet $NSCLUSTER_SUBNET (exit to tear down)"
      on node0 bash -i || true ;;
    *) echo "usage: $0 shell [N]   (or source it: cluster_up N; on HOST CMD; cluster_down)" >&2; exit 2 ;;
  esac
fi
