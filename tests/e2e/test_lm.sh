#!/usr/bin/env bash
# e2e: language models on token data through the real CLI.
# - `data text` on Debian's /usr/share/common-licenses (bytes, vocab 256; symlinked duplicates
#   skipped);
# - the central invariant for `--model gpt` (also with --zero 1) and for a TorchScript GPT-like
#   module: 2 ranks x 8 windows == 1 rank x 16 after 20 AdamW steps (weight decay on matrices
#   only, warmup, clipping), per-tensor relative L2 norm <= 1e-5;
# - exact resume mid-epoch (2 ranks, 10 + 10 steps == 20 steps, bitwise) and resume 2 -> 3 ranks
#   at the same global batch (within 1e-5 of the uninterrupted 2-rank run);
# - the language-model metrics (tokens_per_s, test_ppl, bits_per_byte) in the summary and the
#   metrics file; `hpctrain eval` gives the run's test loss;
# - `hpctrain generate`: greedy is deterministic, the same from the directory and the merged .h5,
#   starts with the prompt and slides past the block size; sampling with a seed repeats, differs
#   from greedy, between seeds and between temperatures, top-k 1 is greedy, and .pt/.safetensors
#   merges sample the same; a NaN weight and logits of the wrong width are one-line errors (exit 2).
source "$(dirname "$0")/lib.sh"
PY=${HPCTRAIN_PYTHON:-${HPCTRAIN_HOME:-$HOME/.cache/hpctrain}/venv/bin/python}
CMP="$(dirname "$0")/compare_state.py"
D="$WORK/d"
run_np 1 data text --out "$D" --test-fraction 0.1 /usr/share/common-licenses >"$WORK/data.txt"
grep -q "^wrote $D/train.h5 (.* tokens) and $D/test.h5 (.* tokens) from .* text file(s), tokenizer bytes" "$WORK/data.txt" ||
  { cat "$WORK/data.txt"; fail "data text"; }
ok "data text: $(cut -c1-200 "$WORK/data.txt")"
common=(--data "$D" --seq-len 32 --optimizer adamw --lr 3e-3 --weight-decay 0.1 --schedule constant --warmup-steps 5
  --clip-grad-norm 1.0 --epochs 3 --seed 3 --log-every 10)
# bias=false: the key projection's bias gets an exactly zero gradient (softmax is shift invariant),
# i.e. rounding noise, which AdamW scales up to lr-sized steps whose sign depends on the order
# of the gradient sum (compare_state.py); without that bias every tensor has a real gradient.
gpt=(--model gpt --model-config n_layer=2,n_head=2,n_embd=32,bias=false)
merged() { run_np 1 ckpt merge "$1" --out "$2" >/dev/null || fail "merge $1"; }
train_to() {  # NAME NP ARGS...: trains into $WORK/NAME (checkpoint dir, log, metrics)
  local name=$1 np=$2; shift 2
  run_np "$np" train "${common[@]}" --ckpt-dir "$WORK/$name" --metrics "$WORK/$name.jsonl" "$@" >"$WORK/$name.txt" 2>&1 ||
    { tail -5 "$WORK/$name.txt"; fail "$name: train"; }
}

# The invariant, three ways.
train_to gpt2 2 "${gpt[@]}" --batch-size 8 --max-steps 20
train_to gpt1 1 "${gpt[@]}" --batch-size 16 --max-steps 20
train_to zero2 2 "${gpt[@]}" --batch-size 8 --max-steps 20 --zero 1
"$PY" "$(dirname "$0")/lm_models.py" "$WORK/lm.pt" 256 32
train_to ts2 2 --model "$WORK/lm.pt" --batch-size 8 --max-steps 20
train_to ts1 1 --model "$WORK/lm.pt" --batch-size 16 --max-steps 20
for r in gpt2 gpt1 zero2 ts2 ts1; do merged "$WORK/$r" "$WORK/$r.h5"; done
/usr/bin/python3 "$CMP" "$WORK/gpt2.h5" "$WORK/gpt1.h5" --rtol 1e-5 || fail "gpt: 2 ranks x 8 != 1 rank x 16"
ok "gpt: 2 ranks x 8 == 1 rank x 16 after 20 steps"
/usr/bin/python3 "$CMP" "$WORK/zero2.h5" "$WORK/gpt1.h5" --rtol 1e-5 || fail "gpt --zero 1: 2 ranks x 8 != 1 rank x 16"
ok "gpt --zero 1: 2 ranks x 8 == 1 rank x 16 (replicated AdamW) after 20 steps"
/usr/bin/python3 "$CMP" "$WORK/ts2.h5" "$WORK/ts1.h5" --rtol 1e-5 || fail "TorchScript LM: 2 ranks x 8 != 1 rank x 16"
ok "TorchScript GPT-like module: 2 ranks x 8 == 1 rank x 16 after 20 steps"

# The run's lines and records.
grep -q "hpctrain train: model gpt L2 H2 E32 T32 V256, dropout 0, bias false.*MFLOPs per token.*weight decay on 9 matrices (not on biases" "$WORK/gpt2.txt" ||
  { grep "hpctrain train:" "$WORK/gpt2.txt"; fail "no model line with size, FLOPs and the decay rule"; }
grep -q "tokens/s" "$WORK/gpt2.txt" || fail "progress lines show no tokens/s"
/usr/bin/python3 - "$WORK/gpt2.txt" "$WORK/gpt2.jsonl" <<'PY' || fail "language-model metrics"
import json, math, sys
s = json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][-1])
recs = [json.loads(l) for l in open(sys.argv[2])]
ev = [r for r in recs if r["type"] == "eval"][-1]
tr = [r for r in recs if r["type"] == "train"][-1]
assert s["tokens_per_s"] > 0 and abs(s["tokens_per_s"] - 32 * s["samples_per_s"]) < 1e-6 * s["tokens_per_s"], s
assert abs(s["test_ppl"] - math.exp(s["test_loss"])) < 1e-9 * s["test_ppl"], s
assert abs(s["bits_per_byte"] - s["test_loss"] / math.log(2)) < 1e-12, s
assert 0 < s["test_accuracy"] < 1 and s["test_loss"] < math.log(256), s  # learnt something in 20 steps
assert ev["test_loss"] == s["test_loss"] and "test_ppl" in ev and "bits_per_byte" in ev, ev
assert tr["tokens_per_s"] > 0, tr
print(f"ok: summary test loss {s['test_loss']:.4f} nats/byte ({s['bits_per_byte']:.3f} bits/byte, ppl {s['test_ppl']:.2f}), "
      f"{s['tokens_per_s']:.0f} tokens/s, test accuracy {s['test_accuracy']:.4f}")
PY
run_np 2 eval --ckpt "$WORK/gpt2" --data "$D" >"$WORK/eval.txt" 2>&1 || { tail "$WORK/eval.txt"; fail "eval"; }
/usr/bin/python3 - "$WORK/gpt2.txt" "$WORK/eval.txt" <<'PY' || fail "eval's test loss differs from the run's"
import json, sys
a, b = (json.loads([l for l in open(p) if l.startswith("{")][-1]) for p in sys.argv[1:])
assert abs(a["test_loss"] - b["test_loss"]) <= 1e-6 * a["test_loss"], (a["test_loss"], b["test_loss"])
assert b["bits_per_byte"] > 0 and b["samples"] > 0, b
print(f"ok: hpctrain eval: test loss {b['test_loss']:.6f} == the run's, {b['samples']} test windows")
PY

# Resume: 10 + 10 steps on 2 ranks == 20 steps, bitwise; 2 -> 3 ranks at global batch 24.
train_to res 2 "${gpt[@]}" --batch-size 8 --max-steps 10
train_to res 2 "${gpt[@]}" --batch-size 8 --max-steps 20
grep -q "resumed from .*step-00000010 at step 10" "$WORK/res.txt" || { cat "$WORK/res.txt"; fail "no resume at step 10"; }
merged "$WORK/res" "$WORK/res.h5"
/usr/bin/python3 "$CMP" "$WORK/res.h5" "$WORK/gpt2.h5" --exact || fail "resume mid-epoch is not exact"
ok "resume mid-epoch (step 10 of $(grep -o '[0-9]* steps/epoch' "$WORK/gpt1.txt" | head -1)): bitwise equal to the uninterrupted run"
train_to w24 2 "${gpt[@]}" --batch-size 12 --max-steps 20
train_to w23 2 "${gpt[@]}" --batch-size 12 --max-steps 10
train_to w23 3 "${gpt[@]}" --batch-size 8 --max-steps 20
grep -q "saved with 2 rank(s); now 3, global batch 24" "$WORK/w23.txt" || { cat "$WORK/w23.txt"; fail "no 2 -> 3 resume"; }
merged "$WORK/w24" "$WORK/w24.h5"
merged "$WORK/w23" "$WORK/w23.h5"
/usr/bin/python3 "$CMP" "$WORK/w23.h5" "$WORK/w24.h5" --rtol 1e-5 || fail "resume 2 -> 3 ranks drifted"
ok "resume 2 -> 3 ranks at global batch 24 == the 2-rank run within 1e-5"

# Generation.
gen() { run_np 1 generate --ckpt "$1" --prompt "GNU General" "${@:2}"; }
gen "$WORK/gpt2" --max-new-tokens 40 --temperature 0 >"$WORK/g1.txt" || fail "generate"
gen "$WORK/gpt2" --max-new-tokens 40 --temperature 0 >"$WORK/g2.txt"
gen "$WORK/gpt2.h5" --max-new-tokens 40 --temperature 0 >"$WORK/g3.txt" || fail "generate from the merged .h5"
cmp -s "$WORK/g1.txt" "$WORK/g2.txt" || fail "greedy generation is not deterministic"
cmp -s "$WORK/g1.txt" "$WORK/g3.txt" || fail "the merged .h5 generates other text than the checkpoint directory"
head -c 11 "$WORK/g1.txt" | grep -q "^GNU General$" || fail "the output does not start with the prompt"
run_np 1 generate --ckpt "$WORK/gpt2" --prompt "GNU General" --max-new-tokens 40 --temperature 0 --json >"$WORK/g.json"
/usr/bin/python3 -c "
import json,sys; j=json.load(open(sys.argv[1]))
assert len(j['prompt_tokens']) == 11 and len(j['tokens']) == 40 and j['block_size'] == 32, j
assert all(0 <= t < 256 for t in j['tokens'])" "$WORK/g.json" || fail "generate --json"
# Sampling, as token ids (--json): seeded draws repeat; they differ from greedy, between seeds and
# between temperatures; top-k 1 is greedy; the .pt and .safetensors merges give the same draws.
merged "$WORK/gpt2" "$WORK/gpt2.pt"
merged "$WORK/gpt2" "$WORK/gpt2.safetensors"
gj() {  # NAME CKPT ARGS...: 30 tokens after "GNU General" as JSON into $WORK/NAME.json
  run_np 1 generate --ckpt "$2" --prompt "GNU General" --max-new-tokens 30 --json "${@:3}" >"$WORK/$1.json" ||
    fail "generate $*"
}
gj greedy "$WORK/gpt2" --temperature 0
gj s5 "$WORK/gpt2" --temperature 0.8 --top-k 20 --seed 5
gj s5again "$WORK/gpt2" --temperature 0.8 --top-k 20 --seed 5
gj s6 "$WORK/gpt2" --temperature 0.8 --top-k 20 --seed 6
gj hot5 "$WORK/gpt2" --temperature 2 --top-k 20 --seed 5
gj k1 "$WORK/gpt2" --temperature 0.8 --top-k 1 --seed 5
for f in pt safetensors; do
  gj "greedy_$f" "$WORK/gpt2.$f" --temperature 0
  gj "s5_$f" "$WORK/gpt2.$f" --temperature 0.8 --top-k 20 --seed 5
done
/usr/bin/python3 - "$WORK" <<'PY' || fail "sampling"
import json, sys
t = lambda n: json.load(open(f"{sys.argv[1]}/{n}.json"))["tokens"]
g, s5 = t("greedy"), t("s5")
assert len(g) == len(s5) == 30, (g, s5)
assert t("s5again") == s5, "seeded sampling does not repeat"
assert s5 != g, "sampling at temperature 0.8 gives the greedy tokens (--temperature ignored?)"
assert t("s6") != s5, "seed 6 draws the same tokens as seed 5 (--seed ignored?)"
assert t("hot5") != s5, "temperature 2 draws the same tokens as 0.8 with the same seed (--temperature ignored?)"
assert t("k1") == g, "--top-k 1 is not greedy (--top-k ignored?)"
for f in ("pt", "safetensors"):
    assert t(f"greedy_{f}") == g, f"greedy from the merged .{f} differs from the checkpoint directory's"
    assert t(f"s5_{f}") == s5, f"seeded sampling from the merged .{f} differs from the checkpoint directory's"
print(f"ok: greedy {g[:8]}..., seed 5 {s5[:8]}..., seed 6 {t('s6')[:8]}..., top-k 1 == greedy; .pt and .safetensors the same")
PY
ok "generate: greedy 40 tokens past a 32-token block, same from the merged .h5; sampling honours --seed, --temperature and --top-k, the same from .pt and .safetensors: $(head -c 60 "$WORK/g1.txt" | tr '\n' ' ')"

# Errors in generate are one line on stderr with exit code 2. A checkpoint with a NaN weight
# (transformer.ln_f.weight of the merged .safetensors, its checksum entry dropped as a hand edit
# would): named, for sampling (LibTorch's multinomial would throw with a C++ backtrace) and greedy
# (whose argmax over NaN would pick a token silently).
/usr/bin/python3 - "$WORK/gpt2.safetensors" "$WORK/nan.safetensors" transformer.ln_f.weight <<'PY' || fail "poisoning"
import json, struct, sys
src, dst, name = sys.argv[1:]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h, data = json.loads(b[8:8 + n]), bytearray(b[8 + n:])
meta = json.loads(h["__metadata__"]["hpctrain_meta"])
for m in (meta, meta.get("meta", {})):  # its checksum is stored under the shard path model/NAME
    m.get("tensor_xxh3", {}).pop("model/" + name, None)
h["__metadata__"]["hpctrain_meta"] = json.dumps(meta)
a, z = h[name]["data_offsets"]
assert h[name]["dtype"] == "F32", h[name]
data[a:z] = struct.pack("<f", float("nan")) * ((z - a) // 4)
hs = json.dumps(h).encode()
hs += b" " * ((8 - len(hs) % 8) % 8)
open(dst, "wb").write(struct.pack("<Q", len(hs)) + hs + data)
PY
gen_error() {  # NAME KEY ARGS...: `generate ARGS` exits 2 with exactly one stderr line, containing KEY
  local name=$1 key=$2 rc; shift 2
  set +e  # one process without mpiexec (an MPI singleton): stderr is the program's alone
  timeout 600 "$BIN" generate --max-new-tokens 5 "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"; rc=$?
  set -e
  [ "$rc" = 2 ] || { cat "$WORK/$name.err"; fail "$name: exit $rc, expected 2"; }
  [ "$(wc -l <"$WORK/$name.err")" = 1 ] || { cat "$WORK/$name.err"; fail "$name: $(wc -l <"$WORK/$name.err") stderr lines, expected 1"; }
  grep -qF -- "$key" "$WORK/$name.err" || { cat "$WORK/$name.err"; fail "$name: the error does not say '$key'"; }
  ok "$name: $(cut -c1-200 "$WORK/$name.err")"
}
gen_error nan_sampled "transformer.ln_f.weight holds non-finite values" --ckpt "$WORK/nan.safetensors" --prompt "GNU" --temperature 0.8 --seed 1
gen_error nan_greedy "transformer.ln_f.weight holds non-finite values" --ckpt "$WORK/nan.safetensors" --prompt "GNU" --temperature 0
# A model whose logits do not fit the checkpoint's vocabulary (the TorchScript module's
# parameters with one logit more): its shape and the vocabulary are named.
"$PY" "$(dirname "$0")/lm_models.py" "$WORK/lm_wide.pt" 256 32 --extra-logit 2>/dev/null
gen_error wide_logits "returned logits [1,3,257] for input [1,3]; a language model with the checkpoint's vocab_size 256 returns [B, T, vocab_size] = [1,3,256]" \
  --ckpt "$WORK/ts2" --model "$WORK/lm_wide.pt" --prompt "GNU" --temperature 0
echo "PASS test_lm"
