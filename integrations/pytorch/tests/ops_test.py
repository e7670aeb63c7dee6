#!/usr/bin/python3
"""Every ringo_torch collective against gloo's result on the same inputs.

N processes (--nranks) each make the default group with backend "ringo" and
a gloo group over the same ranks, run every operation on both with the same
inputs and compare: every dtype both support (and against a local reference
for those gloo lacks: bfloat16, bool, int16 and complex moves), every
reduction, every root; asynchronous operations and their futures; subgroups;
empty and non-contiguous tensors; the errors for what Ringo does not do.

Exact where the reduction order cannot matter (integers, min/max, 2 ranks,
moves); floating-point sums over 3 or more ranks within a relative tolerance
of a few ulps of the dtype times the rank count (Ringo's ring and gloo's
algorithm add in different orders).

--device cuda (PyTorch 2.x with ringo_torch built with CUDA, ringo_torch.HAS_CUDA;
a GPU): every operation through the ringo group runs on CUDA tensors, every
rank on cuda:0 (the ranks are processes sharing the one GPU), so the
operations go through ringo_torch's CUDA path (cuda_group.cc: a Ringo GPU
communicator and stream per device) instead of its host path. The inputs are
made on the CPU as before, copied to the GPU for ringo, and the results are
copied back (.cpu()) and compared with gloo's, which stays on the CPU with
the same values. Nothing is skipped for CUDA: ringo_torch's CUDA path runs
the same bodies (ops.cc) for every dtype, op and layout, and refuses the same
things on the caller's thread. Where the semantics differ, the CUDA check is
the CUDA one: Work.wait() makes the current stream wait (the host does not
block), so the asynchronous case synchronises the stream before it asks
is_completed(); one case (cuda.stream_semantics) checks that a collective
waits for work queued on a user stream and that wait() orders later work on
that stream. The worker processes run the Python that runs this script
(sys.executable) unless RINGO_TORCH_PYTHON says otherwise. --device cpu (the
default) is the test as CI runs it, unchanged.

PyTorch 2.x: the tensor forms are called by their public names
(all_gather_into_tensor, reduce_scatter_tensor) where the private ones
(_all_gather_base, _reduce_scatter_base) are gone, and on CUDA; the CPU run
keeps the private names where they exist (PyTorch 1.13).

The last line is "RESULT PASS ..." or "RESULT FAIL <why>"; the exit status
is non-zero on failure.

Usage: ops_test.py --nranks N [--backend ringo] [--device cpu|cuda] [--deadline SECONDS]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

GLOO_DTYPES = ["int8", "uint8", "int32", "int64", "float16", "float32", "float64"]
OPS = ["SUM", "PRODUCT", "MIN", "MAX"]


def worker(args):
    import datetime
    import time

    import torch
    import torch.distributed as dist

    cuda = args.device == "cuda"
    if cuda:
        # Every rank on cuda:0: the ranks are processes sharing the one GPU.
        torch.cuda.set_device(0)
    if args.backend == "ringo":
        import ringo_torch  # noqa: F401  (registers the backend)
        if cuda and not ringo_torch.HAS_CUDA:
            harness.emit("cuda.ringo_torch_has_cuda", "failed",
                         "ringo_torch was built without CUDA (ringo_torch.HAS_CUDA is False, built with torch %s): "
                         "CUDA tensors cannot go through it; build it with setup.py against PyTorch 2.x with CUDA"
                         % ringo_torch.BUILT_WITH_TORCH)
            return
    dist.init_process_group(args.backend, init_method=args.init, rank=args.rank, world_size=args.nranks,
                            timeout=datetime.timedelta(seconds=60))
    gloo = dist.new_group(backend="gloo")
    rank, n = args.rank, args.nranks
    cases = harness.Cases()
    dt = lambda name: getattr(torch, name)  # noqa: E731

    # The device of every tensor given to the group under test: dev() moves a
    # tensor there (the identity on the CPU run), host() brings a result back
    # for comparison with gloo's (also the identity on the CPU run).
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")

    def dev(t):
        return t.to(device) if cuda else t

    def host(t):
        return t.cpu() if cuda else t

    # The tensor forms: the private names where they exist on the CPU run
    # (PyTorch 1.13, as CI has always run them), else the public ones.
    def all_gather_base(output, input, **kwargs):
        if (not cuda and hasattr(dist, "_all_gather_base")) or not hasattr(dist, "all_gather_into_tensor"):
            return dist._all_gather_base(output, input, **kwargs)
        return dist.all_gather_into_tensor(output, input, **kwargs)

    def reduce_scatter_base(output, input, **kwargs):
        if (not cuda and hasattr(dist, "_reduce_scatter_base")) or not hasattr(dist, "reduce_scatter_tensor"):
            return dist._reduce_scatter_base(output, input, **kwargs)
        return dist.reduce_scatter_tensor(output, input, **kwargs)

    has_coalesced = hasattr(dist, "all_reduce_coalesced")

    if cuda:
        def on_cuda():
            x = dev(torch.ones(3))
            assert x.is_cuda and x.device.index == 0, "dev() gave %s" % x.device
            dist.all_reduce(x)
            assert x.is_cuda, "the result left the GPU: %s" % x.device
            assert torch.equal(host(x), torch.full((3,), float(n))), host(x)
            assert torch.cuda.current_device() == 0

        cases.run("cuda.tensors_stay_on_cuda0", on_cuda)

    def make(dtype, count, r, seed, op="SUM"):
        g = torch.Generator().manual_seed(seed * 7919 + r * 104729 + count)
        if dtype == torch.bool:
            return torch.randint(0, 2, (count,), generator=g).bool()
        if dtype.is_floating_point or dtype.is_complex:
            x = torch.randn(count, generator=g, dtype=torch.float64)
            if op == "PRODUCT":
                x = 0.5 + x.abs()
            if dtype.is_complex:
                return torch.complex(x, x.flip(0)).to(dtype)
            return x.to(dtype)
        if op == "PRODUCT":
            lo, hi = (1, 3) if dtype == torch.uint8 else (-1, 3)
            x = torch.randint(lo, hi, (count,), generator=g)
            return torch.where(x == 0, torch.ones_like(x), x).to(dtype)
        lo, hi = (0, 60) if dtype == torch.uint8 else (-30, 30)
        return torch.randint(lo, hi, (count,), generator=g).to(dtype)

    def exact_for(dtype, op):
        return (not dtype.is_floating_point and not dtype.is_complex) or op in ("MIN", "MAX") or n == 2

    def check(got, want, exact, what=""):
        got, want = host(got), host(want)
        assert got.dtype == want.dtype, "%s: dtype %s, want %s" % (what, got.dtype, want.dtype)
        assert got.shape == want.shape, "%s: shape %s, want %s" % (what, tuple(got.shape), tuple(want.shape))
        if exact:
            if not torch.equal(got, want):
                bad = (got != want).nonzero()[:3].flatten().tolist()
                raise AssertionError("%s: not bit-identical at %s: %s vs %s" % (
                    what, bad, got.flatten()[bad].tolist(), want.flatten()[bad].tolist()))
        else:
            eps = torch.finfo(got.dtype).eps if got.dtype.is_floating_point else torch.finfo(torch.float32).eps
            g, w = torch.view_as_real(got) if got.is_complex() else got, torch.view_as_real(want) if want.is_complex() else want
            if not torch.allclose(g.double(), w.double(), rtol=4 * n * eps, atol=4 * n * eps):
                err = (g.double() - w.double()).abs().max().item()
                raise AssertionError("%s: max abs difference %g beyond %d*eps" % (what, err, 4 * n))

    def expect_error(fn, text):
        try:
            fn()
        except RuntimeError as e:
            assert text in str(e), "RuntimeError without %r: %s" % (text, e)
            return
        raise AssertionError("no RuntimeError (wanted one saying %r)" % text)

    # ---- all_reduce ----------------------------------------------------------
    def allreduce_vs_gloo(dtype, op, counts):
        for count in counts:
            x = make(dtype, count, rank, 1, op)
            mine, ref = dev(x.clone()), x.clone()
            dist.all_reduce(mine, op=getattr(dist.ReduceOp, op))
            dist.all_reduce(ref, op=getattr(dist.ReduceOp, op), group=gloo)
            check(mine, ref, exact_for(dtype, op), "count %d" % count)

    for name in GLOO_DTYPES:
        for op in OPS:
            counts = (1, 3, 1025, 70001) if op == "SUM" else (1, 1025)
            cases.run("allreduce.%s.%s" % (op.lower(), name), allreduce_vs_gloo, dt(name), op, counts)

    def allreduce_avg(dtype):
        for count in (1, 1025):
            x = make(dtype, count, rank, 2)
            mine, ref = dev(x.clone()), x.clone()
            dist.all_reduce(mine, op=dist.ReduceOp.AVG)
            dist.all_reduce(ref, group=gloo)
            if dtype.is_floating_point:
                # Ringo scales each input by 1/n, then sums: the same value as
                # sum/n when n is 2 (a power of two, one addition).
                check(mine, (ref.double() / n).to(dtype), n == 2, "count %d" % count)
            else:
                check(mine, torch.div(ref, n, rounding_mode="trunc"), True, "count %d" % count)

    for name in GLOO_DTYPES:
        cases.run("allreduce.avg.%s" % name, allreduce_avg, dt(name))

    def allreduce_premul(dtype):
        if not hasattr(dist, "_make_nccl_premul_sum"):
            raise cases.Skip("this torch has no premul-sum ReduceOp")
        for factor in (0.5, 3.0, dev(torch.tensor([0.25], dtype=dtype))):
            x = make(dtype, 1025, rank, 3)
            mine = dev(x.clone())
            # A tensor factor: one per input tensor in 1.13, a tensor in 2.x.
            arg = [factor] if torch.is_tensor(factor) and torch.__version__ < "2" else factor
            dist.all_reduce(mine, op=dist._make_nccl_premul_sum(arg))
            f = factor.item() if torch.is_tensor(factor) else factor
            ref = (x * f).to(dtype)
            dist.all_reduce(ref, group=gloo)
            check(mine, ref, n == 2, "factor %s" % factor)

    for name in ("float16", "float32", "float64"):
        cases.run("allreduce.premul_sum.%s" % name, allreduce_premul, dt(name))

    def allreduce_bool(op):
        x = make(torch.bool, 1037, rank, 4)
        mine = dev(x.clone())
        dist.all_reduce(mine, op=getattr(dist.ReduceOp, op))
        ref = x.to(torch.uint8)
        dist.all_reduce(ref, op=dist.ReduceOp.MAX if op in ("SUM", "MAX") else dist.ReduceOp.MIN, group=gloo)
        check(mine, ref.bool(), True)
        assert mine.view(torch.uint8).max().item() <= 1, "a bool byte other than 0/1"

    for op in OPS:
        cases.run("allreduce.%s.bool" % op.lower(), allreduce_bool, op)
    cases.run("allreduce.avg.bool_refused", expect_error,
              lambda: dist.all_reduce(dev(torch.ones(3, dtype=torch.bool)), op=dist.ReduceOp.AVG),
              "not defined for bool")

    def allreduce_bf16(op):
        for count in (1, 1025):
            x = make(torch.bfloat16, count, rank, 5, op if op != "AVG" else "SUM")
            mine = dev(x.clone())
            dist.all_reduce(mine, op=getattr(dist.ReduceOp, op))
            ref = x.float()  # bf16 values are exact in fp32; the fp32 result rounded once to bf16
            dist.all_reduce(ref, op=getattr(dist.ReduceOp, op if op != "AVG" else "SUM"), group=gloo)
            if op == "AVG":
                ref = ref / n
            exact = op in ("MIN", "MAX") or (n == 2 and op in ("SUM", "PRODUCT"))
            check(mine, ref.to(torch.bfloat16), exact, "count %d" % count)

    for op in OPS + ["AVG"]:
        cases.run("allreduce.%s.bfloat16" % op.lower(), allreduce_bf16, op)

    def allreduce_complex():
        x = make(torch.complex64, 513, rank, 6)
        mine, ref = dev(x.clone()), x.clone()
        dist.all_reduce(mine)
        dist.all_reduce(ref, group=gloo)
        check(mine, ref, n == 2)

    cases.run("allreduce.sum.complex64", allreduce_complex)
    cases.run("allreduce.int16_refused", expect_error,
              lambda: dist.all_reduce(dev(torch.ones(3, dtype=torch.int16))), "cannot reduce")
    cases.run("allreduce.band_refused", expect_error,
              lambda: dist.all_reduce(dev(torch.ones(3, dtype=torch.int32)), op=dist.ReduceOp.BAND),
              "not supported by Ringo")

    def allreduce_coalesced(dtype):
        if not has_coalesced:
            raise cases.Skip("this torch has no all_reduce_coalesced")
        xs = [make(dtype, c, rank, 7 + i) for i, c in enumerate((1, 17, 1000, 3))]
        xs[2] = xs[2].view(10, 100)
        mine, ref = [dev(x.clone()) for x in xs], [x.clone() for x in xs]
        dist.all_reduce_coalesced(mine)
        dist.all_reduce_coalesced(ref, group=gloo)
        for a, b in zip(mine, ref):
            check(a, b, exact_for(dtype, "SUM"))

    for name in ("float32", "int64"):
        cases.run("allreduce_coalesced.%s" % name, allreduce_coalesced, dt(name))

    # ---- broadcast, reduce ---------------------------------------------------
    ALL_DTYPES = GLOO_DTYPES + ["bfloat16", "bool", "int16", "complex64"]

    def broadcast(dtype):
        for root in range(n):
            for count in (1, 4099):
                x = make(dtype, count, rank, 8)
                mine = dev(x.clone())
                dist.broadcast(mine, root)
                if dtype in [dt(d) for d in GLOO_DTYPES]:
                    ref = x.clone()
                    dist.broadcast(ref, root, group=gloo)
                else:
                    ref = make(dtype, count, root, 8)
                check(mine, ref, True, "root %d count %d" % (root, count))

    for name in ALL_DTYPES:
        cases.run("broadcast.%s" % name, broadcast, dt(name))

    def reduce(dtype, op):
        for root in range(n):
            x = make(dtype, 2049, rank, 9, op)
            mine, ref = dev(x.clone()), x.clone()
            dist.reduce(mine, root, op=getattr(dist.ReduceOp, op))
            dist.reduce(ref, root, op=getattr(dist.ReduceOp, op), group=gloo)
            if rank == root:
                check(mine, ref, exact_for(dtype, op), "root %d" % root)
            else:  # Ringo writes the root only (gloo leaves partial sums here)
                check(mine, x, True, "non-root %d keeps its input" % rank)

    for name in ("int32", "float32", "float64", "float16"):
        for op in OPS:
            cases.run("reduce.%s.%s" % (op.lower(), name), reduce, dt(name), op)

    # ---- all_gather, reduce_scatter -------------------------------------------
    def allgather(dtype):
        for count in (1, 3001):
            x = make(dtype, count, rank, 10)
            mine = [dev(torch.zeros_like(x)) for _ in range(n)]
            dist.all_gather(mine, dev(x))
            if dtype in [dt(d) for d in GLOO_DTYPES]:
                ref = [torch.zeros_like(x) for _ in range(n)]
                dist.all_gather(ref, x, group=gloo)
            else:
                ref = [make(dtype, count, r, 10) for r in range(n)]
            for r in range(n):
                check(mine[r], ref[r], True, "count %d from rank %d" % (count, r))

    for name in ALL_DTYPES:
        cases.run("allgather.%s" % name, allgather, dt(name))

    def allgather_base(dtype):
        for count in (1, 3001):
            x = make(dtype, count, rank, 11)
            mine = dev(torch.zeros(n * count, dtype=dtype))
            all_gather_base(mine, dev(x))
            ref = [torch.zeros_like(x) for _ in range(n)]
            dist.all_gather(ref, x, group=gloo)
            check(mine, torch.cat(ref), True, "count %d" % count)

    for name in GLOO_DTYPES:
        cases.run("allgather_base.%s" % name, allgather_base, dt(name))

    def tensor_forms():
        # all_gather_into_tensor / reduce_scatter_tensor: the public names of
        # _allgather_base / _reduce_scatter_base (a stacked output too).
        if not hasattr(dist, "all_gather_into_tensor"):
            raise cases.Skip("this torch has no all_gather_into_tensor")
        x = dev(make(torch.float32, 12, rank, 21).view(3, 4))
        stacked = dev(torch.zeros(n, 3, 4))
        dist.all_gather_into_tensor(stacked, x)
        check(stacked, torch.stack([make(torch.float32, 12, r, 21).view(3, 4) for r in range(n)]), True, "gather")
        y = make(torch.float64, 5 * n, rank, 22)
        out = dev(torch.zeros(5, dtype=torch.float64))
        dist.reduce_scatter_tensor(out, dev(y))
        ref = y.clone()
        dist.all_reduce(ref, group=gloo)
        check(out, ref.chunk(n)[rank], exact_for(torch.float64, "SUM"), "reduce_scatter_tensor")

    cases.run("allgather_into_tensor_and_reduce_scatter_tensor", tensor_forms)

    def reduce_scatter(dtype, op, base):
        for count in (1, 1001):
            x = make(dtype, n * count, rank, 12, op)
            mine = dev(torch.zeros(count, dtype=dtype))
            if base:
                reduce_scatter_base(mine, dev(x), op=getattr(dist.ReduceOp, op))
            else:
                dist.reduce_scatter(mine, list(dev(x).chunk(n)), op=getattr(dist.ReduceOp, op))
            ref = x.clone()  # gloo has no reduce_scatter: its all_reduce, this rank's chunk
            dist.all_reduce(ref, op=getattr(dist.ReduceOp, op), group=gloo)
            check(mine, ref.chunk(n)[rank], exact_for(dtype, op), "count %d" % count)

    for name in ("int64", "float32", "float16", "uint8"):
        for op in OPS:
            cases.run("reduce_scatter.%s.%s" % (op.lower(), name), reduce_scatter, dt(name), op, False)
    for name in ("int32", "float32", "float64"):
        for op in ("SUM", "MAX"):
            cases.run("reduce_scatter_base.%s.%s" % (op.lower(), name), reduce_scatter, dt(name), op, True)

    # ---- barrier, asynchronous work -------------------------------------------
    def barrier():
        # Rank 0 comes late; no rank may leave before it came (the ranks
        # share one host's monotonic clock).
        dist.barrier(group=gloo)
        if rank == 0:
            time.sleep(0.5)
        entered = time.monotonic()
        dist.barrier()
        left = time.monotonic()
        came = torch.tensor([entered], dtype=torch.float64)
        dist.broadcast(came, 0, group=gloo)
        assert left >= came.item(), "barrier returned %.3f s before rank 0 arrived" % (came.item() - left)

    cases.run("barrier.waits_for_every_rank", barrier)

    def async_overlaps():
        # Rank 0 issues first and looks at its work before the others issue
        # theirs (they wait for it at a gloo barrier): it cannot be complete.
        dist.barrier(group=gloo)
        x = dev(torch.full((1000,), float(rank + 1)))
        if rank == 0:
            start = time.monotonic()
            work = dist.all_reduce(x, async_op=True)
            issued = time.monotonic() - start
            assert issued < 5, "all_reduce(async_op=True) blocked %.3f s" % issued
            assert not work.is_completed(), "completed before the other ranks issued theirs"
            dist.barrier(group=gloo)
        else:
            dist.barrier(group=gloo)
            work = dist.all_reduce(x, async_op=True)
        assert work.wait() is True
        if cuda:
            # wait() only made the current stream wait for the collective.
            torch.cuda.current_stream().synchronize()
        assert work.is_completed()
        if hasattr(work, "is_success"):
            assert work.is_success()
        want = float(n * (n + 1) // 2)
        assert torch.equal(host(x), torch.full((1000,), want)), host(x)[:3]
        value = work.get_future().wait()
        assert isinstance(value, list) and len(value) == 1 and value[0] is not None
        assert torch.equal(value[0], x)
        assert torch.equal(work.result()[0], x)

    cases.run("async.returns_before_completion", async_overlaps)

    def async_in_flight():
        xs = [make(torch.float32, 4096 + i, rank, 13 + i) for i in range(6)]
        works, mine = [], []
        for i, x in enumerate(xs):
            t = dev(x.clone())
            mine.append(t)
            if i % 3 == 0:
                works.append(dist.all_reduce(t, async_op=True))
            elif i % 3 == 1:
                works.append(dist.broadcast(t, i % n, async_op=True))
            else:
                works.append(dist.all_reduce(t, op=dist.ReduceOp.MAX, async_op=True))
        outs = [dev(torch.zeros(100)) for _ in range(n)]
        works.append(dist.all_gather(outs, dev(torch.full((100,), float(rank))), async_op=True))
        for w in reversed(works):
            w.wait()
        for i, x in enumerate(xs):
            ref = x.clone()
            if i % 3 == 0:
                dist.all_reduce(ref, group=gloo)
            elif i % 3 == 1:
                dist.broadcast(ref, i % n, group=gloo)
            else:
                dist.all_reduce(ref, op=dist.ReduceOp.MAX, group=gloo)
            check(mine[i], ref, exact_for(torch.float32, "SUM" if i % 3 == 0 else "MAX"), "op %d" % i)
        for r in range(n):
            assert torch.equal(host(outs[r]), torch.full((100,), float(r)))

    cases.run("async.many_in_flight_in_order", async_in_flight)

    def async_future_then():
        x = dev(torch.ones(10))
        fut = dist.all_reduce(x, async_op=True).get_future().then(lambda f: f.value()[0] * 2)
        assert torch.equal(host(fut.wait()), torch.full((10,), 2.0 * n))

    cases.run("async.future_then", async_future_then)

    def cuda_stream_semantics():
        # ProcessGroupNCCL's stream semantics: the collective waits for what the
        # caller queued on its current stream (here a user stream, with a long
        # kernel chain ahead of the all-reduce), and wait() makes that stream wait
        # for the collective, so work queued after it sees the result without any
        # host synchronisation in between.
        s = torch.cuda.Stream()
        count = 1 << 20
        with torch.cuda.stream(s):
            x = torch.full((count,), float(rank + 1), device=device)
            for _ in range(100):  # keeps the stream busy when the collective is issued (exact)
                x.mul_(2.0)
            for _ in range(100):
                x.mul_(0.5)
            work = dist.all_reduce(x, async_op=True)
            work.wait()
            y = x * 3.0
        s.synchronize()
        want = 3.0 * float(n * (n + 1) // 2)
        got = host(y)
        assert torch.equal(got, torch.full((count,), want)), \
            "after the all-reduce on a user stream: %s, want %s everywhere" % (got[:3].tolist(), want)

    if cuda:
        cases.run("cuda.stream_semantics", cuda_stream_semantics)

    # ---- empty and non-contiguous tensors ------------------------------------
    def empty():
        e = dev(torch.zeros(0))
        dist.all_reduce(e)
        dist.broadcast(e, 0)
        dist.reduce(e, 0)
        dist.all_gather([dev(torch.zeros(0)) for _ in range(n)], e)
        all_gather_base(dev(torch.zeros(0)), e)
        dist.reduce_scatter(dev(torch.zeros(0)), [dev(torch.zeros(0)) for _ in range(n)])
        reduce_scatter_base(dev(torch.zeros(0)), dev(torch.zeros(0)))
        if has_coalesced:
            dist.all_reduce_coalesced([dev(torch.zeros(0)), dev(torch.zeros(0, 3))])
        e2 = dev(torch.zeros(4, 0))
        dist.all_reduce(e2)
        assert e2.shape == (4, 0)
        # the group still works afterwards
        x = dev(torch.ones(5))
        dist.all_reduce(x)
        assert torch.equal(host(x), torch.full((5,), float(n)))

    cases.run("empty.every_op", empty)

    def noncontig_allreduce():
        base = make(torch.float32, 36, rank, 14).view(6, 6)
        mine, ref = dev(base.clone()), base.clone()
        dist.all_reduce(mine[:, 1])          # a strided column
        dist.all_reduce(mine[1:4, 2:5].t())  # a transposed block
        col, blk = ref[:, 1].contiguous(), ref[1:4, 2:5].t().contiguous()
        dist.all_reduce(col, group=gloo)
        dist.all_reduce(blk, group=gloo)
        ref[:, 1] = col
        ref[1:4, 2:5] = blk.t()
        check(mine, ref, exact_for(torch.float32, "SUM"))  # and the rest of `base` untouched

    cases.run("noncontig.allreduce", noncontig_allreduce)

    def noncontig_others():
        root = n - 1
        b = make(torch.float64, 40, rank, 15).view(5, 8)
        mine = dev(b.clone())
        dist.broadcast(mine[:, ::2], root)
        want = b.clone()
        want[:, ::2] = make(torch.float64, 40, root, 15).view(5, 8)[:, ::2]
        check(mine, want, True, "broadcast")

        mine = dev(b.clone())
        dist.reduce(mine.t()[1:], 0, op=dist.ReduceOp.MAX)
        ref = b.t()[1:].contiguous()
        dist.reduce(ref, 0, op=dist.ReduceOp.MAX, group=gloo)
        want = b.clone()
        if rank == 0:
            want.t()[1:] = ref
        check(mine, want, True, "reduce")

        # The views are taken on the device (a copy of a view to the GPU would
        # be contiguous).
        strided = lambda r, d=(lambda t: t): d(make(torch.int32, 24, r, 16).view(3, 8))[:, ::2]  # noqa: E731
        outs = [dev(torch.zeros(4, 3, dtype=torch.int32)).t() for _ in range(n)]
        dist.all_gather(outs, strided(rank, dev))
        for r in range(n):
            check(outs[r].contiguous(), strided(r).contiguous(), True, "all_gather")
        transposed = lambda r, d=(lambda t: t): d(make(torch.int32, 6, r, 17).view(3, 2)).t()  # noqa: E731
        out = dev(torch.zeros(3, 2 * n, dtype=torch.int32)).t()
        all_gather_base(out, transposed(rank, dev))
        check(out.contiguous(), torch.cat([transposed(r) for r in range(n)]), True, "_all_gather_base")

        ins = [make(torch.float32, 8, rank, 18 + r).view(2, 4).t() for r in range(n)]
        out = dev(torch.zeros(2, 4)).t()
        dist.reduce_scatter(out, [dev(t.t()).t() for t in ins] if cuda else ins)
        ref = torch.cat([t.contiguous().flatten() for t in ins])
        dist.all_reduce(ref, group=gloo)
        check(out.contiguous().flatten(), ref.chunk(n)[rank], exact_for(torch.float32, "SUM"), "reduce_scatter")

        if has_coalesced:
            xs = [dev(torch.ones(3, 4)).t(), dev(torch.arange(10.0))[::2]]
            dist.all_reduce_coalesced(xs)
            check(xs[0].contiguous(), torch.full((4, 3), float(n)), True, "coalesced 0")
            check(xs[1].contiguous(), torch.arange(10.0)[::2] * n, True, "coalesced 1")

    cases.run("noncontig.broadcast_reduce_gather_scatter_coalesced", noncontig_others)

    # ---- subgroups -------------------------------------------------------------
    def subgroups():
        first = list(range(n - 1)) if n > 2 else [0]
        last = list(range(1, n))
        r_first, g_first = dist.new_group(first), dist.new_group(first, backend="gloo")
        r_last, g_last = dist.new_group(last), dist.new_group(last, backend="gloo")
        y = dev(torch.full((7,), float(rank)))
        in_world = dist.all_reduce(y, async_op=True)  # the world group, alongside the subgroups'
        for members, rg, gg in ((first, r_first, g_first), (last, r_last, g_last)):
            if rank not in members:
                assert rg == dist.GroupMember.NON_GROUP_MEMBER
                continue
            assert dist.get_world_size(rg) == len(members) and dist.get_rank(rg) == members.index(rank)
            x = make(torch.float32, 2001, rank, 19)
            mine, ref = dev(x.clone()), x.clone()
            dist.all_reduce(mine, group=rg, async_op=True).wait()
            dist.all_reduce(ref, group=gg)
            check(mine, ref, len(members) <= 2, "subgroup all_reduce")
            src = members[-1]
            b = dev(make(torch.int64, 99, rank, 20))
            dist.broadcast(b, src, group=rg)
            check(b, make(torch.int64, 99, src, 20), True, "subgroup broadcast from global rank %d" % src)
            outs = [dev(torch.zeros(3)) for _ in members]
            dist.all_gather(outs, dev(torch.full((3,), float(rank))), group=rg)
            for i, m in enumerate(members):
                check(outs[i], torch.full((3,), float(m)), True, "subgroup all_gather")
        in_world.wait()
        assert torch.equal(host(y), torch.full((7,), float(n * (n - 1) // 2))), host(y)
        dist.barrier()
        # A group of its own after that, destroyed again: the world group goes on.
        extra = dist.new_group(list(range(n)))
        z = dev(torch.ones(4))
        dist.all_reduce(z, group=extra)
        assert torch.equal(host(z), torch.full((4,), float(n)))
        dist.destroy_process_group(extra)
        z = dev(torch.ones(4))
        dist.all_reduce(z)
        assert torch.equal(host(z), torch.full((4,), float(n)))

    cases.run("subgroups.own_communicators", subgroups)

    # ---- what Ringo does not have yet ------------------------------------------
    def p2p_not_yet():
        import ringo_torch
        if args.backend != "ringo" or ringo_torch.HAS_P2P:
            raise cases.Skip("Ringo has point-to-point: p2p_test checks these against gloo")
        t = dev(torch.ones(4))
        expect_error(lambda: dist.send(t, (rank + 1) % n), "not supported yet")
        expect_error(lambda: dist.recv(t, (rank + 1) % n), "not supported yet")
        expect_error(lambda: dist.all_to_all_single(dev(torch.zeros(n)), dev(torch.ones(n))), "not supported yet")
        expect_error(lambda: dist.gather(t, [dev(torch.zeros(4)) for _ in range(n)] if rank == 0 else None, 0),
                     "not supported yet")
        expect_error(lambda: dist.scatter(t, [dev(torch.zeros(4)) for _ in range(n)] if rank == 0 else None, 0),
                     "not supported yet")

    cases.run("p2p.not_supported_yet", p2p_not_yet)

    dist.barrier(group=gloo)
    dist.destroy_process_group()


def result_line(report, code):
    """The last line: RESULT PASS, or RESULT FAIL and why."""
    failed = [c[0] for c in report.cases if c[1] == "failed"]
    passed = sum(1 for c in report.cases if c[1] == "passed")
    skipped = sum(1 for c in report.cases if c[1] == "skipped")
    counts = "%d passed, %d failed, %d skipped" % (passed, len(failed), skipped)
    if code == 0:
        return "RESULT PASS %s: %s" % (report.suite, counts)
    why = ("failed: " + ", ".join(failed[:8]) + (" ..." if len(failed) > 8 else "")) if failed else "no case ran"
    return "RESULT FAIL %s: %s; %s" % (report.suite, counts, why)


def main():
    p = harness.worker_parser()
    p.add_argument("--backend", default="ringo")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="where the tensors given to the group under test live (gloo's stay on the CPU)")
    p.add_argument("--deadline", type=float, default=None,
                   help="seconds before the ranks are killed (default $RINGO_TORCH_TEST_DEADLINE or 240; 180 on cuda)")
    args = p.parse_args()
    if args.worker:
        harness.main_guard(lambda: worker(args))
    cuda = args.device == "cuda"
    extra = ["--backend", args.backend] + (["--device", "cuda"] if cuda else [])
    if cuda and "RINGO_TORCH_PYTHON" not in os.environ:
        # The ranks need the PyTorch 2.x with CUDA that runs this script, not
        # Debian's /usr/bin/python3.
        harness.PYTHON = sys.executable
    deadline = args.deadline
    if deadline is None:
        deadline = float(os.environ.get("RINGO_TORCH_TEST_DEADLINE", "180" if cuda else "240"))
    suite = "ops_%dranks%s" % (args.nranks, "_cuda" if cuda else "")
    prefix = "n%d.%s" % (args.nranks, "cuda." if cuda else "")
    report = harness.Report(suite)
    script = os.path.abspath(__file__)
    init = harness.file_init()
    ranks = harness.Ranks(lambda r: harness.worker_argv(script, r, args.nranks, init, extra),
                          args.nranks, deadline_s=deadline)
    codes, outputs = ranks.wait()
    report.merge_ranks(prefix, codes, outputs)
    for r, c in enumerate(codes):
        if c != 0:
            report.add("%srank%d_exit" % (prefix, r), "failed",
                       "exit status %s%s; output ends: %s" % (
                           c, " (killed at the %.0f s deadline)" % deadline if c is None else "",
                           harness.tail(outputs[r])))
    code = report.finish()
    print(result_line(report, code), flush=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
