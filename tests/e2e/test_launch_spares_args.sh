#!/usr/bin/env bash
# e2e: the bad inputs of the restart options, which stop before anything is launched, each with
# one line and exit 2: launch/multinode.sh --spares/--max-restarts/--shrink (fewer hosts than
# spares + 1, no --ckpt-dir, --resume other than auto, --shrink without --batch-size, a
# hostfile line without slots=, a number that is not one, spares without restarts, a subcommand
# other than train; launch/local.sh --max-restarts with --hostfile) and slurm/train.sbatch's HPCTRAIN_SPARE_NODES (not a number, as many spares
# as nodes, with the mpirun launcher). No cluster is needed: `mpirun`, `srun` and `scontrol` on
# PATH are stand-ins that record being called.
source "$(dirname "$0")/lib.sh"
SRC=${HPCTRAIN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
mkdir -p "$WORK/shim"
for b in mpirun srun; do
  printf '#!/bin/sh\necho "%s $*" >>"%s/launched"\nexit 0\n' "$b" "$WORK" >"$WORK/shim/$b"
done
cat >"$WORK/shim/scontrol" <<'SH'
#!/bin/sh
# scontrol show hostnames A,B -> one per line
[ "$1 $2" = "show hostnames" ] && echo "$3" | tr ',' '\n'
SH
chmod +x "$WORK/shim/"*
export PATH="$WORK/shim:$PATH"
printf 'node0 slots=1\nnode1 slots=1\n' >"$WORK/hf2"
printf 'node0 slots=1\nnode1\n' >"$WORK/hf_noslots"
tr=(train --model cnn --data "$WORK/d" --ckpt-dir "$WORK/ck")

# bad NAME REGEX CMD...: CMD exits 2 with exactly one line on stderr matching REGEX, nothing launched.
bad() {
  local name=$1 re=$2 rc; shift 2
  set +e; "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"; rc=$?; set -e
  [ "$rc" = 2 ] || { cat "$WORK/$name.err"; fail "$name: exit $rc, expected 2"; }
  [ "$(wc -l <"$WORK/$name.err")" = 1 ] && grep -Eq -e "$re" "$WORK/$name.err" || { cat "$WORK/$name.err"; fail "$name: not one line matching '$re'"; }
  [ ! -e "$WORK/launched" ] || { cat "$WORK/launched"; fail "$name: something was launched"; }
  ok "$name: $(cat "$WORK/$name.err")"
}
MN="$SRC/launch/multinode.sh"
bad spares_vs_hosts "--spares 2 needs at least 3 hosts in .*hf2.* it has 2" "$MN" --hostfile "$WORK/hf2" --spares 2 -- "${tr[@]}"
bad spares_no_ckpt "need --ckpt-dir DIR in the train arguments" "$MN" --hostfile "$WORK/hf2" --spares 1 -- train --data "$WORK/d"
bad restarts_no_ckpt "need --ckpt-dir DIR in the train arguments" "$MN" --hostfile "$WORK/hf2" --max-restarts 2 -- train --data "$WORK/d"
bad resume_none "drop --resume none" "$MN" --hostfile "$WORK/hf2" --max-restarts 1 -- "${tr[@]}" --resume none
bad shrink_no_batch "--shrink .* give --batch-size N" "$MN" --hostfile "$WORK/hf2" --max-restarts 1 --shrink -- "${tr[@]}"
bad no_slots "'node1' has no slots=N" "$MN" --hostfile "$WORK/hf_noslots" --max-restarts 1 -- "${tr[@]}"
bad not_a_number "--max-restarts two: expected a number" "$MN" --hostfile "$WORK/hf2" --max-restarts two -- "${tr[@]}"
bad spares_no_restarts "give --max-restarts N \(N >= 1\)" "$MN" --hostfile "$WORK/hf2" --spares 1 --max-restarts 0 -- "${tr[@]}"
bad not_train "restart .train. .*, not doctor" "$MN" --hostfile "$WORK/hf2" --max-restarts 1 -- doctor
bad local_hostfile "--max-restarts with --hostfile: use launch/multinode.sh" "$SRC/launch/local.sh" --hostfile "$WORK/hf2" --max-restarts 1 -- "${tr[@]}"

# train.sbatch: the error goes to the job log (stdout), one line, exit 2, no srun.
sbatch_bad() {
  local name=$1 re=$2 rc; shift 2
  set +e
  env SLURM_JOB_ID=7 SLURM_JOB_NODELIST=node0,node1 SLURM_NTASKS_PER_NODE=1 HPCTRAIN_RUN_DIR="$WORK/run-$name" \
    HPCTRAIN_REPO="$SRC" HPCTRAIN_BIN="$BIN" HPCTRAIN_CPU=1 "$@" bash "$SRC/slurm/train.sbatch" --data "$WORK/d" >"$WORK/$name.log" 2>&1
  rc=$?
  set -e
  [ "$rc" = 2 ] || { cat "$WORK/$name.log"; fail "$name: exit $rc, expected 2"; }
  [ "$(grep -c '^hpctrain: error:' "$WORK/$name.log")" = 1 ] && grep -Eq -e "^hpctrain: error: .*$re" "$WORK/$name.log" ||
    { cat "$WORK/$name.log"; fail "$name: no single error line matching '$re'"; }
  [ ! -e "$WORK/launched" ] || { cat "$WORK/launched"; fail "$name: srun was launched"; }
  ok "$name: $(grep '^hpctrain: error:' "$WORK/$name.log")"
}
sbatch_bad spare_nodes_nan "HPCTRAIN_SPARE_NODES=x: expected a number" HPCTRAIN_SPARE_NODES=x
sbatch_bad spare_nodes_all "HPCTRAIN_SPARE_NODES=2: the job has 2 node\(s\); submit with --nodes=N\+2" HPCTRAIN_SPARE_NODES=2
sbatch_bad spare_nodes_mpirun "spares need the srun launcher" HPCTRAIN_SPARE_NODES=1 HPCTRAIN_LAUNCHER=mpirun
