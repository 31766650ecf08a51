#!/usr/bin/python3
"""The bad-input battery (issue "No silent hangs, no lost work"): one table of cases, each run
through the real CLI under mpiexec with 2 ranks. Every case asserts
  1. the exit code (!= 0; the documented code: 2 for bad input every rank sees, 1 for an error
     only one rank can see),
  2. exactly one line on stderr that starts with "hpctrain:" and carries "error:", containing
     every expected keyword (Open MPI's own abort banner may follow; no stack trace, no
     "terminate called"); a case whose documented outcome is a warning (exit 0) has exactly
     one "hpctrain: warning:" line instead,
  3. mpiexec returned before its timeout and no process of this battery is left running (the
     binary runs under a per-battery symlink name, so `pgrep -f` finds only ours),
  4. every file written before the case (data, a good checkpoint + `latest`, a metrics file,
     configs) still has its SHA-256 and mtime; the disk cases also re-verify the previous
     checkpoint with `hpctrain ckpt verify` and check that `latest` still names it.
Usage: bad_inputs.py --bin BIN --mpiexec MPIEXEC --work DIR [-- MPIEXEC_FLAGS...]
Uses h5py/numpy from Debian's python3 (run with /usr/bin/python3)."""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import h5py
import numpy as np

CASE_TIMEOUT_S = 90
ap = argparse.ArgumentParser()
ap.add_argument("--bin", required=True)
ap.add_argument("--mpiexec", default="mpiexec")
ap.add_argument("--work", required=True)
ap.add_argument("--only", default="", help="comma-separated case names")
ap.add_argument("mpiflags", nargs="*")
A = ap.parse_args()
W = A.work
KEEP = f"{W}/keep"     # files that must survive every case
BAD = f"{W}/bad"       # crafted bad inputs
# The binary under a name unique to this battery: `pgrep -f TAG` then finds only our ranks.
TAG = f"{W}/bin/hpctrain-battery-{os.getpid()}"
os.makedirs(os.path.dirname(TAG), exist_ok=True)
os.symlink(os.path.abspath(A.bin), TAG)
MPI = [A.mpiexec, "-np", "2"] + A.mpiflags


def run(args, env=None, np=2, timeout=CASE_TIMEOUT_S):
    e = dict(os.environ, **(env or {}))
    cmd = ["timeout", "-k", "5", str(timeout)] + MPI[:1] + ["-np", str(np)] + MPI[3:]
    for k in (env or {}):
        cmd += ["-x", k]
    t0 = time.time()
    p = subprocess.run(cmd + [TAG] + args, env=e, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr, time.time() - t0


def must(args, **kw):
    rc, out, err, _ = run(args, **kw)
    if rc != 0:
        sys.exit(f"FAIL: fixture command {' '.join(args)} exited {rc}:\n{out[-2000:]}\n{err[-2000:]}")
    return out


# ---------------------------------------------------------------- fixtures (written once)
D = f"{KEEP}/data"          # good 1x8x8, 4 classes
D12 = f"{KEEP}/data12"      # good 1x12x12: same mlp, other input size -> shape mismatches
CK = f"{KEEP}/ck"           # good mlp checkpoint root (step-00000002 + latest)
STEP = f"{CK}/step-00000002"
METRICS = f"{KEEP}/metrics.jsonl"
must(["data", "synthetic", "--out", D, "--n", "64", "--test-n", "32", "--classes", "4",
      "--height", "8", "--width", "8", "--seed", "1"], np=1)
must(["data", "synthetic", "--out", D12, "--n", "64", "--test-n", "32", "--classes", "4",
      "--height", "12", "--width", "12", "--seed", "1"], np=1)
must(["train", "--model", "mlp", "--data", D, "--batch-size", "8", "--max-steps", "2", "--lr", "0.01",
      "--momentum", "0.9", "--ckpt-dir", CK, "--ckpt-async=false", "--metrics", METRICS, "--log-every", "1"])
assert open(f"{CK}/latest").read().strip() == "step-00000002", "fixture: latest"
SHARD = sorted(f for f in os.listdir(STEP) if f.startswith("shard-"))[0]
# Model plugins (tests/plugins, built next to the binary's tests/): faulty models, one library
# that cannot be loaded, one that registers nothing; PCK is a good checkpoint of a plugin model.
PLUGINS = os.path.join(os.environ.get("HPCTRAIN_BUILD_DIR", os.path.dirname(os.path.abspath(A.bin))), "tests")
TLIB = os.path.realpath(f"{PLUGINS}/libtest_models.so")
PCK = f"{KEEP}/plugin_ck"
must(["train", "--model-lib", TLIB, "--model", "env_width", "--data", D, "--batch-size", "8", "--max-steps", "2",
      "--lr", "0.01", "--ckpt-dir", PCK, "--ckpt-async=false"])
CK_OTHER = f"{KEEP}/ck-other"  # the same mlp from another seed: same names and shapes, other values
must(["train", "--model", "mlp", "--data", D, "--batch-size", "8", "--max-steps", "2", "--lr", "0.01",
      "--momentum", "0.9", "--seed", "9", "--ckpt-dir", CK_OTHER, "--ckpt-async=false", "--log-every", "1"])
CK_CNN = f"{KEEP}/ck-cnn"      # a cnn: BatchNorm's int64 num_batches_tracked among its tensors
must(["train", "--model", "cnn", "--data", D, "--batch-size", "8", "--max-steps", "1", "--lr", "0.01",
      "--ckpt-dir", CK_CNN, "--ckpt-async=false", "--log-every", "1"], np=1)


def write_h5(dirname, images=None, labels=None, attrs=None, test_from=D):
    """A data dir whose train.h5 holds the given datasets (None: left out); test.h5 is good."""
    os.makedirs(dirname, exist_ok=True)
    with h5py.File(f"{dirname}/train.h5", "w") as f:
        if images is not None:
            f["images"] = images
        if labels is not None:
            f["labels"] = labels
        for k, v in (attrs or {}).items():
            f.attrs[k] = v
    shutil.copy(f"{test_from}/test.h5", f"{dirname}/test.h5")
    return dirname


rng = np.random.default_rng(0)
img = rng.integers(0, 255, (64, 1, 8, 8), dtype=np.uint8)
lab = rng.integers(0, 4, 64).astype(np.int64)
os.makedirs(f"{BAD}/not_hdf5", exist_ok=True)
with open(f"{BAD}/not_hdf5/train.h5", "w") as f:
    f.write("images,labels\n1,2\n")
shutil.copy(f"{D}/test.h5", f"{BAD}/not_hdf5/test.h5")
write_h5(f"{BAD}/no_labels", images=img)
write_h5(f"{BAD}/wrong_rank", images=lab.astype(np.uint8), labels=lab)
write_h5(f"{BAD}/int16", images=img.astype(np.int16), labels=lab)
write_h5(f"{BAD}/float_labels", images=img, labels=lab.astype(np.float32))
write_h5(f"{BAD}/label_range", images=img, labels=np.where(np.arange(64) == 5, 7, lab),
         attrs={"num_classes": 4})
write_h5(f"{BAD}/neg_label", images=img, labels=np.where(np.arange(64) == 9, -1, lab))
write_h5(f"{BAD}/count", images=img, labels=lab[:60])
os.makedirs(f"{BAD}/truncated", exist_ok=True)
shutil.copy(f"{D}/test.h5", f"{BAD}/truncated/test.h5")
with open(f"{D}/train.h5", "rb") as f:
    whole = f.read()
with open(f"{BAD}/truncated/train.h5", "wb") as f:
    f.write(whole[: len(whole) // 2])
os.makedirs(f"{BAD}/no_test", exist_ok=True)
shutil.copy(f"{D}/train.h5", f"{BAD}/no_test/train.h5")


def step_copy(name):
    dst = f"{BAD}/{name}/step-00000002"
    shutil.copytree(STEP, dst)
    return dst


no_manifest = step_copy("no_manifest")
os.remove(f"{no_manifest}/manifest.json")
no_shard = step_copy("no_shard")
os.remove(f"{no_shard}/{SHARD}")
flipped = step_copy("flipped")
with h5py.File(f"{flipped}/{SHARD}", "r") as f:
    names = []
    f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) and n.startswith("model/") else None)
    FLIP_TENSOR = max(names, key=lambda n: f[n].size)  # the biggest weight: surely contiguous
    off = f[FLIP_TENSOR].id.get_offset()
with open(f"{flipped}/{SHARD}", "r+b") as f:
    f.seek(off + 7)
    b = f.read(1)
    f.seek(off + 7)
    f.write(bytes([b[0] ^ 0x40]))
trunc_shard = step_copy("trunc_shard")
size = os.path.getsize(f"{trunc_shard}/{SHARD}")
with open(f"{trunc_shard}/{SHARD}", "r+b") as f:
    f.truncate(size // 2)
swapped = step_copy("swapped")  # a shard swapped in from another checkpoint: same names, other data
with h5py.File(f"{swapped}/{SHARD}", "r+") as f, h5py.File(f"{CK_OTHER}/step-00000002/{SHARD}", "r") as o:
    # Written in place, so the layout and size stay (the other run may order its tensors
    # differently, which alone would change the file's size).
    f.visititems(lambda n, d: d.write_direct(o[n][()]) if isinstance(d, h5py.Dataset) else None)
assert os.path.getsize(f"{swapped}/{SHARD}") == os.path.getsize(f"{STEP}/{SHARD}"), "fixture: swapped size"
bad_sum = step_copy("bad_sum")  # the manifest's checksum of the shard file is not 16 hex digits
man = json.load(open(f"{bad_sum}/manifest.json"))
man["shards"][0]["xxh3"] = "not-a-checksum"
json.dump(man, open(f"{bad_sum}/manifest.json", "w"))
other_model = step_copy("other_model")  # an mlp checkpoint whose metadata says cnn
man = json.load(open(f"{other_model}/manifest.json"))
man["meta"]["model"] = "cnn"
json.dump(man, open(f"{other_model}/manifest.json", "w"))

CFG = f"{KEEP}/cfg"
os.makedirs(CFG, exist_ok=True)
toml = {
    "unknown_key": f'data = "{D}"\nbatchsize = 8\n',
    "wrong_type": f'data = "{D}"\nbatch_size = "eight"\n',
    "neg_batch": f'data = "{D}"\nbatch_size = -4\n',
    "neg_lr": f'data = "{D}"\nlr = -0.1\n',
    "zero_epochs": f'data = "{D}"\nepochs = 0\n',
    "invalid": f'data = "{D}"\nbatch_size = = 8\n',
    "float_for_int": f'data = "{D}"\nepochs = 1.5\n',
}
for k, v in toml.items():
    with open(f"{CFG}/{k}.toml", "w") as f:
        f.write(v)
with open(f"{KEEP}/not_a_dir.txt", "w") as f:
    f.write("a regular file: nothing can be created below it, not even by root\n")


# ---------------------------------------------------------------- protection: sha256 + mtime
def snapshot(root):
    snap = {}
    for dp, _, fs in os.walk(root):
        for fn in fs:
            p = os.path.join(dp, fn)
            st = os.stat(p)
            snap[p] = (hashlib.sha256(open(p, "rb").read()).hexdigest(), st.st_mtime_ns, st.st_size)
    return snap


def damaged(before):
    bad = []
    for p, (h, m, s) in before.items():
        if not os.path.exists(p):
            bad.append(f"{p} was removed")
            continue
        st = os.stat(p)
        if st.st_mtime_ns != m or st.st_size != s:
            bad.append(f"{p} was rewritten (mtime/size changed)")
        elif hashlib.sha256(open(p, "rb").read()).hexdigest() != h:
            bad.append(f"{p} changed content")
    return bad


def verify_ckpt(root, step_name):
    """The previous checkpoint still verifies and `latest` still names it."""
    latest = open(f"{root}/latest").read().strip()
    if latest != step_name:
        return f"latest is {latest!r}, expected {step_name!r}"
    rc, out, err, _ = run(["ckpt", "verify", root], np=1)
    if rc != 0 or not out.startswith("OK "):
        return f"ckpt verify {root} failed: {out}{err}"
    return None


# ---------------------------------------------------------------- disk fixtures (tmpfs mounts)
MOUNTS = []


def try_mount(path, opts):
    os.makedirs(path, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", path], capture_output=True)
    if r.returncode == 0:
        MOUNTS.append(path)
        return True
    return False


def prepare_full_disk():
    """A tmpfs that holds the good checkpoint but has no room for another one."""
    root = f"{W}/full"
    need = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(CK) for f in fs)
    if not try_mount(root, f"size={need + 256 * 1024}"):
        return None
    shutil.copytree(CK, f"{root}/ck")
    free = shutil.disk_usage(root).free
    with open(f"{root}/filler", "wb") as f:  # leave ~48 KiB: far less than a checkpoint
        f.write(b"\0" * max(free - 48 * 1024, 0))
    return f"{root}/ck"


def prepare_readonly_disk():
    root = f"{W}/ro"
    if not try_mount(root, "size=4m"):
        return None
    shutil.copytree(CK, f"{root}/ck")
    if subprocess.run(["mount", "-o", "remount,ro", root], capture_output=True).returncode != 0:
        return None
    return f"{root}/ck"


def fresh_ckpt(name):
    dst = f"{W}/{name}/ck"
    shutil.copytree(CK, dst)
    return dst


# ---------------------------------------------------------------- the table
def train(*extra, data=D, ckpt=CK, metrics=METRICS):
    """A train command that would overwrite the kept metrics file and resume from the kept
    checkpoint if it got past validation."""
    opts = {"--model": "mlp", "--batch-size": "8", "--max-steps": "2", "--lr": "0.01",
            "--data": data, "--ckpt-dir": ckpt, "--metrics": metrics}
    rest = list(extra)
    while rest and rest[0] in opts:  # a case's own value replaces the default (no repeats)
        opts[rest[0]] = rest[1]
        rest = rest[2:]
    a = ["train"]
    for k, v in opts.items():
        if v:
            a += [k, v]
    return a + rest


def ev(ckpt, data=D, *extra):
    return ["eval", "--ckpt", ckpt, "--data", data, "--device", "cpu"] + list(extra)


# name, argv (or a function returning (argv, disk_root_or_None)), keywords, env, exit code
CASES = [
    # config file and flags
    ("config_unknown_key", train("--config", f"{CFG}/unknown_key.toml"), ["unknown_key.toml", "batchsize", "not a known key"], {}, 2),
    ("config_wrong_type", train("--config", f"{CFG}/wrong_type.toml"), ["batch_size", "must be an integer"], {}, 2),
    ("config_float_for_int", train("--config", f"{CFG}/float_for_int.toml"), ["epochs", "must be an integer"], {}, 2),
    ("config_negative_batch", train("--config", f"{CFG}/neg_batch.toml"), ["batch_size = -4", "out of range"], {}, 2),
    ("config_negative_lr", train("--config", f"{CFG}/neg_lr.toml"), ["lr = -0.1", "out of range", "> 0"], {}, 2),
    ("config_zero_epochs", train("--config", f"{CFG}/zero_epochs.toml"), ["epochs = 0", "out of range"], {}, 2),
    ("config_missing_file", train("--config", f"{W}/nope.toml"), ["config file", "nope.toml", "does not exist"], {}, 2),
    ("config_invalid_toml", train("--config", f"{CFG}/invalid.toml"), ["invalid.toml", "not valid TOML", "line 2"], {}, 2),
    ("flag_zero_batch", train("--batch-size", "0"), ["--batch-size = 0", "out of range"], {}, 2),
    ("flag_zero_lr", train("--lr", "0"), ["--lr = 0", "out of range"], {}, 2),
    ("flag_negative_epochs", train("--epochs", "-3"), ["--epochs = -3", "out of range"], {}, 2),
    ("flag_wrong_type", train("--batch-size", "eight"), ["--batch-size", "expects an integer", "eight"], {}, 2),
    ("flag_bad_choice", train("--optimizer", "adam"), ["--optimizer", "adam", "not allowed", "sgd|adamw"], {}, 2),
    ("flag_grad_accum_indivisible", train("--grad-accum", "3"), ["--batch-size 8", "not divisible", "--grad-accum 3"], {}, 2),
    ("env_bad_collective_timeout", train(), ["HPCTRAIN_COLLECTIVE_TIMEOUT", "abc"], {"HPCTRAIN_COLLECTIVE_TIMEOUT": "abc"}, 2),
    # command line
    ("cli_unknown_flag", train("--bogus-flag", "1"), ["--bogus-flag", "hpctrain --help"], {}, 2),
    ("cli_unknown_subcommand", ["frobnicate"], ["frobnicate", "hpctrain --help"], {}, 2),
    ("cli_missing_required", ["eval", "--data", D], ["--ckpt", "required"], {}, 2),
    ("cli_no_data_dir", train(data=None), ["no data directory", "--data"], {}, 2),
    # data files
    ("data_missing_dir", train(data=f"{W}/no-such-dir"), ["no-such-dir/train.h5", "does not exist"], {}, 2),
    ("data_not_hdf5", train(data=f"{BAD}/not_hdf5"), ["not_hdf5/train.h5", "not an HDF5 file"], {}, 2),
    ("data_missing_dataset", train(data=f"{BAD}/no_labels"), ["no_labels/train.h5", "'labels' not found"], {}, 2),
    ("data_wrong_rank", train(data=f"{BAD}/wrong_rank"), ["'images'", "shape [64]", "expected [N, d1..dk]"], {}, 2),
    ("data_unsupported_dtype", train(data=f"{BAD}/int16"), ["'images'", "int16", "supported: uint8, float16, float32"], {}, 2),
    ("data_float_labels", train(data=f"{BAD}/float_labels"), ["'labels'", "float32", "must be integers"], {}, 2),
    ("data_label_out_of_range", train(data=f"{BAD}/label_range"), ["label 7 at index 5", "outside [0, 4)"], {}, 2),
    ("data_negative_label", train(data=f"{BAD}/neg_label"), ["label -1 at index 9", "outside"], {}, 2),
    ("data_count_mismatch", train(data=f"{BAD}/count"), ["'labels' has 60 entries", "'images' has 64 samples"], {}, 2),
    ("data_truncated_file", train(data=f"{BAD}/truncated"), ["truncated/train.h5", "truncated"], {}, 2),
    ("data_missing_test_file", train(data=f"{BAD}/no_test"), ["no_test/test.h5", "does not exist"], {}, 2),
    ("eval_data_missing", ev(CK, f"{W}/no-such-dir"), ["no-such-dir/test.h5", "does not exist"], {}, 2),
    # checkpoints
    ("ckpt_missing_manifest", train("--resume", no_manifest), ["--resume", "no manifest.json"], {}, 2),
    ("ckpt_missing_shard", train("--resume", no_shard), ["--resume", f"shard file {SHARD} is missing"], {}, 2),
    ("ckpt_checksum_mismatch", train("--resume", flipped), [SHARD, FLIP_TENSOR, "checksum mismatch"], {}, 2),
    ("ckpt_truncated_shard", train("--resume", trunc_shard), ["trunc_shard", SHARD], {}, 2),
    ("ckpt_resume_other_model", train("--model", "cnn", "--resume", STEP), ["does not match the model", "missing keys [classifier.2.bias", "unexpected keys [features.3.bias", "shape mismatches [classifier.0.bias: saved [4] vs model [256]"], {}, 2),
    ("ckpt_resume_shape_mismatch", train("--resume", STEP, data=D12), ["does not match the model", "shape mismatches [", "saved [512,64] vs model [512,144]"], {}, 2),
    ("ckpt_eval_other_model", ev(other_model), ["does not match the model", "missing keys [classifier.2.bias", "unexpected keys [features.3.bias"], {}, 2),
    ("ckpt_eval_shape_mismatch", ev(CK, D12), ["takes samples of shape [1,8,8]", "[1,12,12]"], {}, 2),
    ("ckpt_resume_not_checkpoint", train("--resume", D), ["--resume", "neither a checkpoint step directory nor a checkpoint root"], {}, 2),
    ("ckpt_resume_missing_path", train("--resume", f"{W}/no-such-ckpt"), ["--resume", "no-such-ckpt", "does not exist"], {}, 2),
    ("ckpt_eval_data_file_as_ckpt", ev(f"{D}/train.h5"), ["train.h5", "tensor images", "no dtype attribute"], {}, 2),
    ("ckpt_verify_checksum", ["ckpt", "verify", flipped], [SHARD, "file checksum mismatch", FLIP_TENSOR], {}, 2),
    ("ckpt_verify_truncated_shard", ["ckpt", "verify", trunc_shard], [SHARD, "bytes, the manifest says", "truncated"], {}, 2),
    ("ckpt_verify_swapped_shard", ["ckpt", "verify", swapped], [f"swapped/step-00000002/{SHARD}", "file checksum mismatch"], {}, 2),
    ("ckpt_resume_swapped_shard", train("--resume", swapped), ["--resume", SHARD, "file checksum mismatch"], {}, 2),
    ("ckpt_verify_malformed_shard_checksum", ["ckpt", "verify", bad_sum], ["bad_sum/step-00000002/manifest.json", SHARD, "malformed checksum", "not-a-checksum", "16 hex digits"], {}, 2),
    ("ckpt_eval_malformed_shard_checksum", ev(bad_sum), ["manifest.json", "malformed checksum"], {}, 2),
    ("ckpt_merge_out_dir_missing", ["ckpt", "merge", CK, "--out", f"{W}/no-such-dir/w.pt"], ["--out", "no-such-dir/w.pt", "does not exist"], {}, 2),
    ("ckpt_merge_unknown_extension", ["ckpt", "merge", CK, "--out", f"{W}/w.onnx"], ["w.onnx", "cannot tell the format", "'.onnx'", ".safetensors"], {}, 2),
    ("ckpt_merge_format_contradicts", ["ckpt", "merge", CK, "--out", f"{W}/w.pt", "--format", "safetensors"], ["--format safetensors contradicts", "w.pt"], {}, 2),
    ("ckpt_merge_full_not_h5", ["ckpt", "merge", CK, "--out", f"{W}/w.safetensors", "--full"], ["--full", "needs an .h5 output"], {}, 2),
    # a warning, not an error: the counters stay int64 and the merge succeeds (exit 0)
    ("ckpt_merge_dtype_non_float", ["ckpt", "merge", f"{CK_CNN}/latest", "--out", f"{W}/cnn-fp16.safetensors", "--dtype", "fp16"],
     ["warning:", "--dtype fp16", "not floating point", "kept as they are", "features.1.num_batches_tracked (int64)"], {}, 0),
    # model plugins (--model-lib) and models that do not fit the data
    ("plugin_missing", train("--model", "x", "--model-lib", f"{W}/nope.so"), ["--model-lib", "nope.so", "does not exist"], {}, 2),
    ("plugin_not_a_library", train("--model", "x", "--model-lib", f"{D}/train.h5"), ["--model-lib", "train.h5", "cannot be loaded", "invalid ELF header"], {}, 2),
    ("plugin_undefined_symbol", train("--model", "x", "--model-lib", f"{PLUGINS}/libundefined_symbol.so"),
     ["cannot be loaded", "undefined symbol: hpctrain_test_symbol_nobody_defines"], {}, 2),
    ("plugin_registers_nothing", train("--model", "x", "--model-lib", f"{PLUGINS}/libno_models.so"), ["libno_models.so", "registers no model", "HPCTRAIN_REGISTER_MODEL"], {}, 2),
    ("plugin_unknown_name", train("--model", "nosuch", "--model-lib", TLIB),
     ['unknown model "nosuch"', "registers wrong_classes, wrong_input, env_width, stray_parameter"], {}, 2),
    ("model_unknown_name", train("--model", "vgg"), ['unknown model "vgg"', "zoo: mlp, cnn, resnet", "--model-lib"], {}, 2),
    ("model_output_wrong_classes", train("--model", "wrong_classes", "--model-lib", TLIB),
     ["model output [8,7] does not fit targets [8] with 4 classes", "cross_entropy needs [8,4]"], {}, 2),
    ("model_fails_on_first_batch", train("--model", "wrong_input", "--model-lib", TLIB),
     ["wrong_input fails on a batch of this data", "input [8,1,8,8]", "targets [8]", "mat1 and mat2"], {}, 2),
    ("model_parameter_off_device", train("--model", "stray_parameter", "--model-lib", TLIB),
     ["tensor stray is on meta", "the run's device is cpu"], {}, 2),
    ("plugin_eval_without_lib", ev(PCK), ["env_width", f"from the plugin {TLIB}", "pass --model-lib"], {}, 2),
    ("plugin_resume_without_lib", train("--model", "env_width", "--resume", PCK), ['unknown model "env_width"', f"pass --model-lib {TLIB}"], {}, 2),
    # launch
    ("launch_cuda_without_gpu", train("--device", "cuda"), ["--device cuda needs a CUDA GPU", "0 visible GPU(s)", "--device cpu"], {}, 2),
    ("launch_cuda_index", train("--device", "cuda:3"), ["--device cuda:3", "0 visible GPU(s)"], {}, 2),
    ("launch_eval_cuda_without_gpu", ["eval", "--ckpt", CK, "--data", D, "--device", "cuda"], ["needs a CUDA GPU"], {}, 2),
    ("launch_unknown_device", train("--device", "tpu"), ["--device tpu", "unknown device"], {}, 2),
    ("launch_thread_level", train(), ["thread level 1", "MPI_THREAD_MULTIPLE"],
     {"LD_PRELOAD": f"{PLUGINS}/libpreload_thread_level.so", "PRELOAD_MPI_THREAD_LEVEL": "1"}, 2),
    # disk
    ("disk_ckpt_dir_under_file", train(ckpt=f"{KEEP}/not_a_dir.txt/ck"), ["cannot prepare", "not_a_dir.txt/ck"], {}, 2),
    ("disk_metrics_under_file", train(metrics=f"{KEEP}/not_a_dir.txt/m.jsonl"), ["metrics file", "not_a_dir.txt/m.jsonl"], {}, 2),
    ("disk_write_fault", lambda: (train("--max-steps", "4", "--ckpt-async=false", ckpt=fresh_ckpt("fault"), metrics=None), f"{W}/fault/ck"),
     ["checkpoint step-00000004 failed", "rank 0", "step-00000004.tmp/shard-", "Input/output error"],
     {"LD_PRELOAD": f"{PLUGINS}/libpreload_write_eio.so", "PRELOAD_WRITE_EIO_PATH": f"{W}/fault/ck/step-00000004.tmp/shard-"}, 2),
    ("disk_full_tmpfs", lambda: (lambda ck: (train("--max-steps", "4", ckpt=ck, metrics=None), ck) if ck else None)(prepare_full_disk()),
     ["checkpoint step-00000004 failed", "rank 0", "No space left on device"], {}, 2),
    ("disk_readonly_ckpt_dir", lambda: (lambda ck: (train("--max-steps", "4", ckpt=ck, metrics=None), ck) if ck else None)(prepare_readonly_disk()),
     ["checkpoint step-00000004 failed", "cannot create", "step-00000004.tmp", "Read-only file system"], {}, 2),
]


def check_case(name, argv, keys, env, want_rc, disk_root):
    protect = [KEEP, BAD] + ([disk_root] if disk_root else [])
    before = {}
    for r in protect:
        before.update(snapshot(r))
    rc, out, err, wall = run(argv, env=env)
    problems = []
    if rc in (124, 137):
        problems.append(f"timed out after {CASE_TIMEOUT_S}s (a hang)")
    elif rc != want_rc:
        problems.append(f"exit code {rc}, expected {want_rc}")
    lines = err.splitlines()
    level = "warning:" if want_rc == 0 else "error:"
    ours = [l for l in lines if l.startswith("hpctrain:") and level in l]
    if len(ours) != 1:
        problems.append(f"{len(ours)} 'hpctrain: ... {level}' lines on stderr, expected exactly 1")
    if want_rc == 0 and any("error:" in l for l in lines):
        problems.append("an error line in a case that should only warn")
    else:
        missing = [k for k in keys if k not in ours[0]]
        if missing:
            problems.append(f"error line lacks {missing}")
    for junk in ("terminate called", "Exception raised from", "frame #", "Traceback", "what():",
                 "HDF5-DIAG"):
        if junk in err:
            problems.append(f"stderr contains {junk!r} (a crash or a multi-line error)")
    for _ in range(20):  # ranks may take a moment to be reaped after mpiexec returns
        left = subprocess.run(["pgrep", "-f", TAG], capture_output=True, text=True).stdout.split()
        if not left:
            break
        time.sleep(0.25)
    if left:
        problems.append(f"processes still running: {left}")
        subprocess.run(["pkill", "-9", "-f", TAG])
    problems += damaged(before)
    if disk_root:
        v = verify_ckpt(disk_root, "step-00000002")
        if v:
            problems.append(v)
    return problems, rc, (ours[0] if len(ours) == 1 else "\n".join(lines[-5:])), wall


def main():
    only = set(filter(None, A.only.split(",")))
    passed, failed, skipped = [], [], []
    t_all = time.time()
    try:
        for name, argv, keys, env, want_rc in CASES:
            if only and name not in only:
                continue
            disk_root = None
            if callable(argv):
                made = argv()
                if made is None:
                    skipped.append(name)
                    print(f"SKIP {name}: cannot mount a tmpfs here (needs CAP_SYS_ADMIN)")
                    continue
                argv, disk_root = made
            problems, rc, line, wall = check_case(name, argv, keys, env, want_rc, disk_root)
            if problems:
                failed.append(name)
                print(f"FAIL {name} ({wall:.1f}s, rc {rc}): {'; '.join(problems)}\n     stderr: {line}")
            else:
                passed.append(name)
                print(f"ok   {name} ({wall:.1f}s, rc {rc}): {line}")
            sys.stdout.flush()
    finally:
        for m in MOUNTS:
            subprocess.run(["umount", m])
    print(f"bad-input battery: {len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped "
          f"in {time.time() - t_all:.0f}s")
    if failed:
        print("failed: " + ", ".join(failed))
        sys.exit(1)


main()
