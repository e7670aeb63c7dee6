#!/usr/bin/python3
"""The same MLP, data and global batch as ringo-train, trained with PyTorch
DistributedDataParallel on the CPU (gloo by default), one compute thread per
rank (torch.set_num_threads(1)); prints one JSON line with samples/s.

Model: 784 -> [Linear(width), (BatchNorm1d), ReLU] x depth -> Linear(10),
softmax cross-entropy, SGD with momentum 0.9 and weight decay 5e-4, as
ringo-train. Data: Fashion-MNIST's IDX files (gzip or plain), normalised as
ringo-train does; each rank takes its B/N share of every global batch of a
seeded permutation. DDP's default buckets (25 MiB).

Usage: train_ddp.py --np 2 [--width 1024] [--depth 8] [--batch 256]
                    [--steps 60] [--warmup 5] [--backend gloo] [--data DIR]
"""
import argparse
import gzip
import json
import os
import socket
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    for p in (path + ".gz", path):
        if os.path.exists(p):
            opener = gzip.open if p.endswith(".gz") else open
            with opener(p, "rb") as f:
                data = f.read()
            magic, = struct.unpack(">I", data[:4])
            dims = struct.unpack(">" + "I" * (magic & 0xff), data[4:4 + 4 * (magic & 0xff)])
            return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * len(dims)).reshape(dims)
    raise SystemExit("no %s[.gz]" % path)


def make_model(width, depth, bn):
    layers, fan_in = [], 784
    for _ in range(depth):
        layers.append(nn.Linear(fan_in, width))
        if bn:
            layers.append(nn.BatchNorm1d(width))
        layers.append(nn.ReLU())
        fan_in = width
    layers.append(nn.Linear(fan_in, 10))
    return nn.Sequential(*layers)


def worker(rank, args, port, queue):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(args.backend, rank=rank, world_size=args.np)
    images = read_idx(os.path.join(args.data, "train-images-idx3-ubyte"))
    labels = read_idx(os.path.join(args.data, "train-labels-idx1-ubyte"))
    x_all = torch.from_numpy(((images.reshape(-1, 784).astype(np.float32) / 255.0) - MEAN) / STD)
    y_all = torch.from_numpy(labels.astype(np.int64))
    torch.manual_seed(args.seed)
    model = DDP(make_model(args.width, args.depth, args.bn))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    micro = args.batch // args.np
    perm = torch.randperm(len(y_all), generator=torch.Generator().manual_seed(args.seed))
    times = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        first = (step * args.batch) % (len(y_all) - args.batch) + rank * micro
        idx = perm[first:first + micro]
        x, y = x_all[idx], y_all[idx]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    mean = sum(times[args.warmup:]) / max(1, len(times) - args.warmup)
    slowest = torch.tensor([mean], dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    if rank == 0:
        queue.put({"backend": args.backend, "ranks": args.np, "batch": args.batch,
                   "width": args.width, "depth": args.depth, "bn": args.bn,
                   "params": sum(p.numel() for p in model.parameters()),
                   "step_ms": slowest.item() * 1e3,
                   "samples_per_s": args.batch / slowest.item(),
                   "final_loss": loss.item(), "torch": torch.__version__})
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--depth", type=int, default=9)
    ap.add_argument("--bn", action="store_true")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--backend", default="gloo")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    args = ap.parse_args()
    if args.batch % args.np:
        raise SystemExit("--batch must be a multiple of --np")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.spawn(worker, args=(args, port, queue), nprocs=args.np, join=True)
    print(json.dumps(queue.get()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
