#!/usr/bin/env python3
"""ringo-train's model in PyTorch on the same GPU, for step times side by side.

The same MLP (784 inputs, --depth hidden Linear+ReLU blocks of --width, a
Linear to 10 classes), softmax cross-entropy, SGD with momentum 0.9 and
weight decay 5e-4, the same global batch; inputs are random tensors already
on the GPU (a step's time is compute and communication, as ringo-train's
step time without its data column).

  torch_reference.py --mode single                 one process, the whole batch
  torch_reference.py --mode ddp --ranks N          N processes on GPU 0, DDP with
                                                   backend "nccl" (run it with
                                                   LD_PRELOAD=.../libnccl.so.2 to
                                                   put Ringo under it)

Prints one line: RESULT mode=... ranks=N batch=B step_ms=MEAN median_ms=MEDIAN
(exit 3 when PyTorch or CUDA is missing).
"""
import argparse
import os
import statistics
import sys
import time


def build(torch, width, depth):
    layers, fan_in = [], 784
    for _ in range(depth):
        layers += [torch.nn.Linear(fan_in, width), torch.nn.ReLU()]
        fan_in = width
    layers.append(torch.nn.Linear(fan_in, 10))
    return torch.nn.Sequential(*layers)


def train(rank, args, result):
    import torch
    import torch.distributed as dist
    torch.manual_seed(args.seed)
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    model = build(torch, args.width, args.depth).to(device)
    micro = args.batch // args.ranks
    if args.mode == "ddp":
        dist.init_process_group("nccl", rank=rank, world_size=args.ranks)
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0], bucket_cap_mb=25)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    x = torch.randn(micro, 784, device=device)
    y = torch.randint(0, 10, (micro,), device=device)
    loss_fn = torch.nn.CrossEntropyLoss()
    times = []
    for step in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        loss.item()  # one read back per step, as ringo-train's
        torch.cuda.synchronize()
        if step >= args.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    if args.mode == "ddp":
        t = torch.tensor([statistics.mean(times), statistics.median(times)], device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        dist.destroy_process_group()
        if rank == 0:
            result.put((t[0].item(), t[1].item()))
    else:
        result.put((statistics.mean(times), statistics.median(times)))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=["single", "ddp"], default="single")
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--depth", type=int, default=9)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError as e:
        print("SKIP no PyTorch: %s" % e)
        return 3
    if not torch.cuda.is_available():
        print("SKIP PyTorch %s sees no CUDA device" % torch.__version__)
        return 3
    if args.mode == "single":
        args.ranks = 1
    if args.batch % args.ranks:
        print("--batch must split over --ranks")
        return 2
    ctx = mp.get_context("spawn")
    result = ctx.Queue()
    if args.mode == "single":
        train(0, args, result)
    else:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29577")
        mp.spawn(train, args=(args, result), nprocs=args.ranks, join=True)
    mean, median = result.get(timeout=60)
    print("RESULT mode=%s ranks=%d batch=%d model=784-%dx%d-10 torch=%s step_ms=%.3f median_ms=%.3f"
          % (args.mode, args.ranks, args.batch, args.width, args.depth, torch.__version__, mean, median))
    return 0


if __name__ == "__main__":
    sys.exit(main())
