#!/usr/bin/env bash
# e2e: examples/gpt_reference.py is `--model gpt` in plain PyTorch. A short 2-rank run on byte
# tokens, `ckpt merge` to .safetensors and .pt; each loads strictly into the Python GPT (tied
# head: no lm_head.weight in the file) with exactly the checkpoint's names and shapes and the
# parameter count `hpctrain train` reports; its greedy generation from the same prompt (past
# the block size) is byte-identical to `hpctrain generate`'s; its test loss equals
# `hpctrain eval`'s within 1e-4 relative; the torch.save'd .pt and the .safetensors give the same.
source "$(dirname "$0")/lib.sh"
PY=${HPCTRAIN_PYTHON:-${HPCTRAIN_HOME:-$HOME/.cache/hpctrain}/venv/bin/python}
SRC=${HPCTRAIN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
REF="$SRC/examples/gpt_reference.py"
[ -f "$REF" ] || fail "no $REF"
[ -x "$PY" ] || fail "no venv python at $PY (bash launch/setup.sh makes it)"
D="$WORK/d"
run_np 1 data text --out "$D" /usr/share/common-licenses >/dev/null
run_np 2 train --model gpt --model-config n_layer=2,n_head=4,n_embd=32 --seq-len 24 --data "$D" --batch-size 8 \
  --optimizer adamw --lr 3e-3 --max-steps 30 --log-every 1000 --ckpt-dir "$WORK/ck" >"$WORK/train.txt" 2>&1 ||
  { tail "$WORK/train.txt"; fail "train"; }
params=$(/usr/bin/python3 -c "import json,sys; print(json.loads([l for l in open(sys.argv[1]) if l.startswith('{')][-1])['parameters'])" "$WORK/train.txt")
for ext in safetensors pt; do run_np 1 ckpt merge "$WORK/ck" --out "$WORK/w.$ext" >/dev/null || fail "merge .$ext"; done
run_np 2 eval --ckpt "$WORK/ck" --data "$D" >"$WORK/eval.txt" 2>&1 || { tail "$WORK/eval.txt"; fail "eval"; }
prompt="This License applies to any"  # 27 bytes > the block size 24: the context slides at once
run_np 1 generate --ckpt "$WORK/ck" --prompt "$prompt" --max-new-tokens 60 --temperature 0 >"$WORK/gen.hpctrain" ||
  fail "hpctrain generate"
for ext in safetensors pt; do
  "$PY" "$REF" generate "$WORK/w.$ext" --n-head 4 --prompt "$prompt" --max-new-tokens 60 --temperature 0 \
    >"$WORK/gen.$ext" 2>"$WORK/gen.$ext.err" || { cat "$WORK/gen.$ext.err"; fail "gpt_reference.py generate .$ext"; }
  cmp "$WORK/gen.hpctrain" "$WORK/gen.$ext" || { od -c "$WORK/gen.hpctrain" | head; od -c "$WORK/gen.$ext" | head; fail ".$ext: Python's greedy text differs from hpctrain generate's"; }
done
ok "greedy generation: Python (.safetensors and .pt) == hpctrain generate: $(head -c 87 "$WORK/gen.hpctrain" | tr '\n' ' ')"
# Seeded sampling takes the same fp64 steps and CPU generator in both: the same draws (and a text
# of many distinct bytes, so the comparison is not one of two runs of blanks).
samp=(--prompt "$prompt" --max-new-tokens 80 --temperature 0.9 --top-k 40 --seed 11)
run_np 1 generate --ckpt "$WORK/ck" "${samp[@]}" >"$WORK/samp.hpctrain" || fail "hpctrain generate (sampling)"
"$PY" "$REF" generate "$WORK/w.safetensors" --n-head 4 "${samp[@]}" >"$WORK/samp.py" 2>"$WORK/samp.err" ||
  { cat "$WORK/samp.err"; fail "gpt_reference.py generate (sampling)"; }
cmp "$WORK/samp.hpctrain" "$WORK/samp.py" || fail "seeded sampling: Python's text differs from hpctrain generate's"
distinct=$(tail -c +28 "$WORK/samp.hpctrain" | od -An -v -tu1 | tr -s ' ' '\n' | sort -u | grep -c .)
[ "$distinct" -ge 10 ] || fail "the sampled text has only $distinct distinct bytes"
ok "seeded sampling (T 0.9, top-k 40): Python == hpctrain generate, $distinct distinct bytes"
(cd "$SRC/examples" && "$PY" - "$WORK" "$D/test.h5" "$params" <<'PY'
import json, sys, warnings
warnings.filterwarnings("ignore", category=FutureWarning)
from gpt_reference import GPT, config_from_state_dict, load_state_dict_file, test_loss
work, test_h5, params = sys.argv[1], sys.argv[2], int(sys.argv[3])
ev = json.loads([l for l in open(f"{work}/eval.txt") if l.startswith("{")][-1])
losses = {}
for ext in ("safetensors", "pt"):
    sd = load_state_dict_file(f"{work}/w.{ext}")
    assert "lm_head.weight" not in sd, "the tied head is not a separate tensor in hpctrain's files"
    net = GPT(config_from_state_dict(sd, n_head=4))
    got = {k: tuple(v.shape) for k, v in net.state_dict().items()}
    want = {k: tuple(v.shape) for k, v in sd.items()}
    assert got == want, f"{ext}: names/shapes differ: only in Python {sorted(set(got) - set(want))}, only in the file {sorted(set(want) - set(got))}"
    n = sum(p.numel() for p in net.parameters())
    assert n == params, f"{ext}: {n} parameters in Python, hpctrain reports {params}"
    net.load_state_dict(sd, strict=True)
    assert net.lm_head.weight.data_ptr() == net.transformer.wte.weight.data_ptr(), "lm_head is not tied after loading"
    losses[ext] = test_loss(net, test_h5, net.config.block_size)
    rel = abs(losses[ext] - ev["test_loss"]) / ev["test_loss"]
    assert rel <= 1e-4, f"{ext}: Python test loss {losses[ext]:.6f} vs hpctrain eval {ev['test_loss']:.6f} (rel {rel:.2e})"
assert losses["pt"] == losses["safetensors"], losses
print(f"ok: strict load of .safetensors and .pt ({params} parameters, tied head); Python test loss "
      f"{losses['pt']:.6f} == hpctrain eval {ev['test_loss']:.6f} (rel {abs(losses['pt'] - ev['test_loss']) / ev['test_loss']:.1e})")
PY
) || fail "Python round trip"
