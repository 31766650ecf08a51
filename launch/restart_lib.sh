# The restart loop's shared parts (sourced; functions prefixed rl_): launch/local.sh
# --max-restarts, launch/multinode.sh --max-restarts/--spares/--shrink and slurm/train.sbatch
# (HPCTRAIN_SPARE_NODES).
#   rl_arg NAME ARGS...         the value of flag NAME in ARGS (`--x V` or `--x=V`, the last one wins)
#   rl_has NAME ARGS...         whether flag NAME is in ARGS
#   rl_set_arg NAME VALUE ARGS... sets RL_ARGS to ARGS with every NAME's value replaced by VALUE
#                               (appended when NAME is absent)
#   rl_restartable RC           true when a restart can cure exit RC: anything but 0, 2 (bad input)
#                               and 75 (preempted after a checkpoint)
#   rl_cause RC                 why a job ended with RC, in words
#   rl_resume_from SUBCMD CKPT  "step-00000040" (CKPT/latest), or "scratch (why)"
#   rl_restart_env K N RC WHY FAILED_AT [JSON]  exports HPCTRAIN_RESTART, the record `train` writes
#                               after its first step (README "Launching"); FAILED_AT: when the
#                               failure was noticed (date +%s.%N); JSON: more keys, `"a":1,"b":[2]`
#   rl_wait PID                 waits for PID, forwarding TERM INT HUP USR1 USR2 to it; sets RL_RC
#   rl_json_list A B ...        ["A","B"] (numbers unquoted)
#   rl_local_host NAME          whether NAME is this machine
#   rl_probe_hosts HOST...      prints the HOSTs that do not run `true` through mpirun's remote
#                               shell (OMPI_MCA_plm_rsh_agent, default ssh; BatchMode and
#                               ConnectTimeout for ssh) within HPCTRAIN_PROBE_TIMEOUT s (default
#                               5), probed in parallel; this machine is not probed

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

rl_restartable() { case "$1" in 0 | 2 | 75) return 1 ;; *) return 0 ;; esac; }

rl_cause() {
  if [ "$1" -gt 128 ]; then echo "a process was killed by signal $(($1 - 128))"
  elif [ "$1" = 3 ]; then echo "the watchdog found a collective that never finished"
  else echo "a rank died or hung"; fi
}

rl_resume_from() {
  local sub=$1 ckpt=$2 s
  if [ "$sub" != train ] || [ -z "$ckpt" ]; then echo "scratch (no --ckpt-dir)"; return; fi
  s=$(cat "$ckpt/latest" 2>/dev/null || true)
  [ -n "$s" ] && [ -d "$ckpt/$s" ] && { echo "$s"; return; }
  echo "scratch (no complete checkpoint in $ckpt yet)"
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

rl_probe_hosts() {
  local agent=${OMPI_MCA_plm_rsh_agent:-ssh} t=${HPCTRAIN_PROBE_TIMEOUT:-5} h pids=() cmd k=0
  agent=${agent%%:*}
  read -ra cmd <<<"$agent"
  [ "$(basename "${cmd[0]}")" = ssh ] && cmd+=(-o BatchMode=yes -o ConnectTimeout="$t")
  for h in "$@"; do
    if rl_local_host "$h"; then pids+=(""); continue; fi
    timeout "$t" "${cmd[@]}" "$h" true </dev/null >/dev/null 2>&1 &
    pids+=($!)
  done
  for h in "$@"; do
    [ -z "${pids[$k]}" ] || wait "${pids[$k]}" || echo "$h"
    k=$((k + 1))
  done
}
