"""The bad-input battery's fixtures (see bad_inputs.py), written once: good data, checkpoints
and metrics that every case must leave intact, crafted bad inputs, and tmpfs disks."""
from bad_input_harness import *  # noqa: F401,F403  (A, W, KEEP, BAD, run, must, ...)

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


# Token data (language models): a good byte stream and crafted bad ones.
TOK = f"{KEEP}/tokens"      # good: tokens uint8, vocab_size 256, tokenizer bytes


def write_tokens(dirname, tokens, attrs=None, name="train.h5", test=True):
    os.makedirs(dirname, exist_ok=True)
    with h5py.File(f"{dirname}/{name}", "w") as f:
        f["tokens"] = tokens
        for k, v in (attrs if attrs is not None else {"vocab_size": 256, "tokenizer": "bytes"}).items():
            f.attrs[k] = v
    if test:
        with h5py.File(f"{dirname}/test.h5", "w") as f:
            f["tokens"] = rng.integers(0, 256, 300).astype(np.uint8)
            f.attrs["vocab_size"] = 256
    return dirname


toks = rng.integers(0, 256, 2000)
write_tokens(TOK, toks.astype(np.uint8))
write_tokens(f"{BAD}/tok_big_id", np.where(np.arange(2000) == 77, 300, toks).astype(np.uint16))
write_tokens(f"{BAD}/tok_float", toks.astype(np.float32))
write_tokens(f"{BAD}/tok_no_vocab", toks.astype(np.uint8), attrs={"tokenizer": "bytes"})
write_tokens(f"{BAD}/tok_vocab_mix", toks.astype(np.uint8), name="train-00000.h5")
write_tokens(f"{BAD}/tok_vocab_mix", toks.astype(np.uint16), attrs={"vocab_size": 512}, name="train-00001.h5",
             test=False)
write_tokens(f"{BAD}/tok_neg", np.where(np.arange(2000) == 55, -1, toks).astype(np.int16))
write_tokens(f"{BAD}/tok_2d", toks.astype(np.uint8).reshape(100, 20))
write_tokens(f"{BAD}/tok_empty", np.zeros(0, np.uint8))
write_tokens(f"{BAD}/tok_test_vocab", toks.astype(np.uint8), test=False)
with h5py.File(f"{BAD}/tok_test_vocab/test.h5", "w") as f:
    f["tokens"] = rng.integers(0, 512, 300).astype(np.uint16)
    f.attrs["vocab_size"] = 512
# A stream over the in-memory budget (--data-in-memory-mb 0) is streamed once at start-up: a bad
# id deep in it (a window a short run never reads) is found before anything is written.
write_tokens(f"{BAD}/tok_big_id_late", np.where(np.arange(2000) == 1900, 300, toks).astype(np.uint16))
# --validate-tokens lazy: two windows of 16 (33 tokens), the second with id 300, so exactly one of
# two ranks reads it in its first batch and ends the run with exit code 2.
write_tokens(f"{BAD}/tok_lazy", np.where(np.arange(33) == 20, 300, toks[:33]).astype(np.uint16))
# A small GPT checkpoint on the byte stream (vocab 256, tokenizer bytes) for eval and generate,
# and a copy whose metadata names another tokenizer.
GCK = f"{KEEP}/gpt_ck"
must(["train", "--model", "gpt", "--model-config", "n_layer=1,n_head=1,n_embd=8", "--seq-len", "16", "--data", TOK,
      "--batch-size", "8", "--max-steps", "1", "--ckpt-dir", GCK, "--ckpt-async=false"], np=1)
gpt2_tok = f"{BAD}/gpt2_tok/step-00000001"
shutil.copytree(f"{GCK}/step-00000001", gpt2_tok)
man = json.load(open(f"{gpt2_tok}/manifest.json"))
man["meta"]["tokenizer"] = "gpt2"
json.dump(man, open(f"{gpt2_tok}/manifest.json", "w"))
