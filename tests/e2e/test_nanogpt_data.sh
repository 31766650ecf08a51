#!/usr/bin/env bash
# e2e: nanoGPT's data layout (DIR/train.bin, DIR/val.bin as uint16 ids, optional meta.pkl) trains
# directly, and equals training on the same ids in HDF5 bitwise.
# - `data text` makes byte tokens (train.h5/test.h5); the same ids go to train.bin/val.bin
#   (numpy uint16 tofile, as nanoGPT's prepare.py) with a meta.pkl like shakespeare_char's
#   (vocab_size, itos, stoi, written by pickle.dump);
# - 2 ranks x 12 AdamW steps on each: the final checkpoints (model and optimizer state) are
#   equal bitwise, and so are the summaries' train and test losses; val.bin is the test split
#   (its window count in the start-up line);
# - without meta.pkl, --vocab-size gives the vocabulary; `hpctrain eval` reads val.bin;
# - MFU: the start-up line names the peak (a measured CPU GEMM, or --peak-tflops), progress lines
#   show it, and train records, the summary and TensorBoard hold FLOPs/token x tokens/s / peak;
# - bad input, one line each, exit 2, no metrics file and no checkpoint: an odd byte count, an
#   id >= vocab_size, meta.pkl without vocab_size and no --vocab-size, a meta.pkl that would
#   run code (a global), --vocab-size disagreeing with meta.pkl, --vocab-size for .h5 data.
source "$(dirname "$0")/lib.sh"
H5="$WORK/h5" NG="$WORK/bin"
mkdir -p "$NG"
printf 'To be, or not to be, that is the question:\nWhether tis nobler in the mind to suffer\n%.0s' {1..60} >"$WORK/text.txt"
run_np 1 data text --out "$H5" --test-fraction 0.2 "$WORK/text.txt" >/dev/null || fail "data text"
/usr/bin/python3 - "$H5" "$NG" <<'PY' || fail "writing train.bin/val.bin"
import h5py, numpy as np, pickle, sys
h5, out = sys.argv[1:]
for split, name in (("train", "train"), ("test", "val")):
    ids = h5py.File(f"{h5}/{split}.h5", "r")["tokens"][()].astype(np.uint16)
    ids.tofile(f"{out}/{name}.bin")
chars = [chr(i) for i in range(256)]
with open(f"{out}/meta.pkl", "wb") as f:
    pickle.dump({"vocab_size": 256, "itos": dict(enumerate(chars)), "stoi": {c: i for i, c in enumerate(chars)}}, f)
PY
common=(--model gpt --model-config n_layer=1,n_head=2,n_embd=16 --seq-len 16 --batch-size 4 --optimizer adamw
  --lr 3e-3 --schedule wsd --warmup-steps 2 --seed 5 --log-every 4)
train_on() {  # NAME DATA ARGS...
  local name=$1 data=$2; shift 2
  run_np 2 train "${common[@]}" --max-steps 12 --data "$data" --ckpt-dir "$WORK/$name" --metrics "$WORK/$name.jsonl" "$@" \
    >"$WORK/$name.txt" 2>&1 || { tail -5 "$WORK/$name.txt"; fail "$name: train"; }
  run_np 1 ckpt merge "$WORK/$name" --out "$WORK/$name.h5" --full >/dev/null || fail "$name: merge"
}
train_on from_h5 "$H5"
train_on from_bin "$NG"
/usr/bin/python3 - "$WORK/from_h5.h5" "$WORK/from_bin.h5" <<'PY' || fail "nanoGPT .bin != HDF5"
import h5py, numpy as np, sys
a, b = (h5py.File(p, "r") for p in sys.argv[1:])
def tensors(f):
    out = {}
    for g in ("model", "optim"):
        f[g].visititems(lambda n, o: out.__setitem__(g + "/" + n, o[()]) if isinstance(o, h5py.Dataset) else None)
    return out
ta, tb = tensors(a), tensors(b)
assert ta.keys() == tb.keys() and len(ta) > 10, (sorted(ta), sorted(tb))
bad = [k for k in ta if ta[k].tobytes() != tb[k].tobytes()]
assert not bad, bad
print(f"ok: {len(ta)} tensors (model and AdamW state) equal bitwise")
PY
/usr/bin/python3 - "$WORK/from_h5.txt" "$WORK/from_bin.txt" <<'PY' || fail "summaries differ"
import json, sys
a, b = (json.loads([l for l in open(p) if l.startswith("{")][-1]) for p in sys.argv[1:])
for k in ("train_loss", "test_loss", "test_accuracy", "steps"):
    assert a[k] == b[k], (k, a[k], b[k])
print(f"ok: train loss {a['train_loss']:.6f}, test loss {a['test_loss']:.6f} equal")
PY
grep -q "token data $NG: .* windows of 16 (+1), .* test windows, vocab_size 256" "$WORK/from_bin.txt" ||
  { grep "token data" "$WORK/from_bin.txt"; fail "no token-data line for the .bin directory"; }
h5w=$(grep -o "[0-9]* test windows" "$WORK/from_h5.txt") binw=$(grep -o "[0-9]* test windows" "$WORK/from_bin.txt")
[ "$h5w" = "$binw" ] || fail "val.bin is not the test split ($binw vs $h5w)"
ok "nanoGPT .bin == HDF5 bitwise after 12 steps on 2 ranks; val.bin is the test split ($binw)"

# MFU: measured peak (CPU GEMM) in the .bin run; --peak-tflops in the next, checked against
# 6N + 12LET x tokens/s / (peak x ranks) from the run's own numbers, in records, summary and TensorBoard.
grep -q "hpctrain train: MFU against a peak of .* TFLOP/s (measured: float32 GEMM 512^3 on each of 2 rank(s)" \
  "$WORK/from_bin.txt" || { grep "MFU" "$WORK/from_bin.txt"; fail "no MFU start-up line (measured peak)"; }
grep -Eq "^epoch .* tokens/s MFU [0-9.]+% data-wait" "$WORK/from_bin.txt" || fail "progress lines show no MFU"
NOMETA="$WORK/nometa"
mkdir -p "$NOMETA" && cp "$NG"/*.bin "$NOMETA/"
run_np 2 train "${common[@]}" --max-steps 8 --data "$NOMETA" --vocab-size 256 --peak-tflops 0.5 \
  --metrics "$WORK/nometa.jsonl" --tensorboard "$WORK/tb" >"$WORK/nometa.txt" 2>&1 ||
  { tail -3 "$WORK/nometa.txt"; fail "train.bin without meta.pkl, --vocab-size 256"; }
grep -q "MFU against a peak of 1 TFLOP/s (--peak-tflops 0.5 per rank x 2 rank(s))" "$WORK/nometa.txt" ||
  { grep MFU "$WORK/nometa.txt"; fail "no MFU start-up line (--peak-tflops)"; }
"${HPCTRAIN_PYTHON:-${HPCTRAIN_HOME:-$HOME/.cache/hpctrain}/venv/bin/python}" - "$WORK/nometa.txt" "$WORK/nometa.jsonl" "$WORK/tb" <<'PY' ||
import json, sys
from tensorboard.backend.event_processing import plugin_event_accumulator as pea
txt, jsonl, tb = sys.argv[1:]
s = json.loads([l for l in open(txt) if l.startswith("{")][-1])
L, E, T = 1, 16, 16  # n_layer=1, n_embd=16, --seq-len 16
flops = 6 * (s["parameters"] - T * E) + 12 * L * E * T
assert abs(s["mfu"] - flops * s["tokens_per_s"] / 1e12) <= 1e-9 * s["mfu"], (s["mfu"], flops, s["tokens_per_s"])
train = [r for r in map(json.loads, open(jsonl)) if r["type"] == "train"]
for r in train:
    assert abs(r["mfu"] - flops * r["tokens_per_s"] / 1e12) <= 1e-9 * r["mfu"], r
a = pea.EventAccumulator(tb); a.Reload()
assert [e.step for e in a.Tensors("train/mfu")] == [r["step"] for r in train], a.Tensors("train/mfu")
print(f"ok: MFU {100 * s['mfu']:.4f}% = {flops} FLOPs/token x {s['tokens_per_s']:.0f} tokens/s / 1 TFLOP/s, "
      f"in {len(train)} train records, the summary and TensorBoard")
PY
  fail "MFU numbers"
run_np 1 eval --ckpt "$WORK/from_bin" --data "$NG" >"$WORK/eval.txt" 2>&1 || { tail -3 "$WORK/eval.txt"; fail "eval on val.bin"; }
/usr/bin/python3 - "$WORK/from_bin.txt" "$WORK/eval.txt" <<'PY' || fail "eval on val.bin differs from the run"
import json, sys
a, b = (json.loads([l for l in open(p) if l.startswith("{")][-1]) for p in sys.argv[1:])
assert abs(a["test_loss"] - b["test_loss"]) <= 1e-6 * a["test_loss"], (a["test_loss"], b["test_loss"])
print(f"ok: eval on val.bin: test loss {b['test_loss']:.6f} == the run's")
PY
ok "no meta.pkl: --vocab-size 256 trains; hpctrain eval reads val.bin"

bad_dir() {  # NAME: a copy of the .bin directory to spoil
  rm -rf "$WORK/$1" && cp -r "$NG" "$WORK/$1" && echo "$WORK/$1"
}
expect_bad() {  # NAME REGEX DIR [ARGS...]: exit 2, one line, nothing written
  local name=$1 key=$2 dir=$3; shift 3
  expect_error "$name" "$key" train "${common[@]}" --max-steps 12 --data "$dir" --ckpt-dir "$WORK/$name.ck" \
    --metrics "$WORK/$name.jsonl" "$@"
  [ ! -e "$WORK/$name.ck" ] && [ ! -e "$WORK/$name.jsonl" ] || fail "$name: something was written"
}
d=$(bad_dir odd) && printf 'x' >>"$d/train.bin"
expect_bad odd_bytes "train.bin has an odd byte count" "$d"
d=$(bad_dir big_id) && /usr/bin/python3 -c "
import numpy as np, sys; a = np.fromfile(sys.argv[1], np.uint16); a[100] = 300; a.tofile(sys.argv[1])" "$d/train.bin"
expect_bad id_over_vocab "train.bin: token id 300 at position 100 is outside \[0, 256)" "$d"
d=$(bad_dir no_vocab) && /usr/bin/python3 -c "
import pickle, sys; pickle.dump({'itos': {0: 'a'}}, open(sys.argv[1], 'wb'))" "$d/meta.pkl"
expect_bad meta_without_vocab "meta.pkl has no integer vocab_size: pass --vocab-size" "$d"
d=$(bad_dir code) && /usr/bin/python3 -c "
import os, pickle, sys
class Boom:
    def __reduce__(self): return (os.system, ('touch /tmp/hpctrain-pwned',))
pickle.dump({'vocab_size': 256, 'x': Boom()}, open(sys.argv[1], 'wb'))" "$d/meta.pkl"
expect_bad meta_with_code "meta.pkl: not a plain pickle: a global" "$d"
expect_bad vocab_disagrees "--vocab-size 300 disagrees with .*meta.pkl's vocab_size 256" "$NG" --vocab-size 300
d=$(bad_dir no_meta) && rm "$d/meta.pkl"
expect_bad no_meta_no_flag "train.bin but no meta.pkl: pass --vocab-size N" "$d"
expect_bad vocab_for_h5 "--vocab-size 256 is for nanoGPT's layout" "$H5" --vocab-size 256
ok "bad nanoGPT input: one line each, exit 2, nothing written"
