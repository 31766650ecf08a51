"""PyTorch DDP (gloo) baseline for the side-by-side comparison with hpctrain.

Trains the same `cnn` (DESIGN.md) or `mlp` network with the same per-rank batch, optimizer
(SGD momentum 0.9, lr 0.01, no weight decay), launched by the same mpirun:
    mpirun -np 2 $VENV/bin/python perf/train/torch_ddp.py --model cnn --batch 64 --steps 300 [--data train.h5]
Data, two variants:
  --data FILE.h5  the way PyTorch users train from an HDF5 file: h5py reads images/labels once,
                  normalized to float32 with the file's mean/std (as hpctrain's loader does per
                  batch), TensorDataset + DistributedSampler(shuffle) + DataLoader(batch,
                  num_workers=--workers, default 0: one core per rank on a CPU node, like
                  hpctrain's single loader thread), epochs as needed for --steps.
  (none)          one fixed random batch reused every step: no data cost at all.
Rank and world come from OMPI_COMM_WORLD_*; the process group is initialized over
tcp://127.0.0.1. One thread per rank. Timing: each step from fetching its batch to the end of
opt.step(); after --warmup steps, the steps are grouped in intervals of --log-every (hpctrain's
own metrics interval) and step_s is the median of the interval means, the slowest rank's.
Prints one JSON line (rank 0).
"""
import argparse, json, os, statistics, time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 256), nn.ReLU(), nn.Linear(256, 10))


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def h5_batches(path, batch, rank, world, workers):
    """Endless batches from an HDF5 file, as a PyTorch user writes it."""
    import h5py
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
    with h5py.File(path, "r") as f:
        x = torch.from_numpy(f["images"][:]).float().div_(255)
        y = torch.from_numpy(f["labels"][:]).long()
        mean = torch.tensor(f.attrs["mean"], dtype=torch.float32).view(1, -1, 1, 1)
        std = torch.tensor(f.attrs["std"], dtype=torch.float32).view(1, -1, 1, 1)
    ds = TensorDataset(x.sub_(mean).div_(std), y)
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=0, drop_last=True)
    loader = DataLoader(ds, batch_size=batch, sampler=sampler, num_workers=workers, drop_last=True,
                        persistent_workers=workers > 0)
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        yield from loader
        epoch += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="cnn", choices=["cnn", "mlp"])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--data", default="", help="train.h5 (default: one fixed in-memory batch)")
    ap.add_argument("--workers", type=int, default=0, help="DataLoader num_workers (with --data)")
    ap.add_argument("--port", type=int, default=29517)
    a = ap.parse_args()
    torch.set_num_threads(1)
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", 0))
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", 1))
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{a.port}", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = cnn() if a.model == "cnn" else mlp()
    assert sum(p.numel() for p in model.parameters()) == (824650 if a.model == "cnn" else 535818)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    if a.data:
        batches = h5_batches(a.data, a.batch, rank, world, a.workers)
    else:
        fixed = (torch.randn(a.batch, 1, 28, 28), torch.randint(0, 10, (a.batch,)))
        batches = iter(lambda: fixed, None)
    times = []
    t_start = None
    for s in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        if s == a.warmup:
            t_start = t0
        x, y = next(batches)
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        if s >= a.warmup:
            times.append(time.perf_counter() - t0)
    total = time.perf_counter() - t_start
    k = a.log_every
    intervals = [statistics.fmean(times[i:i + k]) for i in range(0, len(times) - k + 1, k)] or times
    step = torch.tensor([statistics.median(intervals), total / a.steps], dtype=torch.float64)
    dist.all_reduce(step, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(json.dumps({"impl": "pytorch-ddp-gloo", "torch": torch.__version__, "model": a.model,
                          "data": a.data or "fixed-batch", "workers": a.workers,
                          "world_size": world, "batch_per_rank": a.batch, "step_s": step[0].item(),
                          "mean_step_s": step[1].item(),
                          "samples_per_s": a.batch * world / step[0].item()}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
