#!/usr/bin/env python3
"""ringo-train end to end: a short run converges above a threshold (with its
CSV and plot), a killed rank makes the others fail naming it, ranks started
the way torchrun starts them meet through the environment, and the what-if
table. Each case prints ok/FAIL; the last line counts them."""
import csv
import os
import socket
import subprocess
import sys
import tempfile

BINARY = os.path.abspath(sys.argv[1])
TMP = tempfile.mkdtemp(prefix="ringo-train-run-")
results = []


def case(name):
    def wrap(fn):
        try:
            fn()
            results.append((name, None))
            print("ok    %s" % name)
        except Exception as e:  # noqa: BLE001 - report every failure
            results.append((name, str(e)))
            print("FAIL  %s: %s" % (name, e))
        sys.stdout.flush()
        return fn
    return wrap


def run(args, timeout=300, env=None):
    p = subprocess.run([BINARY] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout, env=env)
    return p.returncode, p.stdout


@case("convergence: 2 ranks, one epoch of a 784-128-10 MLP reaches 82% test accuracy")
def convergence():
    out_csv = os.path.join(TMP, "conv.csv")
    png = os.path.join(TMP, "conv.png")
    rc, out = run(["-np", "2", "--width", "128", "--depth", "1", "--batch", "128", "--epochs", "1",
                   "--lr", "0.1", "--target-acc", "0.82", "--eval-every", "200",
                   "--log-every", "100", "--csv", out_csv, "--plot", png, "--bucket-mb", "0.1"])
    assert rc == 0, "exit %d\n%s" % (rc, out[-3000:])
    for needle in ("== calibration", "fitted ring model", "== per rank", "== per bucket",
                   "communication overhead", "test accuracy", "== prediction", "topology model"):
        assert needle in out, "no '%s' in the output:\n%s" % (needle, out[-3000:])
    with open(out_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    kinds = {r["kind"] for r in rows}
    assert kinds == {"step", "bucket", "eval", "calibration"}, kinds
    steps = [r for r in rows if r["kind"] == "step"]
    assert len(steps) == 2 * (60000 // 128), len(steps)
    assert all(len(r) == 23 and None not in r.values() for r in rows)
    evals = [r for r in rows if r["kind"] == "eval"]
    assert float(evals[-1]["test_acc"]) >= 0.82, evals[-1]
    assert os.path.getsize(png) > 10000


@case("a killed rank: the others exit non-zero naming it")
def killed():
    rc, out = run(["-np", "3", "--width", "64", "--depth", "1", "--batch", "96", "--steps", "50",
                   "--kill-rank", "1", "--kill-step", "10", "--no-calibrate"], timeout=120)
    assert rc != 0, "exit 0:\n" + out
    survivors = [line for line in out.splitlines()
                 if line.startswith("ringo-train: rank 0:") or line.startswith("ringo-train: rank 2:")]
    assert len(survivors) == 2, "both survivors should report an error:\n" + out[-3000:]
    for line in survivors:
        assert "rank 1" in line, "a survivor's error does not name rank 1: " + line
    assert "rank 1 (pid" in out and "killed by signal 9" in out, out[-2000:]


@case("torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT): 2 ranks meet")
def torchrun_env():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port - 1 if port > 1024 else port))
        procs.append(subprocess.Popen(
            [BINARY, "--width", "32", "--depth", "1", "--batch", "64", "--steps", "20",
             "--log-every", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=env))
    outs = [p.communicate(timeout=120)[0] for p in procs]
    for rank, p in enumerate(procs):
        assert p.returncode == 0, "rank %d exit %d:\n%s" % (rank, p.returncode, outs[rank])
    assert "2 ranks" in outs[0] and "== per bucket" in outs[0], outs[0][-2000:]


@case("--predict: 1..1024 GPUs from a given compute time")
def predict():
    rc, out = run(["--predict", "--compute-ms", "0.5", "--width", "1024", "--depth", "8"])
    assert rc == 0, out
    lines = [l for l in out.splitlines() if l.strip().split(" ")[0].isdigit()]
    assert len(lines) == 11, out
    assert "rule of thumb" in out and "assumptions" in out, out
    # The last two columns: an 8 B all-reduce by the ring and by recursive
    # doubling; at 1024 GPUs doubling's 10 steps beat the ring's 2046.
    ring_us, dbl_us = (float(v) for v in lines[-1].split()[-2:])
    assert "8B dbl us" in out and dbl_us * 100 < ring_us, lines[-1]


@case("refusals: what --device does not do yet, a batch that does not split, a missing data set")
def refusals():
    rc, out = run(["--device", "--grad-dtype", "bf16"])
    assert rc == 2 and "fp32 gradients" in out, out
    rc, out = run(["--device", "--wire", "bf16"])
    assert rc == 2 and "compressed wire" in out, out
    rc, out = run(["--device", "--elastic"])
    assert rc == 2 and "elastic GPU test" in out, out
    rc, out = run(["--device", "--gemm", "fast"])
    assert rc == 2 and "--gemm is auto, cublas or own" in out, out
    # Without a GPU --device says so and fails; with one it trains a step.
    rc, out = run(["--device", "--steps", "1", "--width", "32", "--depth", "1", "--batch", "32"])
    assert (rc != 0 and "no usable GPU" in out) or (rc == 0 and "cuda (" in out), out
    rc, out = run(["-np", "2", "--batch", "7", "--steps", "1"])
    assert rc != 0 and "not a multiple" in out, out
    rc, out = run(["--data", "/nonexistent", "--steps", "1"])
    assert rc != 0 and "dataset-fashion-mnist" in out, out


failed = [n for n, e in results if e]
print("%d passed, %d failed" % (len(results) - len(failed), len(failed)))
sys.exit(1 if failed else 0)
