#!/usr/bin/env bash
# e2e, ZeRO-3 through the real CLI (--zero 3: parameters sharded, gathered per unit): final
# parameters from merged checkpoints, per-tensor relative L2 norm <= 1e-5, AdamW with clipping:
# - 2 ranks x 8 under --zero 3 == 1 rank x 16 under --zero 0 for gpt (units: its blocks), mlp,
#   cnn with --sync-bn (units: features, classifier) and a TorchScript model (one unit);
# - --zero 3 == --zero 0 on the same 2 ranks: cnn with BatchNorm; gpt with --grad-accum 2 and
#   with --activation-checkpointing == 1 rank x 16; --amp bf16 against DDP at bf16's tolerance;
# - --amp bf16 (units gathered in bf16): == --zero 0 --amp bf16 at 1 and 2 ranks (bf16 tolerance), the
#   start-up line, plan == run, the bytes gathered per step halved for the units, checkpoints
#   of fp32 masters (a resume ends bitwise as the uninterrupted run);
# - an uneven shard: 3 ranks x 5 == 1 rank x 15 (gpt; its units do not divide by 3);
# - checkpoints: --zero 3 on 4 ranks resumes as --zero 0 on 2 ranks, and a --zero 0 checkpoint
#   of 2 ranks as --zero 3 on 4, each ending as its uninterrupted run; eval of a stage-3
#   checkpoint; the manifest records the stage;
# - gpt's --zero 3 set-up (built on meta, shards drawn from the seed) starts bitwise from --zero 0's
#   initial parameters;
# - a plugin model's units (Model::set_unit_runner); a rank that skips a unit: one line, exit 2.
# (--zero 3 on a CUDA device is refused in one line: not testable without a GPU.)
source "$(dirname "$0")/lib.sh"
HERE=$(dirname "$0")
PY=${HPCTRAIN_PYTHON:-$HOME/.cache/hpctrain/venv/bin/python}
T="$WORK/t" I="$WORK/i" M="$WORK/m"
mkdir -p "$M"
run_np 1 data text --out "$T" --test-fraction 0.1 /usr/share/common-licenses >/dev/null
run_np 1 data synthetic --out "$I" --n 512 --test-n 64 --classes 4 --height 8 --width 8 --seed 5 --noise 60 >/dev/null
"$PY" "$HERE/torchscript_models.py" "$M" 1 8 8 4 || fail "writing the TorchScript models"
common=(--optimizer adamw --lr 3e-3 --weight-decay 0.1 --schedule constant --clip-grad-norm 0.5 --seed 3
  --log-every 1000 --epochs 1)
gpt=(--model gpt --model-config n_layer=3,n_head=2,n_embd=32,bias=false --data "$T" --seq-len 16)
train_to() {  # NAME NP ARGS...: trains into $WORK/NAME, merged to $WORK/NAME.h5
  local name=$1 np=$2; shift 2
  run_np "$np" train "${common[@]}" --ckpt-dir "$WORK/$name" "$@" >"$WORK/$name.txt" 2>&1 ||
    { tail -5 "$WORK/$name.txt"; fail "$name: train"; }
  run_np 1 ckpt merge "$WORK/$name" --out "$WORK/$name.h5" --full >/dev/null || fail "merge $name"
}
same() {  # A B WHAT [compare_state args]
  local a=$1 b=$2 what=$3; shift 3
  /usr/bin/python3 "$HERE/compare_state.py" "$WORK/$a.h5" "$WORK/$b.h5" "$@" --rtol 1e-5 >"$WORK/cmp.txt" ||
    { cat "$WORK/cmp.txt"; fail "$what"; }
  ok "$what ($(tail -1 "$WORK/cmp.txt" | cut -c5-))"
}

# 1. 2 ranks x 8 (--zero 3) == 1 rank x 16 (--zero 0).
train_to g1 1 "${gpt[@]}" --batch-size 16 --max-steps 10 --zero 0
train_to g2z3 2 "${gpt[@]}" --batch-size 8 --max-steps 10 --zero 3
same g2z3 g1 "gpt: 2 ranks x 8 --zero 3 == 1 rank x 16"
grep -q "ZeRO-3: 3 unit(s) + the root" "$WORK/g2z3.txt" || fail "no ZeRO-3 start-up line"
# hpctrain plan's stage-3 row == the model state this run measured at start (bytes).
plan_is_run() {  # RUN [plan args]: hpctrain plan's stage-3 total == RUN's measured model state
  local run=$1; shift
  run_np 1 plan --model gpt --model-config n_layer=3,n_head=2,n_embd=32,bias=false --seq-len 16 --vocab-size 256 \
    --world 2 --zero 3 --json "$@" >"$WORK/plan-$run.json" || fail "plan --zero 3 $*"
  /usr/bin/python3 - "$WORK/plan-$run.json" "$WORK/$run.txt" <<'PY' || fail "plan's stage 3 != $run's model state"
import json, re, sys
plan = [json.loads(l) for l in open(sys.argv[1]) if '"stage"' in l][0]
run = int(re.search(r"model state per rank \(ZeRO-3\):.* \((\d+) bytes\)", open(sys.argv[2]).read()).group(1))
assert plan["total"] == run, (plan, run)
PY
  ok "hpctrain plan --zero 3 $* == $run's model state per rank ($(grep -o '"total":[0-9]*' "$WORK/plan-$run.json") bytes)"
}
plan_is_run g2z3
/usr/bin/python3 -c "
import json,sys; m=json.load(open(sys.argv[1])); assert m['meta']['zero']['stage']==3 and m['meta']['zero']['world_size']==2, m['meta'].get('zero')
" "$WORK/g2z3/latest/manifest.json" 2>/dev/null || /usr/bin/python3 -c "
import json,sys,glob; m=json.load(open(sorted(glob.glob(sys.argv[1]+'/step-*/manifest.json'))[-1])); assert m['meta']['zero']['stage']==3, m['meta'].keys()
" "$WORK/g2z3" || fail "the manifest does not record stage 3"
ok "the manifest records stage 3 and the partition"
# gpt under --zero 3 is built on the meta device and each rank draws only its shards from the
# seed (model/sharded_model.h): its initial parameters equal a whole --zero 0 build's, bitwise
# (one SGD step at lr 1e-30 moves nothing: every update is far below fp32 rounding, and with
# bias=false no parameter starts at 0), on 3 ranks (padded shards).
init=(--optimizer sgd --momentum 0 --weight-decay 0 --lr 1e-30 --schedule constant --seed 3 --log-every 1000
  --max-steps 1 "${gpt[@]}")
for z in "1 0 15" "3 3 5"; do
  set -- $z
  run_np "$1" train "${init[@]}" --batch-size "$3" --zero "$2" --ckpt-dir "$WORK/init$2" >"$WORK/init$2.txt" 2>&1 ||
    { tail -5 "$WORK/init$2.txt"; fail "init$2: train"; }
  run_np 1 ckpt merge "$WORK/init$2" --out "$WORK/init$2.h5" >/dev/null || fail "merge init$2"
done
grep -q "built shard by shard" "$WORK/init3.txt" || fail "gpt --zero 3 was not built shard by shard"
same init3 init0 "gpt: --zero 3 (3 ranks, built shard by shard) starts from --zero 0's parameters" --exact
img=(--data "$I" --batch-size 8 --max-steps 12)
for model in mlp "$M/resnorm.pt"; do
  tag=$(basename "$model" .pt)
  train_to "$tag-1" 1 --model "$model" --data "$I" --batch-size 16 --max-steps 12 --zero 0
  train_to "$tag-z3" 2 --model "$model" "${img[@]}" --zero 3
  same "$tag-z3" "$tag-1" "$tag: 2 ranks x 8 --zero 3 == 1 rank x 16"
done
train_to cnnsb-1 1 --model cnn --data "$I" --batch-size 16 --max-steps 12 --zero 0 --sync-bn
train_to cnnsb-z3 2 --model cnn "${img[@]}" --zero 3 --sync-bn
same cnnsb-z3 cnnsb-1 "cnn --sync-bn: 2 ranks x 8 --zero 3 == 1 rank x 16" --skip-no-signal

# 2. Same world: --zero 3 == --zero 0 (BatchNorm buffers, gradient accumulation).
train_to cnn-z0 2 --model cnn "${img[@]}" --zero 0
train_to cnn-z3 2 --model cnn "${img[@]}" --zero 3
same cnn-z3 cnn-z0 "cnn (BatchNorm): --zero 3 == --zero 0 on 2 ranks" --skip-no-signal
train_to ga-z3 2 "${gpt[@]}" --batch-size 8 --max-steps 10 --zero 3 --grad-accum 2
same ga-z3 g1 "gpt --grad-accum 2: 2 ranks --zero 3 == 1 rank x 16"

train_to ac-z3 2 "${gpt[@]}" --batch-size 8 --max-steps 10 --zero 3 --activation-checkpointing
same ac-z3 g1 "gpt --activation-checkpointing: 2 ranks --zero 3 == 1 rank x 16 without it"
# bf16 autocast: 2 ranks x 8 against 1 rank x 16 spreads 7e-3 by itself; stage 3 against DDP on
# the same ranks stays within 1e-2 (measured 8e-4).
train_to bf-z0 2 "${gpt[@]}" --batch-size 8 --max-steps 8 --zero 0 --amp bf16
train_to bf-z3 2 "${gpt[@]}" --batch-size 8 --max-steps 8 --zero 3 --amp bf16
same bf-z3 bf-z0 "gpt --amp bf16: --zero 3 == --zero 0 on 2 ranks (bf16 tolerance)" --rtol 1e-2
# Under --amp bf16 stage 3 gathers its units in bf16 over fp32 master shards (ddp/fsdp.h "Mixed
# precision"); the reference is DDP at the same world size and bf16's tolerance (above: 2 ranks;
# here 1 rank x 16). Across world sizes bf16 is not invariant even under DDP (each rank's weight
# gradients are rounded to bf16 before the average: 2x8 and 1x16 differ by ~1e-2 after 8 steps).
train_to bf-z3-1 1 "${gpt[@]}" --batch-size 16 --max-steps 8 --zero 3 --amp bf16
train_to bf-z0-1 1 "${gpt[@]}" --batch-size 16 --max-steps 8 --zero 0 --amp bf16
same bf-z3-1 bf-z0-1 "gpt --amp bf16: --zero 3 == --zero 0 on 1 rank x 16 (bf16 tolerance)" --rtol 1e-2
grep -q "its matrices in bfloat16" "$WORK/bf-z3.txt" || fail "the start-up line does not name the bf16 gather"
plan_is_run bf-z3 --amp bf16
# The parameter bytes gathered per step (the summary), from the manifest's partition: each unit's
# padded elements twice per step (forward, backward) at 2 bytes (fp32: 4), the root's once at 4.
gathered=$(/usr/bin/python3 - "$WORK/bf-z3" "$WORK/bf-z3.txt" "$WORK/g2z3.txt" <<'PY'
import glob, json, sys
man = json.load(open(sorted(glob.glob(sys.argv[1] + "/step-*/manifest.json"))[-1]))
b = man["meta"]["zero"]["buckets"]
units, root = sum(x["padded"] for x in b[:-1]), b[-1]["padded"]
def summary(path):
    return [json.loads(l) for l in open(path) if l.startswith("{") and '"bytes_gathered_per_step"' in l][-1]
bf, fp = summary(sys.argv[2]), summary(sys.argv[3])
assert bf["gather_dtype"] == "bfloat16" and fp["gather_dtype"] == "float32", (bf["gather_dtype"], fp["gather_dtype"])
assert bf["bytes_gathered_per_step"] == 2 * 2 * units + 4 * root, (bf["bytes_gathered_per_step"], units, root)
assert fp["bytes_gathered_per_step"] == 2 * 4 * units + 4 * root, (fp["bytes_gathered_per_step"], units, root)
print(f"fp32 {fp['bytes_gathered_per_step']}, bf16 {bf['bytes_gathered_per_step']} bytes; units {units}, root {root} elements")
PY
) || fail "bytes gathered per step: $gathered"
ok "--amp bf16: the units' gathered bytes per step halved ($gathered)"
# Checkpoints hold the fp32 masters, not the bf16 the units computed with: a resume at step 6
# ends bitwise as the uninterrupted run, and the unit matrices have bits below bf16's.
rb=("${gpt[@]}" --batch-size 8 --max-steps 12 --ckpt-every 6 --zero 3 --amp bf16)
train_to bfc 2 "${rb[@]}"
train_to bfc-r 2 "${rb[@]}" --resume "$WORK/bfc/step-00000006"
grep -q "resumed from" "$WORK/bfc-r.txt" || fail "bfc-r did not resume"
same bfc-r bfc "--zero 3 --amp bf16 resumed at step 6 == the uninterrupted run" --exact --group model --group optim
/usr/bin/python3 - "$WORK/bfc.h5" <<'PY' || fail "the --amp bf16 checkpoint holds bf16-rounded parameters"
import sys, h5py, numpy as np
f, seen = h5py.File(sys.argv[1], "r"), []
def visit(name, o):
    if isinstance(o, h5py.Dataset) and ".h." in name and o.ndim >= 2:
        bits = np.ascontiguousarray(o[()], dtype="<f4").view("<u4") & 0xFFFF
        seen.append((name, int(np.count_nonzero(bits))))
f["model"].visititems(visit)
assert seen and all(n > 0 for _, n in seen), seen
PY
ok "the --amp bf16 checkpoint holds fp32 masters (every unit matrix has bits below bf16's)"

# A plugin model whose units come from Model::set_unit_runner (tests/plugins/unit_models.cpp;
# dropout 0.2: the same masks as DDP, drawn once per unit); one whose rank 1 skips a unit is
# refused at the first forward in one line naming it.
LIB="$(dirname "$BIN")/tests/libunit_models.so"
train_to rm-z0 2 --model residual_mlp --model-lib "$LIB" "${img[@]}" --zero 0
train_to rm-z3 2 --model residual_mlp --model-lib "$LIB" "${img[@]}" --zero 3
same rm-z3 rm-z0 "plugin residual_mlp (3 units, dropout 0.2): --zero 3 == --zero 0 on 2 ranks"
grep -q "ZeRO-3: 3 unit(s) + the root" "$WORK/rm-z3.txt" || fail "the plugin's units were not used"
expect_error skip "in the first forward rank 1 ran unit units.2 where rank 0 ran unit units.1" train --model rank_skip_mlp --model-lib "$LIB" \
  --data "$I" --zero 3 --ckpt-dir "$WORK/skip"
[ ! -e "$WORK/skip" ] || [ -z "$(ls -A "$WORK/skip")" ] || fail "a refused run wrote a checkpoint"

# 3. An uneven shard: 3 ranks.
train_to u1 1 "${gpt[@]}" --batch-size 15 --max-steps 8 --zero 0
train_to u3 3 "${gpt[@]}" --batch-size 5 --max-steps 8 --zero 3
# DDP on 3 ranks drifts from 1 rank x 15 by itself (2.5e-5 on c_fc since gpt's init changed): the
# 1-rank comparison allows 4x DDP's own drift per tensor, and --zero 3 must equal DDP on 3 ranks.
train_to d3 3 "${gpt[@]}" --batch-size 5 --max-steps 8 --zero 0
same u3 d3 "gpt: 3 ranks x 5 --zero 3 (padded shards) == --zero 0 on 3 ranks"
same u3 u1 "gpt: 3 ranks x 5 --zero 3 == 1 rank x 15 (within 4x DDP's own 3-rank drift)" --noise-ref "$WORK/d3.h5"

# 4. Checkpoints reshard across stages and world sizes, both ways.
r=("${gpt[@]}" --max-steps 12 --ckpt-every 6)
train_to c4 4 "${r[@]}" --batch-size 4 --zero 3
train_to c2 2 "${r[@]}" --batch-size 8 --zero 0
train_to c4to2 2 "${r[@]}" --batch-size 8 --zero 0 --resume "$WORK/c4/step-00000006"
grep -q "resumed from" "$WORK/c4to2.txt" || fail "c4to2 did not resume"
same c4to2 c4 "--zero 3 on 4 ranks -> --zero 0 on 2 ranks continues the run" --group model --group optim
train_to c2to4 4 "${r[@]}" --batch-size 4 --zero 3 --resume "$WORK/c2/step-00000006"
grep -q "resumed from" "$WORK/c2to4.txt" || fail "c2to4 did not resume"
same c2to4 c2 "--zero 0 on 2 ranks -> --zero 3 on 4 ranks continues the run" --group model --group optim
run_np 1 eval --ckpt "$WORK/c4" --data "$T" >"$WORK/eval.txt" 2>&1 || { tail -3 "$WORK/eval.txt"; fail "eval of a stage-3 checkpoint"; }
ok "hpctrain eval of a --zero 3 checkpoint"
echo "all ZeRO-3 tests passed"
