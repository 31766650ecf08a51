#!/usr/bin/env bash
# `hpctrain data`: synthetic and Fashion-MNIST files are readable by h5py with the contract's
# layout; a bad source gives a one-line error, exit != 0 and no output files.
source "$(dirname "$0")/lib.sh"
: "${HPCTRAIN_BIN:?}"
# Debian's python3 has python3-h5py (a pyenv python on PATH may not).
PY=/usr/bin/python3

"$HPCTRAIN_BIN" data synthetic --out "$WORK/syn" --n 40 --test-n 12 --channels 3 --height 4 --width 5 --classes 4 --seed 2
"$PY" - "$WORK/syn" <<'PY'
import sys, h5py, numpy as np
d = sys.argv[1]
with h5py.File(d + "/train.h5") as f, h5py.File(d + "/test.h5") as t:
    assert f["images"].shape == (40, 3, 4, 5) and f["images"].dtype == np.uint8, f["images"]
    assert f["labels"].shape == (40,) and f["labels"].dtype == np.int64
    assert t["images"].shape == (12, 3, 4, 5)
    assert sorted(set(f["labels"][:].tolist())) == [0, 1, 2, 3]
    x = f["images"][:].astype(np.float64) / 255
    assert np.allclose(f.attrs["mean"], x.mean(axis=(0, 2, 3)), atol=1e-6), f.attrs["mean"]
    assert np.allclose(f.attrs["std"], x.std(axis=(0, 2, 3)), atol=1e-6), f.attrs["std"]
    assert (t.attrs["mean"] == f.attrs["mean"]).all()
    assert int(f.attrs["num_classes"]) == 4 and len(f.attrs["class_names"]) == 4
print("checked: synthetic layout, dtypes, label set, mean/std against numpy")
PY

# A bad source: the error names the file, exit != 0, nothing written.
set +e
msg=$("$HPCTRAIN_BIN" data fashion-mnist --src "$WORK/nowhere" --out "$WORK/fm_bad" 2>&1 >/dev/null)
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "missing source exited 0"
[ "$(printf '%s\n' "$msg" | wc -l)" -eq 1 ] || fail "error is not one line: $msg"
[[ "$msg" == *"train-images-idx3-ubyte.gz: cannot open"* ]] || fail "error does not name the file: $msg"
[ ! -e "$WORK/fm_bad/train.h5" ] || fail "output written despite the error"
echo "checked: missing source -> rc=$rc, one line: $msg"

src=/usr/share/datasets/fashion-mnist
if [ -f "$src/train-images-idx3-ubyte.gz" ]; then
  "$HPCTRAIN_BIN" data fashion-mnist --out "$WORK/fm"
  "$PY" - "$WORK/fm" "$src" <<'PY'
import sys, gzip, h5py, numpy as np
d, src = sys.argv[1], sys.argv[2]
raw = np.frombuffer(gzip.open(src + "/t10k-images-idx3-ubyte.gz").read()[16:], np.uint8).reshape(-1, 1, 28, 28)
lab = np.frombuffer(gzip.open(src + "/t10k-labels-idx1-ubyte.gz").read()[8:], np.uint8)
with h5py.File(d + "/test.h5") as t, h5py.File(d + "/train.h5") as f:
    assert (t["images"][:] == raw).all() and (t["labels"][:] == lab).all()
    assert f["images"].shape == (60000, 1, 28, 28)
print("checked: fashion-mnist test.h5 equals the idx files byte for byte; train is 60000x1x28x28")
PY
else
  echo "skipped fashion-mnist conversion: $src not installed"
fi
echo "PASS"
