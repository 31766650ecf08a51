#!/usr/bin/env bash
# e2e: examples/zoo_reference.py is the zoo in plain PyTorch. For each of mlp, cnn (trained with
# --sync-bn) and resnet: a short 2-rank run, `ckpt merge` to .h5 / .pt / .safetensors, a strict
# load_state_dict into the Python class, and the Python test accuracy (uint8/255, then the
# file's mean/std; eval mode) equals `hpctrain eval`'s on the same checkpoint, exactly. Also:
# the Python model's state_dict keys and shapes are exactly the checkpoint's, and its parameter
# count is the one `hpctrain train` reports.
source "$(dirname "$0")/lib.sh"
PY=${HPCTRAIN_PYTHON:-${HPCTRAIN_HOME:-$HOME/.cache/hpctrain}/venv/bin/python}
SRC=${HPCTRAIN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
[ -f "$SRC/examples/zoo_reference.py" ] || fail "no examples/zoo_reference.py under $SRC"
[ -x "$PY" ] || fail "no venv python at $PY (bash launch/setup.sh makes it)"
# last_json LOG FIELD: field of the last JSON line of LOG (stderr lines may follow it).
last_json() { /usr/bin/python3 -c "
import json,sys
print(json.loads([l for l in open(sys.argv[1]) if l.startswith('{')][-1])[sys.argv[2]])" "$1" "$2"; }
D="$WORK/d"
run_np 1 data synthetic --out "$D" --n 512 --test-n 200 --classes 4 --height 8 --width 8 --seed 5 --noise 60 >/dev/null
t0=$SECONDS
for spec in mlp:h5: cnn:pt:--sync-bn resnet:safetensors:; do
  IFS=: read -r model ext extra <<<"$spec"
  # shellcheck disable=SC2086
  run_np 2 train --model "$model" $extra --data "$D" --epochs 2 --batch-size 16 --lr 0.05 --seed 3 \
    --max-steps 12 --log-every 1000 --ckpt-dir "$WORK/$model" >"$WORK/$model.txt" 2>&1 || { tail "$WORK/$model.txt"; fail "$model: train"; }
  run_np 1 ckpt merge "$WORK/$model" --out "$WORK/$model.$ext" >/dev/null || fail "$model: merge to .$ext"
  run_np 2 eval --ckpt "$WORK/$model" --data "$D" >"$WORK/$model-eval.txt" 2>&1 || { tail "$WORK/$model-eval.txt"; fail "$model: eval"; }
  acc_h=$(last_json "$WORK/$model-eval.txt" test_accuracy)
  params=$(last_json "$WORK/$model.txt" parameters)
  acc_p=$(cd "$SRC/examples" && "$PY" - "$model" "$WORK/$model.$ext" "$D/test.h5" "$params" <<'PY'
import sys, warnings
import h5py
warnings.filterwarnings("ignore", category=FutureWarning)
from zoo_reference import make_model, preprocess, load_state_dict_file, main
name, ckpt, test_h5, params = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sd = load_state_dict_file(ckpt)
net = make_model(name, (1, 8, 8), 4)
want = {k: tuple(v.shape) for k, v in sd.items()}
got = {k: tuple(v.shape) for k, v in net.state_dict().items()}
assert got == want, f"state_dict differs: only in Python {sorted(set(got) - set(want))}, only in the checkpoint {sorted(set(want) - set(got))}, shapes {[(k, got[k], want[k]) for k in got if k in want and got[k] != want[k]]}"
n = sum(p.numel() for p in net.parameters())
assert n == params, f"{n} parameters in Python, hpctrain reports {params}"
main(["zoo_reference.py", name, ckpt, test_h5])
PY
) || fail "$model: loading $model.$ext into examples/zoo_reference.py"
  /usr/bin/python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) == float(sys.argv[2]) else 1)" "$acc_h" "$acc_p" ||
    fail "$model: Python accuracy $acc_p != hpctrain eval $acc_h"
  ok "$model${extra:+ ($extra)}: $model.$ext loads strictly into zoo_reference.make_model('$model'), $params parameters; Python accuracy $acc_p == hpctrain eval $acc_h"
done
echo "test_zoo_reference: $((SECONDS - t0)) s"
