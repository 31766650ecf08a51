#!/usr/bin/env bash
# The prepared GPU check (one run, a few minutes on one GPU). Writes one report:
#   $REPORT_DIR/gpu-check-<date>.md (default perf/train/results; every result and number, also
#   echoed to stdout) and the raw summaries beside it (gpu-check-<date>.jsonl).
# Steps: build (launch/setup.sh, unless SKIP_BUILD=1: ./build made by perf/train/gpu-prefix.sh),
# doctor on the GPU, ctest -L gpu, cnn/resnet training with fp32/bf16/fp16, a GPU-written
# checkpoint verified, merged and evaluated on the CPU in a process that sees no GPU (accuracy must
# equal the GPU's), AMP speedups, DDP tax at world size 1, pinned D2H bandwidth, async-checkpoint
# slowdown, a TorchScript model, --zero 1/2 on CUDA (NCCL reduce-scatter/allgather), --zero 3 on
# CUDA, the GPT with fp32/bf16 (tokens/s, the attention kernel torch picks) and
# --activation-checkpointing (peak GPU memory against without).
# Environment: HPCTRAIN_DATA (Fashion-MNIST h5 dir; synthetic 28x28 data is generated if
# absent), STEPS (training steps per image run, default 300), PYTHON (a Python with the same
# CUDA torch; default the venv's, else python3), CPU_STANDIN=1 (rehearsal on a machine without
# a GPU: every --device cuda becomes cpu; the numbers mean nothing), GPT_CONFIG, GPT_SEQ,
# GPT_STEPS (the GPT rows' size).
set -uo pipefail
cd "$(dirname "$0")/../.."
STAMP=$(date +%Y%m%d-%H%M)
REPORT_DIR=${REPORT_DIR:-perf/train/results}
mkdir -p "$REPORT_DIR"
REPORT=$REPORT_DIR/gpu-check-$STAMP.md
RAW=$REPORT_DIR/gpu-check-$STAMP.jsonl
: >"$REPORT"; : >"$RAW"
WORK=$(mktemp -d /tmp/hpctrain-gpu.XXXXXX)
STEPS=${STEPS:-300}
BIN=$PWD/build/hpctrain
PY=${PYTHON:-$HOME/.cache/hpctrain/venv/bin/python}
[ -x "$PY" ] || PY=$(command -v python3)
DEV=cuda; [ "${CPU_STANDIN:-0}" = 1 ] && DEV=cpu
T=${STEP_TIMEOUT:-240}  # seconds any one step may take
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
fails=0
say() { echo "$*" | tee -a "$REPORT"; }
fail() { say "- FAIL $*"; fails=$((fails + 1)); }
check() { local name=$1; shift; if timeout "$T" "$@" >>"$WORK/log" 2>&1; then say "- PASS $name"; else fail "$name (exit $?; see $WORK/log)"; fi; }
last() { tail -1 "$1"; }
field() { "$PY" -c "import json,sys; v = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]).get(sys.argv[2], 'none'); print(round(v, 4) if isinstance(v, float) else v)" "$1" "$2" 2>/dev/null || echo none; }
ratio() { "$PY" -c "import sys; a, b = map(float, sys.argv[1:3]); print(round(a / b, 3))" "$1" "$2" 2>/dev/null || echo none; }
# run NAME ARGS...: hpctrain train, its summary line kept in the raw file; returns its exit code
run() {
  local name=$1; shift
  timeout "$T" "$BIN" train "$@" >"$WORK/$name.txt" 2>&1
  local rc=$?
  echo "{\"run\": \"$name\", \"rc\": $rc, \"summary\": $(last "$WORK/$name.txt" | "$PY" -c 'import json,sys; s=sys.stdin.read().strip()
try: json.loads(s); print(s)
except Exception: print(json.dumps(s))')}" >>"$RAW"
  return $rc
}

say "# hpctrain GPU check $STAMP"
say "host $(hostname), $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1), torch $("$PY" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' 2>/dev/null)"
say "## 1. build"
if [ "${SKIP_BUILD:-0}" = 1 ]; then
  say "- build: made before this script (perf/train/gpu-prefix.sh)"
else
  check "build (launch/setup.sh)" bash launch/setup.sh
fi
grep -q "HPCTRAIN_HAVE_CUDA=1" build/build.ninja && say "- CUDA build: yes" || fail "not a CUDA build"
say "## 2. doctor"
timeout "$T" "$BIN" doctor --device $DEV >"$WORK/doctor.txt" 2>&1 && say "- PASS doctor on $DEV" || fail "doctor"
sed 's/^/    /' "$WORK/doctor.txt" >>"$REPORT"
say "## 3. ctest -L gpu"
(cd build && timeout "$T" ctest -L gpu --output-on-failure) >"$WORK/ctest.txt" 2>&1 && say "- PASS ctest -L gpu" || fail "ctest -L gpu"
grep -E "Passed|Failed|Skipped|SKIPPED|FAILED|Exception|error" "$WORK/ctest.txt" | head -40 | sed 's/^/    /' >>"$REPORT"
say "## 4. training on the GPU ($STEPS steps each)"
DATA=${HPCTRAIN_DATA:-}
if [ -z "$DATA" ] || [ ! -f "$DATA/train.h5" ]; then
  DATA=$WORK/data
  "$BIN" data fashion-mnist --out "$DATA" >/dev/null 2>&1 || "$BIN" data synthetic --out "$DATA" --n 60000 --test-n 10000 --classes 10 --height 28 --width 28 --noise 60 >/dev/null
fi
say "| model | amp | batch | samples/s | test accuracy | peak MB |"
say "|---|---|---|---|---|---|"
declare -A SPS
for model in cnn resnet; do
  for amp in off bf16 fp16; do
    if run "$model-$amp" --model $model --data "$DATA" --device $DEV --amp $amp --batch-size 256 --max-steps "$STEPS" --lr 0.05 --log-every 100; then
      SPS[$model-$amp]=$(field "$WORK/$model-$amp.txt" samples_per_s)
      say "| $model | $amp | 256 | ${SPS[$model-$amp]} | $(field "$WORK/$model-$amp.txt" test_accuracy) | $(field "$WORK/$model-$amp.txt" peak_mem_mb) |"
    else
      say "| $model | $amp | 256 | FAILED | $(last "$WORK/$model-$amp.txt" | cut -c1-200) | |"; fails=$((fails + 1))
    fi
  done
done
for m in cnn resnet; do
  for amp in bf16 fp16; do
    [ -n "${SPS[$m-$amp]:-}" ] && [ -n "${SPS[$m-off]:-}" ] && say "- AMP speedup $m $amp: $(ratio "${SPS[$m-$amp]}" "${SPS[$m-off]}") (goal >= 2.0 on resnet)"
  done
done
say "## 5. GPU checkpoint -> verify -> merge -> CPU eval without a GPU"
CK=$WORK/ck
run ck-train --model cnn --data "$DATA" --device $DEV --batch-size 256 --max-steps "$STEPS" --ckpt-dir "$CK"
gpu_acc=$(field "$WORK/ck-train.txt" test_accuracy)
check "ckpt verify" "$BIN" ckpt verify "$CK"
check "ckpt merge" "$BIN" ckpt merge "$CK" --out "$WORK/merged.h5"
CUDA_VISIBLE_DEVICES= timeout "$T" "$BIN" eval --ckpt "$WORK/merged.h5" --data "$DATA" --device cpu >"$WORK/eval.txt" 2>&1
cpu_acc=$(field "$WORK/eval.txt" test_accuracy)
if [ "$gpu_acc" != none ] && "$PY" -c "import sys; sys.exit(abs(float('$gpu_acc') - float('$cpu_acc')) > 1e-3)" 2>/dev/null; then
  say "- PASS CPU eval of the GPU checkpoint: accuracy $cpu_acc (GPU run: $gpu_acc)"
else
  fail "CPU eval accuracy $cpu_acc vs GPU $gpu_acc ($(tail -1 "$WORK/eval.txt" | cut -c1-200))"
fi
say "## 6. numbers"
plain=$(timeout "$T" ./build/perf/ddp_bench --device $DEV --model resnet --batch 256 --mode plain --steps 50 2>&1 | tail -1)
ddp=$(timeout "$T" ./build/perf/ddp_bench --device $DEV --model resnet --batch 256 --mode ddp --steps 50 2>&1 | tail -1)
tax=$("$PY" -c "import json,sys; print(round(json.loads(sys.argv[1])['step_s'] / json.loads(sys.argv[2])['step_s'], 3))" "$ddp" "$plain" 2>/dev/null || echo "none ($ddp | $plain)")
say "- DDP tax at world size 1 (resnet, b256; microbenchmark perf/ddp_bench): $tax (goal <= 1.02)"
bw=$("$PY" -c "
import torch, time
x = torch.empty(256 * 2**20 // 4, device='cuda'); h = torch.empty(x.numel(), pin_memory=True)
h.copy_(x); torch.cuda.synchronize(); t = time.perf_counter()
for _ in range(10): h.copy_(x, non_blocking=True)
torch.cuda.synchronize(); print(round(10 * x.numel() * 4 / (time.perf_counter() - t) / 1e9, 1))" 2>&1 | tail -1)
say "- pinned device-to-host copy bandwidth (torch, 256 MiB x 10): $bw GB/s"
run async --model resnet --data "$DATA" --device $DEV --batch-size 256 --max-steps "$STEPS" --ckpt-dir "$WORK/ck2" --ckpt-every 50
run noasync --model resnet --data "$DATA" --device $DEV --batch-size 256 --max-steps "$STEPS"
a=$(field "$WORK/async.txt" samples_per_s); b=$(field "$WORK/noasync.txt" samples_per_s)
say "- training slowdown with an async checkpoint every 50 steps: $("$PY" -c "print(round(1 - $a / $b, 3))" 2>/dev/null || echo "none ($a, $b)") (goal <= 0.05; samples/s $a with, $b without)"
say "## 7. TorchScript model, ZeRO on CUDA"
mkdir -p "$WORK/ts"
"$PY" tests/e2e/torchscript_models.py "$WORK/ts" 1 28 28 10 >"$WORK/ts.txt" 2>&1 || fail "writing TorchScript models: $(tail -1 "$WORK/ts.txt")"
if run torchscript --model "$WORK/ts/resnorm.pt" --data "$DATA" --device $DEV --batch-size 256 --max-steps 100 --log-every 50; then
  say "- PASS --model resnorm.pt (TorchScript) on $DEV: $(field "$WORK/torchscript.txt" samples_per_s) samples/s, accuracy $(field "$WORK/torchscript.txt" test_accuracy)"
else
  fail "--model resnorm.pt: $(last "$WORK/torchscript.txt" | cut -c1-300)"
fi
for z in 1 2; do
  timeout "$T" mpirun -np 1 "$BIN" train --model cnn --data "$DATA" --device $DEV --batch-size 256 --max-steps 100 --optimizer adamw --lr 1e-3 --zero $z --log-every 50 >"$WORK/zero$z.txt" 2>&1 &&
    say "- PASS --zero $z on $DEV (mpirun -np 1, NCCL): $(field "$WORK/zero$z.txt" samples_per_s) samples/s, accuracy $(field "$WORK/zero$z.txt" test_accuracy)" ||
    fail "--zero $z on $DEV: $(last "$WORK/zero$z.txt" | cut -c1-300)"
done
timeout "$T" "$BIN" train --model cnn --data "$DATA" --device $DEV --batch-size 256 --max-steps 20 --optimizer adamw --zero 3 >"$WORK/zero3.txt" 2>&1
say "- --zero 3 on $DEV: exit $? ($(last "$WORK/zero3.txt" | cut -c1-300))"
say "## 8. GPT: fp32 against bf16, activation checkpointing"
LM=$WORK/lm
timeout "$T" "$BIN" data text --out "$LM" README.md docs >"$WORK/lmdata.txt" 2>&1 || fail "data text: $(tail -1 "$WORK/lmdata.txt")"
GPT=(--model gpt --model-config "${GPT_CONFIG:-n_layer=8,n_head=8,n_embd=512}" --seq-len "${GPT_SEQ:-512}" --data "$LM" --device $DEV --batch-size 16 --optimizer adamw --lr 3e-4 --max-steps "${GPT_STEPS:-60}" --log-every 20)
say "| gpt run | tokens/s | peak MB | test loss |"
say "|---|---|---|---|"
for v in fp32:off bf16:bf16 fp32-ac:off bf16-ac:bf16; do
  name=${v%%:*}; amp=${v##*:}; extra=(); [[ $name == *-ac ]] && extra=(--activation-checkpointing)
  if run "gpt-$name" "${GPT[@]}" --amp "$amp" "${extra[@]}"; then
    say "| $name | $(field "$WORK/gpt-$name.txt" tokens_per_s) | $(field "$WORK/gpt-$name.txt" peak_mem_mb) | $(field "$WORK/gpt-$name.txt" test_loss) |"
  else
    say "| $name | FAILED | $(last "$WORK/gpt-$name.txt" | cut -c1-200) | |"; fails=$((fails + 1))
  fi
done
[ -f "$WORK/gpt-bf16.txt" ] && say "- GPT bf16 over fp32 tokens/s: $(ratio "$(field "$WORK/gpt-bf16.txt" tokens_per_s)" "$(field "$WORK/gpt-fp32.txt" tokens_per_s)")"
[ -f "$WORK/gpt-fp32-ac.txt" ] && say "- activation checkpointing, fp32: peak memory $(ratio "$(field "$WORK/gpt-fp32-ac.txt" peak_mem_mb)" "$(field "$WORK/gpt-fp32.txt" peak_mem_mb)") of without, tokens/s $(ratio "$(field "$WORK/gpt-fp32-ac.txt" tokens_per_s)" "$(field "$WORK/gpt-fp32.txt" tokens_per_s)") of without"
sdpa=$("$PY" -c "
import torch, torch.nn.functional as F
from torch.profiler import profile, ProfilerActivity
q = torch.randn(16, 8, 512, 64, device='cuda', dtype=torch.bfloat16)
for dt in (torch.bfloat16, torch.float32):
    x = q.to(dt)
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        F.scaled_dot_product_attention(x, x, x, is_causal=True); torch.cuda.synchronize()
    names = [e.key for e in p.key_averages() if 'flash' in e.key.lower() or 'efficient' in e.key.lower() or 'cudnn' in e.key.lower() or 'attention' in e.key.lower()]
    print(str(dt).replace('torch.', ''), (names or ['math (no fused kernel)'])[0][:80], end='; ')" 2>&1 | tail -1)
say "- scaled_dot_product_attention kernel torch picks for the GPT's shapes (B16 H8 T512 D64, causal; same LibTorch): $sdpa"
say "## result: $fails failure(s)"
cp "$WORK/log" "$REPORT_DIR/gpu-check-$STAMP.log" 2>/dev/null
echo "report: $REPORT"
[ $fails -eq 0 ]
