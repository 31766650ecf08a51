#!/usr/bin/env bash
# hpctrain --zero 3 against PyTorch FSDP2 (fully_shard on every block, then the root; gloo) on the
# same GPT, the same token data, 2 CPU ranks: tokens/s and peak RSS per rank, interleaved ROUNDS
# times (hpctrain, FSDP2, hpctrain, ...), one JSON line per run and the ratios at the end.
# usage: perf/memory/zero3_vs_fsdp2.sh [DATA_DIR] [--rounds 3] [--steps 40] [--smoke]
#   DATA_DIR: token data (hpctrain data text ...); made from /usr/share/common-licenses if absent.
#   --smoke: 1 round of 6 steps on a tiny GPT (checks that both sides run; numbers meaningless).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${HPCTRAIN_BIN:-$ROOT/build/hpctrain}
PY=${HPCTRAIN_PYTHON:-$HOME/.cache/hpctrain/venv/bin/python}
DATA=${1:-}
[ "${DATA#--}" = "$DATA" ] && [ -n "$DATA" ] && shift || DATA=""
ROUNDS=3 STEPS=40 L=4 H=4 E=128 T=64 B=8
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --smoke) ROUNDS=1 STEPS=6 L=2 H=2 E=32 T=16; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
WORK=$(mktemp -d /tmp/zero3-fsdp2.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
if [ -z "$DATA" ]; then
  DATA="$WORK/data"
  "$BIN" data text --out "$DATA" --test-fraction 0.05 /usr/share/common-licenses >/dev/null
fi
MPI=(mpirun -np 2 --oversubscribe -x OMP_NUM_THREADS=1)
[ "$(id -u)" = 0 ] && MPI+=(--allow-run-as-root)
export OMP_NUM_THREADS=1
for ((r = 1; r <= ROUNDS; r++)); do
  "${MPI[@]}" "$BIN" train --model gpt --model-config "n_layer=$L,n_head=$H,n_embd=$E,bias=false" --data "$DATA" \
    --seq-len $T --batch-size $B --max-steps $STEPS --zero 3 --optimizer adamw --lr 3e-3 --weight-decay 0.1 \
    --clip-grad-norm 1.0 --log-every 100000 --epochs 1 --resume none 2>"$WORK/err.txt" | tail -1 |
    /usr/bin/python3 -c "import json,sys; s=json.loads(sys.stdin.read()); print(json.dumps({'run':'hpctrain_zero3','tokens_per_s':s['tokens_per_s'],'peak_rss_mb_per_rank':s['peak_mem_mb_per_rank']}))" |
    tee -a "$WORK/runs.jsonl"
  "$PY" "$ROOT/perf/memory/zero3_vs_fsdp2.py" "$DATA/train.h5" --ranks 2 --n-layer $L --n-head $H --n-embd $E \
    --seq-len $T --batch $B --steps $STEPS 2>/dev/null |
    /usr/bin/python3 -c "import json,sys; s=json.loads(sys.stdin.read()); s['run']='fsdp2'; print(json.dumps(s))" |
    tee -a "$WORK/runs.jsonl"
done
/usr/bin/python3 - "$WORK/runs.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
def med(kind, key):
    return statistics.median(max(r[key]) if isinstance(r[key], list) else r[key] for r in runs if r["run"] == kind)
print(json.dumps({"tokens_per_s_ratio": med("hpctrain_zero3", "tokens_per_s") / med("fsdp2", "tokens_per_s"),
                  "peak_rss_ratio": med("hpctrain_zero3", "peak_rss_mb_per_rank") / med("fsdp2", "peak_rss_mb_per_rank")}))
PY
