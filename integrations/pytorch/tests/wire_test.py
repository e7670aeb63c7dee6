#!/usr/bin/python3
"""ringo_torch's compressed wire (docs/wire.md) on 2 ranks with host ids of
their own (RINGO_HOSTID), so that the pair crosses "the network":

- set_wire("bf16") then an fp32 all-reduce: the bits the algorithm gives
  (each rank's contribution to the other's shard rounded to bf16 once, the
  two summed in fp32, the sum rounded once), the same on both ranks;
- wire_round: this rank's contribution as sent (the other rank's shard
  rounded, its own exact);
- DDP with wire_hook (bf16 and e4m3, with error feedback) against DDP
  without it, same seed: the replicas identical, the residuals kept, the
  parameters close to the uncompressed run's.

Usage: wire_test.py
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

COUNT = 10007
STEPS = 6


def shard_size(count, n):
    per = (count + n - 1) // n
    return (per + 31) // 32 * 32


def inputs(rank):
    import torch
    g = torch.Generator().manual_seed(7 + rank)
    return torch.randn(COUNT, generator=g) * 0.01


def bf16(t):
    import torch
    return t.to(torch.bfloat16).to(torch.float32)


def check_allreduce(rank, n):
    import torch
    import torch.distributed as dist
    import ringo_torch

    ringo_torch.set_wire("bf16")
    xs = [inputs(r) for r in range(n)]
    got = xs[rank].clone()
    dist.all_reduce(got)
    size = shard_size(COUNT, n)
    want = torch.empty(COUNT)
    for q in range(n):
        lo, hi = q * size, min(COUNT, (q + 1) * size)
        acc = None
        for r in range(n):
            c = xs[r][lo:hi] if r == q else bf16(xs[r][lo:hi])
            acc = c.clone() if acc is None else acc + c
        want[lo:hi] = bf16(acc)
    assert torch.equal(got, want), "all-reduce: not the algorithm's bits (max diff %g)" % (got - want).abs().max().item()
    exact = sum(x.double() for x in xs)
    err = ((got.double() - exact).norm() / exact.norm()).item()
    assert err < 4e-3, "relative error %g" % err
    other = got.clone()
    dist.broadcast(other, 0)
    assert torch.equal(other, got), "the ranks' results differ"


def check_wire_round(rank, n):
    import torch
    import ringo_torch

    ringo_torch.set_wire("bf16")
    x = inputs(rank)
    sent = ringo_torch.wire_round(x)
    size = shard_size(COUNT, n)
    want = bf16(x)
    want[rank * size:min(COUNT, (rank + 1) * size)] = x[rank * size:min(COUNT, (rank + 1) * size)]
    assert torch.equal(sent, want), "wire_round: max diff %g" % (sent - want).abs().max().item()
    assert not torch.equal(sent, x), "nothing was rounded"


def train(rank, wire):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    import ringo_torch

    torch.manual_seed(1234)
    model = nn.Sequential(nn.Linear(32, 128), nn.Tanh(), nn.Linear(128, 8))
    ddp = DDP(model, bucket_cap_mb=0.01)
    state = None
    if wire != "none":
        state = ringo_torch.WireHookState(wire=wire, error_feedback=True)
        ddp.register_comm_hook(state, ringo_torch.wire_hook)
    else:
        ringo_torch.set_wire("none")
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(99 + rank)
    losses = []
    for _ in range(STEPS):
        x, y = torch.randn(16, 32, generator=g), torch.randn(16, 8, generator=g)
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    for k, v in model.state_dict().items():
        ref = v.clone()
        dist.broadcast(ref, 0)
        assert torch.equal(ref, v), "rank %d's %s differs from rank 0's" % (rank, k)
    if state is not None:
        assert state.residuals, "no residual kept"
        assert any(r.abs().sum().item() > 0 for r in state.residuals.values()), "every residual is zero"
    return {k: v.clone() for k, v in model.state_dict().items()}, losses


def check_ddp(rank):
    import torch

    ref, ref_losses = train(rank, "none")
    for wire, tol in (("bf16", 1e-2), ("e4m3", 6e-2)):
        params, losses = train(rank, wire)
        for k in ref:
            rel = ((params[k] - ref[k]).norm() / ref[k].norm()).item()
            assert rel < tol, "%s: %s differs from the uncompressed run by %g (relative)" % (wire, k, rel)
        assert all(abs(a - b) < 0.1 * abs(b) + 1e-3 for a, b in zip(losses, ref_losses)), (
            "%s: losses %s vs %s" % (wire, losses, ref_losses))


def worker(args):
    import datetime

    os.environ["RINGO_HOSTID"] = "wire-test-host-%d" % args.rank
    import torch.distributed as dist
    import ringo_torch  # noqa: F401

    dist.init_process_group("ringo", init_method=args.init, rank=args.rank, world_size=args.nranks,
                            timeout=datetime.timedelta(seconds=60))
    cases = harness.Cases()
    cases.run("allreduce_bf16_bits", check_allreduce, args.rank, args.nranks)
    cases.run("wire_round", check_wire_round, args.rank, args.nranks)
    cases.run("ddp_wire_hook", check_ddp, args.rank)
    dist.barrier()
    dist.destroy_process_group()


def main():
    args = harness.worker_parser().parse_args()
    if args.worker:
        harness.main_guard(lambda: worker(args))
    report = harness.Report("wire")
    script = os.path.abspath(__file__)
    init = harness.file_init()
    ranks = harness.Ranks(lambda r: harness.worker_argv(script, r, 2, init, []), 2, deadline_s=150)
    codes, outputs = ranks.wait()
    report.merge_ranks("", codes, outputs)
    for r in range(2):
        if codes[r] != 0:
            report.add("rank%d_exit" % r, "failed", "exit status %s; output ends: %s" % (codes[r], harness.tail(outputs[r])))
    sys.exit(report.finish())


if __name__ == "__main__":
    main()
