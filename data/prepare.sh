#!/usr/bin/env bash
# Writes data/fmnist (Fashion-MNIST) and data/tiny (synthetic) with the built CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${HPCTRAIN_BIN:-./build/hpctrain}
"$BIN" data fashion-mnist --out data/fmnist
"$BIN" data synthetic --out data/tiny --n 512 --test-n 128
