#!/usr/bin/env bash
# Start hpctrain on this machine with mpirun, with flags that fit it.
#   launch/local.sh [-n N] [--oversubscribe] [--hostfile FILE] [--max-restarts N] [-- ] SUBCOMMAND [ARGS...]
# - -n defaults to the number of GPUs (nvidia-smi -L), or 1 on a CPU-only host.
# - GPU hosts: one rank per GPU, --bind-to none (the process pins its GPU; NUMA is left to the
#   OS). CPU-only hosts: --bind-to core --map-by slot, one compute thread per rank.
# - OMP_NUM_THREADS / OPENBLAS_NUM_THREADS / MKL_NUM_THREADS default to 1 per rank unless set.
# - --allow-run-as-root only when run as root; --oversubscribe only when asked (more ranks
#   than cores, e.g. tests on a laptop).
# - --hostfile FILE runs across machines (see launch/multinode.sh for the network variables).
#   Then Open MPI's daemon keepalive is shortened (launch/node_loss.sh) so that a host that
#   drops off the network ends the job within 25 s, and mpirun is supervised: if every rank on
#   this machine has exited but mpirun still waits for a remote host after
#   HPCTRAIN_LAUNCHER_GRACE seconds (default 15), mpirun is ended and the exit code is 3.
# - --max-restarts N (one machine; across machines: launch/multinode.sh --max-restarts): when the
#   job ends in a way a restart can cure (a rank killed by a signal, exit 129-192: the OOM
#   killer's SIGKILL, a segfault; the watchdog's exit 3; an MPI error's exit 6; see
#   launch/restart_lib.sh rl_restartable), start it again, up to N times, with the same command;
#   `train` resumes from the newest complete checkpoint in its --ckpt-dir (--resume auto, the
#   default; without --ckpt-dir it starts from scratch, and says so). One line per restart:
#   "local.sh: restart 1/2: the job ended with exit 137 (...); resuming from step-00000040".
#   Never restarted: exit 1 (an error a restart does not cure, e.g. a model that throws), 2 (bad
#   input), 4 (out of memory), 5 (diverged), 75 (preempted): one line names the exit code and
#   its cause, and the code is returned. After N restarts the last exit code is returned. As
#   torchrun's --max-restarts. The restarted ranks get HPCTRAIN_RESTART (JSON: restart, of,
#   exit_code, cause, failed_at): `train` then continues its --metrics file and writes a
#   `restart` record after its first step.
# - HPCTRAIN_BIN: the binary to start (default build/hpctrain of this checkout).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/restart_lib.sh"
BIN=${HPCTRAIN_BIN:-$here/../build/hpctrain}
n="" oversub=0 hostfile="" max_restarts=0
while [ $# -gt 0 ]; do
  case "$1" in
    -n) n=$2; shift 2 ;;
    --max-restarts) max_restarts=$2; shift 2 ;;
    --oversubscribe) oversub=1; shift ;;
    --hostfile) hostfile=$2; shift 2 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: launch/local.sh [-n N] [--oversubscribe] [--hostfile F] -- SUBCOMMAND [ARGS]" >&2; exit 2; }
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); fi
[ -n "$n" ] || n=$(( gpus > 0 ? gpus : 1 ))
flags=(-np "$n")
# Oversubscribed ranks cannot each own a core: leave binding to the OS then.
if [ "$gpus" -gt 0 ] || [ "$oversub" = 1 ]; then flags+=(--bind-to none --map-by slot); else flags+=(--bind-to core --map-by slot); fi
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
[ "$oversub" = 1 ] && flags+=(--oversubscribe)
[ -n "$hostfile" ] && flags+=(--hostfile "$hostfile")
for v in OMP_NUM_THREADS OPENBLAS_NUM_THREADS MKL_NUM_THREADS; do
  export "$v=${!v:-1}"
  flags+=(-x "$v")
done
# Pass the usual network/debug knobs through when the user set them.
for v in NCCL_SOCKET_IFNAME NCCL_DEBUG NCCL_IB_HCA OMPI_MCA_btl_tcp_if_include CUDA_VISIBLE_DEVICES HPCTRAIN_COLLECTIVE_TIMEOUT HPCTRAIN_DEBUG_COLLECTIVES HPCTRAIN_SHM_ALLREDUCE HPCTRAIN_RESTART; do
  [ -n "${!v:-}" ] && flags+=(-x "$v")
done
[ -z "$hostfile" ] || [ "$max_restarts" = 0 ] ||
  { echo "launch/local.sh: --max-restarts with --hostfile: use launch/multinode.sh --max-restarts N (it replaces lost hosts)" >&2; exit 2; }
if [ -z "$hostfile" ] && [ "$max_restarts" = 0 ]; then exec mpirun "${flags[@]}" "$BIN" "$@"; fi
if [ -z "$hostfile" ]; then
  # One machine, restarted on failure (see the header).
  [[ "$max_restarts" =~ ^[0-9]+$ ]] || { echo "launch/local.sh: --max-restarts $max_restarts: expected a number >= 0" >&2; exit 2; }
  ckpt=$(rl_arg --ckpt-dir "$@") resume=$(rl_arg --resume "$@") snap=$(rl_arg --snapshot-every "$@")
  if [ "$1" = train ] && [ -n "$resume" ] && [ "$resume" != auto ]; then
    echo "launch/local.sh: --max-restarts resumes from the newest checkpoint (--resume auto, the default); drop --resume $resume" >&2
    exit 2
  fi
  attempt=0
  while :; do
    mpirun "${flags[@]}" "$BIN" "$@" &
    rl_wait $!
    rc=$RL_RC failed_at=$(date +%s.%N)
    if ! rl_restartable "$rc"; then
      [ "$rc" = 0 ] || [ "$max_restarts" = 0 ] ||
        echo "launch/local.sh: the job ended with exit $rc ($(rl_cause "$rc")): not restarted" >&2
      exit "$rc"
    fi
    if [ "$attempt" -ge "$max_restarts" ]; then
      [ "$max_restarts" -gt 0 ] && echo "launch/local.sh: the job ended with exit $rc after $attempt restart(s) (--max-restarts $max_restarts): giving up" >&2
      exit "$rc"
    fi
    attempt=$((attempt + 1))
    why=$(rl_cause "$rc")
    echo "launch/local.sh: restart $attempt/$max_restarts: the job ended with exit $rc ($why); resuming from $(rl_resume_from "$1" "$ckpt" "$snap")" >&2
    # The trainer writes a `restart` record from this (README "Watching a run").
    rl_restart_env "$attempt" "$max_restarts" "$rc" "$why" "$failed_at"
    [[ " ${flags[*]} " == *" HPCTRAIN_RESTART "* ]] || flags+=(-x HPCTRAIN_RESTART)
  done
fi

# Across machines. Open MPI keeps waiting for a lost host's daemon once it has queued a message to
# it (after a rank's MPI_Abort: the kernel then retransmits for ~15 min and stops keepalive), so
# a watchdog abort that comes before the keepalive verdict would leave mpirun running until the
# allocation ends. Hence the supervision: mpirun's own ranks on this machine are its children.
source "$here/node_loss.sh"
mpirun "${flags[@]}" "$BIN" "$@" &
mp=$!
for sig in TERM INT HUP USR1 USR2; do trap "kill -$sig $mp 2>/dev/null" "$sig"; done
grace=${HPCTRAIN_LAUNCHER_GRACE:-15}
rank_name=$(basename "$BIN" | cut -c1-15)
seen=0 alone_since=""
while kill -0 "$mp" 2>/dev/null; do
  if pgrep -P "$mp" -x "$rank_name" >/dev/null; then
    seen=1 alone_since=""
  elif [ "$seen" = 1 ]; then
    alone_since=${alone_since:-$SECONDS}
    if [ $((SECONDS - alone_since)) -ge "$grace" ]; then
      echo "launch/local.sh: every rank on $(hostname) has exited, but mpirun has waited ${grace} s more for a remote host (one lost from the network?); ending mpirun (pid $mp)" >&2
      kill -KILL "$mp" 2>/dev/null
      wait "$mp" 2>/dev/null || true
      exit 3
    fi
  fi
  sleep 1
done
wait "$mp"
