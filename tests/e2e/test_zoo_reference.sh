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
# Noisy enough that a few steps leave the test accuracy well below 1 (so it discriminates).
run_np 1 data synthetic --out "$D" --n 512 --test-n 200 --classes 4 --height 8 --width 8 --seed 5 --noise 200 >/dev/null
t0=$SECONDS
specs=(mlp:h5: cnn:pt:--sync-bn resnet:safetensors:)
for spec in "${specs[@]}"; do
  IFS=: read -r model ext extra <<<"$spec"
  # shellcheck disable=SC2086
  run_np 2 train --model "$model" $extra --data "$D" --epochs 1 --batch-size 16 --lr 0.05 --seed 3 \
    --max-steps 6 --log-every 1000 --ckpt-dir "$WORK/$model" >"$WORK/$model.txt" 2>&1 || { tail "$WORK/$model.txt"; fail "$model: train"; }
  run_np 1 ckpt merge "$WORK/$model" --out "$WORK/$model.$ext" >/dev/null || fail "$model: merge to .$ext"
  run_np 2 eval --ckpt "$WORK/$model" --data "$D" >"$WORK/$model-eval.txt" 2>&1 || { tail "$WORK/$model-eval.txt"; fail "$model: eval"; }
  echo "$model $WORK/$model.$ext $(last_json "$WORK/$model.txt" parameters) $(last_json "$WORK/$model-eval.txt" test_accuracy) $(last_json "$WORK/$model-eval.txt" test_loss) ${extra:-plain}" >>"$WORK/runs.txt"
done
# One Python process for the three: strict load, names/shapes/parameter count, accuracy == eval's
# exactly, mean cross-entropy == eval's test_loss (float32 sums in another order: 1e-4 relative).
(cd "$SRC/examples" && "$PY" - "$WORK/runs.txt" "$D/test.h5" <<'PY'
import sys, warnings
import h5py, torch
warnings.filterwarnings("ignore", category=FutureWarning)
from zoo_reference import make_model, preprocess, load_state_dict_file
with h5py.File(sys.argv[2], "r") as f:
    x, y = preprocess(f["images"][()], f), torch.from_numpy(f["labels"][()]).long()
for line in open(sys.argv[1]):
    name, ckpt, params, acc_h, loss_h, how = line.split()
    sd = load_state_dict_file(ckpt)
    net = make_model(name, x.shape[1:], 4)
    want = {k: tuple(v.shape) for k, v in sd.items()}
    got = {k: tuple(v.shape) for k, v in net.state_dict().items()}
    assert got == want, f"{name}: state_dict differs: only in Python {sorted(set(got) - set(want))}, only in the checkpoint {sorted(set(want) - set(got))}"
    n = sum(p.numel() for p in net.parameters())
    assert n == int(params), f"{name}: {n} parameters in Python, hpctrain reports {params}"
    net.load_state_dict(sd, strict=True)
    net.eval()
    with torch.no_grad():
        logits = net(x)
    acc = float((logits.argmax(1) == y).sum()) / len(y)
    loss = float(torch.nn.functional.cross_entropy(logits, y))
    assert acc == float(acc_h), f"{name}: Python accuracy {acc} != hpctrain eval {acc_h}"
    assert abs(loss - float(loss_h)) <= 1e-4 * abs(float(loss_h)), f"{name}: Python loss {loss} != hpctrain eval {loss_h}"
    assert acc < 0.99, f"{name}: accuracy {acc}: the data set is too easy to tell models apart"
    print(f"ok: {name} ({how}): {ckpt.rsplit('/', 1)[1]} loads strictly into zoo_reference.make_model('{name}'), "
          f"{n} parameters; Python accuracy {acc} == hpctrain eval {acc_h}, loss {loss:.6f} vs {float(loss_h):.6f}")
PY
) || fail "examples/zoo_reference.py disagrees with hpctrain (above)"
echo "test_zoo_reference: $((SECONDS - t0)) s"
