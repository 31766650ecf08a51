#!/usr/bin/env bash
# e2e: Hugging Face GPT-2 out and in (tests/e2e/hf_gpt2_check.py is transformers' side).
# Out: a short 2-rank `--model gpt` run, `ckpt merge --format hf`; transformers' GPT2LMHeadModel
# and AutoModelForCausalLM load the directory with no missing/unexpected key and give
# `hpctrain eval`'s test loss (1e-5 relative) and `hpctrain generate`'s greedy text
# (model.generate); `hpctrain eval` of the directory itself gives the same loss again.
# In: a tiny GPT-2 saved by transformers with every parameter random (biases and LayerNorms
# too); `hpctrain eval` of it and `train --init-from` it (1 rank --zero 0 with --model-config,
# 2 ranks --zero 1 with config.json supplying it) give transformers' test loss; the run's one
# step at --lr 1e-30 leaves the weights bitwise as loaded (checked), so its checkpoint is the
# import itself. A checkpoint in --ckpt-dir wins over --init-from. Bad input: one line, exit 2,
# nothing written. Skips when transformers cannot be imported.
source "$(dirname "$0")/lib.sh"
PY=${HPCTRAIN_PYTHON:-${HPCTRAIN_HOME:-$HOME/.cache/hpctrain}/venv/bin/python}
CHECK="$(dirname "$0")/hf_gpt2_check.py"
[ -x "$PY" ] || fail "no venv python at $PY (bash launch/setup.sh makes it)"
"$PY" -c "import transformers" 2>/dev/null ||
  { echo "SKIPPED: transformers cannot be imported by $PY (bash launch/setup.sh installs it)"; exit 0; }
T=48
D="$WORK/d"
run_np 1 data text --out "$D" /usr/share/common-licenses >/dev/null
loss_of() { /usr/bin/python3 -c "import json,sys; print(json.loads([l for l in open(sys.argv[1]) if l.startswith('{')][-1])['test_loss'])" "$1"; }
close() {  # close NAME A B: |A - B| <= 1e-5 |B|
  /usr/bin/python3 -c "import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > 1e-5 * abs(b))" "$2" "$3" ||
    fail "$1: $2 vs $3 (more than 1e-5 relative)"
}

# ---- out: hpctrain -> transformers ----
run_np 2 train --model gpt --model-config n_layer=2,n_head=4,n_embd=32 --seq-len $T --data "$D" --batch-size 8 \
  --optimizer adamw --lr 3e-3 --max-steps 30 --log-every 1000 --ckpt-dir "$WORK/ck" >"$WORK/train.txt" 2>&1 ||
  { tail "$WORK/train.txt"; fail "train"; }
run_np 1 ckpt merge "$WORK/ck" --out "$WORK/hf" --format hf >"$WORK/merge.txt" || fail "merge --format hf"
grep -qx "wrote $WORK/hf (hf, 28 tensors)" "$WORK/merge.txt" || fail "merge said: $(cat "$WORK/merge.txt")"
run_np 1 eval --ckpt "$WORK/ck" --data "$D" >"$WORK/eval.txt" 2>&1 || { tail "$WORK/eval.txt"; fail "eval"; }
prompt="This License"
run_np 1 generate --ckpt "$WORK/ck" --prompt "$prompt" --max-new-tokens 30 --temperature 0 >"$WORK/gen.txt" ||
  fail "generate"
"$PY" "$CHECK" load "$WORK/hf" "$D/test.h5" $T "$prompt" 30 >"$WORK/py.json" 2>"$WORK/py.err" ||
  { cat "$WORK/py.err"; fail "transformers could not load the export"; }
! grep -iE "missing|unexpected|newly initialized|not used" "$WORK/py.err" || fail "transformers warned on loading"
py_loss=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['test_loss'])" "$WORK/py.json")
close "export: transformers' test loss vs hpctrain eval's" "$py_loss" "$(loss_of "$WORK/eval.txt")"
/usr/bin/python3 - "$WORK/py.json" "$WORK/gen.txt" <<'PY' || fail "greedy continuation differs"
import json, sys
got = json.load(open(sys.argv[1]))
want = open(sys.argv[2], "rb").read().rstrip(b"\n").decode("latin-1")
assert got["greedy"] == want, f"transformers {got['greedy']!r} vs hpctrain {want!r}"
c = got["config"]
assert (c["activation_function"], c["n_positions"], c["layer_norm_epsilon"]) == ("gelu", 48, 1e-5), c
PY
ok "export: transformers loads it without warnings; test loss $py_loss == hpctrain eval's (1e-5); greedy text equal: $(tr '\n' ' ' <"$WORK/gen.txt")"
run_np 1 eval --ckpt "$WORK/hf" --data "$D" >"$WORK/eval-hf.txt" 2>&1 || { tail "$WORK/eval-hf.txt"; fail "eval of the hf dir"; }
[ "$(loss_of "$WORK/eval-hf.txt")" = "$(loss_of "$WORK/eval.txt")" ] || fail "eval of the exported directory differs"
ok "hpctrain eval reads the exported directory back: the same test loss exactly"

# ---- in: transformers -> hpctrain ----
"$PY" "$CHECK" make "$WORK/gpt2" 256 $T 5 "$WORK/bad" 2>"$WORK/make.err" || { cat "$WORK/make.err"; fail "make a GPT-2"; }
"$PY" "$CHECK" load "$WORK/gpt2" "$D/test.h5" $T "$prompt" 30 >"$WORK/ref.json" 2>/dev/null || fail "reference loss"
ref=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['test_loss'])" "$WORK/ref.json")
run_np 1 eval --ckpt "$WORK/gpt2" --data "$D" >"$WORK/eval-gpt2.txt" 2>&1 || { tail "$WORK/eval-gpt2.txt"; fail "eval gpt2"; }
close "hpctrain eval of transformers' GPT-2" "$(loss_of "$WORK/eval-gpt2.txt")" "$ref"
run_np 1 eval --ckpt "$WORK/bad/legacy" --data "$D" >"$WORK/eval-legacy.txt" 2>&1 || { tail "$WORK/eval-legacy.txt"; fail "eval legacy"; }
[ "$(loss_of "$WORK/eval-legacy.txt")" = "$(loss_of "$WORK/eval-gpt2.txt")" ] || fail "the legacy layout gives another loss"
ok "hpctrain eval of transformers' GPT-2: $(loss_of "$WORK/eval-gpt2.txt") (transformers: $ref); the same from its legacy layout (pytorch_model.bin, no prefix, masks, lm_head)"
tiny=(--model gpt --seq-len $T --data "$D" --batch-size 8 --optimizer sgd --momentum 0 --weight-decay 0 --lr 1e-30
  --log-every 1000)
for run in "1 0 --model-config n_layer=2,n_head=4,n_embd=32" "2 1"; do
  read -r n zero extra <<<"$run"
  # shellcheck disable=SC2086
  run_np "$n" train "${tiny[@]}" --max-steps 1 --init-from "$WORK/gpt2" --zero "$zero" $extra --ckpt-dir "$WORK/ft$n" \
    >"$WORK/ft$n.txt" 2>&1 || { tail "$WORK/ft$n.txt"; fail "train --init-from ($n ranks)"; }
  grep -q "^hpctrain train: initialised 28 tensors from $WORK/gpt2 (Hugging Face GPT-2)" "$WORK/ft$n.txt" ||
    fail "$n ranks: no init line"
  run_np 1 ckpt merge "$WORK/ft$n" --out "$WORK/ft$n.safetensors" >/dev/null || fail "merge ft$n"
  run_np "$n" eval --ckpt "$WORK/ft$n" --data "$D" >"$WORK/eval-ft$n.txt" 2>&1 || fail "eval ft$n"
  close "--init-from ($n ranks, --zero $zero)" "$(loss_of "$WORK/eval-ft$n.txt")" "$ref"
  run_np 1 generate --ckpt "$WORK/ft$n" --prompt "$prompt" --max-new-tokens 30 --temperature 0 >"$WORK/gen$n.txt" ||
    fail "generate ft$n"
  /usr/bin/python3 - "$WORK/ref.json" "$WORK/gen$n.txt" <<'PY' || fail "$n ranks: greedy text differs from transformers'"
import json, sys
got = json.load(open(sys.argv[1]))["greedy"].encode("latin-1")
want = open(sys.argv[2], "rb").read().rstrip(b"\n")
assert got == want and len(set(want[12:])) >= 5, f"transformers {got!r} vs hpctrain {want!r}"
PY
  ok "--init-from GPT-2 ($n rank(s), --zero $zero${extra:+, --model-config}): greedy text as transformers', test loss $(loss_of "$WORK/eval-ft$n.txt") vs transformers' $ref"
done
run_np 1 ckpt merge "$WORK/ft1" --out "$WORK/hf1" --format hf >/dev/null || fail "merge ft1 --format hf"
run_np 1 train "${tiny[@]}" --max-steps 1 --init-from "$WORK/ft1.safetensors" --model-config n_layer=2,n_head=4,n_embd=32 \
  --ckpt-dir "$WORK/ft3" >"$WORK/ft3.txt" 2>&1 || { tail "$WORK/ft3.txt"; fail "--init-from .safetensors"; }
grep -q "^hpctrain train: initialised 28 tensors from $WORK/ft1.safetensors (checkpoint)" "$WORK/ft3.txt" || fail "no init line"
run_np 1 ckpt merge "$WORK/ft3" --out "$WORK/ft3.safetensors" >/dev/null
"$PY" "$CHECK" same "$WORK/gpt2" "$WORK"/ft{1,2,3}.safetensors "$WORK/hf1/model.safetensors" >"$WORK/same.txt" ||
  fail "the weights after --init-from differ from the GPT-2's"
ok "weights bitwise as transformers saved them: after --init-from GPT-2 (1 and 2 ranks), after --init-from a merged .safetensors, and GPT-2 -> --init-from -> ckpt merge --format hf"
run_np 2 train "${tiny[@]}" --max-steps 2 --zero 1 --init-from "$WORK/gpt2" --ckpt-dir "$WORK/ft2" >"$WORK/again.txt" 2>&1 ||
  { grep "^hpctrain" "$WORK/again.txt"; fail "resume over --init-from"; }
grep -q "^hpctrain train: --init-from $WORK/gpt2 not used: --resume auto finds a checkpoint in $WORK/ft2, which wins" \
  "$WORK/again.txt" && grep -q "^hpctrain train: resumed from .*step-00000001" "$WORK/again.txt" ||
  { cat "$WORK/again.txt"; fail "resume does not win over --init-from"; }
ok "a checkpoint in --ckpt-dir wins over --init-from (said in one line)"

# ---- bad input: one line, exit 2, nothing written ----
run_np 1 data synthetic --out "$WORK/syn" --n 64 --test-n 32 --classes 4 --height 8 --width 8 >/dev/null
run_np 1 train --model mlp --data "$WORK/syn" --max-steps 1 --ckpt-dir "$WORK/ck-mlp" >/dev/null 2>&1 || fail "train mlp"
run_np 1 ckpt merge "$WORK/ck-mlp" --out "$WORK/mlp.safetensors" >/dev/null
nothing=(--ckpt-dir "$WORK/none" --metrics "$WORK/none.jsonl")
base=(train --model gpt --data "$D" --max-steps 1 "${nothing[@]}")
expect_error llama 'config.json: model_type is "llama", not gpt2' "${base[@]}" --seq-len $T --init-from "$WORK/bad/llama"
expect_error gelu_new 'activation_function is gelu_new' "${base[@]}" --seq-len $T --init-from "$WORK/bad/gelu_new"
expect_error missing 'model.safetensors lacks tensor transformer.h.1.mlp.c_fc.weight' "${base[@]}" --seq-len $T --init-from "$WORK/bad/missing"
expect_error disagree 'its config.json has n_head 4 but --model-config says n_head=2' "${base[@]}" --seq-len $T \
  --init-from "$WORK/gpt2" --model-config n_layer=2,n_head=2,n_embd=32
expect_error seq_len 'its config.json has n_positions 48 but --seq-len is 32' "${base[@]}" --seq-len 32 --init-from "$WORK/gpt2"
expect_error shapes 'tensor transformer.wte.weight has shape \[256,32\] there, the model has \[256,64\]' "${base[@]}" --seq-len $T \
  --init-from "$WORK/ft1.safetensors" --model-config n_layer=2,n_head=4,n_embd=64
expect_error other_model 'mlp.safetensors holds model mlp, not --model gpt' "${base[@]}" --seq-len $T --init-from "$WORK/mlp.safetensors"
expect_error export_mlp 'holds model mlp; only --model gpt checkpoints export' ckpt merge "$WORK/ck-mlp" --out "$WORK/none-hf" --format hf
for f in none none.jsonl none-hf; do [ ! -e "$WORK/$f" ] || fail "a failed run left $WORK/$f behind"; done
ok "bad input: nothing written"
echo "PASS test_hf_gpt2"
