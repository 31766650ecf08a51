#!/usr/bin/env bash
# e2e: --activation-checkpointing (each gpt block recomputed in backward) gives the same final
# parameters as without it, per-tensor relative L2 norm <= 1e-5, fp32, AdamW with clipping:
# - with dropout 0.1 (the recompute replays the forward's RNG state, so the masks are the same):
#   1 rank; 2 ranks with --grad-accum 2 (DDP's hooks fire once per parameter, no_sync); 2 ranks
#   --zero 1; 1 rank --amp bf16 (the recompute runs under the forward's autocast);
# - the central invariant with it on: 2 ranks x 8 == 1 rank x 16 without it (dropout 0: each
#   rank draws its own masks, so only a dropout-free model can match across world sizes);
# - the start-up line and the summary figures (activation_checkpointing, units, recompute_s);
# - a plugin model that implements Model::set_activation_checkpointing, the same;
# - a model without units (mlp, a TorchScript file is the same path) is refused in one line,
#   exit 2, nothing written.
source "$(dirname "$0")/lib.sh"
CMP="$(dirname "$0")/compare_state.py"
D="$WORK/d"
run_np 1 data text --out "$D" --test-fraction 0.1 /usr/share/common-licenses >/dev/null
common=(--optimizer adamw --lr 3e-3 --weight-decay 0.1 --schedule constant
  --clip-grad-norm 1.0 --max-steps 12 --seed 3 --log-every 1000)
cfg=n_layer=3,n_head=2,n_embd=32,bias=false
train_to() {  # NAME NP ARGS...: trains into $WORK/NAME and merges it into $WORK/NAME.h5
  local name=$1 np=$2; shift 2
  run_np "$np" train "${common[@]}" --ckpt-dir "$WORK/$name" "$@" >"$WORK/$name.txt" 2>&1 ||
    { tail -5 "$WORK/$name.txt"; fail "$name: train"; }
  run_np 1 ckpt merge "$WORK/$name" --out "$WORK/$name.h5" >/dev/null || fail "merge $name"
}
same() {  # A B WHAT
  /usr/bin/python3 "$CMP" "$WORK/$1.h5" "$WORK/$2.h5" --rtol 1e-5 | tail -1 || fail "$3"
  ok "$3"
}

drop=(--model gpt --model-config "$cfg,dropout=0.1" --data "$D" --seq-len 32)
train_to np1 1 "${drop[@]}" --batch-size 16
train_to np1_ac 1 "${drop[@]}" --batch-size 16 --activation-checkpointing
same np1_ac np1 "1 rank, dropout 0.1: with == without activation checkpointing"
grep -q "activation checkpointing on for 3 units" "$WORK/np1_ac.txt" || fail "no start-up line about 3 units"
/usr/bin/python3 - "$WORK/np1_ac.txt" "$WORK/np1.txt" <<'PY' || fail "summary figures"
import json, sys
on, off = (json.loads([l for l in open(p) if l.startswith("{")][-1]) for p in sys.argv[1:])
assert on["activation_checkpointing"] is True and off["activation_checkpointing"] is False, (on, off)
assert on["checkpointed_units"] == 3 and on["recomputed_units"] == 3 * 12, on
assert on["recompute_s"] > 0 and 0 < on["recompute_pct"] < 100, on
assert "recompute_s" not in off
print(f"ok: summary: 3 units, {on['recomputed_units']} recomputes, {on['recompute_s']} s ({on['recompute_pct']:.1f}% of the wall time)")
PY

train_to np2 2 "${drop[@]}" --batch-size 8 --grad-accum 2
train_to np2_ac 2 "${drop[@]}" --batch-size 8 --grad-accum 2 --activation-checkpointing
same np2_ac np2 "2 ranks, --grad-accum 2, dropout 0.1: with == without"
train_to z1 2 "${drop[@]}" --batch-size 8 --zero 1
train_to z1_ac 2 "${drop[@]}" --batch-size 8 --zero 1 --activation-checkpointing
same z1_ac z1 "2 ranks --zero 1, dropout 0.1: with == without"
train_to bf16 1 "${drop[@]}" --batch-size 16 --amp bf16
train_to bf16_ac 1 "${drop[@]}" --batch-size 16 --amp bf16 --activation-checkpointing
same bf16_ac bf16 "1 rank --amp bf16, dropout 0.1: with == without"

plain=(--model gpt --model-config "$cfg" --data "$D" --seq-len 32)
train_to inv2_ac 2 "${plain[@]}" --batch-size 8 --activation-checkpointing
train_to inv1 1 "${plain[@]}" --batch-size 16
same inv2_ac inv1 "2 ranks x 8 with activation checkpointing == 1 rank x 16 without"

run_np 1 data synthetic --out "$WORK/img" --n 256 --test-n 16 --classes 4 --height 8 --width 8 >/dev/null
# A plugin model that implements the hook (tests/plugins/unit_models.cpp; dropout 0.2), 2 ranks.
LIB="$(dirname "$BIN")/tests/libunit_models.so"
[ -f "$LIB" ] || fail "no $LIB"
img=(--model-lib "$LIB" --model residual_mlp --data "$WORK/img" --batch-size 16)
train_to plug 2 "${img[@]}"
train_to plug_ac 2 "${img[@]}" --activation-checkpointing
grep -q "activation checkpointing on for 3 units" "$WORK/plug_ac.txt" || fail "plugin: no start-up line about 3 units"
same plug_ac plug "a plugin's residual units, 2 ranks, dropout 0.2: with == without"
expect_error no_units "model mlp (zoo) has no units to checkpoint" train --model mlp --data "$WORK/img" \
  --activation-checkpointing --ckpt-dir "$WORK/nounits" --metrics "$WORK/nounits.jsonl"
[ ! -e "$WORK/nounits" ] && [ ! -e "$WORK/nounits.jsonl" ] || fail "no_units: something was written"
ok "no_units: nothing written"
