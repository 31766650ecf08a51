#!/usr/bin/env bash
# perf/plot.py metrics: training curves from metrics JSONL files, no display needed.
# - two hand-made runs overlaid -> one PNG (PNG magic, non-trivial size) at --out;
# - the README's reference runs (perf/train/results/fmnist-*.jsonl) plot next to their JSONL;
# - a file without train records, or with a broken line, is refused with a one-line reason.
source "$(dirname "$0")/lib.sh"
SRC=${HPCTRAIN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
PY=/usr/bin/python3
unset DISPLAY
is_png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] && [ "$(stat -c %s "$1")" -gt 20000 ]; }

$PY - "$WORK" <<'PY'
import json, math, sys
w = sys.argv[1]
for name, scale in (("a", 1.0), ("b", 0.7)):
    with open(f"{w}/{name}.jsonl", "w") as f:
        f.write(json.dumps({"type": "config", "config": {"model": "mlp"}}) + "\n")
        for s in range(10, 201, 10):
            f.write(json.dumps({"type": "train", "step": s, "epoch": s // 100, "loss": scale * math.exp(-s / 80),
                                "lr": 0.1 * (1 + math.cos(math.pi * s / 200)) / 2, "samples_per_s": 900 + s}) + "\n")
            if s % 100 == 0:
                f.write(json.dumps({"type": "eval", "step": s, "test_loss": scale * math.exp(-s / 90),
                                    "test_accuracy": 1 - 0.5 * math.exp(-s / 60)}) + "\n")
PY
out=$($PY "$SRC/perf/plot.py" metrics "$WORK/a.jsonl" "$WORK/b.jsonl" --out "$WORK/ab.png")
[ "$out" = "$WORK/ab.png" ] && is_png "$WORK/ab.png" || fail "overlay PNG not written ($out)"
ok "two runs overlaid: $(stat -c %s "$WORK/ab.png") bytes"

for ref in "$SRC"/perf/train/results/fmnist-cnn-5ep.jsonl "$SRC"/perf/train/results/fmnist-resnet-w48-20ep.jsonl; do
  cp "$ref" "$WORK/"
  out=$($PY "$SRC/perf/plot.py" metrics "$WORK/$(basename "$ref")")
  is_png "$out" || fail "$out not a PNG"
  [ -f "${ref%.jsonl}.png" ] || fail "the reference PNG ${ref%.jsonl}.png is not committed"
done
ok "reference runs plot; their PNGs are in perf/train/results"

echo '{"type": "config", "config": {}}' >"$WORK/none.jsonl"
if $PY "$SRC/perf/plot.py" metrics "$WORK/none.jsonl" 2>"$WORK/err"; then fail "no train records accepted"; fi
grep -q "has no train records" "$WORK/err" || fail "unclear error: $(cat "$WORK/err")"
printf '{"type": "train", "step": 1\n' >"$WORK/broken.jsonl"
if $PY "$SRC/perf/plot.py" metrics "$WORK/broken.jsonl" 2>"$WORK/err"; then fail "broken line accepted"; fi
grep -q "broken.jsonl:1: not JSON" "$WORK/err" || fail "unclear error: $(cat "$WORK/err")"
ok "bad inputs refused: $(head -1 "$WORK/err")"
