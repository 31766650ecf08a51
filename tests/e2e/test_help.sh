#!/usr/bin/env bash
# `--help` a person can use: every option of every subcommand that takes a value names its type
# (INT, FLOAT, BOOL, PATH/DIR/FILE, or the choice list), never CLI11's bare TEXT, and options with
# a default show it (`--batch-size INT=64`).
source "$(dirname "$0")/lib.sh"
: "${HPCTRAIN_BIN:?}"
PY=/usr/bin/python3
subs=("train" "eval" "models" "doctor" "data fashion-mnist" "data synthetic" "ckpt inspect" "ckpt verify"
      "ckpt merge" "bench allreduce" "bench reduce_scatter" "bench allgather" "bench loader" "data text" "generate" "flight")
for sub in "${subs[@]}"; do
  # shellcheck disable=SC2086
  out=$("$HPCTRAIN_BIN" $sub --help) || fail "hpctrain $sub --help exited $?"
  "$PY" - "$sub" "$out" <<'PY' || exit 1
import re, sys
sub, text = sys.argv[1], sys.argv[2]
opts = [l for l in text.splitlines() if re.match(r"^\s+(-\w,)?--[a-z]", l) or re.match(r"^\s+[A-Z]+ ", l)]
assert opts, f"{sub}: no options in --help:\n{text}"
for line in opts:
    head = re.split(r"\s{2,}", line.strip())[0]          # "--batch-size INT=64"
    words = head.split()
    if words[0].startswith("-h") or words[0] == "--help":
        continue
    if len(words) == 1:                                    # a switch (--full): no value
        continue
    assert words[1] != "TEXT" and not words[1].startswith("TEXT"), f"{sub}: {head!r} has no type"
print(f"ok: {sub}: {len(opts)} options typed")
PY
done
# Defaults and types of `hpctrain train`, spot-checked against the config's field list.
help=$("$HPCTRAIN_BIN" train --help)
for want in "--batch-size INT=64" "--lr FLOAT=0.05" "--optimizer {sgd,adamw}=sgd" "--sync-bn [BOOL]=false" \
            "--data DIR" "--resume auto|none|PATH=auto" "--collective-timeout FLOAT=300" "--ckpt-writers {rank0,all}=rank0"; do
  grep -qF -- "$want" <<<"$help" || fail "train --help lacks '$want'"
done
grep -qF -- "--device auto|cpu|cuda|cuda:N=auto" <<<"$("$HPCTRAIN_BIN" eval --help)" || fail "eval --help: --device lacks its default"
"$HPCTRAIN_BIN" bench loader --help | grep -qE -- "--batch-size INT=[0-9]+" || fail "bench loader --help: --batch-size lacks its default"
echo "ok: help shows types and defaults"
