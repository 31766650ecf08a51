#!/usr/bin/env bash
# A real data straggler (#20), slow from outside the process: the data set sits on an ext4
# loop device, rank 1 runs in a blkio cgroup whose reads from that device are throttled
# (blkio.throttle.read_bps_device, cgroup v1; io.max on cgroup v2), and a helper keeps
# evicting the file from the page cache (posix_fadvise DONTNEED), so every read really goes to
# the device. Rank 0 reads the same device unthrottled. The report names rank 1, cause data.
# Needs root, a free loop device and a writable blkio/io cgroup; else "SKIPPED: ...".
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] && command -v losetup >/dev/null && command -v mkfs.ext4 >/dev/null || { echo "SKIPPED: needs root, losetup, mkfs.ext4"; exit 0; }
LOOP="" MNT="$WORK/mnt" CG="" EVICT=""
cleanup() {
  [ -n "$EVICT" ] && kill "$EVICT" 2>/dev/null || true
  mountpoint -q "$MNT" && umount "$MNT" || true
  [ -n "$LOOP" ] && losetup -d "$LOOP" || true
  [ -n "$CG" ] && rmdir "$CG" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
truncate -s 64M "$WORK/disk.img"
LOOP=$(losetup -f --show "$WORK/disk.img") || { echo "SKIPPED: no free loop device"; exit 0; }
mkfs.ext4 -q -F "$LOOP" && mkdir -p "$MNT" && mount "$LOOP" "$MNT" || { echo "SKIPPED: cannot mount a loop device here"; exit 0; }
"$BIN" data synthetic --out "$MNT/d" --n 4096 --height 28 --width 28 --classes 10 >/dev/null
DEV=$(lsblk -dno MAJ:MIN "$LOOP" | tr -d ' ')
if [ -d /sys/fs/cgroup/blkio ]; then
  CG=/sys/fs/cgroup/blkio/hpctrain-straggler-$$
  mkdir "$CG" && echo "$DEV 4194304" >"$CG/blkio.throttle.read_bps_device" || { echo "SKIPPED: blkio throttle not writable"; exit 0; }
elif grep -qw io /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  CG=/sys/fs/cgroup/hpctrain-straggler-$$
  mkdir "$CG" && echo "$DEV rbps=4194304" >"$CG/io.max" || { echo "SKIPPED: io.max not writable"; exit 0; }
else
  echo "SKIPPED: no blkio/io cgroup controller"; exit 0
fi
/usr/bin/python3 - "$MNT/d/train.h5" <<'PY' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
while True:  # keep the data set out of the page cache: every read goes to the device
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    time.sleep(0.02)
PY
EVICT=$!
# Rank 1 joins the throttled cgroup before it starts (its threads inherit it).
cat >"$WORK/rank.sh" <<SH
#!/bin/sh
[ "\$OMPI_COMM_WORLD_RANK" = 1 ] && echo \$\$ >"$CG/cgroup.procs"
exec "$BIN" "\$@"
SH
chmod +x "$WORK/rank.sh"
# --data-in-memory-mb 0: every batch is read from the (throttled) file, as for a data set too
# large to hold in memory; a small one would otherwise be read whole at the first batch.
timeout 120 "$MPIEXEC" -np 2 "${MPIFLAGS[@]}" "$WORK/rank.sh" train --model mlp --data "$MNT/d" --epochs 1 \
  --data-in-memory-mb 0 --max-steps 24 --batch-size 32 --log-every 8 --metrics "$WORK/m.jsonl" >"$WORK/out.txt" 2>"$WORK/err.txt" ||
  { grep -m3 hpctrain "$WORK/err.txt"; tail -3 "$WORK/out.txt"; fail "train exited non-zero"; }
/usr/bin/python3 "$(dirname "$0")/straggler_check.py" "$WORK/m.jsonl" "$WORK/out.txt" --rank 1 --cause data --within 2
