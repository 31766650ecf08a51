#!/usr/bin/env bash
# README command 1: set up (idempotent), prepare Fashion-MNIST if missing, train the `cnn`
# model on 2 ranks with mpirun, and print the JSON summary (last line).
#   EPOCHS=5 bash launch/quickstart.sh      # more epochs (default 2)
# The data set goes to $HPCTRAIN_DATA (default ${HPCTRAIN_HOME:-~/.cache/hpctrain}/fashion-mnist:
# train.h5 and test.h5, made once from Debian's dataset-fashion-mnist and reused).
set -euo pipefail
cd "$(dirname "$0")/.."
HPCTRAIN_BUILD_TARGET=hpctrain bash launch/setup.sh  # the CLI only; tests/run.sh builds the rest
DATA=${HPCTRAIN_DATA:-${HPCTRAIN_HOME:-$HOME/.cache/hpctrain}/fashion-mnist}
if [ ! -f "$DATA/train.h5" ] || [ ! -f "$DATA/test.h5" ]; then
  ./build/hpctrain data fashion-mnist --out "$DATA"
fi
exec bash launch/local.sh -n 2 --oversubscribe -- train --model cnn --data "$DATA" \
  --epochs "${EPOCHS:-2}" --batch-size 64 --lr 0.05 --log-every 200
