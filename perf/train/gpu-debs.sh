#!/usr/bin/env bash
# Download (here, on a Debian 12 machine with apt) the Debian packages a GPU machine without a
# package registry needs to build and run hpctrain: MPI, HDF5, protobuf, GoogleTest, the header
# libraries, pkg-config, and the runtime libraries they pull in. ~25 MB of .debs.
#   bash perf/train/gpu-debs.sh [DIR]      (default .gpu/debs; add /.gpu/ to .git/info/exclude)
# On the GPU machine, perf/train/gpu-prefix.sh unpacks them into a prefix (no root needed) and
# builds there against that machine's own LibTorch.
set -euo pipefail
DIR=${1:-.gpu/debs}
mkdir -p "$DIR"
# Runtime libraries: what ldd lists for hpctrain, mpirun, orted and Open MPI's components on
# Debian 12 (gpu-prefix.sh drops those the GPU machine already has, except MPI's own stack).
RT=(libopenmpi3 libpmix2 libhwloc15 libevent-2.1-7 libevent-core-2.1-7 libevent-pthreads-2.1-7
  libfabric1 libucx0 libibverbs1 ibverbs-providers librdmacm1 libpsm2-2 libpsm-infinipath1
  libnl-3-200 libnl-route-3-200 libnuma1 libmunge2 libltdl7
  libhdf5-103-1 libhdf5-hl-100 libsz2 libaec0 libcurl4 libnghttp2-14 librtmp1 libssh2-1 libpsl5
  libldap-2.5-0 libsasl2-2 libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libbrotli1
  libgnutls30 libhogweed6 libnettle8 libgmp10 libidn2-0 libunistring2 libp11-kit0 libtasn1-6
  libffi8 libssl3 libzstd1 libudev1 libuuid1 libatomic1
  libprotobuf32 libprotobuf-lite32 libprotoc32 libsentencepiece0 libtomlplusplus3 libxxhash0)
DEV=(libopenmpi-dev openmpi-bin openmpi-common libhdf5-dev libaec-dev libgtest-dev libgmock-dev
  libcli11-dev nlohmann-json3-dev libtomlplusplus-dev libxxhash-dev zlib1g-dev libprotobuf-dev
  protobuf-compiler libsentencepiece-dev pkgconf pkgconf-bin libpkgconf3)
cd "$DIR"
apt-get download "${RT[@]}" "${DEV[@]}"
echo "[gpu-debs] $(ls *.deb | wc -l) packages, $(du -sh . | cut -f1) in $DIR"
