"""PyTorch FSDP2's side of zero3_vs_fsdp2.sh: hpctrain's GPT (examples/gpt_reference.py) with
`fully_shard` on every block, then the root, on gloo CPU ranks (mp.spawn), AdamW, the same token
windows. Prints one JSON line: tokens_per_s (after the warm-up steps), peak RSS per rank (MiB).
usage: zero3_vs_fsdp2.py TRAIN_H5 --ranks 2 --n-layer L --n-head H --n-embd E --seq-len T
                         --batch B (per rank) --steps N [--warmup 3]"""
import argparse, json, os, resource, sys, time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from gpt_reference import GPT, GPTConfig, load_windows, read_tokens  # noqa: E402


def worker(rank, a, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks)
    from torch.distributed.fsdp import fully_shard
    x, y = load_windows(a.train, a.seq_len)
    vocab = read_tokens(a.train)[1]
    torch.manual_seed(3)
    model = GPT(GPTConfig(vocab_size=vocab, block_size=a.seq_len, n_layer=a.n_layer, n_head=a.n_head,
                          n_embd=a.n_embd, bias=False))
    for block in model.transformer.h:
        fully_shard(block)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    g = torch.Generator().manual_seed(rank)
    t0 = None
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            dist.barrier()
            t0 = time.perf_counter()
        idx = torch.randint(0, x.shape[0], (a.batch,), generator=g)
        logits = model(x[idx])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y[idx].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
    dist.barrier()
    wall = time.perf_counter() - t0
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0])
    all_rss = [torch.zeros(1) for _ in range(a.ranks)]
    dist.all_gather(all_rss, rss)
    if rank == 0:
        out.put({"tokens_per_s": a.steps * a.batch * a.ranks * a.seq_len / wall,
                 "peak_rss_mb_per_rank": [float(t) for t in all_rss]})
    dist.destroy_process_group()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("train")
    for k, v in [("ranks", 2), ("n-layer", 4), ("n-head", 4), ("n-embd", 128), ("seq-len", 64), ("batch", 8),
                 ("steps", 20), ("warmup", 3)]:
        p.add_argument("--" + k, type=int, default=v)
    a = p.parse_args()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    mp.spawn(worker, args=(a, q), nprocs=a.ranks)
    print(json.dumps(q.get()))
