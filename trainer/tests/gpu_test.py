#!/usr/bin/env python3
"""ringo-train --device against the CPU run of the same seed and settings.

Both runs take the same data in the same order, start from the same
weights, and all-reduce with the same ring arithmetic; they differ in the
order of each dot product's sum (cuBLAS or ringo-train's own GEMM against
OpenBLAS) and in the double exp and log of the softmax. A dot product of
length k errs by at most gamma_k ~ k u (u = 2^-24) of sum |a||b| in either
backend, so the two differ by at most 2 k u; a layer's output carries its
input's error on, so a pass through L layers of widths up to K errs by up
to 2 L K u relative, forward and again backward: a step's gradient by
4 L K u. As in equivalence_test.py, K steps of SGD with momentum add these
errors to parameters whose whole movement over the run is made of those
gradients, so to first order

    max |w_gpu - w_cpu| <= 4 L K u * max |w_cpu - w_0|,

and a factor of 10 covers what first order leaves out: tau = 40 L K u
(L = depth + 1 = 3 layers, K = 784 inputs: 5.6e-3).

The cases: 200 steps on 2 ranks of one GPU (cuBLAS, and the trainer's own
GEMM), gradient accumulation, SyncBatchNorm, no overlap; and the replay:
the same GPU run twice with RINGO_DETERMINISTIC=1 gives the same bits.

Usage: gpu_test.py RINGO_TRAIN [DATA_DIR]. Without a GPU every case is skipped with the reason (exit 0), unless
RINGO_REQUIRE_GPU=1 says one is expected.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

B, STEPS = 48, 200
U = 2.0 ** -24
DEPTH, WIDTH, INPUTS = 2, 64, 784
TAU = 40 * (DEPTH + 1) * INPUTS * U
COMMON = ["--batch", str(B), "--width", str(WIDTH), "--depth", str(DEPTH),
          "--lr", "0.05", "--lr-scale", "none", "--schedule", "constant",
          "--no-calibrate", "--log-every", "0", "--quiet", "--seed", "3",
          "--bucket-mb", "0.05", "--eval-every", "100000"]


def main():
    binary = os.path.abspath(sys.argv[1])
    if len(sys.argv) > 2:  # the data set's folder (default: ringo-train's)
        COMMON.extend(["--data", sys.argv[2]])
    tmp = tempfile.mkdtemp(prefix="ringo-train-gpu-")
    failures = []
    cases = 0

    def run(name, args, steps=STEPS, env=None, check=True):
        out = os.path.join(tmp, name + ".bin")
        cmd = [binary] + COMMON + ["--steps", str(steps)] + args + ["--dump-params", out]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=600, env=env)
        if not check:
            return p
        if p.returncode != 0:
            raise SystemExit("FAIL %s: exit %d\n%s\n%s" % (name, p.returncode, " ".join(cmd),
                                                           p.stdout[-3000:]))
        return np.fromfile(out, dtype=np.float32).astype(np.float64)

    probe = run("probe", ["--device", "-np", "1"], steps=1, check=False)
    if probe.returncode != 0:
        why = probe.stdout.strip().splitlines()[-1] if probe.stdout.strip() else "exit %d" % probe.returncode
        no_gpu = "no usable GPU" in probe.stdout or "without the CUDA toolkit" in probe.stdout
        if not no_gpu or os.environ.get("RINGO_REQUIRE_GPU") == "1":
            print("FAIL ringo-train --device -np 1 failed%s: %s" % (
                "" if not no_gpu else " (RINGO_REQUIRE_GPU=1)", probe.stdout[-3000:]))
            return 1
        print("SKIP every case: " + why)
        return 0
    print("GPU backend: " + next((l.strip() for l in probe.stdout.splitlines() if "cuda (" in l), "?"))

    def compare(name, gpu_args, cpu_args, steps=STEPS):
        nonlocal cases
        cases += 1
        init = run(name + "-init", cpu_args + ["--lr", "0"], steps=1)
        cpu = run(name + "-cpu", cpu_args, steps=steps)
        gpu = run(name + "-gpu", ["--device"] + gpu_args, steps=steps)
        moved = np.max(np.abs(cpu - init))
        diff = np.max(np.abs(gpu - cpu))
        ratio = diff / moved
        ok = np.all(np.isfinite(gpu)) and ratio <= TAU
        print("%-40s max |w_gpu - w_cpu| = %.3e = %.2e x movement %.3e (tolerance %.2e) %s"
              % (name, diff, ratio, moved, TAU, "ok" if ok else "FAIL"))
        if not ok:
            failures.append(name)

    two = ["-np", "2"]
    cublas = run("cublas-probe", ["--device", "-np", "1", "--gemm", "cublas"], steps=1, check=False)
    if cublas.returncode == 0:
        compare("2 ranks on one GPU, cuBLAS", two + ["--gemm", "cublas"], two)
    else:  # a machine without libcublas: said, not counted
        print("%-40s SKIP: %s" % ("2 ranks on one GPU, cuBLAS", cublas.stdout.strip().splitlines()[-1]))
    compare("2 ranks on one GPU, own GEMM", two + ["--gemm", "own"], two)
    compare("2 ranks, accum 2", two + ["--accum", "2"], two + ["--accum", "2"], steps=50)
    compare("2 ranks, no overlap", two + ["--no-overlap"], two + ["--no-overlap"], steps=50)
    compare("2 ranks, sync-bn", two + ["--sync-bn"], two + ["--sync-bn"], steps=20)

    cases += 1
    env = dict(os.environ, RINGO_DETERMINISTIC="1")
    a = run("replay-a", ["--device"] + two, env=env)
    b = run("replay-b", ["--device"] + two, env=env)
    same = a.tobytes() == b.tobytes()
    print("%-40s %s" % ("replay with RINGO_DETERMINISTIC=1", "same bits ok" if same else
                        "FAIL: %d parameters differ" % int(np.sum(a != b))))
    if not same:
        failures.append("replay")
    print("%d passed, %d failed" % (cases - len(failures), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
