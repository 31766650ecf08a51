"""Reads a --tensorboard directory with the real TensorBoard reader and checks it against the
metrics JSONL of the runs that wrote it.

    tb_check.py TBDIR RUN.jsonl[:MAXSTEP] ... [--files N] [--ranks R] [--upto STEP]

Each RUN.jsonl contributes its train/eval/checkpoint/restart records (those with step <= MAXSTEP when
given: a later run resumed from that step, so TensorBoard must have dropped the rest). Checks:
- every file's TFRecord framing: both masked CRC-32Cs of every record, no trailing bytes;
- EventAccumulator (purge of orphaned data on) shows exactly the expected tags, and per tag
  exactly the expected steps with the float32 of the JSONL value (the mapping: every numeric
  field but step/epoch as <type>/<field>, nested objects as <type>/<field>/<sub>, per_rank[r]
  as rank/<r>/<sub>); steps increase, so resumed curves join;
- the config (and, unless --upto, summary) text summaries are there, and the server's loader
  (plugin_event_accumulator) files them under the text and scalars plugins; --files: how many event
  files; --upto: compare only steps <= STEP on both sides (a killed run's last record);
  --cut: a failed write may have cut the last record (readers stop there).
Run with the venv python that has PyPI `tensorboard`."""
import argparse, glob, json, os, struct, sys

from tensorboard.backend.event_processing import event_accumulator, plugin_event_accumulator
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

ap = argparse.ArgumentParser()
ap.add_argument("tbdir")
ap.add_argument("runs", nargs="+")
ap.add_argument("--files", type=int)
ap.add_argument("--ranks", type=int, default=2)
ap.add_argument("--upto", type=int)
ap.add_argument("--cut", action="store_true",
                help="the file may end in a partly written record (a write failed): compare the "
                     "steps before the last one TensorBoard read")
A = ap.parse_args()


def fail(msg):
    sys.exit(f"FAIL: {msg}")


def check_framing(path):
    b = open(path, "rb").read()
    at = n = 0
    while at < len(b):
        if len(b) - at < 12:
            if A.cut:
                break
            fail(f"{path}: {len(b) - at} trailing bytes at {at}")
        (length,) = struct.unpack_from("<Q", b, at)
        (hcrc,) = struct.unpack_from("<I", b, at + 8)
        if hcrc != masked_crc32c(b[at:at + 8]):
            fail(f"{path}: bad length CRC at {at}")
        if len(b) - at - 12 < length + 4:
            if A.cut:
                break
            fail(f"{path}: truncated record at {at}")
        (dcrc,) = struct.unpack_from("<I", b, at + 12 + length)
        if dcrc != masked_crc32c(b[at + 12:at + 12 + length]):
            fail(f"{path}: bad data CRC at {at}")
        at += 12 + length + 4
        n += 1
    return n


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def expected_scalars(runs):
    want = {}  # tag -> {step: value}
    for spec in runs:
        path, _, maxstep = spec.partition(":")
        for line in open(path):
            r = json.loads(line)
            t = r["type"]
            if t not in ("train", "eval", "checkpoint", "restart") or (maxstep and r["step"] > int(maxstep)):
                continue
            if A.upto is not None and r["step"] > A.upto:
                continue
            def put(tag, v):
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    steps = want.setdefault(tag, {})
                    if r["step"] in steps:
                        fail(f"{path}: two {tag} values at step {r['step']}")
                    steps[r["step"]] = f32(v)
            for k, v in r.items():
                if k in ("type", "step", "epoch"):
                    continue
                if isinstance(v, dict):
                    for k2, v2 in v.items():
                        put(f"{t}/{k}/{k2}", v2)
                elif k == "per_rank":
                    for rank, d in enumerate(v):
                        for k2, v2 in d.items():
                            put(f"rank/{rank}/{k2}", v2)
                else:
                    put(f"{t}/{k}", v)
    return want


files = sorted(glob.glob(os.path.join(A.tbdir, "events.out.tfevents.*")))
if A.files is not None and len(files) != A.files:
    fail(f"{len(files)} event files in {A.tbdir}, expected {A.files}: {files}")
records = sum(check_framing(f) for f in files)

acc = event_accumulator.EventAccumulator(A.tbdir, size_guidance={"scalars": 0, "tensors": 0})
acc.Reload()
tags = acc.Tags()
if A.cut:
    read = [e.step for e in acc.Scalars("train/loss")]
    if len(read) < 2:
        fail(f"--cut: only {len(read)} train/loss points were readable")
    A.upto = read[-1] - 1
want = expected_scalars(A.runs)
tb_tags = {t for t in tags["scalars"] if A.upto is None or acc.Scalars(t)[0].step <= A.upto}
if tb_tags != set(want):
    fail(f"scalar tags differ: only in TensorBoard {sorted(tb_tags - set(want))}, "
         f"only in JSONL {sorted(set(want) - tb_tags)}")
points = 0
for tag, steps in want.items():
    got = [(e.step, e.value) for e in acc.Scalars(tag) if A.upto is None or e.step <= A.upto]
    if [s for s, _ in got] != sorted(steps):
        fail(f"{tag}: TensorBoard steps {[s for s, _ in got]} != JSONL steps {sorted(steps)}")
    for s, v in got:
        if v != steps[s]:
            fail(f"{tag} at step {s}: TensorBoard {v!r} != JSONL {steps[s]!r}")
    points += len(got)
for k in range(A.ranks):
    if f"rank/{k}/step_s" not in want:
        fail(f"no rank/{k}/step_s")
for text in ("config",) if A.upto is not None else ("config", "summary"):
    if text not in tags["tensors"]:
        fail(f"no {text} text summary (tensors: {tags['tensors']})")
cfg = acc.Tensors("config")[-1].tensor_proto.string_val[0].decode()
if "| tensorboard |" not in cfg or "| model |" not in cfg:
    fail(f"config text lacks the config table: {cfg[:200]}")
# The TensorBoard server's own loader (plugin data path) sees the same tags in its plugins.
pacc = plugin_event_accumulator.EventAccumulator(A.tbdir)
pacc.Reload()
if "config" not in pacc.PluginTagToContent("text"):
    fail(f"text plugin sees no config: {pacc.PluginTagToContent('text')}")
# Every expected tag, and no other than EventAccumulator's: a missing tag fails (a subset
# test `<` passed when the plugin lacked a tag but had another).
plugin_scalars = set(pacc.PluginTagToContent("scalars"))
if set(want) - plugin_scalars:
    fail(f"scalars plugin lacks {sorted(set(want) - plugin_scalars)}")
if plugin_scalars != set(tags["scalars"]):
    fail(f"scalars plugin tags differ from EventAccumulator's: only in plugin "
         f"{sorted(plugin_scalars - set(tags['scalars']))}, only in EventAccumulator "
         f"{sorted(set(tags['scalars']) - plugin_scalars)}")
loss_steps = [e.step for e in acc.Scalars("train/loss")]
print(f"ok: {len(files)} file(s), {records} records with valid CRCs; {len(want)} tags, {points} "
      f"points equal to the JSONL; train/loss steps {loss_steps[0]}..{loss_steps[-1]}")
