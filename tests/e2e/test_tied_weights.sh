#!/usr/bin/env bash
# e2e: tied weights (one tensor under two names) train as one parameter, as in PyTorch.
# Models: a nanoGPT-style GPT written in Python whose head is its token embedding
# (`self.transformer.wte.weight = self.lm_head.weight`), through TorchScript; a C++ plugin module
# that registers its embedding a second time as head.weight (tied_lm), and the same network
# behind a plugin's own Model class that lists the tensor under both names (tied_lm_own).
# Data: exactly 16 training windows, so a global batch of 16 is the whole set every step and
# a plain PyTorch loop (tied_models.py reference) trains on the very same batches.
# For each model, 20 AdamW steps (weight decay on every parameter, clipping at 1.0):
# - 1 rank x 16, 2 ranks x 8 under --zero 0, and 2 ranks x 8 under --zero 1 as 10 steps and a
#   resume to 20 == plain single-process PyTorch, per-tensor relative difference <= 1e-5;
# - the parameter count is PyTorch's (the shared tensor once), the checkpoint stores it once and
#   names the other in its manifest ("tied"), `ckpt merge` to .pt and .safetensors writes both
#   names and loads into the Python module with load_state_dict(strict=True), the head still tied;
# - a module that ties by a view (two tensors over one memory) is refused at start, exit 2.
source "$(dirname "$0")/lib.sh"
PY=${HPCTRAIN_PYTHON:-${HPCTRAIN_HOME:-$HOME/.cache/hpctrain}/venv/bin/python}
HERE="$(dirname "$0")"
CMP="$HERE/compare_ckpt.py"
LIB="${HPCTRAIN_BUILD_DIR:-$(dirname "$BIN")}/tests/libtied_models.so"
[ -f "$LIB" ] || fail "no $LIB (built with the tests)"
T=8 V=48 D="$WORK/d"
mkdir -p "$D"
"$PY" "$HERE/tied_models.py" data "$D" "$V" "$T" || fail "tied_models.py data"
"$PY" "$HERE/tied_models.py" script "$WORK/gpt.pt" "$V" "$T" 2>/dev/null || fail "tied_models.py script"
common=(--data "$D" --seq-len "$T" --optimizer adamw --lr 3e-3 --weight-decay 0.1 --schedule constant
  --clip-grad-norm 1.0 --epochs 20 --seed 5 --log-every 1000)
train_to() {  # NAME NP STEPS ARGS...: trains (or resumes) into $WORK/NAME
  local name=$1 np=$2 steps=$3; shift 3
  run_np "$np" train "${common[@]}" --batch-size $((16 / np)) --max-steps "$steps" --ckpt-dir "$WORK/$name" "$@" \
    >"$WORK/$name.txt" 2>&1 || { tail -5 "$WORK/$name.txt"; fail "$name: train"; }
}
summary() { /usr/bin/python3 -c "import json,sys; print(json.loads([l for l in open(sys.argv[1]) if l.startswith('{')][-1])[sys.argv[2]])" "$1" "$2"; }

check_model() {  # KIND TAG ARGS...: KIND gpt|cpp picks the Python reference; ARGS select the model
  local kind=$1 tag=$2; shift 2
  local src=$T
  [ "$kind" = gpt ] && src="$WORK/gpt.pt"
  "$PY" "$HERE/tied_models.py" reference "$kind" "$src" "$D" 20 "$WORK/$tag.ref.h5" 2>/dev/null ||
    fail "$tag: the PyTorch reference"
  train_to "$tag.1" 1 20 "$@"
  train_to "$tag.z0" 2 20 "$@" --zero 0
  train_to "$tag.z1" 2 10 "$@" --zero 1
  train_to "$tag.z1" 2 20 "$@" --zero 1
  grep -q "resumed from" "$WORK/$tag.z1.txt" || fail "$tag --zero 1: the second run did not resume"
  for r in 1 z0 z1; do
    run_np 1 ckpt merge "$WORK/$tag.$r" --out "$WORK/$tag.$r.h5" >/dev/null || fail "$tag.$r: merge"
    /usr/bin/python3 "$CMP" "$WORK/$tag.$r.h5" "$WORK/$tag.ref.h5" --rtol 1e-5 >"$WORK/cmp.txt" ||
      { cat "$WORK/cmp.txt"; fail "$tag ($r): hpctrain != plain PyTorch on the same batches"; }
    ok "$tag ($r): == plain PyTorch after 20 steps: $(cat "$WORK/cmp.txt")"
  done
  # One tensor stored once; the other name in the manifest; every name in merged files.
  /usr/bin/python3 - "$WORK/$tag.z1" <<'PY' || fail "$tag: the manifest's tied names"
import json, os, sys
d = os.path.join(sys.argv[1], open(os.path.join(sys.argv[1], "latest")).read().strip())
m = json.load(open(os.path.join(d, "manifest.json")))
tied = m["meta"].get("tied")
assert tied and len(tied) == 1, m["meta"].keys()
(alias, name), = tied.items()
stored = [t["name"] for t in m["tensors"] if t["name"].startswith("model/")]
assert "model/" + name in stored and "model/" + alias not in stored, (alias, name, stored)
print(f"ok: the manifest stores {name} once and names {alias} as its alias")
PY
  local n
  n=$(summary "$WORK/$tag.1.txt" parameters)
  for ext in pt safetensors; do
    run_np 1 ckpt merge "$WORK/$tag.z1" --out "$WORK/$tag.$ext" >/dev/null || fail "$tag: merge .$ext"
    "$PY" "$HERE/tied_models.py" load "$kind" "$WORK/$tag.$ext" "$n" 2>/dev/null || fail "$tag: .$ext into PyTorch"
  done
  # eval reads the merged file back (both names, one tensor): the run's own test loss.
  run_np 1 eval --ckpt "$WORK/$tag.z1.h5" --data "$D" "$@" >"$WORK/$tag.eval.txt" 2>&1 ||
    { tail -3 "$WORK/$tag.eval.txt"; fail "$tag: eval of the merged .h5"; }
  local a b
  a=$(summary "$WORK/$tag.z1.txt" test_loss) b=$(summary "$WORK/$tag.eval.txt" test_loss)
  /usr/bin/python3 -c "import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > 1e-6 * abs(a))" "$a" "$b" ||
    fail "$tag: eval of the merged .h5 gives test loss $b, the run $a"
  ok "$tag: eval of the merged .h5 (both names, one tensor): test loss $b == the run's"
}

check_model gpt tsgpt --model "$WORK/gpt.pt"
check_model cpp cpp --model-lib "$LIB" --model tied_lm
check_model cpp cppown --model-lib "$LIB" --model tied_lm_own
# Tied by a view (a second tensor over the same memory): refused at start in one line, exit 2.
expect_error aliased "parameters wte.weight and alias.weight are different tensors over the same memory" \
  train "${common[@]}" --batch-size 8 --max-steps 2 --model-lib "$LIB" --model aliased_lm --ckpt-dir "$WORK/aliased"
[ ! -e "$WORK/aliased" ] || [ -z "$(ls -A "$WORK/aliased")" ] || fail "aliased: something was written to the checkpoint directory"
echo "test_tied_weights: all passed"
