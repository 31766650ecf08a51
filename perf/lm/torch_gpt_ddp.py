"""PyTorch DDP (gloo) baseline for `hpctrain train --model gpt`: the GPT training loop a nanoGPT
user writes, from the same token files, launched by the same mpirun:
    mpirun -np 2 --bind-to core $VENV/bin/python perf/lm/torch_gpt_ddp.py --train DIR/train.h5 --test DIR/test.h5 \\
        [--seq-len 128 --n-layer 4 --n-head 4 --n-embd 128 --batch 16 --steps 300 --amp bf16]
Model: examples/gpt_reference.py's GPT (hpctrain's names, tied head, GPT-2 init; vocab from
the train file's `vocab_size` attribute, block size = --seq-len). Data: h5py reads `tokens`
once; each file is cut into windows of T+1 tokens with stride T (data/README.md) into a
TensorDataset of (x [N,T], y [N,T]) int64; DistributedSampler(shuffle, seed=--seed) + DataLoader
(batch, num_workers 0, drop_last=False), epochs as needed for --steps. --train/--test also take
a data directory (its train.h5 / test.h5 or numbered -00000.h5 files, windows never crossing a
file). Optimizer: AdamW (betas 0.9/0.999, eps 1e-8) with two parameter groups, weight decay on
wte and every Linear weight, none on biases, LayerNorm weights and wpe; lr linear warmup
lr*(s+1)/warmup for s < --warmup, then constant (hpctrain's --schedule constant);
clip_grad_norm_(--clip) after the allreduce; cross-entropy over [B*T, V];
--amp bf16: forward and loss under torch.autocast('cpu', bfloat16) (the loss in fp32).
Rank and world come from OMPI_COMM_WORLD_*; the process group is initialized over
tcp://127.0.0.1. One thread per rank. Timing (as perf/train/torch_ddp.py): each step from fetching
its batch to the end of opt.step(); the --steps steps (all of them, as hpctrain's --max-steps)
are grouped in intervals of --log-every (hpctrain's metrics intervals, a short last one
included), the first --warmup-intervals are dropped, and step_s is the median of the interval
means, the slowest rank's. tokens_per_s = world * batch * T / step_s.
At the end: test loss = mean nats/token over every test window once (eval mode, no grad), each
rank its DistributedSampler(shuffle=False) share, the sampler's padding duplicates not counted,
sum and count allreduced in fp64. Prints one JSON line (rank 0).
"""
import argparse, json, os, statistics, sys, time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
from gpt_reference import GPT, GPTConfig, load_windows, optimizer_groups, read_tokens, token_files  # noqa: E402


def token_dataset(path, split, T):
    """TensorDataset of the windows of `path` (a token file or a data directory) and its vocab size."""
    from torch.utils.data import TensorDataset
    files = token_files(path, split)
    vocab = max(read_tokens(f)[1] for f in files)
    x, y = load_windows(files, T)
    if x.shape[0] == 0:
        raise SystemExit(f"torch_gpt_ddp: {path}: no window of {T + 1} tokens")
    return TensorDataset(x, y), vocab


def batches(ds, batch, rank, world, seed):
    """Endless batches, as a PyTorch user writes it."""
    from torch.utils.data import DataLoader, DistributedSampler
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=seed, drop_last=False)
    loader = DataLoader(ds, batch_size=batch, sampler=sampler, num_workers=0, drop_last=False)
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        yield from loader
        epoch += 1


@torch.no_grad()
def distributed_test_loss(model, ds, batch, rank, world, amp):
    """(mean nats/token over every window once, windows): each rank its DistributedSampler
    share, the padding (positions >= len) left out; sums and counts allreduced."""
    from torch.utils.data import DataLoader, DistributedSampler, Subset
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=False, drop_last=False)
    idx = list(sampler)
    # DistributedSampler pads the index list to a multiple of world and gives rank r the
    # positions r, r + world, ...: the i-th index of this rank is padding when r + i*world >= len.
    valid = torch.tensor([rank + i * world < len(ds) for i in range(len(idx))], dtype=torch.bool)
    model.eval()
    acc = torch.zeros(2, dtype=torch.float64)  # sum of nats, tokens
    seen = 0
    for x, y in DataLoader(Subset(ds, idx), batch_size=batch, shuffle=False, num_workers=0):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            logits = model(x)
        ce = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none")
        keep = valid[seen:seen + x.shape[0]]
        seen += x.shape[0]
        acc[0] += ce.view(x.shape[0], -1)[keep].double().sum()
        acc[1] += keep.sum().item() * y.shape[1]
    dist.all_reduce(acc, op=dist.ReduceOp.SUM)
    model.train()
    return (acc[0] / acc[1]).item(), int(acc[1].item()) // ds.tensors[1].shape[1]


def interval_means(times, k):
    """Mean step time of each interval of k steps (hpctrain logs at every k-th step and at the last)."""
    return [statistics.fmean(times[i:i + k]) for i in range(0, len(times), k)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", required=True, help="train token file (or a data directory)")
    ap.add_argument("--test", required=True, help="test token file (or a data directory)")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-embd", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16, help="per-rank batch (windows)")
    ap.add_argument("--steps", type=int, default=300, help="optimizer steps in all (hpctrain's --max-steps)")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100, help="linear lr warmup steps")
    ap.add_argument("--clip", type=float, default=1.0, help="gradient norm clip (0: off)")
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--warmup-intervals", type=int, default=1, help="timing intervals dropped at the start")
    ap.add_argument("--amp", default="off", choices=["off", "bf16"])
    ap.add_argument("--port", type=int, default=29518)
    a = ap.parse_args()
    if a.steps < 1 or a.log_every < 1 or a.warmup < 0:
        ap.error("--steps and --log-every must be >= 1, --warmup >= 0")
    torch.set_num_threads(1)
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", 0))
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", 1))
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{a.port}", rank=rank, world_size=world)
    T, amp = a.seq_len, a.amp == "bf16"
    train_ds, vocab = token_dataset(a.train, "train", T)
    test_ds, test_vocab = token_dataset(a.test, "test", T)
    if test_vocab > vocab:
        raise SystemExit(f"torch_gpt_ddp: test vocab_size {test_vocab} > train's {vocab}")
    torch.manual_seed(a.seed)
    model = GPT(GPTConfig(vocab_size=vocab, block_size=T, n_layer=a.n_layer, n_head=a.n_head, n_embd=a.n_embd))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(optimizer_groups(model, a.weight_decay), lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    data = batches(train_ds, a.batch, rank, world, a.seed)
    times, losses = [], []
    t_start = time.perf_counter()
    for s in range(a.steps):
        t0 = time.perf_counter()
        x, y = next(data)
        lr = a.lr * (s + 1) / a.warmup if s < a.warmup else a.lr  # hpctrain's lr_at(s)
        for g in opt.param_groups:
            g["lr"] = lr
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            logits = ddp(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
        losses.append(loss.detach())
    total = time.perf_counter() - t_start
    k = a.log_every
    intervals = interval_means(times, k)
    timed = intervals[a.warmup_intervals:] or intervals
    last = torch.stack(losses[(len(losses) - 1) // k * k:]).float().mean().double()
    step = torch.tensor([statistics.median(timed), total / a.steps], dtype=torch.float64)
    dist.all_reduce(step, op=dist.ReduceOp.MAX)
    dist.all_reduce(last, op=dist.ReduceOp.SUM)
    test_loss, test_windows = distributed_test_loss(model, test_ds, a.batch, rank, world, amp)
    step_s = step[0].item()
    if rank == 0:
        print(json.dumps({"impl": "pytorch-ddp-gloo", "torch": torch.__version__, "model": "gpt",
                          "n_layer": a.n_layer, "n_head": a.n_head, "n_embd": a.n_embd, "seq_len": T,
                          "vocab_size": vocab, "parameters": model.num_params(), "amp": a.amp,
                          "train": a.train, "test": a.test, "train_windows": len(train_ds),
                          "world": world, "world_size": world, "batch_per_rank": a.batch, "steps": a.steps,
                          "intervals_timed": len(timed), "step_s": step_s, "mean_step_s": step[1].item(),
                          "tokens_per_s": world * a.batch * T / step_s,
                          "samples_per_s": world * a.batch / step_s,
                          "train_loss": last.item() / world, "test_loss": test_loss,
                          "test_windows": test_windows}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
