#!/usr/bin/env bash
# e2e: SentencePiece tokenizers through the real CLI (spm_train from Debian's `sentencepiece`).
# - BPE and unigram models trained here with identity normalization (and byte fallback):
#   `data text --tokenizer M.model` stores the model with the data, vocab_size = pieces + 1 (the
#   newline id), and reports decode(encode(text)) == text;
# - the test split's ids decode (generate --prompt-tokens ... --max-new-tokens 0) to exactly the
#   test text, newlines included, and hold one newline id per "\n";
# - a model with SentencePiece's default normalization (it collapses spaces): the report names
#   the first changed line, and newlines still survive (one id each);
# - a GPT trained on the BPE data: the checkpoint carries the model (state/tokenizer);
#   `generate --prompt` with a two-line prompt prints text that starts with the prompt, also from
#   `ckpt merge --full`; a merge without --full refuses --prompt in one line; the summary's
#   bits_per_byte = test loss / ln 2 x test tokens / test bytes;
# - bad input: a file that is not a SentencePiece model and a missing file, one line each,
#   exit 2, nothing written.
source "$(dirname "$0")/lib.sh"
command -v spm_train >/dev/null || { echo "SKIPPED: spm_train not installed (Debian package sentencepiece)"; exit 0; }
TXT="$WORK/corpus.txt"
{ cat /usr/share/common-licenses/GPL-3; printf '  indented line\n\n\ttabbed\tline  with  two spaces \n'; } >"$TXT"
train_spm() {  # NAME TYPE [spm_train flags...]
  local name=$1 type=$2; shift 2
  spm_train --input="$TXT" --model_prefix="$WORK/$name" --vocab_size=400 --model_type="$type" \
    --character_coverage=1.0 "$@" >"$WORK/$name.spm.log" 2>&1 || { tail -5 "$WORK/$name.spm.log"; fail "spm_train $name"; }
}
exact=(--normalization_rule_name=identity --remove_extra_whitespaces=false --byte_fallback=true)
train_spm bpe bpe "${exact[@]}"
train_spm uni unigram "${exact[@]}"
train_spm lossy bpe
for m in bpe uni lossy; do
  run_np 1 data text --out "$WORK/d_$m" --tokenizer "$WORK/$m.model" --test-fraction 0.2 "$TXT" >"$WORK/data_$m.txt" ||
    fail "data text --tokenizer $m.model"
done
for m in bpe uni; do
  grep -q "tokenizer sentencepiece (.*$m.model: 400 pieces + the newline id 400), vocab_size 401, 35[0-9]* bytes of text; decode(encode(text)) == text" \
    "$WORK/data_$m.txt" || { cat "$WORK/data_$m.txt"; fail "$m: no exact round trip reported"; }
done
grep -q "the model's normalization changes the text (first at train line [0-9]*" "$WORK/data_lossy.txt" ||
  { cat "$WORK/data_lossy.txt"; fail "lossy model: no changed line reported"; }
ok "data text: $(cut -c1-240 "$WORK/data_bpe.txt")"

# A GPT on the BPE data; its checkpoint decodes ids and encodes prompts.
run_np 2 train --data "$WORK/d_bpe" --model gpt --model-config n_layer=1,n_head=2,n_embd=32 --seq-len 32 \
  --batch-size 4 --optimizer adamw --lr 3e-3 --max-steps 20 --log-every 10 --ckpt-dir "$WORK/ck" >"$WORK/train.txt" 2>&1 ||
  { tail -5 "$WORK/train.txt"; fail "train on BPE data"; }
grep -q "vocab_size 401, tokenizer sentencepiece" "$WORK/train.txt" || fail "start-up line: no tokenizer"
/usr/bin/python3 - "$WORK" "$TXT" <<'PY' >"$WORK/ids.txt" || fail "reading the test split"
import h5py, math, json, sys
work, txt = sys.argv[1:]
for m in ("bpe", "uni", "lossy"):
    f = h5py.File(f"{work}/d_{m}/test.h5", "r")
    ids, text_bytes = f["tokens"][()], int(f.attrs["text_bytes"])
    assert f.attrs["tokenizer"] in (b"sentencepiece", "sentencepiece") and f["tokenizer_model"].shape[0] > 1000
    data = open(txt, "rb").read()
    test = data[len(data) - int(len(data) * 0.2):]
    assert text_bytes == len(test), (text_bytes, len(test))
    assert int((ids == 400).sum()) == test.count(b"\n"), (m, int((ids == 400).sum()), test.count(b"\n"))
    if m == "bpe":
        open(f"{work}/test_text.txt", "wb").write(test)
        print(",".join(str(int(i)) for i in ids))
s = json.loads([l for l in open(f"{work}/train.txt") if l.startswith("{")][-1])
n = h5py.File(f"{work}/d_bpe/test.h5", "r")["tokens"].shape[0]
want = s["test_loss"] / math.log(2) * n / len(open(f"{work}/test_text.txt", "rb").read())
assert abs(s["bits_per_byte"] - want) < 1e-9 * want, (s["bits_per_byte"], want)
print(f"bits_per_byte {want:.4f} ({n} test tokens)", file=sys.stderr)
PY
run_np 1 generate --ckpt "$WORK/ck" --prompt-tokens "$(cat "$WORK/ids.txt")" --max-new-tokens 0 >"$WORK/decoded.txt" ||
  fail "generate --prompt-tokens (decode)"
/usr/bin/python3 -c "
import sys
a, b = open(sys.argv[1], 'rb').read(), open(sys.argv[2], 'rb').read()
assert a == b + b'\n', (len(a), len(b), a[:80], b[:80])" "$WORK/decoded.txt" "$WORK/test_text.txt" ||
  fail "the test split's ids do not decode to its text"
ok "every model's test split holds one newline id per newline; the BPE split's $(tr ',' '\n' <"$WORK/ids.txt" | wc -l) ids decode to its $(wc -c <"$WORK/test_text.txt") bytes exactly"

prompt=$'This program is free software;\n  you'
gen() {  # CKPT OUT
  run_np 1 generate --ckpt "$1" --prompt "$prompt" --max-new-tokens 20 --temperature 0 >"$2" 2>&1 ||
    { cat "$2"; fail "generate --prompt from $1"; }
  /usr/bin/python3 -c "
import sys
out, p = open(sys.argv[1]).read(), sys.argv[2]
assert out.startswith(p) and len(out) > len(p) + 5, repr(out)" "$2" "$prompt" || { cat "$2"; fail "$1: output does not start with the prompt"; }
}
gen "$WORK/ck" "$WORK/gen.txt"
run_np 1 ckpt merge "$WORK/ck" --out "$WORK/full.h5" --full >/dev/null || fail "merge --full"
gen "$WORK/full.h5" "$WORK/gen_full.txt"
cmp -s "$WORK/gen.txt" "$WORK/gen_full.txt" || fail "merge --full generates other text"
ok "generate --prompt (two lines) prints text: $(head -c 120 "$WORK/gen.txt" | tr '\n' '|')"
run_np 1 ckpt merge "$WORK/ck" --out "$WORK/weights.h5" >/dev/null || fail "merge"
expect_error merged_without_tokenizer "tokenizer is \"sentencepiece\" without its model .*--full" \
  generate --ckpt "$WORK/weights.h5" --prompt "This"

printf 'just some text\n' >"$WORK/not_a_model"
expect_error not_a_model "--tokenizer .*not_a_model is not a SentencePiece model" \
  data text --out "$WORK/bad1" --tokenizer "$WORK/not_a_model" "$TXT"
expect_error missing_model "--tokenizer .*nothing.model: no such file" \
  data text --out "$WORK/bad2" --tokenizer "$WORK/nothing.model" "$TXT"
[ ! -e "$WORK/bad1" ] && [ ! -e "$WORK/bad2" ] || fail "a bad tokenizer wrote something"
ok "bad tokenizer files: one line each, exit 2, nothing written"
