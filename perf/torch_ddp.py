"""PyTorch DDP (gloo) baseline for the side-by-side comparison with hpctrain.

Trains the same `cnn` (DESIGN.md) or `mlp` network with the same per-rank batch, optimizer
(SGD momentum 0.9, lr 0.01) and synthetic data of the same shape, launched by the same mpirun:
    mpirun -np 2 $VENV/bin/python perf/torch_ddp.py --model cnn --batch 64 --steps 30
Rank and world come from OMPI_COMM_WORLD_*; the process group is initialized over
tcp://127.0.0.1. One thread per rank. Prints one JSON line (rank 0) like ddp_bench.
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="cnn", choices=["cnn", "mlp"])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
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
    x, y = torch.randn(a.batch, 1, 28, 28), torch.randint(0, 10, (a.batch,))
    times = []
    for s in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        if s >= a.warmup:
            times.append(time.perf_counter() - t0)
    step = torch.tensor([statistics.median(times)], dtype=torch.float64)
    dist.all_reduce(step, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(json.dumps({"impl": "pytorch-ddp-gloo", "torch": torch.__version__, "model": a.model,
                          "world_size": world, "batch_per_rank": a.batch, "step_s": step.item(),
                          "samples_per_s": a.batch * world / step.item()}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
