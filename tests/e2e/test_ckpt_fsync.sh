#!/usr/bin/env bash
# e2e: a checkpoint costs one fsync per shard file plus the four its atomic commit needs
# (manifest.json, latest.tmp, the step's tmp dir, the root once for both renames) and one more
# when it prunes an old checkpoint. Counted from outside with strace (fsync and fdatasync of
# every thread and process, with the path of each descriptor) on real training runs: sync and
# async writer, several shards (--ckpt-shard-mb 1), --ckpt-keep 1, and 2 ranks with
# --ckpt-writers all (each rank writes its own shards).
source "$(dirname "$0")/lib.sh"
command -v strace >/dev/null || fail "strace is not installed (bash launch/setup.sh installs it)"
D="$WORK/d"
run_np 1 data synthetic --out "$D" --n 128 --test-n 32 --classes 4 --height 28 --width 28 --seed 2 >/dev/null
common=(--model cnn --data "$D" --batch-size 8 --lr 0.02 --momentum 0.9 --seed 1 --log-every 1000
        --max-steps 6 --ckpt-every 2 --ckpt-shard-mb 1)

check() {  # check NAME LOG ROOT KEEP: per checkpoint, the fsyncs by path
  /usr/bin/python3 - "$@" <<'PY'
import collections, json, os, re, sys
name, log, root, keep = sys.argv[1], sys.argv[2], os.path.realpath(sys.argv[3]), int(sys.argv[4])
pat = re.compile(r'^\d+ +(fsync|fdatasync)\(\d+<([^>]*)>')  # also '<unfinished ...>' lines
per = collections.OrderedDict()   # step -> Counter(kind)
current, other = None, []
for line in open(log):
    m = pat.match(line)
    if not m:
        continue
    path = m.group(2)
    if not (path == root or path.startswith(root + "/")):
        other.append(path)        # not the checkpoint's (none expected from the trainer here)
        continue
    rel = path[len(root):].lstrip("/")
    s = re.match(r'step-(\d{8})\.tmp(?:/(.*))?$', rel)
    if s:
        current = int(s.group(1))
        kind = "tmp dir" if s.group(2) is None else ("manifest" if s.group(2) == "manifest.json" else
                                                     "shard" if s.group(2).startswith("shard-") else "?" + s.group(2))
    elif rel == "latest.tmp":
        kind = "latest.tmp"
    elif rel == "":
        kind = "root dir"
    else:
        kind = "?" + rel
    per.setdefault(current, collections.Counter())[kind] += 1
bad = []
steps = sorted(k for k in per if k is not None)
# Every checkpoint of a run has the same tensors and shard cap, so the last one's shard count.
latest = open(f"{root}/latest").read().strip()
shards = len(json.load(open(f"{root}/{latest}/manifest.json"))["shards"])
if shards < 2:
    bad.append(f"expected several shards, got {shards}")
for i, step in enumerate(steps):
    c = per[step]
    prunes = 1 if keep and i >= keep else 0
    want = {"shard": shards, "manifest": 1, "latest.tmp": 1, "tmp dir": 1, "root dir": 1 + prunes}
    if dict(c) != want:
        bad.append(f"step {step}: {dict(c)} != {want}")
    print(f"{name}: step {step}: {sum(c.values())} fsyncs = {shards} shards + manifest + latest.tmp + tmp dir + root"
          + (" + root after pruning" if prunes else ""))
if None in per:
    bad.append(f"fsyncs before any checkpoint: {dict(per[None])}")
if len(steps) != 3:
    bad.append(f"expected 3 checkpoints, saw {steps}")
if bad:
    sys.exit(f"{name}: " + "; ".join(bad) + (f"; other fsyncs: {other}" if other else ""))
PY
}

for mode in sync async; do
  ck="$WORK/ck-$mode"
  strace -f -qq --seccomp-bpf -e trace=fsync,fdatasync -y -o "$WORK/$mode.strace" \
    "$BIN" train "${common[@]}" --ckpt-async $([ $mode = async ] && echo true || echo false) --ckpt-dir "$ck" \
    >"$WORK/$mode.txt" 2>&1 || { tail "$WORK/$mode.txt"; fail "train ($mode) under strace"; }
  check "$mode" "$WORK/$mode.strace" "$ck" 0 || fail "$mode writer fsyncs"
done
ok "sync and async writer: shards + 4 fsyncs per checkpoint"

ck="$WORK/ck-keep"
strace -f -qq --seccomp-bpf -e trace=fsync,fdatasync -y -o "$WORK/keep.strace" \
  "$BIN" train "${common[@]}" --ckpt-keep 1 --ckpt-async false --ckpt-dir "$ck" >"$WORK/keep.txt" 2>&1 ||
  { tail "$WORK/keep.txt"; fail "train --ckpt-keep 1"; }
check keep "$WORK/keep.strace" "$ck" 1 || fail "--ckpt-keep 1 fsyncs"
ok "--ckpt-keep 1: one more root fsync per pruning checkpoint"

ck="$WORK/ck-all"
strace -f -qq --seccomp-bpf -e trace=fsync,fdatasync -y -o "$WORK/all.strace" \
  "$MPIEXEC" -np 2 "${MPIFLAGS[@]}" "$BIN" train "${common[@]}" --ckpt-writers all --ckpt-dir "$ck" \
  >"$WORK/all.txt" 2>&1 || { tail "$WORK/all.txt"; fail "train --ckpt-writers all (2 ranks)"; }
check all-writers "$WORK/all.strace" "$ck" 0 || fail "--ckpt-writers all fsyncs"
"$BIN" ckpt verify "$ck" >/dev/null || fail "the all-writers checkpoint does not verify"
ok "2 ranks, --ckpt-writers all: shards + 4 fsyncs per checkpoint in all; it verifies"
echo "PASS test_ckpt_fsync"
