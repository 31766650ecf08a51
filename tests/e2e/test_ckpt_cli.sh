#!/usr/bin/env bash
# hpctrain ckpt inspect|verify|merge on a real checkpoint (written by unit_ckpt's fixture):
# inspect shows the step and tensors; verify passes, then fails naming shard + tensor after a
# flipped byte, and gives its own error for a missing shard and a missing manifest; merge
# writes an HDF5 file h5py reads with equal values, and a .pt file. Also under mpiexec -n 2.
source "$(dirname "$0")/lib.sh"
: "${HPCTRAIN_BIN:?}" "${HPCTRAIN_BUILD_DIR:?}"
UNIT=$(find "$HPCTRAIN_BUILD_DIR" -name unit_ckpt -type f -perm -u+x | head -1)
HPCTRAIN_CKPT_FIXTURE_DIR=$WORK/ck "$UNIT" --gtest_also_run_disabled_tests \
  --gtest_filter=Fixture.DISABLED_WriteSampleCheckpoint >/dev/null
STEP=$WORK/ck/step-00000400

out=$("$HPCTRAIN_BIN" ckpt inspect "$WORK/ck")
grep -q "step 400, epoch 3, world size at save 2" <<<"$out" || fail "inspect header: $out"
grep -q "optim/fc.weight.exp_avg *bfloat16" <<<"$out" || fail "inspect table: $out"
echo "ok: inspect shows step, epoch, world size and the tensor table"

"$HPCTRAIN_BIN" ckpt verify "$STEP" | grep -q "^OK .*13 tensors in 2 shard(s)" || fail "verify good"
"$HPCTRAIN_BIN" ckpt verify "$WORK/ck/latest" | grep -q "^OK $STEP: " || fail "verify ROOT/latest"
"$HPCTRAIN_BIN" ckpt inspect "$WORK/ck/latest" | grep -q "shard-00001-of-00002.h5  [0-9]* bytes  xxh3 [0-9a-f]\{16\}" || fail "inspect shard table"
${MPIEXEC:-mpiexec} -n 2 ${MPIEXEC_FLAGS:-} "$HPCTRAIN_BIN" ckpt verify "$WORK/ck" >/dev/null || fail "verify under mpiexec -n 2"
echo "ok: verify passes (1 and 2 ranks; step dir, root and ROOT/latest)"

"$HPCTRAIN_BIN" ckpt merge "$WORK/ck" --out "$WORK/m.h5" --full >/dev/null
/usr/bin/python3 - "$WORK/m.h5" "$STEP" <<'PY' || fail "h5py comparison"
import sys, h5py, numpy as np, glob
m = h5py.File(sys.argv[1], "r")
n = 0
for shard in sorted(glob.glob(sys.argv[2] + "/shard-*.h5")):
    s = h5py.File(shard, "r")
    def cmp(name, o):
        global n
        if isinstance(o, h5py.Dataset):
            assert np.array_equal(o[()], m[name][()]), name
            assert m[name].attrs["dtype"] == o.attrs["dtype"], name
            n += 1
    s.visititems(cmp)
assert n == 13, n
assert m["model/features.0.weight"].shape == (8, 1, 3, 3)
print("h5py: merged file equals the shards for", n, "tensors")
PY
"$HPCTRAIN_BIN" ckpt merge "$WORK/ck" --out "$WORK/m.pt" --format pt >/dev/null
[ -s "$WORK/m.pt" ] || fail "merge pt"
echo "ok: merge h5 (h5py-equal) and pt"

cp -r "$STEP" "$WORK/bad"
/usr/bin/python3 - "$WORK/bad/shard-00000-of-00002.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    off = f["model/fc.weight"].id.get_offset()
with open(sys.argv[1], "r+b") as f:
    f.seek(off + 5); b = f.read(1); f.seek(off + 5); f.write(bytes([b[0] ^ 0xFF]))
PY
if err=$("$HPCTRAIN_BIN" ckpt verify "$WORK/bad" 2>&1); then fail "verify passed a flipped byte"; fi
grep -q "shard-00000-of-00002.h5: file checksum mismatch (.*): tensor model/fc.weight: checksum mismatch" <<<"$err" || fail "flip msg: $err"
echo "ok: flipped byte -> $err"

cp -r "$STEP" "$WORK/noshard"; rm "$WORK/noshard/shard-00001-of-00002.h5"
if err=$("$HPCTRAIN_BIN" ckpt verify "$WORK/noshard" 2>&1); then fail "verify passed a missing shard"; fi
grep -q "shard file shard-00001-of-00002.h5 is missing" <<<"$err" || fail "missing shard msg: $err"
echo "ok: missing shard -> $err"

cp -r "$STEP" "$WORK/step-00000001"; rm "$WORK/step-00000001/manifest.json"
if err=$("$HPCTRAIN_BIN" ckpt verify "$WORK/step-00000001" 2>&1); then fail "verify passed a missing manifest"; fi
grep -q "no manifest.json in" <<<"$err" || fail "missing manifest msg: $err"
echo "ok: missing manifest -> $err"
echo "PASS test_ckpt_cli"
