#!/usr/bin/env bash
# cluster (label `cluster`): the faults only clusters have, on 2 namespace hosts x 1 rank,
# launched with launch/multinode.sh.
#   a. node1's cable is pulled at the switch mid-training (--collective-timeout 40, above the
#      launcher's 25 s keepalive verdict): the WHOLE job ends (launcher, mpirun, both ranks, the
#      orted on node1) within collective-timeout + 30 s, with the link still down; the latest
#      checkpoint verifies and, with the cable back, the job resumes from it and finishes.
#   b. the same with --collective-timeout 8, so the watchdog aborts before the keepalive verdict
#      (Open MPI then waits for the lost daemon for ~15 min): launch/local.sh ends mpirun once
#      its local ranks are gone, within collective-timeout + 30 s; node1's rank ends through its
#      own watchdog; node1's orted ends once the host is back on the network.
#   c. a slow link (netem delay 5ms on node1, or a 100 Mbit/s tbf where the kernel has no netem):
#      training completes with bitwise the parameters of
#      the same run without delay, and comm-blocked rises in the progress line and metrics.
# Prints the measured exit times (they go to the perf notes).
source "$(dirname "$0")/lib.sh"
cluster_start 2
D="$WORK/d"
run_np 1 data synthetic --out "$D" --n 1024 --test-n 128 --classes 4 --height 12 --width 12 --seed 5 --noise 200 >/dev/null
hostfile "$WORK/hf" node0:1 node1:1
long=(train --model cnn --sync-bn --device cpu --data "$D" --epochs 1000 --batch-size 16 --lr 0.02 --seed 3 --log-every 5 --ckpt-every 5)

# wait_until SECONDS CMD...: poll CMD every 0.5 s; returns 1 on timeout.
wait_until() {
  local end=$((SECONDS + $1)); shift
  until "$@"; do [ $SECONDS -lt $end ] || return 1; sleep 0.5; done
}
no_cluster_procs() { [ -z "$(cluster_procs)" ]; }
# lost_node TAG TIMEOUT: trains in the background, pulls node1's cable after step 10 is saved,
# measures when the launcher and each process are gone. Sets launcher_s, rc.
lost_node() {
  local tag=$1 timeout=$2 ck="$WORK/$1"
  mn "$WORK/hf" "${long[@]}" --collective-timeout "$timeout" --ckpt-dir "$ck" >"$WORK/$tag.txt" 2>"$WORK/$tag.err" &
  local job=$!
  wait_until 240 ckpt_at_least "$ck" 10 || { tail "$WORK/$tag.txt" "$WORK/$tag.err"; fail "$tag: no checkpoint at step 10"; }
  link_down node1
  local t0=$SECONDS
  wait_until $((timeout + 30)) eval '! kill -0 '$job' 2>/dev/null' || true
  launcher_s=$((SECONDS - t0))
  if kill -0 $job 2>/dev/null; then
    show_cluster_procs
    tail -5 "$WORK/$tag.err"
    fail "$tag: the launcher is still running $launcher_s s after node1 went off the network (collective-timeout $timeout)"
  fi
  set +e; wait $job; rc=$?; set -e
}

# --- a. node lost, keepalive verdict first ------------------------------------------------------
lost_node lost40 40
[ "$rc" != 0 ] || fail "a. the job exited 0 after losing node1"
t_all=$launcher_s
wait_until $((40 + 30 - launcher_s)) no_cluster_procs || { show_cluster_procs; fail "a. processes left on the cluster $((40 + 30)) s after the link went down"; }
grep -q "ORTE has lost communication with a remote daemon" "$WORK/lost40.err" || { tail "$WORK/lost40.err"; fail "a. mpirun did not report the lost daemon"; }
latest=$(cat "$WORK/lost40/latest")
run_np 1 ckpt verify "$WORK/lost40" >/dev/null || fail "a. the latest checkpoint ($latest) does not verify"
ok "a. node1 off the network, collective-timeout 40: launcher exited $rc after $t_all s, every process of the job gone (node1's too), $latest verifies"
echo "measured: lost node, keepalive path: launcher (mpirun) gone after $t_all s"
link_up node1
step=${latest#step-}; step=$((10#$step))
mn "$WORK/hf" "${long[@]}" --max-steps $((step + 5)) --ckpt-dir "$WORK/lost40" >"$WORK/lost40-r.txt" 2>&1 || { tail "$WORK/lost40-r.txt"; fail "a. resume after the lost node"; }
grep -q "resumed from .*$latest at step $step" "$WORK/lost40-r.txt" || { grep -i resum "$WORK/lost40-r.txt"; fail "a. did not resume from $latest"; }
[ "$(json_field "$WORK/lost40-r.txt" steps)" = $((step + 5)) ] || fail "a. resumed run did not reach step $((step + 5))"
ok "a. with node1 back, the job resumed from $latest on both hosts and ran to step $((step + 5))"

# --- b. node lost, watchdog first --------------------------------------------------------------
lost_node lost8 8
t_b=$launcher_s
[ "$rc" = 3 ] || { tail "$WORK/lost8.err"; fail "b. launcher exited $rc, expected 3"; }
grep -q "timed out after 8 s" "$WORK/lost8.err" || { tail "$WORK/lost8.err"; fail "b. no watchdog report"; }
# node1's own rank reports through its watchdog too, and ends; only its orted may wait for the link.
hpctrain_left() { [ -z "$(cluster_procs | xargs -r ps -o comm= -p 2>/dev/null | grep -x hpctrain || true)" ]; }
wait_until $((8 + 30 - t_b)) hpctrain_left || { show_cluster_procs; fail "b. an hpctrain rank is still running"; }
[ -z "$(cluster_procs | xargs -r ps -o comm= -p 2>/dev/null | grep -x mpirun || true)" ] || fail "b. mpirun still running"
link_up node1
t0=$SECONDS
wait_until 60 no_cluster_procs || { show_cluster_procs; fail "b. node1's orted still running 60 s after the link came back"; }
ok "b. collective-timeout 8: watchdog report, launcher ended mpirun and exited 3 after $t_b s, no rank left; node1's orted gone $((SECONDS - t0)) s after the link came back"
echo "measured: lost node, watchdog-first path: launcher gone after $t_b s (collective-timeout 8, the watchdog's report, grace 15)"

# --- c. slow link --------------------------------------------------------------------------------
short=(train --model cnn --sync-bn --device cpu --data "$D" --epochs 1 --max-steps 30 --batch-size 16 --lr 0.02 --seed 3 --log-every 10)
mn "$WORK/hf" "${short[@]}" --ckpt-dir "$WORK/fast" --metrics "$WORK/fast.jsonl" >"$WORK/fast.txt" 2>&1 || { tail "$WORK/fast.txt"; fail "c. run without delay"; }
slowed=$(slow_link node1)
mn "$WORK/hf" "${short[@]}" --ckpt-dir "$WORK/slow" --metrics "$WORK/slow.jsonl" >"$WORK/slow.txt" 2>&1 || { tail "$WORK/slow.txt"; fail "c. run over the slow link"; }
run_np 1 ckpt merge "$WORK/fast" --out "$WORK/fast.h5" >/dev/null
run_np 1 ckpt merge "$WORK/slow" --out "$WORK/slow.h5" >/dev/null
/usr/bin/python3 "$COMPARE" "$WORK/slow.h5" "$WORK/fast.h5" --exact || fail "c. the slow link changed the parameters"
read -r cb_fast sps_fast < <(/usr/bin/python3 - "$WORK/fast.jsonl" <<'PY'
import json, sys
t = [json.loads(l) for l in open(sys.argv[1]) if '"type":"train"' in l]
print(f"{sum(r['comm_blocked_pct'] for r in t) / len(t):.1f} {sum(r['samples_per_s'] for r in t) / len(t):.0f}")
PY
)
read -r cb_slow sps_slow < <(/usr/bin/python3 - "$WORK/slow.jsonl" <<'PY'
import json, sys
t = [json.loads(l) for l in open(sys.argv[1]) if '"type":"train"' in l]
print(f"{sum(r['comm_blocked_pct'] for r in t) / len(t):.1f} {sum(r['samples_per_s'] for r in t) / len(t):.0f}")
PY
)
/usr/bin/python3 -c "import sys; a,b=map(float,sys.argv[1:]); sys.exit(0 if b > a + 5 else 1)" "$cb_fast" "$cb_slow" \
  || fail "c. comm-blocked did not rise over the slow link: $cb_fast% -> $cb_slow%"
grep -q "comm-blocked" "$WORK/slow.txt" || fail "c. no progress line with comm-blocked"
ok "c. $slowed on node1: same parameters bitwise; comm-blocked ${cb_fast}% -> ${cb_slow}%, samples/s $sps_fast -> $sps_slow"

cluster_down
left=$(cluster_leftovers)
[ -z "$left" ] || fail "teardown left: $left"
ok "teardown: no namespace, link, hosts line or process left"
