#!/usr/bin/python3
"""What gloo gives a PyTorch program beyond the common collectives, through
ringo against gloo on the same inputs (N processes, --nranks):

- all_gather_coalesced: lists of tensors of different shapes (float32 and
  int64 lists), an empty tensor among them, complex tensors (which PyTorch passes on as
  real views), and the empty list (both refuse it).
- all_reduce of a sparse COO tensor: every rank a different number of
  entries (one rank none), repeated indices, a hybrid tensor with a dense
  dimension; the result compared with gloo's, and the op and device
  refusals.
- DistributedDataParallel over a model with a sparse embedding: a few SGD
  steps on each backend from the same seed, the parameters compared.
- receives from any source (dist.recv and irecv without src; the sender
  returned or from the Work's source rank) and tags: one message from each
  rank; tags taken out of order; several receives outstanding at once, from
  any source and by source; irecv posted before isend on every rank; a
  receive of another size (refused, the message kept).
- the monitored barrier: passing on every rank; then, each case on fresh
  groups of both backends, every rank's message against gloo's (the same
  first line: rank 0's "[Rank 0]: Rank R failed to pass monitoredBarrier in
  T ms", the others' "Rank N successfully reached monitoredBarrier, but
  received errors while waiting for send/recv from rank 0"): rank N-1
  staying away; ranks 2..N-1 away (rank 2, the first, named); ranks 1..N-1
  away with wait_all_ranks (every one named); rank 0 alone with a zero
  timeout ("Rank 0 timed out in monitoredBarrier").

Sums over 2 ranks are compared exactly; over 3 or more, floating sums within
a few ulps (the two backends may add in different orders).

Usage: parity_test.py --nranks N
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

TIMEOUT_MS = 1500  # the monitored barrier's, in the failing cases
GLOO_WAIT_S = 3  # the gloo groups' timeout there: how long gloo's other ranks wait


def worker(args):
    import datetime

    import torch
    import torch.distributed as dist

    import ringo_torch

    rank, n = args.rank, args.nranks
    dist.init_process_group("ringo", init_method=args.init, rank=rank, world_size=n,
                            timeout=datetime.timedelta(seconds=60))
    gloo = dist.new_group(backend="gloo")
    cases = harness.Cases()

    def same(a, b, what, exact=None):
        exact = (n <= 2) if exact is None else exact
        if exact or not (a.is_floating_point() or a.is_complex()):
            assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), "%s: %s != %s" % (what, a, b)
        else:
            assert torch.allclose(a, b, rtol=4 * n * torch.finfo(a.dtype).eps, atol=0), "%s: %s != %s" % (what, a, b)

    # ---- all_gather_coalesced --------------------------------------------------
    def gather_coalesced():
        g = torch.Generator().manual_seed(100 + rank)
        # One dtype per call (PyTorch refuses a mix before any backend sees it).
        for inputs in ([torch.randn(3, generator=g), torch.randint(-50, 50, (2, 2), generator=g).float(),
                        torch.zeros(0), torch.randn(1, 5, generator=g)],
                       [torch.randint(-9, 9, (7,), generator=g), torch.randint(-9, 9, (3, 1), generator=g)]):
            mine = [[torch.zeros_like(t) for t in inputs] for _ in range(n)]
            ref = [[torch.zeros_like(t) for t in inputs] for _ in range(n)]
            dist.all_gather_coalesced(mine, inputs)
            dist.all_gather_coalesced(ref, inputs, group=gloo)
            for r in range(n):
                for i in range(len(inputs)):
                    same(mine[r][i], ref[r][i], "rank %d tensor %d" % (r, i), exact=True)

    cases.run("all_gather_coalesced.shapes_and_dtypes", gather_coalesced)

    def gather_coalesced_complex():
        g = torch.Generator().manual_seed(200 + rank)
        inputs = [torch.randn(4, dtype=torch.complex64, generator=g), torch.randn(2, 3, generator=g)]
        mine = [[torch.zeros_like(t) for t in inputs] for _ in range(n)]
        ref = [[torch.zeros_like(t) for t in inputs] for _ in range(n)]
        dist.all_gather_coalesced(mine, inputs)
        dist.all_gather_coalesced(ref, inputs, group=gloo)
        for r in range(n):
            for i in range(len(inputs)):
                same(mine[r][i], ref[r][i], "rank %d tensor %d" % (r, i), exact=True)

    cases.run("all_gather_coalesced.complex", gather_coalesced_complex)

    def gather_coalesced_refusals():
        for group in (None, gloo):
            try:
                dist.all_gather_coalesced([[] for _ in range(n)], [], group=group)
            except (RuntimeError, ValueError) as e:
                assert "non-empty" in str(e) or "empty" in str(e), str(e)
            else:
                raise AssertionError("an empty input list was accepted by %s" % ("gloo" if group else "ringo"))
        bad = [[torch.zeros(3)] for _ in range(n)]
        bad[0] = [torch.zeros(4)]
        try:
            dist.all_gather_coalesced(bad, [torch.zeros(3)])
        except RuntimeError as e:
            assert "invalid tensor type or size" in str(e), str(e)
        else:
            raise AssertionError("a wrongly sized output was accepted")

    cases.run("all_gather_coalesced.refusals", gather_coalesced_refusals)

    # ---- sparse all_reduce -------------------------------------------------------
    def sparse_tensor(seed, nnz, dense=()):
        g = torch.Generator().manual_seed(seed)
        idx = torch.randint(0, 10, (2, nnz), generator=g)  # repeated indices likely
        val = torch.randint(-20, 20, (nnz,) + tuple(dense), generator=g).float()
        return torch.sparse_coo_tensor(idx, val, (10, 10) + tuple(dense))

    def sparse_allreduce():
        nnz = 0 if rank == n - 1 else 3 + 4 * rank
        for dense in ((), (3,)):
            mine = sparse_tensor(300 + rank, nnz, dense)
            ref = sparse_tensor(300 + rank, nnz, dense)
            work = dist.all_reduce(mine, async_op=True)
            work.wait()
            dist.all_reduce(ref, group=gloo)
            same(mine.to_dense(), ref.to_dense(), "dense form", exact=True)
            result = work.result()[0]
            assert result.is_sparse, "the Work's result is not sparse"
            same(result.coalesce().to_dense(), ref.coalesce().to_dense(), "the Work's result", exact=True)

    cases.run("sparse_all_reduce.against_gloo", sparse_allreduce)

    def sparse_refusals():
        t = sparse_tensor(7, 2)
        try:
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
        except RuntimeError as e:
            assert "only works with ReduceOp.SUM" in str(e), str(e)
        else:
            raise AssertionError("a sparse MAX all-reduce was accepted")

    cases.run("sparse_all_reduce.refusals", sparse_refusals)

    # ---- receive from any source, and tags --------------------------------------
    # Each case runs on ringo (the default group) and on gloo, and the two
    # outcomes must be the same (as sets where the order among senders is
    # the race's).
    def on_both(fn, what):
        mine, ref = fn(None), fn(gloo)
        assert mine == ref, "%s: ringo %s, gloo %s" % (what, mine, ref)

    def any_source(group):
        # Rank 0 takes one message from every other rank, from any source.
        if rank != 0:
            dist.send(torch.full((5,), float(rank)), dst=0, group=group, tag=7)
            return None
        got = set()
        for _ in range(n - 1):
            t = torch.zeros(5)
            src = dist.recv(t, group=group, tag=7)
            assert torch.equal(t, torch.full((5,), float(src))), "%s from rank %d" % (t, src)
            got.add(src)
        return sorted(got)

    cases.run("recv_any_source.one_from_each", lambda: on_both(any_source, "senders"))

    def tags_out_of_order(group):
        # Rank 1 sends tags 1, 2, 3; rank 0 receives 3, then 2, then 1.
        if rank == 1:
            works = [dist.isend(torch.full((t + 1,), float(t)), dst=0, group=group, tag=t) for t in (1, 2, 3)]
            for w in works:
                w.wait()
        if rank != 0:
            return None
        out = []
        for t in (3, 2, 1):
            x = torch.zeros(t + 1)
            dist.recv(x, src=1, group=group, tag=t)
            out.append(x.tolist())
        return out

    cases.run("tags.taken_out_of_order", lambda: on_both(tags_out_of_order, "tagged receives"))

    def many_outstanding(group):
        # Rank 0 posts receives from any source (tag 5) and by source (tag 6)
        # all at once, then waits; every other rank sends two tag-5 messages,
        # rank 1 also one tag-6 message, before (odd ranks) or after its
        # tag-5 ones.
        if rank != 0:
            works = []
            if rank == 1 and n % 2 == 0:
                works.append(dist.isend(torch.tensor([600.0]), dst=0, group=group, tag=6))
            for k in range(2):
                works.append(dist.isend(torch.tensor([rank * 10.0 + k]), dst=0, group=group, tag=5))
            if rank == 1 and n % 2 == 1:
                works.append(dist.isend(torch.tensor([600.0]), dst=0, group=group, tag=6))
            for w in works:
                w.wait()
            return None
        bufs, works, kinds = [], [], []
        for i in range(2 * (n - 1) + 1):
            b = torch.zeros(1)
            bufs.append(b)
            if i == 1:
                works.append(dist.irecv(b, src=1, group=group, tag=6))
                kinds.append("by source")
            else:
                works.append(dist.irecv(b, group=group, tag=5))
                kinds.append("any")
        got = []
        per_sender = {}
        for b, w, kind in zip(bufs, works, kinds):
            w.wait()
            if kind == "any":
                src = w._source_rank()
                value = int(b.item())
                assert value // 10 == src, "value %d from rank %d" % (value, src)
                # One sender's messages arrive in the order sent.
                assert per_sender.get(src, -1) < value % 10, "rank %d's messages out of order" % src
                per_sender[src] = value % 10
                got.append((src, value))
            else:
                got.append(("tag 6", int(b.item())))
        return sorted(got, key=str)

    cases.run("recv_any_source.several_outstanding_mixed", lambda: on_both(many_outstanding, "receives"))

    def irecv_first_everywhere(group):
        # Every rank posts its receive from the previous rank before its send
        # to the next: both backends must not deadlock.
        prev, nxt = (rank - 1) % n, (rank + 1) % n
        inbox = torch.zeros(300000)
        r = dist.irecv(inbox, src=prev, group=group, tag=2)
        s = dist.isend(torch.full((300000,), float(rank)), dst=nxt, group=group, tag=2)
        r.wait()
        s.wait()
        return inbox[0].item() == prev and inbox[-1].item() == prev

    cases.run("send_recv.irecv_before_isend", lambda: on_both(irecv_first_everywhere, "ring exchange"))

    def recv_any_size_mismatch():
        # Another size than the message's: gloo and ringo both raise on the
        # receiver (ringo keeps the message for a receive of the right size).
        # Posted together with a good receive, only the bad one's Work fails;
        # a receive by source reports its source too.
        if rank == 1:
            dist.send(torch.zeros(4), dst=0, tag=9)
            dist.send(torch.ones(2), dst=0, tag=10)
        elif rank == 0:
            try:
                dist.recv(torch.zeros(3), tag=9)
            except RuntimeError as e:
                assert "size" in str(e), str(e)
            else:
                raise AssertionError("a receive of another size was accepted")
            good = torch.zeros(2)
            w_good = dist.irecv(good, src=1, tag=10)
            w_bad = dist.irecv(torch.zeros(5), tag=9)
            w_good.wait()
            assert torch.equal(good, torch.ones(2)) and w_good._source_rank() == 1
            try:
                w_bad.wait()
            except RuntimeError as e:
                assert "size" in str(e), str(e)
            else:
                raise AssertionError("a receive of another size was accepted")
            assert dist.recv(torch.zeros(4), tag=9) == 1
        dist.barrier()

    cases.run("recv_any_source.size_mismatch", recv_any_size_mismatch)

    def ddp_sparse():
        from torch.nn.parallel import DistributedDataParallel as DDP

        def train(group):
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.EmbeddingBag(40, 6, mode="sum", sparse=True),
                                        torch.nn.Linear(6, 2))
            ddp = DDP(model, process_group=group)
            opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
            g = torch.Generator().manual_seed(500 + rank)
            for _ in range(4):
                words = torch.randint(0, 40, (8, 5), generator=g)
                loss = ddp(words).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            return [p.detach().clone() for p in model.parameters()]

        mine = train(dist.group.WORLD)
        ref = train(gloo)
        for i, (a, b) in enumerate(zip(mine, ref)):
            same(a, b, "parameter %d" % i)

    cases.run("ddp.sparse_embedding", ddp_sparse)

    # ---- the monitored barrier -------------------------------------------------------

    def monitored_pass():
        ringo_torch.monitored_barrier(timeout=datetime.timedelta(seconds=30))
        dist.group.WORLD.monitored_barrier(datetime.timedelta(seconds=30), wait_all_ranks=True)
        dist.monitored_barrier(group=gloo, timeout=datetime.timedelta(seconds=30))

    cases.run("monitored_barrier.passes", monitored_pass)

    def monitored(group, away, wait_all, ms):
        """Ranks in `away` stay out; returns what this rank raised ("" if
        nothing), None for a rank away."""
        if rank in away:
            return None
        try:
            group.monitored_barrier(datetime.timedelta(milliseconds=ms), wait_all_ranks=wait_all)
        except RuntimeError as e:
            return str(e)
        return ""

    def same_words(away, wait_all, ms, want0):
        """One case on a fresh ringo group and a fresh gloo group (a failed
        monitored barrier leaves a group's sends unmatched): every rank that
        came raises, with gloo's words: rank 0's first line is want0 on both
        (and, where rank 0 ran out of time, so is its "timed out" line), the
        others' first line is gloo's "Rank N successfully reached ...". gloo's
        other ranks wait for their group's timeout (GLOO_WAIT_S); Ringo's hear
        rank 0 at once."""
        ringo_group = dist.new_group(backend="ringo")
        gloo_group = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=GLOO_WAIT_S))
        said = {}
        for name, group in (("ringo", ringo_group), ("gloo", gloo_group)):
            dist.barrier()  # everyone is here before the case
            said[name] = monitored(group, away, wait_all, ms)
        dist.barrier()
        if rank in away:
            return
        ringo, gloo_said = said["ringo"], said["gloo"]
        assert ringo and gloo_said, "rank %d: a barrier with ranks away passed (ringo %r, gloo %r)" % (
            rank, ringo, gloo_said)
        first = ringo.splitlines()[0]
        assert first == gloo_said.splitlines()[0], "rank %d: ringo said %r, gloo %r" % (rank, ringo, gloo_said)
        if rank == 0:
            assert first == want0, "rank 0: %r, want %r" % (first, want0)
            if "timed out in monitoredBarrier" in gloo_said:
                timed_out = [line for line in gloo_said.splitlines() if "timed out in monitoredBarrier" in line][0]
                assert timed_out in ringo.splitlines(), "rank 0: ringo %r lacks gloo's %r" % (ringo, timed_out)
        else:
            want = ("Rank %d successfully reached monitoredBarrier, but received errors while waiting for "
                    "send/recv from rank 0" % rank)
            assert first.startswith(want), "rank %d: %r, want %r" % (rank, first, want)
            assert want0 in ringo, "rank %d: ringo's message lacks rank 0's words: %r" % (rank, ringo)

    failed = "[Rank 0]: Rank%s %s failed to pass monitoredBarrier in %d ms"
    cases.run("monitored_barrier.one_rank_away", same_words, [n - 1], False, TIMEOUT_MS,
              failed % ("", n - 1, TIMEOUT_MS))
    if n >= 3:  # the first missing rank in order is named
        cases.run("monitored_barrier.failure_order", same_words, list(range(2, n)), False, TIMEOUT_MS,
                  failed % ("", 2, TIMEOUT_MS))
    away = list(range(1, n))
    cases.run("monitored_barrier.wait_all_ranks", same_words, away, True, 300,
              failed % ("s", ", ".join(map(str, away)), 300))
    # Rank 0 alone with no time at all: "Rank 0 timed out in monitoredBarrier".
    cases.run("monitored_barrier.rank_0_timeout", same_words, away, False, 0, failed % ("", 1, 0))

    dist.barrier()
    dist.destroy_process_group()


def main():
    p = harness.worker_parser()
    args = p.parse_args()
    if args.worker:
        harness.main_guard(lambda: worker(args))
    report = harness.Report("parity_%dranks" % args.nranks)
    script = os.path.abspath(__file__)
    init = harness.file_init()
    ranks = harness.Ranks(lambda r: harness.worker_argv(script, r, args.nranks, init, []), args.nranks,
                          deadline_s=180)
    codes, outputs = ranks.wait()
    report.merge_ranks("n%d." % args.nranks, codes, outputs)
    for r, c in enumerate(codes):
        if c != 0:
            report.add("n%d.rank%d_exit" % (args.nranks, r), "failed",
                       "exit status %s; output ends: %s" % (c, harness.tail(outputs[r])))
    sys.exit(report.finish())


if __name__ == "__main__":
    main()
