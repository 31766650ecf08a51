#!/usr/bin/env bash
# The prepared GPU check (one run, < 8 minutes on one GPU). Writes one report:
#   perf/train/results/gpu-check-<date>.md  (every result and number; also echoed to stdout)
# Steps: build against the CUDA LibTorch (reusing ./build), doctor on the GPU, ctest -L gpu,
# cnn/resnet training on the GPU with fp32/bf16/fp16, a GPU-written checkpoint verified, merged
# and evaluated on the CPU in a process that sees no GPU (accuracy must equal the GPU's),
# AMP speedups, DDP tax at world size 1, pinned D2H bandwidth, async-checkpoint slowdown.
# Environment: HPCTRAIN_DATA (Fashion-MNIST h5 dir; synthetic 28x28 data is generated if
# absent), STEPS (training steps per run, default 300).
set -uo pipefail
cd "$(dirname "$0")/../.."
STAMP=$(date +%Y%m%d-%H%M)
REPORT=perf/train/results/gpu-check-$STAMP.md
WORK=$(mktemp -d /tmp/hpctrain-gpu.XXXXXX)
STEPS=${STEPS:-300}
BIN=./build/hpctrain
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fails=0
say() { echo "$*" | tee -a "$REPORT"; }
check() { local name=$1; shift; if "$@" >>"$WORK/log" 2>&1; then say "- PASS $name"; else say "- FAIL $name (see $WORK/log)"; fails=$((fails + 1)); fi; }
field() { /usr/bin/python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])[sys.argv[2]])" "$1" "$2"; }

say "# hpctrain GPU check $STAMP"
say "host $(hostname), $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)"
say "## 1. build"
check "build (launch/setup.sh)" bash launch/setup.sh
grep -q "HPCTRAIN_HAVE_CUDA=1" build/build.ninja && say "- CUDA build: yes" || { say "- FAIL: not a CUDA build"; fails=$((fails + 1)); }
say "## 2. doctor"
$BIN doctor --device cuda >"$WORK/doctor.txt" 2>&1 && say "- PASS doctor on cuda" || { say "- FAIL doctor"; fails=$((fails + 1)); }
sed 's/^/    /' "$WORK/doctor.txt" >>"$REPORT"
say "## 3. ctest -L gpu"
(cd build && ctest -L gpu --output-on-failure) >"$WORK/ctest.txt" 2>&1 && say "- PASS ctest -L gpu" || { say "- FAIL ctest -L gpu"; fails=$((fails + 1)); }
grep -E "Passed|Failed|Skipped|SKIPPED" "$WORK/ctest.txt" | sed 's/^/    /' >>"$REPORT"
say "## 4. training on the GPU ($STEPS steps each)"
DATA=${HPCTRAIN_DATA:-}
if [ -z "$DATA" ] || [ ! -f "$DATA/train.h5" ]; then
  DATA=$WORK/data
  $BIN data fashion-mnist --out "$DATA" >/dev/null 2>&1 || $BIN data synthetic --out "$DATA" --n 60000 --test-n 10000 --classes 10 --height 28 --width 28 --noise 60 >/dev/null
fi
say "| model | amp | batch | samples/s | test accuracy |"
say "|---|---|---|---|---|"
declare -A SPS
for model in cnn resnet; do
  for amp in off bf16 fp16; do
    out=$WORK/train-$model-$amp.txt
    if $BIN train --model $model --data "$DATA" --device cuda --amp $amp --batch-size 256 --max-steps "$STEPS" --lr 0.05 --log-every 100 >"$out" 2>&1; then
      SPS[$model-$amp]=$(field "$out" samples_per_s)
      say "| $model | $amp | 256 | ${SPS[$model-$amp]} | $(field "$out" test_accuracy) |"
    else
      say "| $model | $amp | 256 | FAILED | $(tail -1 "$out") |"; fails=$((fails + 1))
    fi
  done
done
for m in cnn resnet; do
  for amp in bf16 fp16; do
    [ -n "${SPS[$m-$amp]:-}" ] && [ -n "${SPS[$m-off]:-}" ] && say "- AMP speedup $m $amp: $(/usr/bin/python3 -c "print(round(${SPS[$m-$amp]}/${SPS[$m-off]}, 2))") (goal >= 2.0 on resnet)"
  done
done
say "## 5. GPU checkpoint -> verify -> merge -> CPU eval without a GPU"
CK=$WORK/ck
$BIN train --model cnn --data "$DATA" --device cuda --batch-size 256 --max-steps "$STEPS" --ckpt-dir "$CK" >"$WORK/ck-train.txt" 2>&1
gpu_acc=$(field "$WORK/ck-train.txt" test_accuracy 2>/dev/null || echo none)
check "ckpt verify" $BIN ckpt verify "$CK"
check "ckpt merge" $BIN ckpt merge "$CK" --out "$WORK/merged.h5"
CUDA_VISIBLE_DEVICES= $BIN eval --ckpt "$WORK/merged.h5" --data "$DATA" --device cpu >"$WORK/eval.txt" 2>&1
cpu_acc=$(field "$WORK/eval.txt" test_accuracy 2>/dev/null || echo none)
if [ "$gpu_acc" != none ] && /usr/bin/python3 -c "import sys; sys.exit(abs(float('$gpu_acc') - float('$cpu_acc')) > 1e-3)"; then
  say "- PASS CPU eval of the GPU checkpoint: accuracy $cpu_acc (GPU run: $gpu_acc)"
else
  say "- FAIL CPU eval accuracy $cpu_acc vs GPU $gpu_acc"; fails=$((fails + 1))
fi
say "## 6. numbers"
plain=$(./build/perf/ddp_bench --device cuda --model resnet --batch 256 --mode plain --steps 50 | tail -1)
ddp=$(./build/perf/ddp_bench --device cuda --model resnet --batch 256 --mode ddp --steps 50 | tail -1)
say "- DDP tax at world size 1 (resnet, b256): $(/usr/bin/python3 -c "import json; print(round(json.loads('$ddp')['step_s']/json.loads('$plain')['step_s'], 3))") (goal <= 1.02)"
/usr/bin/python3 - "$WORK" >>"$REPORT" 2>&1 <<'PY'
import json, os, subprocess, sys, time
py = os.path.expanduser("~/.cache/hpctrain/venv/bin/python")
code = "import torch,time\nx=torch.empty(256*2**20//4,device='cuda')\nh=torch.empty(x.numel(),pin_memory=True)\nh.copy_(x);torch.cuda.synchronize()\nt=time.perf_counter()\nfor _ in range(10): h.copy_(x,non_blocking=True)\ntorch.cuda.synchronize()\nprint(round(10*x.numel()*4/(time.perf_counter()-t)/1e9,1))"
r = subprocess.run([py, "-c", code], capture_output=True, text=True)
print(f"- pinned device-to-host copy bandwidth: {r.stdout.strip() or r.stderr.strip()[-200:]} GB/s")
PY
a=$WORK/async.txt; b=$WORK/noasync.txt
$BIN train --model resnet --data "$DATA" --device cuda --batch-size 256 --max-steps "$STEPS" --ckpt-dir "$WORK/ck2" --ckpt-every 50 >"$a" 2>&1
$BIN train --model resnet --data "$DATA" --device cuda --batch-size 256 --max-steps "$STEPS" >"$b" 2>&1
say "- training slowdown with an async checkpoint every 50 steps: $(/usr/bin/python3 -c "print(round(1 - $(field "$a" samples_per_s)/$(field "$b" samples_per_s), 3))") (goal <= 0.05)"
say "## result: $fails failure(s)"
echo "report: $REPORT"
[ $fails -eq 0 ]
