#!/usr/bin/env bash
# Idempotent set-up for hpctrain on Debian 12 (run as root, or with sudo available):
#   1. Debian packages (MPI, HDF5, GoogleTest, CLI11, json, toml++, xxhash, protobuf, ccache, data set)
#   2. the pinned LibTorch (PyPI torch wheel) and tensorboard (for tests) in a venv outside the
#      checkout, reused by clones/CI
#   3. configure + build into ./build
# Environment:
#   HPCTRAIN_HOME      where the venv lives (default ~/.cache/hpctrain)
#   HPCTRAIN_TORCH     pinned torch version (default below)
#   CMAKE_PREFIX_PATH  set it to use another LibTorch >= 2.0 instead of the wheel
#   HPCTRAIN_BUILD_TYPE, HPCTRAIN_CMAKE_ARGS  extra build settings
#   HPCTRAIN_BUILD_TARGET  build only this target (quickstart: hpctrain); default: everything
set -euo pipefail
cd "$(dirname "$0")/.."
HPCTRAIN_HOME=${HPCTRAIN_HOME:-$HOME/.cache/hpctrain}
HPCTRAIN_TORCH=${HPCTRAIN_TORCH:-2.15.0}
VENV=$HPCTRAIN_HOME/venv

APT_PKGS=(build-essential cmake ninja-build ccache pkg-config git
  libopenmpi-dev openmpi-bin libhdf5-dev libgtest-dev libcli11-dev nlohmann-json3-dev
  libtomlplusplus-dev libxxhash-dev zlib1g-dev libprotobuf-dev protobuf-compiler
  python3-venv python3-h5py python3-numpy
  python3-matplotlib  # perf/plot.py (PNG plots, Agg backend)
  strace  # tests/e2e/test_ckpt_fsync.sh counts a checkpoint's fsyncs from outside
  dataset-fashion-mnist
  slurmctld slurmd slurm-client munge  # for the Slurm e2e tests' throwaway localhost cluster
  iproute2 procps iputils-ping)  # ip/tc and ping for tests/cluster's network-namespace hosts; pgrep for launch/local.sh
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[setup] installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ -z "${CMAKE_PREFIX_PATH:-}" ]; then
  if ! "$VENV/bin/python" -c "import torch,sys; sys.exit(torch.__version__.split('+')[0] != '$HPCTRAIN_TORCH')" 2>/dev/null; then
    echo "[setup] installing torch==$HPCTRAIN_TORCH into $VENV (once; reused by every clone)"
    mkdir -p "$HPCTRAIN_HOME"
    [ -x "$VENV/bin/python" ] || /usr/bin/python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check "torch==$HPCTRAIN_TORCH" numpy
  fi
  # Python-side test packages in the pinned wheel's Python: h5py loads merged checkpoints back
  # into Python modules (TorchScript tests); tensorboard reads our event files
  # (EventAccumulator); safetensors loads `ckpt merge --out x.safetensors`.
  for pkg in h5py tensorboard safetensors; do
    "$VENV/bin/python" -c "import $pkg" 2>/dev/null ||
      "$VENV/bin/pip" install -q --disable-pip-version-check "$pkg"
  done
  TORCH_PREFIX=$("$VENV/bin/python" -c "import torch.utils; print(torch.utils.cmake_prefix_path)")
  PY=$VENV/bin/python
else
  TORCH_PREFIX=$CMAKE_PREFIX_PATH
  PY=/usr/bin/python3
fi

export CCACHE_DIR=${CCACHE_DIR:-$HPCTRAIN_HOME/ccache}
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${HPCTRAIN_BUILD_TYPE:-RelWithDebInfo}" \
    -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DPython3_EXECUTABLE="$PY" ${HPCTRAIN_CMAKE_ARGS:-}
fi
cmake --build build -j "$(nproc)" ${HPCTRAIN_BUILD_TARGET:+--target "$HPCTRAIN_BUILD_TARGET"}
