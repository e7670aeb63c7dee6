#!/usr/bin/env python3
"""Data-parallel equivalence: from one seed, N ranks with B/N samples each hold,
after K steps, the parameters of 1 rank with the whole batch B.

The runs differ only in the order of floating-point sums: a 1-rank gradient
element is one fp32 sum over B samples (sgemm), an N-rank one is N sums over
B/N samples averaged by ringoAvg (each input times 1/N, then summed), and the
loss scale 1/B becomes 1/(B/N). With unit roundoff u = 2^-24 the worst-case
bound for recursive summation gives each step's gradient a relative error of
at most (B + 3) u (B additions, the scale, 1/N, the final sum), measured
against the gradient's largest element. K steps of SGD with momentum add such
errors to parameters whose whole movement over the run, max |w_K - w_0|, is
made of those gradients, so to first order

    max |w_N - w_1| <= (B + 3) u * max |w_1 - w_0|.

A factor of 10 covers what first order leaves out (a parameter difference
feeding back into later gradients over K = 8 small steps, cancellation in
sums): tolerance tau = 10 (B + 3) u = 3.0e-5 for B = 48.

16-bit gradients (--grad-dtype bf16|fp16) are rounded to nearest even when
converted (unit roundoff 2^-8 for bf16's 8 significant bits, 2^-11 for fp16's
11) and the reduction rounds each of the N - 1 partial sums and the result
again: N + 1 roundings, so tau = 10 (N + 1) 2^-8 = 0.12 for bf16 on 2 ranks,
10 (N + 1) 2^-11 = 0.015 for fp16.

Batch normalisation is equivalent only with --sync-bn (the statistics of the
whole batch); accumulation compares A micro-batches per rank with the plain
1-rank run (no batch norm: per-micro-batch statistics would differ).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

B, K = 48, 8
U = 2.0 ** -24
COMMON = ["--batch", str(B), "--steps", str(K), "--width", "64", "--depth", "2",
          "--lr", "0.05", "--lr-scale", "none", "--schedule", "constant",
          "--no-calibrate", "--log-every", "0", "--quiet", "--seed", "3",
          # several buckets (each layer's gradient ~ 16-200 KB), so that overlap has work
          "--bucket-mb", "0.05"]


def main():
    binary = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="ringo-train-eq-")
    failures = []
    cases = 0

    def run(name, args):
        out = os.path.join(tmp, name + ".bin")
        cmd = [binary] + COMMON + args + ["--dump-params", out]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=300)
        if p.returncode != 0:
            raise SystemExit("FAIL %s: exit %d\n%s\n%s" % (name, p.returncode, " ".join(cmd),
                                                           p.stdout[-3000:]))
        return np.fromfile(out, dtype=np.float32).astype(np.float64)

    init = run("init", ["-np", "1", "--lr", "0"])
    ref = run("ref", ["-np", "1"])
    ref_bn = run("ref_bn", ["-np", "1", "--bn"])
    init_bn = run("init_bn", ["-np", "1", "--bn", "--lr", "0"])
    moved = np.max(np.abs(ref - init))
    moved_bn = np.max(np.abs(ref_bn - init_bn))
    print("1 rank, batch %d, %d steps: parameters moved up to %.3e (%.3e with batch norm)"
          % (B, K, moved, moved_bn))
    tau32 = 10 * (B + 3) * U

    def check(name, args, reference, movement, tau):
        nonlocal cases
        cases += 1
        got = run(name, args)
        diff = np.max(np.abs(got - reference))
        ratio = diff / movement
        ok = ratio <= tau
        print("%-34s max |w_N - w_1| = %.3e = %.2e x movement (tolerance %.2e) %s"
              % (name, diff, ratio, tau, "ok" if ok else "FAIL"))
        if not ok:
            failures.append(name)

    for n in (2, 3, 4):
        check("%d ranks" % n, ["-np", str(n)], ref, moved, tau32)
    for n in (2, 3):
        check("%d ranks, accum 2" % n, ["-np", str(n), "--accum", "2"], ref, moved, tau32)
    check("1 rank, accum 4", ["-np", "1", "--accum", "4"], ref, moved, tau32)
    for n in (2, 4):
        check("%d ranks, no overlap" % n, ["-np", str(n), "--no-overlap"], ref, moved, tau32)
    for n in (2, 3, 4):
        check("%d ranks, sync-bn" % n, ["-np", str(n), "--sync-bn"], ref_bn, moved_bn, tau32)
    check("2 ranks, sync-bn, no overlap", ["-np", "2", "--sync-bn", "--no-overlap"], ref_bn,
          moved_bn, tau32)
    check("2 ranks, bf16 gradients", ["-np", "2", "--grad-dtype", "bf16"], ref, moved,
          10 * 3 * 2.0 ** -8)
    check("2 ranks, fp16 gradients", ["-np", "2", "--grad-dtype", "fp16"], ref, moved,
          10 * 3 * 2.0 ** -11)
    print("%d passed, %d failed" % (cases - len(failures), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
