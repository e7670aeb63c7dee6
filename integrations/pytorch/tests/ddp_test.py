#!/usr/bin/python3
"""DistributedDataParallel through Ringo against the same training through
gloo: a small model trained for a few steps from the same seed with
backend="ringo" and with backend="gloo" (separate runs of the same script)
must give the same losses and parameters on every rank.

Configurations: plain (several gradient buckets, so all-reduces overlap the
backward pass), find_unused_parameters (a branch each rank uses on
different steps), gradient_as_bucket_view, no_sync() gradient accumulation,
and join() with uneven inputs (rank r has 3 + r batches).

With 2 ranks the comparison is bit for bit (a sum of two numbers does not
depend on the order). With 3 ranks Ringo's ring and gloo's algorithm add the
three gradients in different orders, so parameters agree within a relative
tolerance of 1e-6 (losses likewise), and each backend's ranks agree
exactly with each other.

Usage: ddp_test.py [--nranks 2 3]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

CONFIGS = ["plain", "find_unused_parameters", "gradient_as_bucket_view", "no_sync", "join_uneven"]
STEPS = 4
REL_TOL_3 = 1e-6


def train(config, rank, n):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(32, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh())
            self.head = nn.Linear(256, 8)
            self.branch = nn.Linear(256, 8)  # used on some steps only (find_unused_parameters)

        def forward(self, x, use_branch=True):
            h = self.body(x)
            return self.head(h) + self.branch(h) if use_branch else self.head(h)

    torch.manual_seed(1234)
    model = Net()
    ddp = DDP(model, bucket_cap_mb=0.1,  # several buckets: all-reduces start during backward
              find_unused_parameters=(config == "find_unused_parameters"),
              gradient_as_bucket_view=(config == "gradient_as_bucket_view"))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(99 + rank)
    batches = STEPS + rank if config == "join_uneven" else STEPS
    data = [(torch.randn(16, 32, generator=g), torch.randn(16, 8, generator=g)) for _ in range(2 * batches)]
    losses = []

    def step(i):
        x, y = data[2 * i]
        if config == "no_sync":
            with ddp.no_sync():  # first micro-batch: gradients stay local
                nn.functional.mse_loss(ddp(x), y).backward()
            x, y = data[2 * i + 1]
        use_branch = (i + rank) % 2 == 0 if config == "find_unused_parameters" else True
        loss = nn.functional.mse_loss(ddp(x, use_branch), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        losses.append(loss.item())

    if config == "join_uneven":
        with ddp.join():
            for i in range(batches):
                step(i)
    else:
        for i in range(batches):
            step(i)
    params = {k: v.detach().clone() for k, v in model.state_dict().items()}
    # DDP keeps the ranks' replicas identical: check it here, exactly.
    for k, v in params.items():
        ref = v.clone()
        dist.broadcast(ref, 0)
        assert torch.equal(ref, v), "rank %d's %s differs from rank 0's" % (rank, k)
    return {"losses": losses, "params": params}


def worker(args):
    import datetime

    import torch
    import torch.distributed as dist

    if args.backend == "ringo":
        import ringo_torch  # noqa: F401
    dist.init_process_group(args.backend, init_method=args.init, rank=args.rank, world_size=args.nranks,
                            timeout=datetime.timedelta(seconds=60))
    assert dist.get_backend().lower() == args.backend
    cases = harness.Cases()
    results = {}

    def run(config):
        results[config] = train(config, args.rank, args.nranks)

    for config in CONFIGS:
        cases.run("train.%s.%s" % (args.backend, config), run, config)
    torch.save(results, "%s.rank%d" % (args.out, args.rank))
    dist.barrier()
    dist.destroy_process_group()


def compare(report, n, ringo, gloo):
    import torch

    for config in CONFIGS:
        problems = []
        for rank in range(n):
            a, b = ringo[rank].get(config), gloo[rank].get(config)
            if a is None or b is None:
                problems.append("rank %d: no result (%s)" % (rank, "ringo" if a is None else "gloo"))
                continue
            if n == 2:
                if a["losses"] != b["losses"]:
                    problems.append("rank %d losses %s vs gloo %s" % (rank, a["losses"], b["losses"]))
                for k in a["params"]:
                    if not torch.equal(a["params"][k], b["params"][k]):
                        diff = (a["params"][k] - b["params"][k]).abs().max().item()
                        problems.append("rank %d %s not bit-identical (max diff %g)" % (rank, k, diff))
            else:
                worst = max((a["params"][k] - b["params"][k]).abs().max().item() for k in a["params"])
                loss_worst = max(abs(la - lb) for la, lb in zip(a["losses"], b["losses"]))
                print("n%d %s rank %d: largest parameter difference ringo vs gloo %g, loss %g" % (
                    n, config, rank, worst, loss_worst))
                for la, lb in zip(a["losses"], b["losses"]):
                    if abs(la - lb) > REL_TOL_3 * max(abs(lb), 1e-6):
                        problems.append("rank %d losses %s vs gloo %s" % (rank, a["losses"], b["losses"]))
                        break
                for k in a["params"]:
                    pa, pb = a["params"][k], b["params"][k]
                    if not torch.allclose(pa, pb, rtol=REL_TOL_3, atol=REL_TOL_3):
                        problems.append("rank %d %s beyond %g (max diff %g)" % (
                            rank, k, REL_TOL_3, (pa - pb).abs().max().item()))
            if len(a["losses"]) != (STEPS + rank if config == "join_uneven" else STEPS):
                problems.append("rank %d ran %d steps" % (rank, len(a["losses"])))
        # Training moved the parameters (the comparison is not of two untouched models).
        if not problems and torch.equal(ringo[0][config]["params"]["head.weight"], _initial_head()):
            problems.append("parameters did not change")
        name = "n%d.ddp_ringo_vs_gloo.%s" % (n, config)
        report.add(name, "failed" if problems else "passed", "; ".join(problems[:4]))


def _initial_head():
    import torch
    import torch.nn as nn
    torch.manual_seed(1234)
    nn.Linear(32, 256), nn.Linear(256, 256)
    return nn.Linear(256, 8).weight.detach()


def main():
    p = harness.worker_parser()
    p.add_argument("--backend", default="ringo")
    p.add_argument("--out", default="")
    p.add_argument("--nranks_list", nargs="*", type=int, default=[2, 3])
    args = p.parse_args()
    if args.worker:
        harness.main_guard(lambda: worker(args))
    import torch

    report = harness.Report("ddp")
    script = os.path.abspath(__file__)
    for n in args.nranks_list:
        results = {}
        for backend in ("ringo", "gloo"):
            out = os.path.join(harness.scratch_dir(), "result")
            init = harness.file_init()
            ranks = harness.Ranks(lambda r: harness.worker_argv(script, r, n, init, ["--backend", backend, "--out", out]),
                                  n, deadline_s=180)
            codes, outputs = ranks.wait()
            report.merge_ranks("n%d." % n, codes, outputs)
            results[backend] = []
            for r in range(n):
                path = "%s.rank%d" % (out, r)
                results[backend].append(torch.load(path) if os.path.exists(path) else {})
                if codes[r] != 0:
                    report.add("n%d.%s.rank%d_exit" % (n, backend, r), "failed",
                               "exit status %s; output ends: %s" % (codes[r], harness.tail(outputs[r])))
        compare(report, n, results["ringo"], results["gloo"])
    sys.exit(report.finish())


if __name__ == "__main__":
    main()
