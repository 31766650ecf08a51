"""Where a GPT training step's compute goes, per part of the model (a microbenchmark).

    OMP_NUM_THREADS=1 taskset -c 0 $VENV/bin/python perf/lm/gpt_profile.py [--n-layer 4 --n-head 4 --n-embd 128
                                                     --seq-len 128 --batch 16 --reps 10]

The same GPT as `hpctrain train --model gpt` (examples/gpt_reference.py: the same ATen kernels,
the pinned torch wheel is the LibTorch hpctrain links), one thread, one rank's batch. Each part is
timed alone, forward + backward on a leaf input of the real shape (median of --reps after two
warm-ups), with its own output's gradient as the seed:
  attention  ln_1 + c_attn + scaled_dot_product_attention(is_causal) + c_proj (x n_layer)
  mlp        ln_2 + c_fc + GELU + c_proj (x n_layer)
  embed/head wte + wpe lookups, ln_f, the tied LM head and the cross entropy
  optimizer  one AdamW step over every parameter (two groups, as hpctrain)
and the whole step (forward, backward, AdamW) for the sum to be checked against. The residual
adds, reshapes and autograd bookkeeping not inside a part show as the difference. Prints one
JSON line; the allreduce share comes from `hpctrain train` itself (comm_blocked_pct, the trace).
"""
import argparse, json, os, statistics, sys, time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
from gpt_reference import GPT, GPTConfig, optimizer_groups  # noqa: E402


def timed(fn, reps):
    for _ in range(2):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-embd", type=int, default=128)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--reps", type=int, default=10)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=a.vocab, block_size=a.seq_len, n_layer=a.n_layer, n_head=a.n_head, n_embd=a.n_embd)
    m = GPT(cfg)
    B, T, E = a.batch, a.seq_len, a.n_embd
    blk = m.transformer.h[0]
    x0 = torch.randn(B, T, E)
    idx = torch.randint(0, a.vocab, (B, T))
    y = torch.randint(0, a.vocab, (B, T))

    def fb(f):
        x = x0.clone().requires_grad_(True)
        out = f(x)
        out.backward(torch.ones_like(out))

    def head():
        m.zero_grad(set_to_none=True)
        pos = torch.arange(T)
        h = m.transformer.wte(idx) + m.transformer.wpe(pos)
        h = h + x0  # stands for the blocks
        logits = F.linear(m.transformer.ln_f(h), m.transformer.wte.weight)
        F.cross_entropy(logits.view(-1, a.vocab), y.view(-1)).backward()

    opt = torch.optim.AdamW(optimizer_groups(m, 0.1), lr=1e-3)

    def full():
        logits = m(idx)
        loss = F.cross_entropy(logits.view(-1, a.vocab), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    full()  # AdamW state exists from here on
    t = {
        "attention": a.n_layer * timed(lambda: fb(lambda x: blk.attn(blk.ln_1(x))), a.reps),
        "mlp": a.n_layer * timed(lambda: fb(lambda x: blk.mlp(blk.ln_2(x))), a.reps),
        "embed_head_loss": timed(head, a.reps),
        "optimizer": timed(opt.step, a.reps),
    }
    step = timed(full, a.reps)
    parts = sum(t.values())
    out = {"what": "gpt step compute by part (microbenchmark, 1 thread)", "torch": torch.__version__,
           "n_layer": a.n_layer, "n_head": a.n_head, "n_embd": E, "seq_len": T, "batch": B,
           "step_s": step, "parts_s": t, "other_s": step - parts,
           "share": {k: v / step for k, v in t.items()} | {"other": (step - parts) / step},
           "tokens_per_s_one_core": B * T / step}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
