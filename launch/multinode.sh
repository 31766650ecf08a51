#!/usr/bin/env bash
# hpctrain across several workstations with plain mpirun (no Slurm).
#   launch/multinode.sh --hostfile FILE [-n N] [--oversubscribe] -- SUBCOMMAND [ARGS...]
#   e.g.  NCCL_SOCKET_IFNAME=eth1 OMPI_MCA_btl_tcp_if_include=eth1 \
#         launch/multinode.sh --hostfile hosts.txt -- train --model resnet --data /shared/fmnist
#
# FILE: one machine per line with its rank count (= GPUs), Open MPI syntax:
#     gpu-box-1 slots=4
#     gpu-box-2 slots=4
# -n defaults to the sum of the slots. Ranks fill the machines in file order (--map-by slot),
# so ranks 0-3 are on gpu-box-1; each rank's local rank (its GPU) comes from MPI, never SLURM_*.
#
# Every machine needs: passwordless ssh from this one, the same Open MPI, this checkout built at
# the same path (a shared filesystem or an identical clone), and the data at the same path.
#
# Network variables: set them before calling; they are passed to every rank (mpirun -x):
#   NCCL_SOCKET_IFNAME           the interface NCCL bootstraps and (without InfiniBand) talks
#                                over, e.g. eth1, or ^docker,lo to exclude some. Needed when
#                                machines have several NICs and NCCL picks one they can't reach.
#   OMPI_MCA_btl_tcp_if_include  the interface(s) or subnet MPI's TCP transport uses (CPU
#                                tensors, NCCL's unique-id broadcast), e.g. eth1 or 10.0.0.0/24.
#                                Also set OMPI_MCA_oob_tcp_if_include to the same value if
#                                mpirun itself hangs at start-up.
#   NCCL_DEBUG=INFO              NCCL prints the transport it chose (NET/IB or NET/Socket) and
#                                its rings at start-up: the first thing to check when slow.
#   NCCL_IB_HCA                  which InfiniBand adapters NCCL uses.
#   OMPI_MCA_oob_tcp_keepalive_{time,intvl,probes}  how fast mpirun notices a host that drops
#                                off the network; defaults here 10, 5, 3 (about 25 s; Open MPI's
#                                own: 8 min). See launch/node_loss.sh.
#   HPCTRAIN_LAUNCHER_GRACE      seconds mpirun may outlive every rank on this machine before
#                                it is ended (default 15; exit code 3).
# First run `launch/multinode.sh --hostfile FILE -- doctor`: every rank prints its host, rank,
# local rank and GPU, then each host's interfaces, the MPI transport settings and the measured
# bandwidth of every host pair, then a collective self-test runs across the machines. Every rank
# also checks that it runs rank 0's build (a stale clone on one host stops the job at start,
# naming that host).
#
# A host lost mid-run (link down, crash): mpirun reports "ORTE has lost communication with a
# remote daemon" and ends every process of the job within ~25 s (measured: see README,
# "Multi-node"). If hpctrain's watchdog fires first (--collective-timeout under ~25 s), Open MPI
# would wait ~15 min for the lost daemon; this launcher then ends mpirun HPCTRAIN_LAUNCHER_GRACE s
# after the last local rank exited. Either way the latest checkpoint is complete: resubmit.
#
# Tested on a cluster of network-namespace hosts: `ctest -L cluster` (tests/cluster/), or try it
# by hand with `tests/cluster/nscluster.sh shell 2`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hostfile="" pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --hostfile) hostfile=${2:-}; shift 2 ;;
    -n) pass+=(-n "${2:-}"); shift 2 ;;
    --oversubscribe) pass+=(--oversubscribe); shift ;;
    --) shift; break ;;
    *) break ;;
  esac
done
usage="usage: launch/multinode.sh --hostfile FILE [-n N] [--oversubscribe] -- SUBCOMMAND [ARGS]"
[ -n "$hostfile" ] || { echo "multinode.sh: --hostfile FILE is required; $usage" >&2; exit 2; }
[ -r "$hostfile" ] || { echo "multinode.sh: cannot read hostfile $hostfile" >&2; exit 2; }
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
if [[ " ${pass[*]} " != *" -n "* ]]; then
  slots=$(sed -n 's/^[^#]*slots=\([0-9][0-9]*\).*/\1/p' "$hostfile" | awk '{s += $1} END {print s + 0}')
  [ "$slots" -gt 0 ] || { echo "multinode.sh: no 'slots=N' in $hostfile; give -n N" >&2; exit 2; }
  pass+=(-n "$slots")
fi
for v in NCCL_SOCKET_IFNAME OMPI_MCA_btl_tcp_if_include NCCL_DEBUG; do
  [ -n "${!v:-}" ] && echo "multinode.sh: $v=${!v}" >&2
done
# local.sh passes the network variables above (when set) with -x and adds --hostfile.
exec "$here/local.sh" "${pass[@]}" --hostfile "$hostfile" -- "$@"
