#!/usr/bin/env bash
# Idempotent set-up for hpctrain on Debian 12 (run as root, or with sudo available):
#   1. Debian packages (MPI, HDF5, GoogleTest, CLI11, json, toml++, xxhash, protobuf, SentencePiece,
#      ccache, data sets)
#   2. the pinned LibTorch (PyPI torch wheel) and tensorboard (for tests) in a venv outside the
#      checkout, reused by clones/CI
#   3. configure + build into ./build
# Environment:
#   HPCTRAIN_HOME      where the venv lives (default ~/.cache/hpctrain)
#   HPCTRAIN_TORCH     pinned torch version (default below)
#   CMAKE_PREFIX_PATH  set it to use another LibTorch >= 2.0 instead of the wheel (and any
#                      other prefixes: site modules, a private install)
#   HPCTRAIN_BUILD_TYPE, HPCTRAIN_CMAKE_ARGS  extra build settings
#   HPCTRAIN_BUILD_TARGET  build only this target (quickstart: hpctrain); default: everything
# Options:
#   --no-install   a machine without root or apt (a cluster login node with site modules):
#                  install nothing; check what the build needs as the build itself looks it up
#                  (cmake/deps-check), print one line per missing piece with the CMake variable
#                  that points at an existing install, exit 1 if anything is missing; else
#                  configure and build. LibTorch: CMAKE_PREFIX_PATH, else the venv's torch when
#                  there is one.
#   --configure-only  stop after configuring build/ (then: cmake --build build [--target T])
# A build directory configured against another LibTorch is reconfigured (CMakeLists.txt then
# finds the new one), not silently kept.
set -euo pipefail
cd "$(dirname "$0")/.."
NO_INSTALL=0 CONFIGURE_ONLY=0
for a in "$@"; do
  case "$a" in
    --no-install) NO_INSTALL=1 ;;
    --configure-only) CONFIGURE_ONLY=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: unknown option $a (--no-install, --configure-only, --help)" >&2; exit 2 ;;
  esac
done
HPCTRAIN_HOME=${HPCTRAIN_HOME:-$HOME/.cache/hpctrain}
HPCTRAIN_TORCH=${HPCTRAIN_TORCH:-2.15.0}
VENV=$HPCTRAIN_HOME/venv
GEN=(-G Ninja)
command -v ninja >/dev/null || GEN=()  # CMake's default generator (make) without ninja

if [ "$NO_INSTALL" = 1 ]; then
  command -v cmake >/dev/null || { echo "[setup] missing cmake >= 3.22: load a cmake module or put one on PATH (pip install --user cmake)"; exit 1; }
  TORCH_PREFIX=${CMAKE_PREFIX_PATH:-}
  TORCH_PREFIX=${TORCH_PREFIX//:/;}  # the environment's list separator is ':', CMake's ';'
  PY=/usr/bin/python3
  if [ -z "$TORCH_PREFIX" ] && [ -x "$VENV/bin/python" ] &&
     TP=$("$VENV/bin/python" -c "import torch.utils; print(torch.utils.cmake_prefix_path)" 2>/dev/null); then
    TORCH_PREFIX=$TP PY=$VENV/bin/python
  fi
  probe=$(mktemp -d "${TMPDIR:-/tmp}/hpctrain-deps.XXXXXX")
  set +e
  # shellcheck disable=SC2086
  cmake -S cmake/deps-check -B "$probe" -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" ${HPCTRAIN_CMAKE_ARGS:-} >"$probe.log" 2>&1
  rc=$?
  set -e
  sed -n 's/^-- hpctrain-deps: MISSING \(.*\)/[setup] missing \1/p' "$probe.log"
  if [ $rc != 0 ]; then
    grep -q "hpctrain-deps: MISSING" "$probe.log" || { tail -20 "$probe.log"; echo "[setup] the dependency check failed (log above)"; }
    rm -rf "$probe" "$probe.log"
    echo "[setup] --no-install: nothing installed; set the variables above (CMAKE_PREFIX_PATH=... or HPCTRAIN_CMAKE_ARGS=\"-DVAR=...\") and run again"
    exit 1
  fi
  rm -rf "$probe" "$probe.log"
  echo "[setup] --no-install: every dependency found"
fi

APT_PKGS=(build-essential cmake ninja-build ccache pkg-config git
  libopenmpi-dev openmpi-bin libhdf5-dev libgtest-dev libcli11-dev nlohmann-json3-dev
  libtomlplusplus-dev libxxhash-dev zlib1g-dev libprotobuf-dev protobuf-compiler
  python3-venv python3-h5py python3-numpy
  python3-matplotlib  # perf/plot.py (PNG plots, Agg backend)
  strace  # tests/e2e/test_ckpt_fsync.sh counts a checkpoint's fsyncs from outside
  dataset-fashion-mnist
  fortunes  # data/prepare.sh's English text corpus for language models (data/fortunes)
  libsentencepiece-dev sentencepiece  # `data text --tokenizer M.model`; spm_train makes the tests' models
  slurmctld slurmd slurm-client munge  # for the Slurm e2e tests' throwaway localhost cluster
  iproute2 procps iputils-ping)  # ip/tc and ping for tests/cluster's network-namespace hosts; pgrep for launch/local.sh
missing=()
if [ "$NO_INSTALL" = 0 ]; then
  for p in "${APT_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
fi
if ((${#missing[@]})); then
  echo "[setup] installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$NO_INSTALL" = 1 ]; then
  :  # TORCH_PREFIX and PY from the check above
elif [ -z "${CMAKE_PREFIX_PATH:-}" ]; then
  if ! "$VENV/bin/python" -c "import torch,sys; sys.exit(torch.__version__.split('+')[0] != '$HPCTRAIN_TORCH')" 2>/dev/null; then
    echo "[setup] installing torch==$HPCTRAIN_TORCH into $VENV (once; reused by every clone)"
    mkdir -p "$HPCTRAIN_HOME"
    [ -x "$VENV/bin/python" ] || /usr/bin/python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check "torch==$HPCTRAIN_TORCH" numpy
  fi
  # Python-side test packages in the pinned wheel's Python: h5py loads merged checkpoints back
  # into Python modules (TorchScript tests); tensorboard reads our event files
  # (EventAccumulator); safetensors loads `ckpt merge --out x.safetensors`; transformers (pinned)
  # loads `ckpt merge --format hf` and saves the GPT-2 that `train --init-from` reads.
  for pkg in h5py tensorboard safetensors; do
    "$VENV/bin/python" -c "import $pkg" 2>/dev/null ||
      "$VENV/bin/pip" install -q --disable-pip-version-check "$pkg"
  done
  HPCTRAIN_TRANSFORMERS=5.23.0
  "$VENV/bin/python" -c "import transformers,sys; sys.exit(transformers.__version__ != '$HPCTRAIN_TRANSFORMERS')" 2>/dev/null ||
    "$VENV/bin/pip" install -q --disable-pip-version-check "transformers==$HPCTRAIN_TRANSFORMERS"
  TORCH_PREFIX=$("$VENV/bin/python" -c "import torch.utils; print(torch.utils.cmake_prefix_path)")
  PY=$VENV/bin/python
else
  TORCH_PREFIX=${CMAKE_PREFIX_PATH//:/;}
  PY=/usr/bin/python3
fi

export CCACHE_DIR=${CCACHE_DIR:-$HPCTRAIN_HOME/ccache}
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
cached_prefix=$(sed -n 's/^CMAKE_PREFIX_PATH:[A-Z]*=//p' build/CMakeCache.txt 2>/dev/null || true)
if [ ! -f build/CMakeCache.txt ]; then
  # shellcheck disable=SC2086
  cmake -S . -B build "${GEN[@]}" -DCMAKE_BUILD_TYPE="${HPCTRAIN_BUILD_TYPE:-RelWithDebInfo}" \
    -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DPython3_EXECUTABLE="$PY" ${HPCTRAIN_CMAKE_ARGS:-}
elif [ "$cached_prefix" != "$TORCH_PREFIX" ]; then
  echo "[setup] build/ was configured with CMAKE_PREFIX_PATH=$cached_prefix; reconfiguring with $TORCH_PREFIX"
  # shellcheck disable=SC2086
  cmake -S . -B build -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DPython3_EXECUTABLE="$PY" ${HPCTRAIN_CMAKE_ARGS:-}
fi
if [ "$CONFIGURE_ONLY" = 1 ]; then echo "[setup] configured build/ (--configure-only): cmake --build build -j $(nproc)"; exit 0; fi
cmake --build build -j "$(nproc)" ${HPCTRAIN_BUILD_TARGET:+--target "$HPCTRAIN_BUILD_TARGET"}
