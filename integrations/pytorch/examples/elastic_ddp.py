#!/usr/bin/python3
"""DDP with backend="ringo" that goes on after a rank dies, in the same
processes: N ranks train a small model on a fixed global batch; rank K kills
itself (SIGKILL) at step S; the others' backward pass raises a RuntimeError
naming the lost rank; each survivor drops its DDP wrapper, calls
ringo_torch.shrink() for a group of the survivors (they agree on who is
lost and shrink the Ringo communicator: no restart, no rendezvous), wraps
the model again with DDP over that group (which broadcasts the new rank 0's
parameters), re-shards the global batch over the new group and redoes the
failed step. The optimizer state is every replica's own and identical (DDP
keeps the gradients equal, and the failed step never reached opt.step()).

The ranks meet through a FileStore (init_method="file://..."), which outlives
any rank, so rank 0 may be the one lost. With a TCPStore the rank hosting it
must stay: use a store outside the job (torchrun's c10d rendezvous backend
on a separate host, or a FileStore on a shared file system).

Each rank's loss is its rows' summed loss x (group size / global batch), so
that DDP's average over the group is the mean over the whole global batch
however unequal the shares are after a shrink.

Usage:
  elastic_ddp.py --nranks 4 --kill-rank 2 --kill-step 20 [--steps 60] [--out DIR]
Each surviving rank prints "FINAL rank R (was rank r0) of N ..." and, with
--out, writes its final parameters to DIR/rank<r0>.pt. PyTorch 1.x (the
ProcessGroup API): ringo_torch.shrink says so on 2.x.
"""

import argparse
import datetime
import gc
import os
import signal
import subprocess
import sys
import tempfile


def worker(args):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import ringo_torch

    rank0 = args.rank  # the rank this process had at the start
    dist.init_process_group("ringo", init_method=args.init, rank=rank0, world_size=args.nranks,
                            timeout=datetime.timedelta(seconds=30))
    group = dist.distributed_c10d._get_default_group()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    data_x = torch.randn(args.batch * 8, 20, generator=g)
    data_y = torch.randint(0, 4, (args.batch * 8,), generator=g)
    loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")
    ddp = DDP(model, process_group=group)
    step = 0
    while step < args.steps:
        if rank0 == args.kill_rank and step == args.kill_step:
            print("rank %d: killing itself at step %d" % (rank0, step), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        me, size = group.rank(), group.size()
        # This rank's rows of the step's global batch: equal shares, the first
        # ranks one more where the size does not divide the batch.
        first = (step * args.batch) % data_x.shape[0]
        base, extra = divmod(args.batch, size)
        lo = first + me * base + min(me, extra)
        hi = lo + base + (1 if me < extra else 0)
        try:
            opt.zero_grad()
            loss = loss_fn(ddp(data_x[lo:hi]), data_y[lo:hi]) * (size / args.batch)
            loss.backward()
        except RuntimeError as e:
            print("rank %d: step %d failed: %s" % (rank0, step, str(e).splitlines()[0][:300]), flush=True)
            del ddp
            gc.collect()  # the failed DDP's hooks go with it
            start = datetime.datetime.now()
            group = ringo_torch.shrink(group)
            ddp = DDP(model, process_group=group)
            ms = (datetime.datetime.now() - start).total_seconds() * 1e3
            print("rank %d: now rank %d of %d, redoing step %d (shrink and new DDP: %.0f ms)"
                  % (rank0, group.rank(), group.size(), step, ms), flush=True)
            continue
        opt.step()
        step += 1
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    print("FINAL rank %d (was rank %d) of %d after %d steps: sum %.9g" %
          (group.rank(), rank0, group.size(), step, params.double().sum().item()), flush=True)
    if args.out:
        torch.save(params, os.path.join(args.out, "rank%d.pt" % rank0))
    os._exit(0)  # the failed default group holds a lost peer: nothing to tear down with it


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nranks", type=int, default=4)
    p.add_argument("--kill-rank", type=int, default=-1)
    p.add_argument("--kill-step", type=int, default=20)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=48)
    p.add_argument("--out", default="")
    p.add_argument("--worker", action="store_true")
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--init", default="")
    args = p.parse_args()
    if args.worker:
        worker(args)
        return
    init = "file://" + os.path.join(tempfile.mkdtemp(prefix="ringo_elastic_"), "store")
    procs = []
    for r in range(args.nranks):
        argv = [sys.executable, os.path.abspath(__file__), "--worker", "--rank", str(r), "--nranks",
                str(args.nranks), "--init", init, "--kill-rank", str(args.kill_rank), "--kill-step",
                str(args.kill_step), "--steps", str(args.steps), "--batch", str(args.batch), "--out", args.out]
        procs.append(subprocess.Popen(argv))
    codes = [proc.wait(timeout=300) for proc in procs]
    ok = all(c == 0 for r, c in enumerate(codes) if r != args.kill_rank)
    print("exit codes: %s" % codes, flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
