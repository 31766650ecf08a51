#!/usr/bin/env bash
# e2e: every byte of a checkpoint is verified, through the CLI. A cnn checkpoint's shard gets
# one flipped byte at a time at positions chosen from its own layout (h5py: the superblock and
# root group before the first dataset's data; the gaps between datasets' data, where object
# headers, heaps and B-trees sit, including the one between the model and optim groups; the
# tail; and tensor data). Every byte of HDF5 metadata is flipped in unit_ckpt (Integrity.*). Each flip fails `hpctrain ckpt verify`
# (exit 2, one line naming the shard file, valid UTF-8 without control bytes). With the newest
# checkpoint damaged in its HDF5 metadata, `train --resume auto` warns and resumes from the
# previous complete checkpoint; `--resume ROOT/latest` refuses it naming the file.
source "$(dirname "$0")/lib.sh"
D="$WORK/d"
run_np 1 data synthetic --out "$D" --n 256 --test-n 64 --classes 4 --height 12 --width 12 --seed 2 >/dev/null
common=(--model cnn --data "$D" --batch-size 16 --lr 0.02 --momentum 0.9 --seed 1 --log-every 1000 --ckpt-async false)
run_np 1 train "${common[@]}" --max-steps 8 --ckpt-every 4 --ckpt-dir "$WORK/ck" >"$WORK/t1.txt" 2>&1 || { tail "$WORK/t1.txt"; fail "train"; }
STEP="$WORK/ck/step-00000008"
SHARD="$STEP/shard-00000-of-00001.h5"
[ -f "$SHARD" ] || fail "no shard $SHARD"

/usr/bin/python3 - "$SHARD" "$WORK/positions.txt" <<'PY'
import sys, h5py, os, random
path, out = sys.argv[1], sys.argv[2]
size = os.path.getsize(path)
regions = []  # (offset, nbytes, name) of each dataset's data
with h5py.File(path, "r") as f:
    f.visititems(lambda n, o: regions.append((o.id.get_offset(), o.id.get_storage_size(), n))
                 if isinstance(o, h5py.Dataset) and o.id.get_offset() is not None else None)
regions.sort()
data = [r for r in regions if r[1] > 0]
meta = []                                   # (position, what)
meta += [(p, "superblock, root group") for p in range(0, min(8192, data[0][0]), 128)]
gaps = [(a + n, b, f"gap {name} -> {nxt}") for (a, n, name), (b, _, nxt) in zip(data, data[1:]) if b > a + n]
for a, b, what in gaps[:: max(1, len(gaps) // 20)]:   # ~20 gaps (object headers, heaps), spread over the file
    meta += [(a, what), ((a + b) // 2, what)]
model_end = max(a + n for a, n, name in data if name.startswith("model/"))
optim_start = min(a for a, n, name in data if name.startswith("optim/"))
if optim_start > model_end:                 # the gap between the model and optim groups
    meta += [(p, "between model/ and optim/") for p in (model_end, (model_end + optim_start) // 2, optim_start - 1)]
last = data[-1][0] + data[-1][1]
meta += [(p, "tail") for p in range(last, size, max(1, (size - last) // 4))]
random.seed(0)
tensor = [(a + random.randrange(n), f"data {name}") for a, n, name in random.sample(data, min(8, len(data)))]
with open(out, "w") as o:
    for p, what in meta + tensor:
        o.write(f"{p}\t{what}\n")
print(f"{len(meta)} metadata and {len(tensor)} tensor-data positions of a {size}-byte shard "
      f"({len(data)} datasets)")
PY

n=0
while IFS=$'\t' read -r pos what; do
  cp "$SHARD" "$WORK/orig.h5"
  /usr/bin/python3 -c "import sys; f = open(sys.argv[1], 'r+b'); f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0xff]))" "$SHARD" "$pos"
  set +e
  "$BIN" ckpt verify "$WORK/ck/latest" >"$WORK/v.out" 2>"$WORK/v.err"
  rc=$?
  set -e
  cp "$WORK/orig.h5" "$SHARD"
  [ $rc = 2 ] || { cat "$WORK/v.out" "$WORK/v.err"; fail "byte $pos ($what): verify exited $rc"; }
  [ "$(grep -c '^hpctrain' "$WORK/v.err")" = 1 ] || { cat "$WORK/v.err"; fail "byte $pos ($what): not one error line"; }
  grep -q "^hpctrain: error: ckpt verify: .*$SHARD: file checksum mismatch" "$WORK/v.err" ||
    fail "byte $pos ($what): error does not name the shard: $(cat "$WORK/v.err")"
  /usr/bin/python3 -c "
import sys
b = open(sys.argv[1], 'rb').read()
b.decode('utf-8')
assert not any(c < 0x20 and c != 0x0a for c in b), 'control byte in error output'" "$WORK/v.err" ||
    fail "byte $pos ($what): error output is not clean UTF-8: $(cat -v "$WORK/v.err")"
  n=$((n + 1))
done <"$WORK/positions.txt"
"$BIN" ckpt verify "$WORK/ck/latest" >/dev/null || fail "restored shard does not verify"
ok "$n single-byte flips (HDF5 metadata and tensor data): every one fails ckpt verify naming $(basename "$SHARD")"

# Damage the newest checkpoint's HDF5 metadata (a byte in the first KiB): resume falls back.
/usr/bin/python3 -c "import sys; f = open(sys.argv[1], 'r+b'); f.seek(600); b = f.read(1); f.seek(600); f.write(bytes([b[0] ^ 0x01]))" "$SHARD"
run_np 1 train "${common[@]}" --max-steps 12 --ckpt-every 4 --ckpt-dir "$WORK/ck" --resume auto >"$WORK/t2.txt" 2>&1 ||
  { tail "$WORK/t2.txt"; fail "resume auto"; }
grep -q "WARNING: skipping checkpoint $STEP: $SHARD: file checksum mismatch" "$WORK/t2.txt" || { cat "$WORK/t2.txt"; fail "no skip warning"; }
grep -q "resumed from $WORK/ck/step-00000004 at step 4" "$WORK/t2.txt" || { grep -i resum "$WORK/t2.txt"; fail "did not resume from step 4"; }
ok "damaged newest checkpoint: --resume auto warned and resumed from step 4"

mkdir -p "$WORK/r2" && cp -r "$WORK/ck/step-00000004" "$WORK/r2/" && echo step-00000004 >"$WORK/r2/latest"
/usr/bin/python3 -c "import sys; f = open(sys.argv[1], 'r+b'); f.seek(700); b = f.read(1); f.seek(700); f.write(bytes([b[0] ^ 0x01]))" "$WORK/r2/step-00000004/shard-00000-of-00001.h5"
set +e
run_np 1 train "${common[@]}" --max-steps 12 --ckpt-dir "$WORK/r3" --resume "$WORK/r2/latest" >"$WORK/t3.out" 2>"$WORK/t3.err"
rc=$?
set -e
[ $rc = 2 ] || { cat "$WORK/t3.err"; fail "--resume ROOT/latest of a damaged checkpoint exited $rc"; }
grep -q "^hpctrain: error: .*--resume $WORK/r2/latest: $WORK/r2/step-00000004/shard-00000-of-00001.h5: file checksum mismatch" "$WORK/t3.err" ||
  fail "--resume ROOT/latest: $(cat "$WORK/t3.err")"
ok "--resume ROOT/latest of a damaged checkpoint: exit 2 naming the shard"
echo "PASS test_ckpt_integrity"
