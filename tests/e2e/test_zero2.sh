#!/usr/bin/env bash
# e2e, ZeRO-2 (--zero 2: gradients and optimizer state sharded) through the real CLI, AdamW with
# clipping, 20 steps, final states compared per tensor (relative L2 norm, compare_state.py):
# - 2 ranks x 8 with --zero 2 == 1 rank x 16 with --zero 0 (1e-5) for gpt, mlp, cnn (BatchNorm,
#   --sync-bn so 2 x 8 computes the statistics of 16) and a TorchScript model;
# - --zero 2 == --zero 1 on the same world (also gpt with --amp bf16 --activation-checkpointing);
#   --grad-accum 2; --grad-comm-dtype bf16 within bf16 rounding;
# - the summary's model_state_bytes_per_rank: ZeRO-2 holds the gradient shard only (== the
#   shard's bytes, half of ZeRO-1's full buffers on 2 ranks) after the step;
# - resume across stages and world sizes both ways (ZeRO-2 on 2 -> DDP on 1, ZeRO-1 on 3,
#   ZeRO-2 on 3 (uneven shards: padding), and DDP / ZeRO-1 -> ZeRO-2), each continuing as the
#   uninterrupted run;
# - hpctrain plan: its figures against a formula from the model config, and against the real
#   run's start-up figures;
# - bad input: one line, exit 2.
source "$(dirname "$0")/lib.sh"
HERE=$(dirname "$0")
PY=${HPCTRAIN_PYTHON:-$HOME/.cache/hpctrain/venv/bin/python}
D="$WORK/d" T="$WORK/t" M="$WORK/m"
mkdir -p "$M"
run_np 1 data synthetic --out "$D" --n 512 --test-n 64 --classes 4 --height 12 --width 12 --seed 5 --noise 200 >/dev/null
run_np 1 data text --out "$T" --test-fraction 0.1 /usr/share/common-licenses >/dev/null
"$PY" "$HERE/torchscript_models.py" "$M" 1 12 12 4 >/dev/null 2>&1 || fail "writing the TorchScript models"
common=(--epochs 1 --seed 7 --log-every 1000 --optimizer adamw --lr 0.002 --weight-decay 1e-2 --clip-grad-norm 0.5)
cmp_state() { /usr/bin/python3 "$HERE/compare_state.py" "$@"; }
train() {  # train NAME NP ARGS...: a run into $WORK/NAME, merged to $WORK/NAME.h5
  local name=$1 np=$2; shift 2
  run_np "$np" train "${common[@]}" --ckpt-dir "$WORK/$name" --metrics "$WORK/$name.jsonl" "$@" \
    >"$WORK/$name.txt" 2>&1 || { tail -5 "$WORK/$name.txt"; fail "$name"; }
  run_np 1 ckpt merge "$WORK/$name" --out "$WORK/$name.h5" --full >/dev/null || fail "merge $name"
}
same() {  # same A B WHAT [compare_state args]: A's final state within the tolerance of B's
  local a=$1 b=$2 what=$3; shift 3
  cmp_state "$WORK/$a.h5" "$WORK/$b.h5" "$@" >"$WORK/cmp.txt" || { cat "$WORK/cmp.txt"; fail "$what"; }
  ok "$what ($(grep '^ok' "$WORK/cmp.txt" | tail -1 | cut -c5-))"
}

# 1. 2 ranks x 8 under --zero 2 == 1 rank x 16 under DDP.
gpt0=(--data "$T" --model gpt --model-config n_layer=2,n_head=2,n_embd=32,bias=false --seq-len 32)
gpt=("${gpt0[@]}" --max-steps 20)
img=(--data "$D" --max-steps 20)
for m in "gpt" "mlp" "cnn" "ts"; do
  skip=()
  case $m in
    gpt) a=("${gpt[@]}") ;;
    mlp) a=("${img[@]}" --model mlp) ;;
    cnn) a=("${img[@]}" --model cnn --sync-bn) skip=(--skip-no-signal) ;;  # conv biases before BN: no gradient
    ts) a=("${img[@]}" --model "$M/resnorm.pt") ;;
  esac
  train "$m-z2" 2 "${a[@]}" --batch-size 8 --zero 2
  train "$m-z0" 1 "${a[@]}" --batch-size 16 --zero 0
  same "$m-z2" "$m-z0" "$m: 2 ranks x 8 --zero 2 == 1 rank x 16 --zero 0" --rtol 1e-5 "${skip[@]}"
done
grep -q "model state per rank (ZeRO-2)" "$WORK/gpt-z2.txt" || fail "no model state line"

# 2. --zero 2 == --zero 1 on the same world (model and optimizer state), accumulation, bf16 comm.
train mlp-z1 2 "${img[@]}" --model mlp --batch-size 8 --zero 1
same mlp-z2 mlp-z1 "mlp 2 ranks: --zero 2 == --zero 1, model and optimizer state" --group model --group optim --rtol 1e-6
train mlp-z2-acc 2 "${img[@]}" --model mlp --batch-size 8 --zero 2 --grad-accum 2
same mlp-z2-acc mlp-z0 "mlp 2 ranks x 2 micro-batches of 4 --zero 2 == 1 rank x 16" --rtol 1e-5
train mlp-z2-bf16 2 "${img[@]}" --model mlp --batch-size 8 --zero 2 --grad-comm-dtype bf16
same mlp-z2-bf16 mlp-z0 "mlp --zero 2 --grad-comm-dtype bf16 within bf16 rounding of fp32 DDP" --rtol 2e-2

train gpt-z2-ac 2 "${gpt0[@]}" --batch-size 8 --zero 2 --amp bf16 --activation-checkpointing --max-steps 8
train gpt-z1-ac 2 "${gpt0[@]}" --batch-size 8 --zero 1 --amp bf16 --activation-checkpointing --max-steps 8
same gpt-z2-ac gpt-z1-ac "gpt --amp bf16 --activation-checkpointing: --zero 2 == --zero 1" --exact

# 3. What a ZeRO-2 rank holds: the gradient shard only, after every step.
/usr/bin/python3 - "$WORK/mlp-z2.jsonl" "$WORK/mlp-z1.jsonl" "$WORK/mlp-z0.jsonl" <<'PY' || fail "model state bytes"
import json, sys
def ms(p):
    s = [json.loads(l) for l in open(p) if '"summary"' in l][-1]["summary"]
    return s["model_state_bytes_per_rank"]
z2, z1, z0 = (ms(p) for p in sys.argv[1:4])
assert (z2["stage"], z1["stage"], z0["stage"]) == (2, 1, 0)
shard = z2["optimizer_state"] // 2          # AdamW: 2 fp32 slots over the shard
assert z2["gradients"] == shard, (z2, shard)  # no full-size gradient survives the step
assert z1["gradients"] == z1["parameters"] + shard, z1  # ZeRO-1: the full buckets + the shard
assert z2["parameters"] == z1["parameters"] and z2["parameters"] >= z0["parameters"]
assert abs(2 * shard - z2["parameters"]) == 0, (shard, z2["parameters"])  # padded, 2 ranks
assert z2["gradients_peak"] > z2["gradients"] and z2["gradients_peak"] <= z1["gradients"], z2
assert z2["largest_unit"] == 0 and z2["total"] == z2["parameters"] + z2["gradients"] + z2["optimizer_state"]
print(f"ok: per rank, 2 ranks: gradients ZeRO-2 {z2['gradients']} B (peak {z2['gradients_peak']}) / "
      f"ZeRO-1 {z1['gradients']} B / DDP {z0['gradients']} B; total {z2['total']} / {z1['total']} / {z0['total']} B")
PY

# 4. Resume across stages and world sizes: checkpoints every 10 steps, global batch 12.
r=(--data "$D" --model mlp --max-steps 30 --ckpt-every 10)
train u2 2 "${r[@]}" --batch-size 6 --zero 2   # ZeRO-2, 2 ranks, uninterrupted
train u1 1 "${r[@]}" --batch-size 12 --zero 0  # DDP, 1 rank, uninterrupted
continues() {  # continues WHAT NAME NP FROM REF ARGS...
  local what=$1 name=$2 np=$3 from=$4 ref=$5; shift 5
  train "$name" "$np" "${r[@]}" --resume "$from" "$@"
  grep -q "resumed from $from" "$WORK/$name.txt" || fail "$name did not resume"
  same "$name" "$ref" "$what continues as the uninterrupted run" --group model --group optim --rtol 1e-5
}
continues "ZeRO-2 (2 ranks) -> DDP (1 rank)" a1 1 "$WORK/u2/step-00000010" u2 --batch-size 12 --zero 0
continues "ZeRO-2 (2 ranks) -> ZeRO-1 (3 ranks)" a2 3 "$WORK/u2/step-00000010" u2 --batch-size 4 --zero 1
continues "ZeRO-1 (3 ranks) -> ZeRO-2 (2 ranks)" a3 2 "$WORK/a2/step-00000020" u2 --batch-size 6 --zero 2
continues "ZeRO-2 (2 ranks) -> ZeRO-2 (3 ranks, uneven shards)" a4 3 "$WORK/u2/step-00000010" u2 --batch-size 4 --zero 2
continues "DDP (1 rank) -> ZeRO-2 (2 ranks)" a5 2 "$WORK/u1/step-00000010" u1 --batch-size 6 --zero 2
grep -q "(ZeRO-2: 1/3 of it, [1-9][0-9]* padding element(s))" "$WORK/a4.txt" || fail "3 ranks: no padding"
/usr/bin/python3 -c "
import json,sys; m=json.load(open(sys.argv[1]))
assert m['meta']['zero']['stage'] == 2 and m['meta']['zero']['world_size'] == 2, m['meta']['zero']" \
  "$WORK/u2/step-00000030/manifest.json" || fail "the manifest does not record stage 2"
ok "the manifest records the stage and the partition"

# 5. hpctrain plan: a formula from the config, and the real gpt run's figures.
V=$(grep -o 'vocab_size [0-9]*' "$WORK/gpt-z2.txt" | head -1 | cut -d' ' -f2)
run_np 1 plan --model gpt --model-config n_layer=2,n_head=2,n_embd=32,bias=false --seq-len 32 --vocab-size "$V" \
  --world 2 --optimizer adamw --json >"$WORK/plan.json" || fail "plan"
run_np 1 plan --model gpt --model-config n_layer=2,n_head=2,n_embd=32,bias=false --seq-len 32 --vocab-size "$V" \
  --world 2 >"$WORK/plan.txt" || fail "plan (table)"
grep -q "^ *2 " "$WORK/plan.txt" || fail "plan's table has no stage 2 row"
/usr/bin/python3 - "$WORK/plan.json" "$WORK/gpt-z2.jsonl" "$WORK/gpt-z0.jsonl" "$V" "$WORK/gpt-z2.txt" <<'PY' || fail "plan figures"
import json, re, sys
plan = {r["stage"]: r for r in map(json.loads, open(sys.argv[1])) if "stage" in r}
L, E, T, V, N = 2, 32, 32, int(sys.argv[4]), 2
P = V * E + T * E + L * (12 * E * E + 2 * E) + E   # gpt, bias=false, lm_head tied to wte
assert plan[0]["parameters"] == 4 * P and plan[0]["gradients"] == 4 * P and plan[0]["optimizer_state"] == 8 * P, plan[0]
for s in (1, 2):  # padded to the world size per bucket: fewer than N zeros per bucket
    pad = plan[s]["parameters"] // 4 - P
    assert 0 <= pad < N * 4, (s, pad)
    shard = (P + pad) // N
    assert plan[s]["optimizer_state"] == 8 * shard, plan[s]
assert plan[1]["gradients"] == 4 * (P + pad) + 4 * shard and plan[2]["gradients"] == 4 * shard
block = 12 * E * E + 2 * E
assert plan[3]["parameters"] < plan[2]["parameters"] and plan[3]["largest_unit"] >= 4 * block
for s in range(4):
    r = plan[s]
    assert r["total"] == r["parameters"] + r["gradients"] + r["optimizer_state"] + r["largest_unit"], r
def ms(p):
    return [json.loads(l) for l in open(p) if '"summary"' in l][-1]["summary"]["model_state_bytes_per_rank"]
for stage, run in ((2, sys.argv[2]), (0, sys.argv[3])):
    real = ms(run)
    for k in ("parameters", "gradients", "optimizer_state"):
        assert real[k] == plan[stage][k], (stage, k, real[k], plan[stage][k])
start = re.search(r"model state per rank \(ZeRO-2\): .* total .* \((\d+) bytes\)", open(sys.argv[5]).read())
assert start and int(start.group(1)) == plan[2]["total"], (start and start.group(0), plan[2]["total"])
print(f"ok: plan gpt L2 E32 V{V} on 2 ranks (P={P}): totals " +
      ", ".join(f"stage {s} {plan[s]['total']} B" for s in range(4)) + "; stages 0 and 2 == the real runs' figures (start-up line and summary)")
PY

# 6. Bad input: one line, exit 2.
expect_error plan_world "--world" plan --model gpt --world 0
expect_error plan_model "unknown model" plan --model nosuchmodel --world 2
