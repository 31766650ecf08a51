#!/usr/bin/env bash
# Checkpoints when /dev/shm (where a shard's HDF5 layout is built, ckpt/h5_image.h) is read-only
# or nearly full, as in a container with a small /dev/shm: a private mount namespace gets a
# read-only, a 4 KiB and a 1 MiB tmpfs on /dev/shm in turn (from outside the process). Every
# checkpoint is built in /tmp instead, verifies, and the process exits 0 (a failed H5Fclose on
# a full scratch file crashed HDF5 at exit); nothing is left in /dev/shm. Plain and compressed.
# Open MPI itself keeps its shared memory out of /dev/shm here (one process, btl self).
source "$(dirname "$0")/lib.sh"
command -v unshare >/dev/null && unshare --mount true 2>/dev/null || { echo "SKIPPED: no mount namespaces"; exit 0; }
"$BIN" data synthetic --out "$WORK/d" --n 256 --height 8 --width 8 --classes 4 >/dev/null
for opt in ro size=4k size=1m; do
  for comp in false true; do
    ck="$WORK/ck-$opt-$comp"
    unshare --mount --propagation private sh -c '
      mount -t tmpfs -o "$1" tmpfs /dev/shm || exit 77
      OMPI_MCA_btl=self OMPI_MCA_shmem_mmap_backing_file_base_dir=/tmp "$2" train --model mlp --data "$3" \
        --batch-size 32 --max-steps 6 --ckpt-every 2 --ckpt-compress "$5" --ckpt-dir "$4" >"$4.out" 2>&1
      rc=$?
      left=$(ls -A /dev/shm)
      [ -z "$left" ] || { echo "left in /dev/shm: $left"; exit 3; }
      exit $rc' sh "$opt" "$BIN" "$WORK/d" "$ck" "$comp"
    rc=$?
    [ $rc = 77 ] && { echo "SKIPPED: cannot mount a tmpfs"; exit 0; }
    [ $rc = 0 ] || { tail -5 "$ck.out"; fail "/dev/shm $opt, compress $comp: train exited $rc"; }
    "$BIN" ckpt verify "$ck" >/dev/null || fail "/dev/shm $opt, compress $comp: checkpoint does not verify"
    [ "$(ls -d "$ck"/step-* | wc -l)" -ge 3 ] || fail "/dev/shm $opt, compress $comp: checkpoints missing"
    ok "/dev/shm $opt, --ckpt-compress $comp: 3 checkpoints built without it, verified, exit 0"
  done
done
