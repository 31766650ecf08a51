#!/usr/bin/env bash
# Writes data/fmnist (Fashion-MNIST), data/tiny (synthetic) and data/fortunes (Debian's
# fortunes as byte tokens for language models: 43 text files, ~2.3 M train / 0.26 M test tokens)
# with the built CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${HPCTRAIN_BIN:-./build/hpctrain}
"$BIN" data fashion-mnist --out data/fmnist
"$BIN" data synthetic --out data/tiny --n 512 --test-n 128
"$BIN" data text --out data/fortunes --test-fraction 0.1 /usr/share/games/fortunes  # package fortunes
