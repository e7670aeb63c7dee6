#!/usr/bin/python3
"""An ordinary DistributedDataParallel training script, moved from gloo to
Ringo by the lines marked "Ringo" (docs/pytorch.md). Launch it like any
torch.distributed script:

    torchrun --nproc_per_node 2 ddp_train.py
    (Debian's torchrun on Python 3.11: add --redirects 1 --tee 1 --log_dir DIR)

It reads the rendezvous from the environment (env://: RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT), trains a small MLP on synthetic data and prints
each step's loss and, at the end, a checksum of the parameters (equal on
every rank, since DDP keeps the replicas in step).
"""

import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import ringo_torch  # noqa: F401  Ringo: registers the backend "ringo"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="ringo")  # Ringo: was "gloo"
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--width", type=int, default=512)
    args = parser.parse_args()

    dist.init_process_group(backend=args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(64, args.width), nn.ReLU(), nn.Linear(args.width, args.width), nn.ReLU(),
                              nn.Linear(args.width, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    gen = torch.Generator().manual_seed(1000 + rank)
    for step in range(args.steps):
        x = torch.randn(32, 64, generator=gen)
        y = torch.randint(0, 10, (32,), generator=gen)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print("rank %d/%d step %d loss %.6f" % (rank, world, step, loss.item()), flush=True)
    checksum = sum(p.double().sum().item() for p in model.parameters())
    print("rank %d/%d backend %s params-checksum %.12e" % (rank, world, dist.get_backend(), checksum), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
