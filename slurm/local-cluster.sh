#!/usr/bin/env bash
# A throwaway Slurm, for tests and for trying the sbatch scripts: one node on localhost, or
# several hosts of a tests/cluster/nscluster.sh namespace cluster.
#   slurm/local-cluster.sh start [DIR]   # munge + slurmctld + slurmd; prints "export SLURM_CONF=..."
#   slurm/local-cluster.sh stop  [DIR]
#   slurm/local-cluster.sh install       # the Debian packages (needs root)
# Several hosts: HPCTRAIN_SLURM_NODES="node0 node1" names them (slurmctld on the first, one
# slurmd per host, started as `slurmd -N HOST`), and HPCTRAIN_SLURM_ON=CMD starts each daemon
# and client call as `CMD HOST "COMMAND"` (an ssh-like agent, e.g. tests/cluster/nsrsh). One
# munged serves them all through its socket in DIR (the filesystem is shared).
# Runs as root without systemd. Everything (config, state, logs, munge key/socket) lives in DIR
# (default /tmp/hpctrain-slurm). Facts this relies on (Debian 12, Slurm 22.05):
# - no cgroups in containers: ProctrackType=proctrack/linuxproc, TaskPlugin=task/none;
# - Debian's Open MPI direct-launches only through PMIx: MpiDefault=pmix;
# - SlurmdParameters=config_overrides with a large CPUs= lets 4-8 tasks share 2 cores;
# - EnforcePartLimits=ALL makes oversized jobs fail instead of pending forever;
# - MinJobAge=5 keeps `sbatch --wait` from polling for 40 s.
set -euo pipefail
cmd=${1:-}
DIR=${2:-${HPCTRAIN_SLURM_DIR:-/tmp/hpctrain-slurm}}
HOST=$(hostname -s)
NODES=${HPCTRAIN_SLURM_NODES:-$HOST}
CTL=${NODES%% *}
ON=${HPCTRAIN_SLURM_ON:-}
# on HOST COMMAND...: run COMMAND on HOST (here, without HPCTRAIN_SLURM_ON).
on() {
  local h=$1; shift
  if [ -n "$ON" ]; then "$ON" "$h" "$(printf '%q ' "$@")"; else "$@"; fi
}

install_packages() {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    slurmctld slurmd slurm-client munge >/dev/null
}

stop() {
  for pf in "$DIR"/slurmd.*.pid "$DIR/slurmctld.pid" "$DIR/munge/munged.pid"; do
    if [ -f "$pf" ]; then
      pid=$(cat "$pf")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$pf"
    fi
  done
}

start() {
  for b in munged slurmctld slurmd sinfo; do
    command -v "$b" >/dev/null || { echo "local-cluster: $b not installed (run: $0 install)" >&2; exit 3; }
  done
  stop
  rm -rf "$DIR"
  mkdir -p "$DIR"/{state,munge}
  for n in $NODES; do mkdir -p "$DIR/spool/$n" "$DIR/tmp/$n"; done
  # Hosts that share one /tmp (namespace hosts) each need their own: slurmstepd's PMIx creates
  # /tmp/spmix_appdir_<uid>_<step> on every node of a step.
  tmpfs=""
  [ "$NODES" = "$HOST" ] || tmpfs="TmpFS=$DIR/tmp/%n"
  chown munge:munge "$DIR/munge"
  chmod 0700 "$DIR/munge"
  dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
  chown munge:munge "$DIR/munge/munge.key"
  chmod 0400 "$DIR/munge/munge.key"
  runuser -u munge -- munged --force --socket="$DIR/munge/munge.socket" \
    --key-file="$DIR/munge/munge.key" --pid-file="$DIR/munge/munged.pid" \
    --seed-file="$DIR/munge/munged.seed" --log-file="$DIR/munge/munged.log"
  cat >"$DIR/slurm.conf" <<CONF
ClusterName=hpctrain
SlurmctldHost=$CTL
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
$tmpfs
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.%n.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.%n.log
SlurmctldPort=${HPCTRAIN_SLURMCTLD_PORT:-16817}
SlurmdPort=${HPCTRAIN_SLURMD_PORT:-16818}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=pmix
SlurmdParameters=config_overrides
EnforcePartLimits=ALL
MinJobAge=5
MailProg=/bin/true
ReturnToService=2
JobRequeue=1
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
$(for n in $NODES; do echo "NodeName=$n CPUs=8 State=UNKNOWN"; done)
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
  export SLURM_CONF="$DIR/slurm.conf"
  on "$CTL" slurmctld -f "$SLURM_CONF"
  for n in $NODES; do
    if [ "$NODES" = "$HOST" ]; then on "$n" slurmd -f "$SLURM_CONF"; else on "$n" slurmd -f "$SLURM_CONF" -N "$n"; fi
  done
  for _ in $(seq 150); do
    # every node idle: one distinct state, "idle"
    state=$(on "$CTL" env SLURM_CONF="$SLURM_CONF" sinfo -h -N -o %T 2>/dev/null | sort -u | tr '\n' ' ' || true)
    [ "$state" = "idle " ] && { echo "export SLURM_CONF=$SLURM_CONF"; return 0; }
    sleep 0.2
  done
  echo "local-cluster: nodes did not become idle (states: ${state:-none}); logs in $DIR" >&2
  tail -5 "$DIR/slurmctld.log" "$DIR"/slurmd.*.log >&2 || true
  exit 1
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  install) install_packages ;;
  *) echo "usage: $0 start|stop|install [DIR]" >&2; exit 2 ;;
esac
