#!/usr/bin/env bash
# The fortunes language-model recipe swept over settings, each within one wall budget, and a
# table of what each reached, in nats and bits per BYTE of test text (a BPE run's loss per token
# is converted: total nats / bytes of text, from the data's text_bytes; hpctrain's bits_per_byte).
#
#   perf/lm/recipe_sweep.sh [--budget S] [--np N] [--out DIR] [--corpus DIR_OR_FILE] [--only a,b]
#                           [--bpe-vocab V]
#     --budget   wall seconds per setting (default 1200, the recipe's 20 minutes)
#     --np       ranks (default 2)
#     --out      results: DIR/<setting>.{txt,jsonl}, DIR/table.md (default perf/lm/results/lm_sweep)
#     --corpus   text to train on (default /usr/share/games/fortunes, Debian's fortunes)
#     --only     run only these settings (comma-separated names from the list below)
#     --bpe-vocab  the BPE model's pieces (default 2048; a small corpus needs fewer)
#     --calibrate-only  measure every setting's steps for the budget (DIR/<setting>.steps) and stop
#
# Settings (the README recipe is `base`: L4 E128 T128, batch 16 per rank, AdamW 3e-3, cosine):
#   base      L4 E128, T128, b16, lr 3e-3, cosine, bytes
#   wide      L2 E176 (~ the same FLOPs per token as base: 12 L E^2 of 786k vs 743k)
#   deep      L8 E88  (~ the same FLOPs per token: 743k)
#   seq256    T256 at b8 (the same tokens per step)
#   b32lr6    b32, lr 6e-3 (twice the tokens per step, the lr scaled along)
#   wsd       base with --schedule wsd --decay-frac 0.2 instead of cosine
#   bpe       base on a SentencePiece BPE model (2048 pieces, trained here on the train text with
#             identity normalization, so the text round-trips) instead of bytes
#
# The budget: each setting first runs 20 steps to measure its step time and its fixed cost
# (start-up and the final evaluation), then trains for as many steps as fit the budget, so that
# the cosine and WSD schedules end where the budget does. The calibration is outside the
# budget; each line states the wall time of the real run. Run on an otherwise idle machine (the
# settings are compared on what they reach in equal time).
#
# Only the calibration needs the idle machine: the step count it writes to DIR/<setting>.steps is
# reused by a later run, and a run of a fixed step count reaches the same loss however busy the
# machine is (CPU training is bitwise reproducible). So `--calibrate-only` on an idle machine,
# then the training phase may run niced beside other work. The table gives tokens/s and MFU of the
# calibration (idle) and tokens/s and wall time of the real run (what the machine allowed then).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${HPCTRAIN_BIN:-$here/build/hpctrain}
BUDGET=1200 NP=2 OUT=$here/perf/lm/results/lm_sweep CORPUS=/usr/share/games/fortunes ONLY="" BPE_VOCAB=2048 CALIB_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --budget) BUDGET=$2; shift 2 ;;
    --np) NP=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --corpus) CORPUS=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --bpe-vocab) BPE_VOCAB=$2; shift 2 ;;
    --calibrate-only) CALIB_ONLY=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "recipe_sweep.sh: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done
[ -x "$BIN" ] || { echo "recipe_sweep.sh: no binary $BIN (build first)" >&2; exit 2; }
[ -e "$CORPUS" ] || { echo "recipe_sweep.sh: no corpus $CORPUS (apt-get install fortunes, or --corpus)" >&2; exit 2; }
mkdir -p "$OUT"
run() { HPCTRAIN_BIN=$BIN "$here/launch/local.sh" -n "$NP" -- "$@"; }

# Data: bytes, and a BPE model trained on the train split's text (the test text stays unseen).
if [ ! -f "$OUT/data/bytes/train.h5" ]; then
  run data text --out "$OUT/data/bytes" --test-fraction 0.1 "$CORPUS" >/dev/null
fi
if [ ! -f "$OUT/data/bpe/train.h5" ]; then
  command -v spm_train >/dev/null || { echo "recipe_sweep.sh: spm_train missing (apt-get install sentencepiece)" >&2; exit 2; }
  /usr/bin/python3 -c "
import h5py, sys
open(sys.argv[2], 'wb').write(h5py.File(sys.argv[1], 'r')['tokens'][()].tobytes())" "$OUT/data/bytes/train.h5" "$OUT/data/train.txt"
  spm_train --input="$OUT/data/train.txt" --model_prefix="$OUT/data/bpe" --vocab_size="$BPE_VOCAB" --model_type=bpe \
    --character_coverage=1.0 --byte_fallback=true --normalization_rule_name=identity --remove_extra_whitespaces=false \
    --input_sentence_size=2000000 --shuffle_input_sentence=true --max_sentence_length=100000 >"$OUT/data/spm.log" 2>&1
  run data text --out "$OUT/data/bpe" --test-fraction 0.1 --tokenizer "$OUT/data/bpe.model" "$CORPUS" >"$OUT/data/bpe.txt"
fi

common=(--optimizer adamw --weight-decay 0.1 --clip-grad-norm 1.0 --epochs 1000 --seed 1)
declare -A ARGS=(
  [base]="--model-config n_layer=4,n_head=4,n_embd=128 --seq-len 128 --batch-size 16 --lr 3e-3 --schedule cosine"
  [wide]="--model-config n_layer=2,n_head=4,n_embd=176 --seq-len 128 --batch-size 16 --lr 3e-3 --schedule cosine"
  [deep]="--model-config n_layer=8,n_head=4,n_embd=88 --seq-len 128 --batch-size 16 --lr 3e-3 --schedule cosine"
  [seq256]="--model-config n_layer=4,n_head=4,n_embd=128 --seq-len 256 --batch-size 8 --lr 3e-3 --schedule cosine"
  [b32lr6]="--model-config n_layer=4,n_head=4,n_embd=128 --seq-len 128 --batch-size 32 --lr 6e-3 --schedule cosine"
  [wsd]="--model-config n_layer=4,n_head=4,n_embd=128 --seq-len 128 --batch-size 16 --lr 3e-3 --schedule wsd --decay-frac 0.2"
  [bpe]="--model-config n_layer=4,n_head=4,n_embd=128 --seq-len 128 --batch-size 16 --lr 3e-3 --schedule cosine"
)
ORDER=(base wide deep seq256 b32lr6 wsd bpe)
[ -n "$ONLY" ] && IFS=, read -r -a ORDER <<<"$ONLY"

since() { /usr/bin/python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$1"; }
field() { /usr/bin/python3 -c "
import json, sys
s = json.loads([l for l in open(sys.argv[1]) if l.startswith('{')][-1])
print(s.get(sys.argv[2]))" "$1" "$2"; }
for name in "${ORDER[@]}"; do
  [ -n "${ARGS[$name]:-}" ] || { echo "recipe_sweep.sh: unknown setting $name (${!ARGS[*]})" >&2; exit 2; }
  data=$OUT/data/bytes
  [ "$name" = bpe ] && data=$OUT/data/bpe
  # shellcheck disable=SC2206
  args=(train --model gpt ${ARGS[$name]} --data "$data" "${common[@]}")
  if [ ! -f "$OUT/$name.steps" ]; then
    t0=$EPOCHREALTIME
    run "${args[@]}" --max-steps 20 --warmup-steps 5 --log-every 10 --metrics "$OUT/$name.calib.jsonl" \
      >"$OUT/$name.calib.txt" 2>&1
    wall=$(since "$t0")
    step_s=$(/usr/bin/python3 -c "
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '\"train\"' in l][-1]
print(r['step_s'])" "$OUT/$name.calib.jsonl")
    /usr/bin/python3 -c "
budget, wall, step = map(float, __import__('sys').argv[1:])
fixed = max(wall - 20 * step, 0.0)
print(max(int((budget - fixed) / step), 20))" "$BUDGET" "$wall" "$step_s" >"$OUT/$name.steps"
    echo "recipe_sweep: $name: $step_s s/step, $(printf %.0f "$wall") s for 20 steps: $(cat "$OUT/$name.steps") steps fit ${BUDGET} s"
  fi
  steps=$(cat "$OUT/$name.steps")
  [ "$CALIB_ONLY" = 1 ] && continue
  t0=$EPOCHREALTIME
  run "${args[@]}" --max-steps "$steps" --warmup-steps $((steps < 2000 ? steps / 10 : 200)) --log-every 50 --metrics "$OUT/$name.jsonl" >"$OUT/$name.txt" 2>&1
  since "$t0" >"$OUT/$name.wall"
  echo "recipe_sweep: $name: test $(field "$OUT/$name.txt" bits_per_byte) bits/byte in $(printf %.0f "$(cat "$OUT/$name.wall")") s"
done
[ "$CALIB_ONLY" = 1 ] && exit 0

/usr/bin/python3 - "$OUT" "$BUDGET" "$NP" "${ORDER[@]}" <<'PY' | tee "$OUT/table.md"
import json, math, re, sys
out, budget, np_, names = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4:]
print(f"Budget {budget:.0f} s per setting on {np_} rank(s); loss per byte of test text (BPE converted by its text_bytes).\n")
print("| setting | flags | params | MFLOPs/token | steps | tokens/s (calibration) | MFU (calibration) | tokens/s (run) | wall s | test nats/byte | bits/byte |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
rows = []
for n in names:
    txt = open(f"{out}/{n}.txt").read()
    s = json.loads([l for l in txt.splitlines() if l.startswith("{")][-1])
    cfg = json.loads(re.search(r"hpctrain train: config (\{.*\})", txt).group(1))
    mf = re.search(r"([0-9.]+) MFLOPs per token", txt)
    wall = float(open(f"{out}/{n}.wall").read())
    bpb = s["bits_per_byte"]
    flags = f"{cfg['model_config']} T{cfg['seq_len']} b{cfg['batch_size']} lr {cfg['lr']:g} {cfg['schedule']}" + \
            (" bpe" if "bpe" in cfg["data"] else " bytes")
    rows.append((bpb, n))
    calib = [json.loads(l) for l in open(f"{out}/{n}.calib.jsonl") if '"train"' in l][-1]
    print(f"| {n} | {flags} | {s['parameters']:,} | {mf.group(1) if mf else '?'} | {s['steps']} | "
          f"{calib['tokens_per_s']:,.0f} | {100 * calib.get('mfu', 0):.1f}% | {s['tokens_per_s']:,.0f} | {wall:.0f} | "
          f"{bpb * math.log(2):.4f} | {bpb:.4f} |")
best = min(rows)
print(f"\nBest: {best[1]} at {best[0]:.4f} bits/byte ({best[0] * math.log(2):.4f} nats/byte).")
PY
