#!/usr/bin/python3
"""examples/elastic_ddp.py end to end: 4 ranks of DDP with backend="ringo",
uninterrupted and with rank 2, then rank 0, killed (SIGKILL) at step 20 of
60; the survivors shrink the group in the same processes and go on. Every
survivor must exit 0 with the same parameters, and those must match the
uninterrupted run's within the equivalence tolerance: the runs differ in the
order of fp32 sums only (4 ranks against 3 for the last 40 steps), each
step's gradient by at most (B + 3) u relative to its largest element, so
max |w - w_ref| <= 10 (B + 3) u * max |w_ref - w_0|, u = 2^-24, B = 48.

Usage: elastic_test.py
"""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402



def example():
    """The example beside the package (Bazel's runfiles), or in the source tree."""
    for base in (harness.package_dir(), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))):
        path = os.path.join(base, "examples", "elastic_ddp.py")
        if os.path.exists(path):
            return path
    raise SystemExit("examples/elastic_ddp.py not found")
B = 48
U = 2.0 ** -24


def main():
    import torch

    report = harness.Report("elastic")
    out = {}
    for name, victim in (("uninterrupted", -1), ("rank2_killed", 2), ("rank0_killed", 0)):
        d = tempfile.mkdtemp(prefix="ringo_elastic_%s_" % name, dir=os.environ.get("TEST_TMPDIR"))
        p = subprocess.run([harness.PYTHON, example(), "--nranks", "4", "--kill-rank", str(victim), "--kill-step", "20",
                            "--steps", "60", "--batch", str(B), "--out", d],
                           env=harness.child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=240)
        print(p.stdout[-4000:])
        files = sorted(f for f in os.listdir(d) if f.endswith(".pt"))
        want = 4 if victim < 0 else 3
        if p.returncode != 0 or len(files) != want:
            report.add(name + ".survivors_finish", "failed",
                       "exit %d, %d parameter files (want %d): %s" % (p.returncode, len(files), want,
                                                                     harness.tail(p.stdout)))
            continue
        params = [torch.load(os.path.join(d, f)) for f in files]
        same = all(torch.equal(params[0], q) for q in params[1:])
        report.add(name + ".survivors_finish", "passed" if same else "failed",
                   "" if same else "the survivors' parameters differ")
        out[name] = params[0].double()
    if "uninterrupted" in out:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
        w0 = torch.cat([q.detach().flatten() for q in model.parameters()]).double()
        ref = out["uninterrupted"]
        moved = (ref - w0).abs().max().item()
        tau = 10 * (B + 3) * U
        for name in ("rank2_killed", "rank0_killed"):
            if name not in out:
                continue
            ratio = (out[name] - ref).abs().max().item() / moved
            print("%s: max |w - w_ref| = %.2e x movement (tolerance %.2e)" % (name, ratio, tau))
            report.add(name + ".matches_uninterrupted", "passed" if ratio <= tau else "failed",
                       "" if ratio <= tau else "%.2e x movement > %.2e" % (ratio, tau))
    sys.exit(report.finish())


if __name__ == "__main__":
    main()
