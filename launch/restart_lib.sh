# The restart loop's shared parts (sourced; functions prefixed rl_): launch/local.sh
# --max-restarts, launch/multinode.sh --max-restarts/--spares/--shrink and slurm/train.sbatch
# (HPCTRAIN_SPARE_NODES).
#   rl_arg NAME ARGS...         the value of flag NAME in ARGS (`--x V` or `--x=V`, the last one wins)
#   rl_has NAME ARGS...         whether flag NAME is in ARGS
#   rl_set_arg NAME VALUE ARGS... sets RL_ARGS to ARGS with every NAME's value replaced by VALUE
#                               (appended when NAME is absent)
#   rl_restartable RC [LOG]     true when a restart can cure a job that ended with exit RC, LOG
#                               being its launcher's stderr (mpirun's or srun's) when there is one:
#                               a process killed by a signal (129-192; SIGKILL, 137, included: the
#                               kernel's OOM killer, an operator and a lost host look alike), the
#                               watchdog (3), an MPI/NCCL error (6), or a host mpirun lost (LOG has
#                               rl_mpirun_lost's report, whatever RC: mpirun then exits 205 or 1).
#                               Never 0, 1 (an error a restart does not cure), 2 (bad input), 4
#                               (out of memory), 5 (diverged), 75 (preempted) otherwise.
#                               `mpirun` exits with the code of the first rank that failed: the
#                               code its MPI_Abort(code) passed (src/runtime/guard.cpp), the rank's
#                               own exit code, or 128 + the signal that killed it (Open MPI 4.1.4).
#   rl_cause RC [LOG]           why a job ended with RC, in words (for the restart line and record)
#   rl_mpirun_lost LOG          true when mpirun's output in LOG reports a lost or unstartable
#                               daemon (a host it lost, or could not reach at start-up)
#   rl_named_lost LOG           the hosts mpirun names in LOG as lost, one a line: the remote
#                               daemon it lost, or the host whose daemon could not connect back
#   rl_resume_from SUBCMD CKPT [SNAPSHOT_EVERY]  "step-00000040" (CKPT/latest), or "scratch (why)";
#                               with SNAPSHOT_EVERY > 0 prefixed "a newer snapshot in host memory, else "
#   rl_restart_env K N RC WHY FAILED_AT [JSON]  exports HPCTRAIN_RESTART, the record `train` writes
#                               after its first step (README "Launching"); FAILED_AT: when the
#                               failure was noticed (date +%s.%N); JSON: more keys, `"a":1,"b":[2]`
#   rl_wait PID                 waits for PID, forwarding TERM INT HUP USR1 USR2 to it; sets RL_RC
#   rl_json_list A B ...        ["A","B"] (numbers unquoted)
#   rl_local_host NAME          whether NAME is this machine
#   rl_probe_hosts HOST...      probes every HOST (in parallel; this machine is not probed) and
#                               prints one line "HOST WHY" per HOST that fails, see rl_probe_one
rl_arg() {
  local name=$1 prev="" v="" a
  shift
  for a in "$@"; do
    [ "$prev" = "$name" ] && v=$a
    case "$a" in "$name"=*) v=${a#"$name"=} ;; esac
    prev=$a
  done
  printf '%s' "$v"
}

rl_has() {
  local name=$1 a
  shift
  for a in "$@"; do [ "$a" = "$name" ] || [ "${a%%=*}" = "$name" ] && return 0; done
  return 1
}

rl_set_arg() {
  local name=$1 value=$2 skip=0 found=0 a
  shift 2
  RL_ARGS=()
  for a in "$@"; do
    if [ "$skip" = 1 ]; then RL_ARGS+=("$value"); skip=0; continue; fi
    case "$a" in
      "$name") RL_ARGS+=("$a"); skip=1; found=1 ;;
      "$name"=*) RL_ARGS+=("$name=$value"); found=1 ;;
      *) RL_ARGS+=("$a") ;;
    esac
  done
  [ "$found" = 1 ] || RL_ARGS+=("$name" "$value")
}

rl_mpirun_lost() {
  [ -n "${1:-}" ] && [ -r "$1" ] && grep -qE "ORTE has lost communication with a remote daemon|ORTE was unable to reliably start one or more daemons" "$1"
}

rl_named_lost() {
  [ -n "${1:-}" ] && [ -r "$1" ] || return 0
  sed -n 's/^ *Remote daemon: .* on node \([^ ]*\).*/\1/p' "$1"
  awk '/unable to complete a TCP connection/ { t = 1 } t && /^ *Local host:/ { print $3; t = 0 }' "$1"
}

rl_restartable() {
  rl_mpirun_lost "${2:-}" && return 0
  case "$1" in 3 | 6) return 0 ;; esac
  [ "$1" -gt 128 ] && [ "$1" -le 192 ]
}

rl_cause() {
  if rl_mpirun_lost "${2:-}"; then
    if grep -q "ORTE has lost communication" "$2"; then echo "mpirun lost a remote daemon"; else echo "mpirun could not start a remote daemon"; fi
    return
  fi
  if [ "$1" = 3 ] && [ -n "${2:-}" ] && grep -q "but mpirun has waited" "$2" 2>/dev/null; then
    echo "every rank on mpirun's host exited, mpirun still waited for a remote host"; return
  fi
  case "$1" in
    1) echo "an error a restart does not cure: a bug, or a model that throws" ;;
    2) echo "bad input" ;;
    3) echo "the watchdog found a collective that never finished" ;;
    4) echo "out of memory: the same run needs the same memory" ;;
    5) echo "training diverged: a non-finite loss or gradient" ;;
    6) echo "MPI or NCCL reported an error: a peer or the network went away" ;;
    75) echo "preempted after a checkpoint" ;;
    9 | 137) echo "a process was killed by signal 9 (SIGKILL: the OOM killer, an operator, or a lost host)" ;;
    *) if [ "$1" -gt 128 ] && [ "$1" -le 192 ]; then echo "a process was killed by signal $(($1 - 128))"
       else echo "exit $1 from mpirun or a rank"; fi ;;
  esac
}

rl_resume_from() {
  local sub=$1 ckpt=$2 snap=${3:-0} s pre=""
  # With --snapshot-every the trainer takes a newer snapshot in host memory when there is one.
  if [ "$sub" = train ] && [ -n "$snap" ] && [ "$snap" != 0 ]; then pre="a newer snapshot in host memory, else "; fi
  if [ "$sub" != train ] || [ -z "$ckpt" ]; then echo "${pre}scratch (no --ckpt-dir)"; return; fi
  s=$(cat "$ckpt/latest" 2>/dev/null || true)
  [ -n "$s" ] && [ -d "$ckpt/$s" ] && { echo "$pre$s"; return; }
  echo "${pre}scratch (no complete checkpoint in $ckpt yet)"
}

rl_json_list() {
  local out="" x
  for x in "$@"; do
    if [[ "$x" =~ ^[0-9]+$ ]]; then out+=",$x"; else out+=",\"$x\""; fi
  done
  echo "[${out#,}]"
}

rl_restart_env() {
  local extra=${6:-}
  export HPCTRAIN_RESTART="{\"restart\":$1,\"of\":$2,\"exit_code\":$3,\"cause\":\"$4\",\"failed_at\":$5${extra:+,$extra}}"
}

rl_wait() {
  local pid=$1 sig
  for sig in TERM INT HUP USR1 USR2; do trap "kill -$sig $pid 2>/dev/null" "$sig"; done
  RL_RC=0
  while :; do
    set +e; wait "$pid"; RL_RC=$?; set -e
    kill -0 "$pid" 2>/dev/null || break  # a forwarded signal interrupted wait: wait again
  done
  for sig in TERM INT HUP USR1 USR2; do trap - "$sig"; done
}

rl_local_host() { case "$1" in "$(hostname)" | "$(hostname -s)" | localhost | 127.0.0.1) return 0 ;; *) return 1 ;; esac; }

# rl_probe_one HOST: prints "HOST WHY" when HOST fails a probe, nothing when it passes.
#   1. the remote shell mpirun starts its daemons with (OMPI_MCA_plm_rsh_agent, default ssh with
#      BatchMode and ConnectTimeout) runs a command within HPCTRAIN_PROBE_TIMEOUT s (default 5);
#      WHY "shell".
#   2. the network MPI uses: the addresses HOST has (`ip -o -4 addr`, through that shell) on the
#      interfaces or subnets of OMPI_MCA_oob_tcp_if_include and OMPI_MCA_btl_tcp_if_include
#      (names like eth1, or subnets like 10.0.0.0/24) each answer a ping from this machine (where
#      mpirun runs) within the same timeout; WHY "mpi ADDR" (ADDR did not answer) or "nompi SPEC"
#      (no address in SPEC). Skipped when neither variable is set (Open MPI then uses every
#      interface, and the shell's address is one), or without `ip` there or `ping` here.
rl_probe_one() {
  local h=$1 agent=${OMPI_MCA_plm_rsh_agent:-ssh} t=${HPCTRAIN_PROBE_TIMEOUT:-5} cmd out spec a addrs
  agent=${agent%%:*}
  read -ra cmd <<<"$agent"
  [ "$(basename "${cmd[0]}")" = ssh ] && cmd+=(-o BatchMode=yes -o ConnectTimeout="$t")
  out=$(timeout "$t" "${cmd[@]}" "$h" 'ip -o -4 addr show 2>/dev/null || echo no-ip-command' </dev/null 2>/dev/null) ||
    { echo "$h shell"; return 0; }
  spec=${OMPI_MCA_oob_tcp_if_include:-}${OMPI_MCA_btl_tcp_if_include:+,$OMPI_MCA_btl_tcp_if_include}
  spec=${spec#,}
  [ -n "$spec" ] && [ "$out" != no-ip-command ] && command -v ping >/dev/null || return 0
  addrs=$(_rl_mpi_addrs "$spec" <<<"$out")
  [ -n "$addrs" ] || { echo "$h nompi $spec"; return 0; }
  for a in $addrs; do
    ping -n -q -c 2 -i 0.2 -W "$t" "$a" >/dev/null 2>&1 || { echo "$h mpi $a"; return 0; }
  done
}

# _rl_mpi_addrs SPEC < `ip -o -4 addr` lines: the addresses on an interface named in SPEC
# (comma-separated names or CIDR subnets), one a line, each once.
_rl_ip2int() { local IFS=. a b c d; read -r a b c d <<<"$1"; echo $(((a << 24) + (b << 16) + (c << 8) + d)); }
_rl_mpi_addrs() {
  local spec=$1 _n dev _f cidr addr e net bits m
  while read -r _n dev _f cidr _; do
    addr=${cidr%/*}
    for e in ${spec//,/ }; do
      if [[ "$e" == */* ]]; then
        net=${e%/*} bits=${e#*/}
        m=$(((0xffffffff << (32 - bits)) & 0xffffffff))
        [ $(($(_rl_ip2int "$addr") & m)) = $(($(_rl_ip2int "$net") & m)) ] && { echo "$addr"; break; }
      elif [ "$e" = "$dev" ]; then
        echo "$addr"; break
      fi
    done
  done | sort -u
}

rl_probe_hosts() {
  local h pids=() f k=0
  f=$(mktemp "${TMPDIR:-/tmp}/rl_probe.XXXXXX")
  for h in "$@"; do
    rl_local_host "$h" && continue
    rl_probe_one "$h" >"$f.$k" &
    pids+=($!) k=$((k + 1))
  done
  for ((k = 0; k < ${#pids[@]}; k++)); do wait "${pids[$k]}" || true; cat "$f.$k"; rm -f "$f.$k"; done
  rm -f "$f"
}
