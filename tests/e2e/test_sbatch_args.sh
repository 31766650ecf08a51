#!/usr/bin/env bash
# e2e: slurm/train.sbatch passes its defaults (--device, --ckpt-dir, --resume auto, --metrics)
# only for the flags the user did not give, so each of the four given to sbatch wins (before,
# CLI11 refused a second --ckpt-dir: "At Most 1 required but received 2"). Runs the script
# itself, outside Slurm, with an `srun` on PATH that starts the binary as a world of one (the
# launcher is the only thing replaced); tests/e2e/test_slurm.sh runs it under a real sbatch.
source "$(dirname "$0")/lib.sh"
SRC=${HPCTRAIN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
mkdir -p "$WORK/shim"
cat >"$WORK/shim/srun" <<'SH'
#!/usr/bin/env bash
# srun [--options...] BIN ARGS...: drop srun's own options and run BIN once.
while [ $# -gt 0 ] && [ "${1#--}" != "$1" ]; do shift; done
printf '%s\n' "$*" >>"$SHIM_LOG"
exec "$@"
SH
chmod +x "$WORK/shim/srun"
export PATH="$WORK/shim:$PATH" SHIM_LOG="$WORK/argv.log" HPCTRAIN_BIN="$BIN" HPCTRAIN_REPO="$SRC" HPCTRAIN_CPU=1
unset SLURM_JOB_ID
D="$WORK/d"
run_np 1 data synthetic --out "$D" --n 128 --test-n 32 --classes 2 --height 6 --width 6 --seed 1 >/dev/null
base=(--model mlp --data "$D" --epochs 1 --batch-size 32 --ckpt-every 2 --log-every 1)
# sb NAME ARGS...: train.sbatch with run dir $WORK/NAME; stdout+stderr in $WORK/NAME.log.
sb() {
  local name=$1 rc; shift
  set +e
  HPCTRAIN_RUN_DIR="$WORK/$name" timeout 120 bash "$SRC/slurm/train.sbatch" "$@" >"$WORK/$name.log" 2>&1; rc=$?
  set -e
  [ $rc = 0 ] || { tail -20 "$WORK/$name.log"; fail "$name: train.sbatch $* exited $rc"; }
  tail -1 "$SHIM_LOG"
}
# summary LOG FIELD: field of the last JSON line of LOG.
summary() { /usr/bin/python3 -c "
import json,sys
print(json.loads([l for l in open(sys.argv[1]) if l.startswith('{')][-1])[sys.argv[2]])" "$1" "$2"; }
count() { grep -o -- "$1" <<<"$2" | wc -l; }

# Defaults: all four from the script.
argv=$(sb defaults "${base[@]}")
for f in "--device cpu" "--ckpt-dir $WORK/defaults/ckpt" "--resume auto" "--metrics $WORK/defaults/metrics.jsonl"; do
  [[ "$argv" == *"$f"* ]] || fail "defaults: '$f' not passed: $argv"
done
[ -f "$WORK/defaults/ckpt/latest" ] && [ -s "$WORK/defaults/metrics.jsonl" ] || fail "defaults: no checkpoint or metrics in the run dir"
ok "defaults: the script adds --device cpu --ckpt-dir RUN/ckpt --resume auto --metrics RUN/metrics.jsonl"

# --ckpt-dir (both spellings): the user's directory gets the checkpoint, the script's none.
for form in sep eq; do
  if [ $form = sep ]; then u=(--ckpt-dir "$WORK/myckpt-$form"); else u=("--ckpt-dir=$WORK/myckpt-$form"); fi
  argv=$(sb "ck-$form" "${base[@]}" "${u[@]}")
  [ "$(count --ckpt-dir "$argv")" = 1 ] || fail "ckpt-dir $form: --ckpt-dir passed twice: $argv"
  [ -f "$WORK/myckpt-$form/latest" ] || fail "ckpt-dir $form: no checkpoint in the user's directory"
  [ ! -e "$WORK/ck-$form/ckpt/latest" ] || fail "ckpt-dir $form: the script's directory got a checkpoint too"
done
ok "--ckpt-dir DIR and --ckpt-dir=DIR win: checkpoint in the user's directory only"

# --resume none: a run dir with a finished checkpoint; the default (auto) resumes, none starts over.
argv=$(sb defaults "${base[@]}")
grep -q "resumed from $WORK/defaults/ckpt/step-00000004 at step 4.*--resume auto: the newest checkpoint in --ckpt-dir $WORK/defaults/ckpt; --resume none starts fresh" "$WORK/defaults.log" ||
  { cat "$WORK/defaults.log"; fail "resume: the second default run did not say it resumed, from where and why"; }
# That run was finished: it says so instead of reporting a loss and throughput of 0.
grep -q "nothing to train: the resumed checkpoint is at step 4 of 4" "$WORK/defaults.log" || { cat "$WORK/defaults.log"; fail "no 'nothing to train'"; }
[ "$(summary "$WORK/defaults.log" nothing_to_train)" = True ] && [ "$(summary "$WORK/defaults.log" train_loss)" = None ] &&
  [ "$(summary "$WORK/defaults.log" samples_per_s)" = None ] || { tail -1 "$WORK/defaults.log"; fail "summary of a finished run"; }
ok "a reused run dir resumes (--resume auto) and says from where and why; finished: 'nothing to train', null loss/throughput"
argv=$(HPCTRAIN_CKPT_DIR="$WORK/defaults/ckpt" sb resnone "${base[@]}" --resume none)
[ "$(count --resume "$argv")" = 1 ] && [[ "$argv" == *"--resume none"* ]] || fail "resume: $argv"
grep -q "resumed from" "$WORK/resnone.log" && { cat "$WORK/resnone.log"; fail "--resume none resumed"; }
[ "$(summary "$WORK/resnone.log" steps)" = 4 ] || fail "--resume none: did not train 4 steps from 0"
ok "--resume none wins: trains from step 0 beside an existing checkpoint"

# --metrics F
argv=$(sb met "${base[@]}" --metrics "$WORK/my.jsonl")
[ "$(count --metrics "$argv")" = 1 ] || fail "metrics: passed twice: $argv"
grep -q '"type":"train"' "$WORK/my.jsonl" || fail "metrics: nothing in the user's file"
[ ! -e "$WORK/met/metrics.jsonl" ] || fail "metrics: the script's file was written too"
ok "--metrics FILE wins"

# --device cpu given explicitly while HPCTRAIN_CPU is unset: the script's 'auto' is not added.
argv=$(HPCTRAIN_CPU=0 sb dev "${base[@]}" --device cpu)
[ "$(count --device "$argv")" = 1 ] && [[ "$argv" == *"--device cpu"* ]] || fail "device: $argv"
[ "$(summary "$WORK/dev.log" device)" = cpu ] || fail "device: did not run on cpu"
ok "--device D wins"
