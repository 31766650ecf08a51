#!/usr/bin/env bash
# hpctrain across several workstations with plain mpirun (no Slurm).
#   launch/multinode.sh --hostfile FILE [-n N] [--oversubscribe] -- SUBCOMMAND [ARGS...]
#   launch/multinode.sh --hostfile FILE [--spares K] [--max-restarts N] [--shrink] ... -- train ...
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
# after the last local rank exited. Either way the latest checkpoint is complete: resubmit, or
# let this launcher restart the job by itself:
#
# Restarts (`train` with --ckpt-dir on the command line): --max-restarts N restarts a job that
# ended in a way a restart can cure (a lost host or rank: the watchdog's exit 3, an MPI error's
# exit 6, a rank killed by a signal, mpirun's "ORTE has lost communication with a remote daemon"
# or "ORTE was unable to reliably start one or more daemons"; see launch/restart_lib.sh
# rl_restartable), up to N times, with --resume auto from the newest complete checkpoint. Exit 1
# (an error a restart does not cure), 2 (bad input), 4 (out of memory), 5 (diverged) and 75
# (preempted) end the job at once, with one line naming the code and its cause. --spares K
# (default --max-restarts K) holds the LAST K hosts of FILE back as spares.
# After a failure the launcher names the hosts it lost: the ranks the watchdog reports silent,
# mpirun's lost daemon and killed ranks, mapped through the layout it launched (ranks fill the
# hosts in file order, slots=N each, the host mpirun runs on first), then confirmed by probing
# every host and spare, each within HPCTRAIN_PROBE_TIMEOUT s (default 5): through mpirun's remote
# shell (OMPI_MCA_plm_rsh_agent, default ssh), and over the network MPI uses: the host's
# addresses on OMPI_MCA_oob_tcp_if_include / OMPI_MCA_btl_tcp_if_include (interfaces or subnets)
# must answer a ping from this machine (clusters often keep ssh on a management network that
# answers while the data network is down). A host that fails either probe is lost, for the rest
# of the job; so is a host that mpirun names lost (its lost daemon, or the daemon that could not
# connect back at start) in two attempts, even if it answers both probes. Each lost host is
# replaced by the next spare that passes (one that does not is skipped and named); with no spare
# left, --shrink goes on with the remaining hosts and the same
# global batch (the per-rank --batch-size, which must be on the command line, scaled by old/new
# ranks; a one-line error when it does not divide), else the launcher gives up. When no host is
# lost (a rank killed on a host that answers) the same hosts are used again. One line per restart:
#   multinode.sh: restart 1/2: host node1 lost (rank 1), replaced by spare node2; resuming from step-00000040
#   multinode.sh: restart 1/2: host node1 lost (rank 1; node1's shell answers, its MPI address 10.0.0.2 does not), replaced by ...
# With restarts the launcher grace (HPCTRAIN_LAUNCHER_GRACE, see above) defaults to 5 s instead of
# 15: a failed job's mpirun that waits for a lost host only delays the restart.
# After N restarts the last failure's exit code is returned. The ranks get HPCTRAIN_RESTART
# (launch/local.sh) with lost_hosts, lost_ranks and replaced_by or shrunk_to: `train` writes them
# into the `restart` record of its --metrics file.
#
# Tested on a cluster of network-namespace hosts: `ctest -L cluster` (tests/cluster/), or try it
# by hand with `tests/cluster/nscluster.sh shell 2`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/restart_lib.sh"
hostfile="" pass=() n_user="" spares="" max_restarts="" shrink=0
while [ $# -gt 0 ]; do
  case "$1" in
    --hostfile) hostfile=${2:-}; shift 2 ;;
    -n) n_user=${2:-}; shift 2 ;;
    --oversubscribe) pass+=(--oversubscribe); shift ;;
    --spares) spares=${2:-}; shift 2 ;;
    --max-restarts) max_restarts=${2:-}; shift 2 ;;
    --shrink) shrink=1; shift ;;
    --) shift; break ;;
    *) break ;;
  esac
done
usage="usage: launch/multinode.sh --hostfile FILE [-n N] [--oversubscribe] [--spares K] [--max-restarts N] [--shrink] -- SUBCOMMAND [ARGS]"
die() { echo "multinode.sh: $*" >&2; exit 2; }
[ -n "$hostfile" ] || die "--hostfile FILE is required; $usage"
[ -r "$hostfile" ] || die "cannot read hostfile $hostfile"
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
for v in NCCL_SOCKET_IFNAME OMPI_MCA_btl_tcp_if_include NCCL_DEBUG; do
  [ -n "${!v:-}" ] && echo "multinode.sh: $v=${!v}" >&2
done
if [ -z "$spares$max_restarts" ] && [ "$shrink" = 0 ]; then
  if [ -n "$n_user" ]; then pass+=(-n "$n_user"); else
    slots=$(sed -n 's/^[^#]*slots=\([0-9][0-9]*\).*/\1/p' "$hostfile" | awk '{s += $1} END {print s + 0}')
    [ "$slots" -gt 0 ] || die "no 'slots=N' in $hostfile; give -n N"
    pass+=(-n "$slots")
  fi
  # local.sh passes the network variables above (when set) with -x and adds --hostfile.
  exec "$here/local.sh" "${pass[@]}" --hostfile "$hostfile" -- "$@"
fi

# --- restarts: check everything before anything starts -------------------------------------------
for o in "--spares:$spares" "--max-restarts:$max_restarts" "-n:$n_user"; do
  [ -z "${o#*:}" ] || [[ "${o#*:}" =~ ^[0-9]+$ ]] || die "${o%%:*} ${o#*:}: expected a number >= 0"
done
spares=${spares:-0} max_restarts=${max_restarts:-$spares}
[ "$max_restarts" -gt 0 ] || die "--spares/--shrink restart the job after a failure: give --max-restarts N (N >= 1)"
[ "$1" = train ] || die "--spares/--max-restarts/--shrink restart \`train\` (from its --ckpt-dir), not $1"
args=("$@")
ckpt=$(rl_arg --ckpt-dir "${args[@]}") snap=$(rl_arg --snapshot-every "${args[@]}")
[ -n "$ckpt" ] || die "--spares/--max-restarts need --ckpt-dir DIR in the train arguments (a restart resumes from its newest checkpoint)"
resume=$(rl_arg --resume "${args[@]}")
[ -z "$resume" ] || [ "$resume" = auto ] || die "restarts resume from the newest checkpoint (--resume auto, the default); drop --resume $resume"
[ "$shrink" = 0 ] || [[ "$(rl_arg --batch-size "${args[@]}")" =~ ^[1-9][0-9]*$ ]] ||
  die "--shrink keeps the global batch by scaling the per-rank --batch-size: give --batch-size N in the train arguments"
hosts=() lines=()  # the hostfile's hosts, in order, and their lines
while read -r line; do
  line=${line%%#*}
  [ -n "${line// /}" ] || continue
  [[ "$line" =~ slots=[0-9]+ ]] || die "$hostfile: '$line' has no slots=N (restarts map ranks to hosts by their slots)"
  hosts+=("${line%% *}") lines+=("$line")
done <"$hostfile"
[ "${#hosts[@]}" -ge $((spares + 1)) ] ||
  die "--spares $spares needs at least $((spares + 1)) hosts in $hostfile (the last $spares are spares, and one must run the job); it has ${#hosts[@]}"
active=() spare_q=()
for ((i = 0; i < ${#hosts[@]}; i++)); do
  if [ "$i" -lt $((${#hosts[@]} - spares)) ]; then active+=("$i"); else spare_q+=("$i"); fi
done
slots_of() { local l=${lines[$1]#*slots=}; echo "${l%%[^0-9]*}"; }
n_ranks=$n_user
if [ -z "$n_ranks" ]; then n_ranks=0; for i in "${active[@]}"; do n_ranks=$((n_ranks + $(slots_of "$i"))); done; fi

# layout: host index of every rank (ranks fill the hosts in file order, slots=N each, the host
# mpirun runs on first when listed, as Open MPI maps them); sets rank_host.
layout() {
  local order=() i r=0 total=0 k
  for i in "${active[@]}"; do rl_local_host "${hosts[$i]}" && order+=("$i"); done
  for i in "${active[@]}"; do rl_local_host "${hosts[$i]}" || order+=("$i"); done
  rank_host=()
  for i in "${order[@]}"; do total=$((total + $(slots_of "$i"))); done
  while [ "$r" -lt "$n_ranks" ] && [ "$total" -gt 0 ]; do
    for i in "${order[@]}"; do
      for ((k = 0; k < $(slots_of "$i") && r < n_ranks; k++)); do rank_host[r]=$i; r=$((r + 1)); done
    done
  done
}
names() { local i out=(); for i in "$@"; do out+=("${hosts[$i]}"); done; local IFS=,; echo "${out[*]}"; }
plural() { [ "$1" -gt 1 ] && echo "$2s" || echo "$2"; }

export HPCTRAIN_LAUNCHER_GRACE=${HPCTRAIN_LAUNCHER_GRACE:-5}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/multinode.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
attempt=0
declare -A named_lost=() note_of=()  # host -> in how many attempts mpirun named it lost; why a host is lost
while :; do
  for i in "${active[@]}"; do echo "${lines[$i]}"; done >"$tmp/hosts"
  layout
  log="$tmp/stderr.$attempt"
  : >"$log"
  "$here/local.sh" ${pass[@]+"${pass[@]}"} -n "$n_ranks" --hostfile "$tmp/hosts" -- "${args[@]}" 2>"$log" &
  job=$!
  tail -s 0.2 -n +1 -f --pid="$job" "$log" >&2 &
  shown=$!
  rl_wait "$job"
  rc=$RL_RC failed_at=$(date +%s.%N)
  wait "$shown" 2>/dev/null || true
  if ! rl_restartable "$rc" "$log"; then
    [ "$rc" = 0 ] || echo "multinode.sh: the job ended with exit $rc ($(rl_cause "$rc" "$log")): not restarted" >&2
    exit "$rc"
  fi
  if [ "$attempt" -ge "$max_restarts" ]; then
    echo "multinode.sh: the job ended with exit $rc after $attempt restart(s) (--max-restarts $max_restarts): giving up" >&2
    exit "$rc"
  fi
  attempt=$((attempt + 1))
  why=$(rl_cause "$rc" "$log")
  # Who failed, by the job's own words: silent ranks (watchdog), lost daemons and killed ranks (mpirun).
  said=$(sed -n 's/.*ranks that did not answer (dead, or hung with their watchdog): \([0-9,]*\).*/\1/p' "$log" | tr ',' '\n')
  said+=$'\n'$(sed -n 's/.*process rank \([0-9]*\) with PID .* on node .* exited on signal.*/\1/p' "$log")
  said_hosts=$(rl_named_lost "$log" | sort -u)
  for h in $said_hosts; do rl_local_host "$h" || named_lost[$h]=$((${named_lost[$h]:-0} + 1)); done
  for r in $said; do [ -n "${rank_host[$r]:-}" ] && said_hosts+=$'\n'"${hosts[${rank_host[$r]}]}"; done
  # ... confirmed by probing every host and spare (its shell, then its addresses on the network
  # MPI uses): the hosts that fail are lost; so is a host mpirun named lost in two attempts.
  dead=() note_of=()
  while read -r h how addr; do
    dead+=("$h")
    case "$how" in
      mpi) note_of[$h]="$h's shell answers, its MPI address $addr does not" ;;
      nompi) note_of[$h]="$h has no address in the MPI network $addr" ;;
    esac
  done < <(rl_probe_hosts $(names "${active[@]}" "${spare_q[@]}" | tr , ' '))
  for h in "${!named_lost[@]}"; do
    [ "${named_lost[$h]}" -ge 2 ] && [[ " ${dead[*]} " != *" $h "* ]] &&
      dead+=("$h") note_of[$h]="mpirun named $h lost in ${named_lost[$h]} attempts, though it answers"
  done
  lost=() keep=() bad_spares=() new=()
  for i in "${active[@]}"; do if [[ " ${dead[*]} " == *" ${hosts[$i]} "* ]]; then lost+=("$i"); else keep+=("$i"); fi; done
  lost_ranks=()
  for r in "${!rank_host[@]}"; do [[ " ${lost[*]} " == *" ${rank_host[$r]} "* ]] && lost_ranks+=("$r"); done
  from=$(rl_resume_from train "$ckpt" "$snap")
  if [ "${#lost[@]}" = 0 ]; then
    named=$(echo "$said_hosts" | sort -u | grep . | paste -sd, || true)
    echo "multinode.sh: restart $attempt/$max_restarts: the job ended with exit $rc ($why${named:+; reported: $named}), every host answers: same hosts; resuming from $from" >&2
    rl_restart_env "$attempt" "$max_restarts" "$rc" "$why" "$failed_at" '"lost_hosts":[],"lost_ranks":[]'
    continue
  fi
  note=""
  for i in "${lost[@]}"; do [ -z "${note_of[${hosts[$i]}]:-}" ] || note+="; ${note_of[${hosts[$i]}]}"; done
  what="$(plural ${#lost[@]} host) $(names "${lost[@]}") lost ($(plural ${#lost_ranks[@]} rank) $(IFS=,; echo "${lost_ranks[*]:-none}")$note)"
  extra="\"lost_hosts\":$(rl_json_list $(names "${lost[@]}" | tr , ' ')),\"lost_ranks\":$(rl_json_list "${lost_ranks[@]}")"
  # Replace each lost host by the next spare that answers; a spare that does not is dropped.
  while [ "${#new[@]}" -lt "${#lost[@]}" ] && [ "${#spare_q[@]}" -gt 0 ]; do
    s=${spare_q[0]}; spare_q=("${spare_q[@]:1}")
    if [[ " ${dead[*]} " == *" ${hosts[$s]} "* ]]; then bad_spares+=("$s"); else new+=("$s"); fi
  done
  skipped=""
  [ "${#bad_spares[@]}" = 0 ] || skipped=" ($(plural ${#bad_spares[@]} spare) $(names "${bad_spares[@]}") unreachable, skipped)"
  if [ "${#new[@]}" = "${#lost[@]}" ]; then
    active=("${keep[@]}" "${new[@]}")
    echo "multinode.sh: restart $attempt/$max_restarts: $what, replaced by $(plural ${#new[@]} spare) $(names "${new[@]}")$skipped; resuming from $from" >&2
    rl_restart_env "$attempt" "$max_restarts" "$rc" "$why" "$failed_at" "$extra,\"replaced_by\":$(rl_json_list $(names "${new[@]}" | tr , ' '))"
    continue
  fi
  nospare="no spare left${skipped}"
  [ "${#new[@]}" = 0 ] || nospare="only ${#new[@]} spare(s) left ($(names "${new[@]}"))$skipped"
  if [ "$shrink" = 0 ]; then
    echo "multinode.sh: $what, $nospare (--shrink would go on with the remaining hosts): giving up, exit $rc" >&2
    exit "$rc"
  fi
  active=("${keep[@]}" "${new[@]}")
  n_old=$n_ranks
  n_ranks=$((n_ranks - ${#lost_ranks[@]}))
  [ -z "$n_user" ] || n_user=$n_ranks
  for i in "${new[@]}"; do n_ranks=$((n_ranks + $(slots_of "$i"))); done
  b=$(rl_arg --batch-size "${args[@]}") accum=$(rl_arg --grad-accum "${args[@]}")
  g=$((b * n_old))
  if [ "$n_ranks" -lt 1 ] || [ $((g % n_ranks)) != 0 ] || [ $(((g / n_ranks) % ${accum:-1})) != 0 ]; then
    reason="global batch $g (--batch-size $b x $n_old ranks) does not divide over $n_ranks ranks"
    [ "$n_ranks" -lt 1 ] || [ $((g % n_ranks)) != 0 ] || reason="--grad-accum $accum does not divide the new per-rank batch $((g / n_ranks))"
    echo "multinode.sh: $what, $nospare; cannot shrink to $n_ranks rank(s): $reason: giving up, exit $rc" >&2
    exit "$rc"
  fi
  rl_set_arg --batch-size $((g / n_ranks)) "${args[@]}"
  args=("${RL_ARGS[@]}")
  echo "multinode.sh: restart $attempt/$max_restarts: $what, $nospare: shrunk to $(names "${active[@]}") with $n_ranks rank(s), --batch-size $b -> $((g / n_ranks)) (global batch $g kept); resuming from $from" >&2
  rl_restart_env "$attempt" "$max_restarts" "$rc" "$why" "$failed_at" \
    "$extra,\"shrunk_to\":{\"hosts\":$(rl_json_list $(names "${active[@]}" | tr , ' ')),\"ranks\":$n_ranks,\"batch_size\":$((g / n_ranks))}"
done
