#!/usr/bin/python3
"""Point-to-point and what is built on it, against gloo: send/recv, isend/
irecv, all_to_all_single (equal and uneven splits), all_to_all, gather and
scatter, every root, a few dtypes, empty and non-contiguous tensors.

Every case is skipped, with the reason, while Ringo has no point-to-point
(ringo_torch.HAS_P2P is False: ringo/ringo.h does not define RINGO_HAS_P2P).
--backend gloo runs the same checks with gloo under test, which is how the
checks themselves are tested until then.

Usage: p2p_test.py --nranks N [--backend ringo|gloo]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

CASES = ["send_recv", "isend_irecv", "all_to_all_single.equal", "all_to_all_single.uneven",
         "all_to_all", "gather", "scatter", "empty", "noncontig"]


def worker(args):
    import datetime

    import torch
    import torch.distributed as dist

    cases = harness.Cases()
    if args.backend == "ringo":
        import ringo_torch
        if not ringo_torch.HAS_P2P:
            reason = ("Ringo has no point-to-point yet (ringo/ringo.h does not define RINGO_HAS_P2P); "
                      "ringo_torch raises 'not supported yet' for these")
            for name in CASES:
                harness.emit("p2p." + name, "skipped", reason)
            return
    dist.init_process_group(args.backend, init_method=args.init, rank=args.rank, world_size=args.nranks,
                            timeout=datetime.timedelta(seconds=60))
    gloo = dist.new_group(backend="gloo")
    rank, n = args.rank, args.nranks

    def make(dtype, count, r, seed):
        g = torch.Generator().manual_seed(seed * 7919 + r * 104729 + count)
        return torch.randn(count, generator=g, dtype=torch.float64).mul(50).to(dtype)

    def same(a, b, what):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), \
            "%s: %s vs %s" % (what, a.flatten()[:4].tolist(), b.flatten()[:4].tolist())

    def send_recv():
        # Even ranks send first, odd ranks receive first: rank 1 receives
        # first, so the ring unwinds from there even when a send completes
        # only at its matching receive (with an odd count too).
        for dtype in (torch.float32, torch.int64, torch.float16, torch.bfloat16, torch.bool):
            right, left = (rank + 1) % n, (rank - 1) % n
            x = make(dtype, 1001, rank, 1)
            got = torch.zeros_like(x)
            if rank % 2 == 0:
                dist.send(x, right)
                dist.recv(got, left)
            else:
                dist.recv(got, left)
                dist.send(x, right)
            same(got, make(dtype, 1001, left, 1), "from rank %d" % left)

    def isend_irecv():
        right, left = (rank + 1) % n, (rank - 1) % n
        x = make(torch.float32, 5000, rank, 2)
        got = torch.zeros_like(x)
        works = [dist.irecv(got, left), dist.isend(x, right)]
        for w in works:
            w.wait()
        same(got, make(torch.float32, 5000, left, 2), "irecv")

    def a2a_single(uneven):
        if uneven:
            # rank r sends (r + p + 1) rows to rank p
            in_splits = [rank + p + 1 for p in range(n)]
            out_splits = [p + rank + 1 for p in range(n)]
        else:
            in_splits = out_splits = [3] * n
        x = make(torch.float32, sum(in_splits) * 4, rank, 3).view(-1, 4)
        mine = torch.zeros(sum(out_splits), 4)
        ref = torch.zeros(sum(out_splits), 4)
        if uneven:
            dist.all_to_all_single(mine, x, out_splits, in_splits)
            dist.all_to_all_single(ref, x, out_splits, in_splits, group=gloo)
        else:
            dist.all_to_all_single(mine, x)
            dist.all_to_all_single(ref, x, group=gloo)
        same(mine, ref, "all_to_all_single")

    def a2a_list():
        if args.backend == "gloo":
            raise cases.Skip("gloo has no all_to_all (list form)")
        # gloo has none to compare with: every rank's inputs are known here.
        ins = [make(torch.int32, 10 + p, rank, 4 + p) for p in range(n)]
        mine = [torch.zeros(10 + rank, dtype=torch.int32) for _ in range(n)]
        dist.all_to_all(mine, ins)
        for p in range(n):
            same(mine[p], make(torch.int32, 10 + rank, p, 4 + rank), "from rank %d" % p)

    def gather():
        for root in range(n):
            x = make(torch.float64, 777, rank, 5)
            mine = [torch.zeros_like(x) for _ in range(n)] if rank == root else None
            ref = [torch.zeros_like(x) for _ in range(n)] if rank == root else None
            dist.gather(x, mine, root)
            dist.gather(x, ref, root, group=gloo)
            if rank == root:
                for r in range(n):
                    same(mine[r], ref[r], "root %d from %d" % (root, r))

    def scatter():
        for root in range(n):
            parts = [make(torch.float32, 333, root, 6 + r) for r in range(n)] if rank == root else None
            mine, ref = torch.zeros(333), torch.zeros(333)
            dist.scatter(mine, parts, root)
            dist.scatter(ref, parts, root, group=gloo)
            same(mine, ref, "root %d" % root)
            same(mine, make(torch.float32, 333, root, 6 + rank), "root %d" % root)

    def empty():
        right, left = (rank + 1) % n, (rank - 1) % n
        e = torch.zeros(0)
        if rank % 2 == 0:
            dist.send(e, right)
            dist.recv(e, left)
        else:
            dist.recv(e, left)
            dist.send(e, right)
        dist.all_to_all_single(torch.zeros(0), torch.zeros(0))
        dist.gather(e, [torch.zeros(0) for _ in range(n)] if rank == 0 else None, 0)
        dist.scatter(e, [torch.zeros(0) for _ in range(n)] if rank == 0 else None, 0)

    def noncontig():
        if args.backend == "gloo":
            raise cases.Skip("gloo's send/recv and all_to_all_single take contiguous tensors only")
        right, left = (rank + 1) % n, (rank - 1) % n
        x = make(torch.float32, 60, rank, 7).view(6, 10)[:, ::3]
        got = torch.zeros(4, 6).t()
        if rank % 2 == 0:
            dist.send(x, right)
            dist.recv(got, left)
        else:
            dist.recv(got, left)
            dist.send(x, right)
        same(got.contiguous(), make(torch.float32, 60, left, 7).view(6, 10)[:, ::3].contiguous(), "send/recv")
        out = torch.zeros(4, 2 * n).t()
        dist.all_to_all_single(out, make(torch.float32, 8 * n, rank, 8).view(4, 2 * n).t())
        ref = torch.zeros(2 * n, 4)
        dist.all_to_all_single(ref, make(torch.float32, 8 * n, rank, 8).view(4, 2 * n).t().contiguous(), group=gloo)
        same(out.contiguous(), ref, "all_to_all_single")

    runs = [("send_recv", send_recv), ("empty", empty), ("noncontig", noncontig)]
    runs += [("isend_irecv", isend_irecv), ("all_to_all_single.equal", lambda: a2a_single(False)),
             ("all_to_all_single.uneven", lambda: a2a_single(True)), ("all_to_all", a2a_list),
             ("gather", gather), ("scatter", scatter)]
    for name, fn in runs:
        cases.run("p2p." + name, fn)
    dist.barrier(group=gloo)
    dist.destroy_process_group()


def main():
    p = harness.worker_parser()
    p.add_argument("--backend", default="ringo")
    args = p.parse_args()
    if args.worker:
        harness.main_guard(lambda: worker(args))
    report = harness.Report("p2p_%dranks_%s" % (args.nranks, args.backend))
    script = os.path.abspath(__file__)
    init = harness.file_init()
    ranks = harness.Ranks(lambda r: harness.worker_argv(script, r, args.nranks, init, ["--backend", args.backend]),
                          args.nranks, deadline_s=180)
    codes, outputs = ranks.wait()
    report.merge_ranks("n%d." % args.nranks, codes, outputs, expect=["p2p." + c for c in CASES])
    for r, c in enumerate(codes):
        if c != 0:
            report.add("n%d.rank%d_exit" % (args.nranks, r), "failed",
                       "exit status %s; output ends: %s" % (c, harness.tail(outputs[r])))
    sys.exit(report.finish())


if __name__ == "__main__":
    main()
