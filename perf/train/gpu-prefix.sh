#!/usr/bin/env bash
# Build hpctrain on a GPU machine that has CUDA, CMake, ninja, a compiler and a Python with a
# CUDA torch but no package registry, from the Debian 12 .debs that perf/train/gpu-debs.sh
# downloaded elsewhere. No root needed: the packages are unpacked into PREFIX (dpkg -x), their
# pkg-config files and Open MPI (OPAL_PREFIX) are pointed there, and base libraries the machine
# already has (libssl, libcurl, krb5, ...) are taken from the machine, not from the .debs.
#   source perf/train/gpu-prefix.sh DEBDIR [TARGET...]    (default targets: what gpu-check.sh runs)
# Leaves ./build configured against the machine's torch (torch.utils.cmake_prefix_path) and the
# environment (PATH, LD_LIBRARY_PATH, OPAL_PREFIX, PKG_CONFIG_PATH) set in the calling shell.
# Returns non-zero (and says which step) when unpacking, configuring or building fails.
_gp_main() {
  local debs=$1; shift
  local targets=("$@")
  ((${#targets[@]})) || targets=(hpctrain unit_ddp unit_dataset unit_train mpi_comm ddp_bench)
  local root=${HPCTRAIN_DEPS_ROOT:-/tmp/hpctrain-deps}
  local P=$root/usr L=$root/usr/lib/x86_64-linux-gnu
  rm -rf "$root" && mkdir -p "$root" || return 1
  local f b
  for f in "$debs"/*.deb; do dpkg -x "$f" "$root" || { echo "[gpu-prefix] cannot unpack $f"; return 1; }; done
  # Base libraries: the machine's own copy wins (drop our soname link where ldconfig knows it);
  # Open MPI's stack and the libraries hpctrain links directly always come from the .debs.
  local own='^lib(mpi|open-|mca_|ompitrace|oshmem|hdf5|protobuf|protoc|sentencepiece|xxhash|tomlplusplus|pmix|hwloc|event|fabric|uc[pstm]|sz\.|aec|psm|rdmacm|ibverbs|munge|numa|nl-|ltdl)'
  local have
  have=$(ldconfig -p | awk 'NR > 1 {print $1}' | sort -u)
  for f in "$L"/lib*.so.*; do
    b=${f##*/}
    [[ $b =~ $own ]] && continue
    grep -qxF "$b" <<<"$have" && rm -f "$f"
  done
  sed -i "s#^prefix=/usr\$#prefix=$P#" "$L"/pkgconfig/*.pc "$P"/share/pkgconfig/*.pc
  ln -sf mpicc.openmpi "$P/bin/mpicc"
  ln -sf mpirun.openmpi "$P/bin/mpirun"
  ln -sf mpirun.openmpi "$P/bin/mpiexec"
  export OPAL_PREFIX=$P PATH=$P/bin:$PATH
  export LD_LIBRARY_PATH=$L:$L/openmpi/lib:$L/hdf5/serial${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PKG_CONFIG_PATH=$L/pkgconfig:$P/share/pkgconfig
  local py torch
  py=${PYTHON:-$(command -v python3)}
  torch=$("$py" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)') || { echo "[gpu-prefix] $py has no torch"; return 1; }
  # h5cc is not in the .debs (Debian installs it through alternatives): name HDF5 directly.
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$torch;$P" \
    -DPython3_EXECUTABLE="$py" -DMPI_C_COMPILER="$P/bin/mpicc" -DMPIEXEC_EXECUTABLE="$P/bin/mpiexec" \
    -DPKG_CONFIG_EXECUTABLE="$P/bin/pkgconf" -DHDF5_C_INCLUDE_DIR="$P/include/hdf5/serial" \
    -DHDF5_C_LIBRARY_hdf5="$L/hdf5/serial/libhdf5.so" ${HPCTRAIN_CMAKE_ARGS:-} >build-configure.log 2>&1 ||
    { tail -30 build-configure.log; echo "[gpu-prefix] configure failed (build-configure.log)"; return 1; }
  cmake --build build -j "$(nproc)" --target "${targets[@]}" -- -k 0 >build.log 2>&1 ||
    { grep -B2 -A12 -m3 "error" build.log | head -60; echo "[gpu-prefix] build failed (build.log)"; return 1; }
  echo "[gpu-prefix] built ${targets[*]} against $torch"
}
_gp_main "$@"
