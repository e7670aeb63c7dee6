#!/usr/bin/env python3
"""DistributedDataParallel on one GPU, 2 processes, through Ringo, against
single-process training on the same data.

What it checks
--------------
Two processes, both on cuda:0 (the one GPU is shared; each process is one
rank), train a small float32 MLP (32 -> 128 -> 128 -> 8, tanh, no BatchNorm or
dropout: nothing that depends on the batch split) with DDP for --steps steps
(default 300) of SGD with momentum on a fixed synthetic regression set; rank r
takes half r of every global batch. The gradients go through:

  --backend ringo   ringo_torch's CUDA path (import ringo_torch; backend "ringo")
  --backend nccl    PyTorch's own ProcessGroupNCCL. Run it with Ringo's
                    libnccl.so.2 preloaded (LD_PRELOAD) so that NCCL is Ringo
                    underneath; --expect-nccl-lib PATH fails the run unless the
                    process's ncclGetVersion comes from PATH (dladdr of the
                    symbol the global scope resolves, plus the libnccl files in
                    /proc/self/maps and torch.cuda.nccl.version(), all printed).
                    NCCL itself refuses two ranks on one GPU, so this run cannot
                    pass on NVIDIA's NCCL.
  --backend gloo    PyTorch's gloo (a baseline; with --device cpu it checks this
                    script itself on a machine without a GPU).

A third process (the reference, no process group) trains the same model from the
same seed on the same data twice:
  * "single": one process over the whole global batch (the comparison asked for);
  * "emulated": the DDP arithmetic in one process: the mean-loss gradient of
    each half batch (the same kernels on the same shapes as each rank), each
    times 1/2 (DDP divides before it sums), added, then the same optimizer step.

Checks (each failure is printed; the last line is "RESULT PASS ..." or
"RESULT FAIL <why>", and the exit status is non-zero on failure):
  1. both ranks finish, and their final parameters are bit-identical (each
     parameter broadcast from rank 0 and compared with torch.equal);
  2. DDP == emulated, bit for bit (parameters after the last step, and every
     step's per-rank loss). With 2 ranks the all-reduce computes one float32
     addition per element, g0/2 + g1/2, which is commutative, so Ringo's ring
     gives exactly the emulation's bits; multiplying by 1/2 is exact. Anything
     else (a wrong byte, a stale bucket, a missed stream dependency) shows here.
     --emulation tau relaxes this to the tolerance below, --emulation off skips it;
  3. |p_ddp - p_single| <= tau for every parameter element (the tolerance is
     derived below), with the max observed difference and the loss curves' max
     difference reported; the losses of both runs are printed every 50 steps;
  4. it is not vacuous: training moved the parameters by much more than tau
     (max |p_final - p_initial| >= 10 tau), the loss fell (its mean over the last
     16 steps, one pass over the 16 distinct batches, <= 0.8 x that over the first 16),
     and the first step's losses agree (the ranks did see the two halves of the
     global batch: |L_single(0) - L_ddp(0)| <= 256 eps L_single(0));
  5. --compare-to FILE (written by an earlier run's --save FILE): this run's
     final parameters equal that run's bit for bit (--compare-mode tau: within
     tau). Expected exact for --backend nccl (with Ringo's shim) against
     --backend ringo: both runs execute the same kernels on the same data in the
     same order, DDP pre-divides each gradient by 2 and all-reduces with SUM
     (ringo_torch: ringoAllReduce; the shim: ncclAllReduce -> ringoAllReduce),
     and a 2-rank sum is one commutative addition per element, so the bits
     cannot depend on which front end called Ringo;
  6. --ringo-trace DIR: Ringo's flight recorder (RINGO_TRACE_DIR, dumped on
     RINGO_TRACE_SIGNAL=SIGUSR1, which this script sends to itself after
     training) must show a GPU ("device":"cuda") communicator on each rank with
     at least --steps AllReduce operations and none failed; its operations are
     printed. This is how the NCCL calls made through the shim are recorded:
     the shim itself has no call log (collectives/nccl_shim.cc reads no
     RINGO_NCCL_TRACE or other variable; it only translates each call).

Determinism: torch.use_deterministic_algorithms(True), CUBLAS_WORKSPACE_CONFIG=
:4096:8 (set for every process before CUDA starts), cudnn.deterministic=True,
cudnn.benchmark=False, TF32 off for matmul and cudnn (the fp32_precision="ieee"
settings where PyTorch has them, 2.9 and later, else allow_tf32=False; never
both, which newer PyTorch rejects). Batch sizes and the MSE normalisation are
powers of two, so the mean-loss scale factors 2/512 and 2/256 are exact.

The tolerance, from the arithmetic
----------------------------------
eps = 2^-23 (float32 epsilon, one ulp of 1). T = steps, mu = momentum,
lr = learning rate. SGD with momentum: v <- mu v + g; p <- p - lr v.

The single and DDP runs start from bit-identical parameters and data and differ
only in the order of float32 additions: DDP forms each gradient element as
g0/2 + g1/2 where g_h sums over the 32 samples of half h, the single run sums
over all 64 samples inside one matmul (and cuBLAS may split the reductions of
the forward and backward matmuls differently for 32 and 64 rows). Reordering a
sum changes it by a few units of roundoff of its partial sums:
  (a) |delta g| <= k eps G per step, G the largest gradient magnitude, k = 4
      (--k-ulps; a handful of ulps: the sums here are of 32-128 terms in
      blocked/tree order, whose error is a few ulps of their magnitudes);
  (b) the momentum buffer accumulates those: delta v_t = mu delta v_(t-1) +
      delta g_t, plus the two runs' independent roundings of v (eps |v|), so
      |delta v| <= (k eps G + eps V) / (1 - mu), V = max |v|;
  (c) each step adds lr |delta v|, plus the two runs' independent roundings of
      p - lr v (eps |p|, and eps lr |v| for the product).
Summing (c) over T steps with no cancellation between steps and, as a linear
bound, no feedback of a parameter difference into later gradients:
      |p_ddp - p_single| <= eps T (A U + P),  A = (k (1 + mu) + 2) / (1 - mu),
where U = lr V is the largest single-step update |p_t - p_(t-1)| and P the
largest |p| (both measured in the single run; G <= (1 + mu) V because
g_t = v_t - mu v_(t-1)). With k = 4, mu = 0.9: A = 96.
      tau = c eps T (A U + P),  c = 4 (--c-amp)
The factor c covers what the linear bound leaves out: growth of a difference
through the curvature of the loss (a parameter difference changes the next
gradients; at this step size the training map of this small smooth tanh MLP is
close to non-expansive, but not exactly), and k being a typical rather than a
worst-case constant. The linear-in-T accumulation is itself pessimistic
(rounding differences of independent steps mostly cancel, growing like sqrt(T)),
which is the margin for that growth. The run prints U, P, A, tau, the observed
maximum difference and its ratio to tau, so a tight or loose bound shows. (On
the CPU, PyTorch 1.13 with gloo and these defaults: U = 0.022, P = 0.60,
tau = 3.8e-4, observed 1.5e-7, i.e. 4e-4 tau; the GPU's numbers are its own.)

How it is run
-------------
  PYTHONPATH=integrations/pytorch python3 integrations/pytorch/tests/gpu_ddp_test.py \\
      --backend ringo --save /tmp/ddp_ringo.pt
  LD_PRELOAD=$BUNDLE/lib/libnccl.so.2 python3 integrations/pytorch/tests/gpu_ddp_test.py \\
      --backend nccl --expect-nccl-lib $BUNDLE/lib/libnccl.so.2 \\
      --compare-to /tmp/ddp_ringo.pt --ringo-trace /tmp/ddp_trace
  python3 integrations/pytorch/tests/gpu_ddp_test.py --backend gloo --device cpu   # no GPU

Rendezvous through a FileStore in a fresh temporary folder; process-group
timeout --timeout (at most 60 s; also RINGO_TIMEOUT_MS for the shim), and every
process is killed at --deadline (default 240 s workers, 180 s reference).
Expected time on one H100: ~30-60 s per run (two CUDA start-ups, DDP with the
two processes time-sliced on the GPU without MPS, a few milliseconds per
all-reduce), the reference ~10 s.
"""

import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

NRANKS = 2
EPS32 = 2.0 ** -23
IN, HIDDEN, OUT = 32, 128, 8
DISTINCT_BATCHES = 16  # the synthetic set: 16 global batches, cycled
PRINT_EVERY = 50
INITIAL_LOSS_EPS = 256  # check 4: |L_single(0) - L_ddp(0)| <= 256 eps L_single(0)
MOVE_FACTOR = 10.0  # check 4: the parameters moved by >= 10 tau
LOSS_DROP = 0.8  # check 4: mean loss over the last 16 steps <= 0.8 x that over the first 16


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=["ringo", "nccl", "gloo"], default="ringo")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=64, help="global batch (even; each rank takes half)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--bucket-cap-mb", type=float, default=0.03,
                   help="DDP bucket cap (small: several buckets, all-reduces overlapping the backward pass)")
    p.add_argument("--k-ulps", type=float, default=4.0, help="k of the tolerance (see the docstring)")
    p.add_argument("--c-amp", type=float, default=4.0, help="c of the tolerance (see the docstring)")
    p.add_argument("--timeout", type=float, default=60.0, help="process-group timeout, seconds (at most 60)")
    p.add_argument("--deadline", type=float, default=240.0, help="seconds before the workers are killed")
    p.add_argument("--ref-deadline", type=float, default=180.0, help="seconds before the reference is killed")
    p.add_argument("--save", metavar="FILE", help="write this run's final parameters here (for --compare-to)")
    p.add_argument("--compare-to", metavar="FILE", help="compare the final parameters with a --save FILE")
    p.add_argument("--compare-mode", choices=["exact", "tau"], default="exact")
    p.add_argument("--emulation", choices=["exact", "tau", "off"], default="exact")
    p.add_argument("--expect-nccl-lib", metavar="PATH",
                   help="fail unless ncclGetVersion in the workers comes from this file")
    p.add_argument("--ringo-trace", metavar="DIR", help="record Ringo's flight recorder here and check it")
    p.add_argument("--workdir", help="folder for the run's files (default: a new temporary folder)")
    p.add_argument("--role", choices=["main", "worker", "reference"], default="main", help=argparse.SUPPRESS)
    p.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--init", default="", help=argparse.SUPPRESS)
    p.add_argument("--out", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.batch <= 0 or args.batch % NRANKS:
        p.error("--batch must be a positive multiple of %d" % NRANKS)
    if not 0 < args.timeout <= 60:
        p.error("--timeout must be in (0, 60] seconds")
    if args.steps < 1:
        p.error("--steps must be positive")
    if not 0 <= args.momentum < 1:
        p.error("--momentum must be in [0, 1)")
    if args.expect_nccl_lib and args.backend != "nccl":
        p.error("--expect-nccl-lib goes with --backend nccl")
    return args


def config_of(args):
    """What must match between runs compared with --compare-to."""
    return {"steps": args.steps, "batch": args.batch, "lr": args.lr, "momentum": args.momentum,
            "seed": args.seed, "bucket_cap_mb": args.bucket_cap_mb, "device": args.device,
            "model": [IN, HIDDEN, HIDDEN, OUT], "distinct_batches": DISTINCT_BATCHES}


# ---- shared by the worker and reference processes ------------------------------


def setup_determinism(torch):
    """Deterministic kernels, no TF32. Returns a description of what was set."""
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    said = ["use_deterministic_algorithms(True)", "cudnn.deterministic=True", "cudnn.benchmark=False",
            "CUBLAS_WORKSPACE_CONFIG=%s" % os.environ.get("CUBLAS_WORKSPACE_CONFIG")]
    matmul = torch.backends.cuda.matmul

    def has(owner, attr):  # torch.backends' modules raise AssertionError (1.x) for unknown names
        try:
            getattr(owner, attr)
            return True
        except Exception:
            return False

    if has(matmul, "fp32_precision"):
        # PyTorch 2.9+: the new API only (mixing it with allow_tf32 is an error there).
        cudnn = torch.backends.cudnn
        for owner, name in ((torch.backends, "torch.backends"), (matmul, "cuda.matmul"), (cudnn, "cudnn"),
                            (getattr(cudnn, "conv", None), "cudnn.conv"), (getattr(cudnn, "rnn", None), "cudnn.rnn")):
            if owner is not None and has(owner, "fp32_precision"):
                try:
                    owner.fp32_precision = "ieee"
                    said.append("%s.fp32_precision=%s" % (name, owner.fp32_precision))
                except Exception as e:  # matmul's is checked below; the others matter for convolutions only
                    said.append("%s.fp32_precision not set (%s)" % (name, e))
        if matmul.fp32_precision != "ieee":
            raise RuntimeError("could not turn TF32 off: cuda.matmul.fp32_precision is %r" % matmul.fp32_precision)
    else:
        matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        said.append("matmul.allow_tf32=%s cudnn.allow_tf32=%s" % (matmul.allow_tf32, torch.backends.cudnn.allow_tf32))
    return ", ".join(said)


def make_model(torch, seed):
    torch.manual_seed(seed)
    nn = torch.nn
    return nn.Sequential(nn.Linear(IN, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.Tanh(),
                         nn.Linear(HIDDEN, OUT))


def make_data(torch, seed, batch):
    """The fixed synthetic set, on the CPU: randn inputs and a target made of
    elementwise float64 products and sums only (bitwise the same in every
    process), rounded once to float32."""
    g = torch.Generator().manual_seed(seed + 1)
    n = DISTINCT_BATCHES * batch
    x = torch.randn(n, IN, generator=g, dtype=torch.float64)
    noise = torch.randn(n, OUT, generator=g, dtype=torch.float64)
    y = x[:, :8] * x[:, 8:16] + 0.5 * x[:, 16:24] - 0.25 * x[:, 24:32] * x[:, 24:32] + 0.1 * noise
    return x.float(), y.float()


def batch_rows(step, batch, half=None):
    """Rows of the global batch of `step`, or of its half `half`."""
    b = step % DISTINCT_BATCHES
    if half is None:
        return b * batch, (b + 1) * batch
    h = batch // NRANKS
    return b * batch + half * h, b * batch + (half + 1) * h


def device_batches(torch, x, y, batch, device, half=None):
    """One (x, y) pair on the device per distinct batch; each a fresh allocation."""
    out = []
    for b in range(DISTINCT_BATCHES):
        lo, hi = batch_rows(b, batch, half)
        out.append((x[lo:hi].clone().to(device), y[lo:hi].clone().to(device)))
    return out


def nccl_provenance():
    """The libnccl files mapped into this process, the file whose ncclGetVersion
    the global symbol scope resolves (what an LD_PRELOAD puts first), and the
    version that function reports."""
    mapped = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6:
                    path = parts[5].strip()
                    if "libnccl" in os.path.basename(path) and path not in mapped:
                        mapped.append(path)
    except OSError as e:
        mapped.append("(cannot read /proc/self/maps: %s)" % e)
    resolved, version = None, None
    try:
        fn = getattr(ctypes.CDLL(None), "ncclGetVersion")
    except (AttributeError, OSError):
        fn = None
    if fn is not None:
        v = ctypes.c_int(0)
        fn.argtypes = [ctypes.POINTER(ctypes.c_int)]
        fn.restype = ctypes.c_int
        if fn(ctypes.byref(v)) == 0:
            version = v.value

        class DlInfo(ctypes.Structure):
            _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                        ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]

        for lib in (None, "libdl.so.2"):
            try:
                dladdr = getattr(ctypes.CDLL(lib), "dladdr")
            except (AttributeError, OSError):
                continue
            dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
            dladdr.restype = ctypes.c_int
            info = DlInfo()
            if dladdr(ctypes.cast(fn, ctypes.c_void_p), ctypes.byref(info)) and info.dli_fname:
                resolved = info.dli_fname.decode(errors="replace")
            break
    return {"mapped": mapped, "resolved": resolved, "version": version}


def same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def signal_caught(signo):
    """Whether this process has a handler for `signo` (SigCgt of /proc/self/status)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool((int(line.split()[1], 16) >> (signo - 1)) & 1)
    except OSError:
        pass
    return False


def dump_ringo_trace(trace_dir, rank, wait_s=15.0):
    """Makes Ringo write this process's flight records (RINGO_TRACE_SIGNAL) and
    reads them back: (list of per-communicator summaries, None) or (None, why)."""
    signo = int(os.environ.get("RINGO_TRACE_SIGNAL", "0") or 0)
    if signo <= 0:
        return None, "RINGO_TRACE_SIGNAL is not set"
    if not signal_caught(signo):
        return None, ("nothing in this process catches signal %d: Ringo installs that handler when it makes a "
                      "communicator, so no Ringo communicator was made here (is the NCCL in use Ringo's?)" % signo)
    me = os.getpid()
    os.kill(me, signo)
    found = {}
    settle_at = None
    give_up = time.monotonic() + wait_s
    suffix = "-rank%d.jsonl" % rank
    while time.monotonic() < give_up:
        try:
            names = sorted(os.listdir(trace_dir))
        except OSError:
            names = []
        for name in names:
            if not (name.startswith("ringo-trace-") and name.endswith(suffix)):
                continue
            path = os.path.join(trace_dir, name)
            if path in found:
                continue
            try:
                with open(path) as f:
                    lines = f.read().splitlines()
                header = json.loads(lines[0])
            except (OSError, ValueError, IndexError):
                continue
            if header.get("pid") != me:
                continue
            entries = [json.loads(line) for line in lines[1:] if line.strip()]
            found[path] = (header, entries)
            settle_at = time.monotonic() + 1.0  # the dump thread writes every communicator in turn
        if found and time.monotonic() >= settle_at:
            break
        time.sleep(0.1)
    if not found:
        return None, "no flight record of process %d appeared in %s within %.0f s" % (me, trace_dir, wait_s)
    summaries = []
    for path, (header, entries) in sorted(found.items()):
        ops, kinds, states = {}, {}, {}
        for e in entries:
            key = " ".join(str(e.get(k)) for k in ("op", "dtype", "redop") if e.get(k) is not None)
            ops[key] = ops.get(key, 0) + 1
            kinds[e.get("op")] = kinds.get(e.get("op"), 0) + 1
            states[e.get("state")] = states.get(e.get("state"), 0) + 1
        summaries.append({"file": os.path.basename(path), "comm": header.get("comm"),
                          "device": header.get("device"), "rank": header.get("rank"),
                          "nranks": header.get("nranks"), "capacity": header.get("capacity"),
                          "entries": len(entries), "ops": ops, "kinds": kinds, "states": states})
    return summaries, None


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


# ---- the worker: one DDP rank ----------------------------------------------------


def worker(args):
    meta = {"rank": args.rank, "problems": [], "notes": [], "done": False, "destroyed": False}
    try:
        _worker(args, meta)  # exits the process itself when it gets to the end
    except BaseException as e:  # recorded; a non-zero exit
        import traceback
        meta["problems"].append("rank %d raised %s: %s" % (args.rank, type(e).__name__, str(e)[:2000]))
        traceback.print_exc()
    write_json(args.out + ".json", meta)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(3)


def _worker(args, meta):
    import datetime

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank = args.rank
    cuda = args.device == "cuda"
    say = lambda *a: print("[rank %d]" % rank, *a, flush=True)  # noqa: E731
    say("torch %s, python %s, pid %d, backend %s, device %s" % (
        torch.__version__, sys.version.split()[0], os.getpid(), args.backend, args.device))
    meta["determinism"] = setup_determinism(torch)
    say("determinism:", meta["determinism"])
    if cuda:
        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False: no GPU for --device cuda")
        torch.cuda.set_device(0)
        device = torch.device("cuda", 0)
        say("GPU:", torch.cuda.get_device_name(0))
    else:
        device = torch.device("cpu")
    if args.backend == "ringo":
        import ringo_torch
        say("ringo_torch: HAS_CUDA=%s HAS_P2P=%s built with torch %s, Ringo version %s, from %s" % (
            ringo_torch.HAS_CUDA, ringo_torch.HAS_P2P, ringo_torch.BUILT_WITH_TORCH, ringo_torch.ringo_version(),
            os.path.dirname(ringo_torch.__file__)))
        if cuda and not ringo_torch.HAS_CUDA:
            raise RuntimeError("ringo_torch was built without CUDA (HAS_CUDA is False): CUDA tensors cannot go "
                               "through it; build it with setup.py against PyTorch 2.x with CUDA")
    if args.backend == "nccl":
        # Before the process group exists, so that a wrong library fails both
        # ranks at once instead of leaving one waiting for the other.
        prov = nccl_provenance()
        try:
            prov["torch_cuda_nccl_version"] = str(torch.cuda.nccl.version())
        except Exception as e:  # reported, not fatal by itself
            prov["torch_cuda_nccl_version"] = "error: %s" % e
        meta["nccl"] = prov
        say("NCCL: torch.cuda.nccl.version() = %s; ncclGetVersion resolves to %s (reports %s); libnccl mapped: %s" % (
            prov["torch_cuda_nccl_version"], prov["resolved"], prov["version"], prov["mapped"] or "none"))
        say("LD_PRELOAD=%s" % os.environ.get("LD_PRELOAD", ""))
        if args.expect_nccl_lib:
            if prov["resolved"] is None:
                raise RuntimeError("ncclGetVersion is not in this process's global symbol scope, so it cannot be "
                                   "told which NCCL PyTorch calls (NCCL linked statically into torch? no LD_PRELOAD?); "
                                   "expected %s" % args.expect_nccl_lib)
            if not same_file(prov["resolved"], args.expect_nccl_lib):
                raise RuntimeError("ncclGetVersion comes from %s, not from the expected %s (LD_PRELOAD=%r)" % (
                    prov["resolved"], args.expect_nccl_lib, os.environ.get("LD_PRELOAD", "")))
        if not args.ringo_trace:
            say("note: Ringo's NCCL shim keeps no call log (collectives/nccl_shim.cc reads no RINGO_NCCL_TRACE); "
                "--ringo-trace DIR records the calls through Ringo's flight recorder")

    dist.init_process_group(args.backend, init_method=args.init, rank=rank, world_size=NRANKS,
                            timeout=datetime.timedelta(seconds=args.timeout))
    say("process group up: backend %s" % dist.get_backend())

    model = make_model(torch, args.seed).to(device)
    ddp = DDP(model, device_ids=[0] if cuda else None, bucket_cap_mb=args.bucket_cap_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum)
    x, y = make_data(torch, args.seed, args.batch)
    batches = device_batches(torch, x, y, args.batch, device, half=rank)
    losses = torch.zeros(args.steps, dtype=torch.float32, device=device)
    mse = torch.nn.functional.mse_loss
    start = time.monotonic()
    for t in range(args.steps):
        xb, yb = batches[t % DISTINCT_BATCHES]
        opt.zero_grad(set_to_none=True)
        loss = mse(ddp(xb), yb)
        loss.backward()
        opt.step()
        losses[t] = loss.detach()
        if t % PRINT_EVERY == 0 or t == args.steps - 1:
            say("step %4d  loss (this rank's half batch) %.9g  %.1f s" % (t, loss.item(), time.monotonic() - start))
    if cuda:
        torch.cuda.synchronize()
    meta["train_s"] = time.monotonic() - start
    try:  # how DDP bucketed the gradients (after its rebuild at the first step)
        logging_data = ddp._get_ddp_logging_data()
        meta["ddp_buckets"] = {k: str(v) for k, v in logging_data.items() if "bucket" in k}
        say("DDP buckets: %s" % meta["ddp_buckets"])
    except Exception as e:  # informational only
        say("DDP bucket sizes unknown (%s)" % e)
    say("trained %d steps in %.1f s (%.1f ms a step)" % (args.steps, meta["train_s"],
                                                         1000.0 * meta["train_s"] / args.steps))

    # DDP keeps the replicas identical: check it, exactly.
    for name, p in model.named_parameters():
        ref = p.detach().clone()
        dist.broadcast(ref, 0)
        if not torch.equal(ref, p.detach()):
            meta["problems"].append("rank %d's %s differs from rank 0's by up to %g" % (
                rank, name, (ref - p.detach()).abs().max().item()))
    if cuda:
        torch.cuda.synchronize()

    if args.ringo_trace:
        summaries, why = dump_ringo_trace(args.ringo_trace, rank)
        meta["trace"] = summaries
        if summaries is None:
            meta["problems"].append("rank %d: Ringo flight record: %s" % (rank, why))
        else:
            for s in summaries:
                ops = ", ".join("%s x%d" % kv for kv in sorted(s["ops"].items()))
                say("Ringo flight record %s: communicator %s, device %s, rank %s of %s, %d operations "
                    "(capacity %s): %s; states %s" % (s["file"], s["comm"], s["device"], s["rank"], s["nranks"],
                                                      s["entries"], s["capacity"], ops, s["states"]))
            gpu = [s for s in summaries if s["device"] == "cuda"]
            if cuda and not gpu:
                meta["problems"].append("rank %d: no GPU communicator in Ringo's flight records (%s)" % (
                    rank, [s["device"] for s in summaries]))
            all_reduces = sum(s["kinds"].get("AllReduce", 0) for s in (gpu if cuda else summaries))
            if all_reduces < args.steps:
                meta["problems"].append("rank %d: Ringo recorded %d AllReduce operations, fewer than the %d steps" % (
                    rank, all_reduces, args.steps))
            failed = sum(s["states"].get("failed", 0) for s in summaries)
            if failed:
                meta["problems"].append("rank %d: %d failed operations in Ringo's flight records" % (rank, failed))

    torch.save({"params": {k: v.detach().cpu() for k, v in model.named_parameters()},
                "losses": losses.cpu()}, args.out + ".pt")
    meta["done"] = True
    write_json(args.out + ".json", meta)
    dist.destroy_process_group()
    meta["destroyed"] = True
    write_json(args.out + ".json", meta)
    say("process group destroyed")
    # Out before Python tears down the DDP object and what it holds: the
    # results are written, and a hang in a destructor is not what is tested.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if not meta["problems"] else 4)


# ---- the reference: single-process runs ----------------------------------------------


def reference(args):
    import torch

    cuda = args.device == "cuda"
    say = lambda *a: print("[reference]", *a, flush=True)  # noqa: E731
    determinism = setup_determinism(torch)
    say("torch %s, device %s; determinism: %s" % (torch.__version__, args.device, determinism))
    if cuda:
        torch.cuda.set_device(0)
        device = torch.device("cuda", 0)
    else:
        device = torch.device("cpu")
    mse = torch.nn.functional.mse_loss
    x, y = make_data(torch, args.seed, args.batch)
    full = device_batches(torch, x, y, args.batch, device)
    halves = [device_batches(torch, x, y, args.batch, device, half=h) for h in range(NRANKS)]

    # "single": the whole global batch in one process.
    model = make_model(torch, args.seed).to(device)
    params = list(model.parameters())
    initial = {k: v.detach().cpu().clone() for k, v in model.named_parameters()}
    opt = torch.optim.SGD(params, lr=args.lr, momentum=args.momentum)
    prev = [p.detach().clone() for p in params]
    umax = torch.zeros((), device=device)
    pmax = torch.zeros((), device=device)
    for p in params:
        pmax = torch.maximum(pmax, p.detach().abs().max())
    losses_single = torch.zeros(args.steps, dtype=torch.float32, device=device)
    start = time.monotonic()
    for t in range(args.steps):
        xb, yb = full[t % DISTINCT_BATCHES]
        opt.zero_grad(set_to_none=True)
        loss = mse(model(xb), yb)
        loss.backward()
        opt.step()
        losses_single[t] = loss.detach()
        with torch.no_grad():
            for p, q in zip(params, prev):
                umax = torch.maximum(umax, (p - q).abs().max())
                pmax = torch.maximum(pmax, p.abs().max())
                q.copy_(p)
    single = {k: v.detach().cpu() for k, v in model.named_parameters()}
    if cuda:
        torch.cuda.synchronize()
    say("single run: %d steps in %.1f s" % (args.steps, time.monotonic() - start))

    # "emulated": DDP's arithmetic in one process.
    model = make_model(torch, args.seed).to(device)
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=args.lr, momentum=args.momentum)
    losses_emulated = torch.zeros(args.steps, NRANKS, dtype=torch.float32, device=device)
    start = time.monotonic()
    for t in range(args.steps):
        grads = []
        for h in range(NRANKS):
            opt.zero_grad(set_to_none=True)
            xb, yb = halves[h][t % DISTINCT_BATCHES]
            loss = mse(model(xb), yb)
            loss.backward()
            grads.append([p.grad for p in params])
            losses_emulated[t, h] = loss.detach()
        with torch.no_grad():
            for i, p in enumerate(params):
                # DDP: each rank's gradient times 1/world_size into the bucket, then a SUM all-reduce.
                p.grad = grads[0][i].mul(1.0 / NRANKS).add_(grads[1][i].mul(1.0 / NRANKS))
        opt.step()
    emulated = {k: v.detach().cpu() for k, v in model.named_parameters()}
    if cuda:
        torch.cuda.synchronize()
    say("emulated run: %d steps in %.1f s" % (args.steps, time.monotonic() - start))
    torch.save({"initial": initial, "single": single, "emulated": emulated,
                "losses_single": losses_single.cpu(), "losses_emulated": losses_emulated.cpu(),
                "U": umax.item(), "P": pmax.item()}, args.out + ".pt")
    write_json(args.out + ".json", {"done": True, "determinism": determinism})
    sys.stdout.flush()
    os._exit(0)


# ---- the parent --------------------------------------------------------------------


def package_dir():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child_env(args, trace):
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("RINGO_SOCKET_IFNAME", "lo")
    env.setdefault("RINGO_TIMEOUT_MS", str(int(args.timeout * 1000)))
    if args.backend == "nccl" and args.device == "cuda":
        env.setdefault("RINGO_DEVICE", "cuda")  # the shim's communicators: GPU memory or an error, never host
    env["PYTHONPATH"] = os.pathsep.join(p for p in [package_dir(), env.get("PYTHONPATH", "")] if p)
    for k in ("RINGO_TRACE_DIR", "RINGO_TRACE_SIGNAL"):
        env.pop(k, None)
    if trace:
        env["RINGO_TRACE_DIR"] = os.path.abspath(args.ringo_trace)
        env["RINGO_TRACE_SIGNAL"] = str(int(signal.SIGUSR1))
        env.setdefault("RINGO_TRACE_BUFFER", "20000")
    return env


def run_processes(argvs, env, deadline_s, logdir, names, grace_s=30.0):
    """Runs the commands, outputs in files; kills the lot at the deadline, or
    `grace_s` after the first one exits (ranks in lock step finish together;
    10 s when that exit is a failure). Returns (exit codes, None for killed;
    outputs)."""
    procs, logs = [], []
    for argv, name in zip(argvs, names):
        path = os.path.join(logdir, name + ".log")
        logs.append(path)
        with open(path, "wb") as out:
            procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                          start_new_session=True))
    started = time.monotonic()
    while time.monotonic() - started < deadline_s:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            break
        if any(c is not None for c in codes):
            # One is out: the others get a grace period (shorter after a failure).
            grace = 10.0 if any(c not in (None, 0) for c in codes) else grace_s
            deadline_s = min(deadline_s, time.monotonic() - started + grace)
        time.sleep(0.1)
    codes = []
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait()
            codes.append(None)
        else:
            codes.append(p.returncode)
    outputs = []
    for path in logs:
        with open(path, "rb") as f:
            outputs.append(f.read().decode(errors="replace"))
    return codes, outputs


def tail(text, n=6000):
    text = text.strip()
    return text if len(text) <= n else "...\n" + text[-n:]


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def max_diff(torch, a, b):
    """Largest |a - b| over every parameter (float64), and the name where it is."""
    worst, where = 0.0, None
    for k in a:
        d = (a[k].double() - b[k].double()).abs().max().item()
        if d > worst or where is None:
            worst, where = d, k
    return worst, where


def bit_identical(torch, a, b):
    """Names of the parameters that are not bit-identical."""
    return [k for k in a if k not in b or not torch.equal(a[k], b[k])]


def main():
    args = parse_args()
    if args.role == "worker":
        worker(args)
    if args.role == "reference":
        reference(args)

    workdir = args.workdir or tempfile.mkdtemp(prefix="ringo_gpu_ddp_")
    os.makedirs(workdir, exist_ok=True)
    if args.ringo_trace:
        os.makedirs(args.ringo_trace, exist_ok=True)
        for name in os.listdir(args.ringo_trace):  # records of earlier runs would confuse the count
            if name.startswith("ringo-trace-"):
                os.remove(os.path.join(args.ringo_trace, name))
    problems = []
    print("gpu_ddp_test: backend %s, device %s, %d steps, global batch %d (%d a rank), lr %g, momentum %g, "
          "seed %d, bucket cap %g MB; files in %s" % (args.backend, args.device, args.steps, args.batch,
                                                    args.batch // NRANKS, args.lr, args.momentum, args.seed,
                                                    args.bucket_cap_mb, workdir), flush=True)
    if args.compare_to and not os.path.exists(args.compare_to):
        # A failure (never a run that compares nothing), but the run's own checks still run.
        problems.append("--compare-to %s: no such file (the run that should have written it with --save failed?)" %
                        args.compare_to)

    script = os.path.abspath(__file__)
    common = ["--backend", args.backend, "--device", args.device, "--steps", str(args.steps),
              "--batch", str(args.batch), "--lr", repr(args.lr), "--momentum", repr(args.momentum),
              "--seed", str(args.seed), "--bucket-cap-mb", repr(args.bucket_cap_mb),
              "--timeout", repr(args.timeout)]
    if args.expect_nccl_lib:
        common += ["--expect-nccl-lib", os.path.abspath(args.expect_nccl_lib)]
    if args.ringo_trace:
        common += ["--ringo-trace", os.path.abspath(args.ringo_trace)]
    init = "file://" + os.path.join(workdir, "store")
    outs = [os.path.join(workdir, "rank%d" % r) for r in range(NRANKS)]

    # 1. DDP: two processes on the one GPU.
    t0 = time.monotonic()
    codes, outputs = run_processes(
        [[sys.executable, script, "--role", "worker", "--rank", str(r), "--init", init, "--out", outs[r]] + common
         for r in range(NRANKS)], child_env(args, trace=bool(args.ringo_trace)), args.deadline, workdir,
        ["rank%d" % r for r in range(NRANKS)])
    ddp_s = time.monotonic() - t0
    for r in range(NRANKS):
        print("---- rank %d (exit %s) ----\n%s" % (r, "killed at the %.0f s deadline" % args.deadline
                                                    if codes[r] is None else codes[r], tail(outputs[r])), flush=True)
    metas = [read_json(o + ".json") for o in outs]
    for r in range(NRANKS):
        if metas[r] is None:
            problems.append("rank %d wrote no result (exit %s)" % (r, codes[r]))
            continue
        problems.extend(metas[r]["problems"])
        if codes[r] != 0 and not metas[r]["problems"]:
            if metas[r].get("done") and not metas[r].get("destroyed"):
                problems.append("rank %d saved its results but hung in destroy_process_group (killed); the "
                                "comparisons below still run" % r)
            else:
                problems.append("rank %d exited with %s" % (
                    r, "a kill at the deadline" if codes[r] is None else codes[r]))
    if not all(m is not None and m.get("done") and os.path.exists(o + ".pt") for m, o in zip(metas, outs)):
        result(problems or ["a rank saved no parameters"], "")

    # 2. The reference runs, in a process of their own.
    ref_out = os.path.join(workdir, "reference")
    t0 = time.monotonic()
    rcodes, routputs = run_processes(
        [[sys.executable, script, "--role", "reference", "--out", ref_out] + common],
        child_env(args, trace=False), args.ref_deadline, workdir, ["reference"])
    ref_s = time.monotonic() - t0
    print("---- reference (exit %s) ----\n%s" % ("killed at the %.0f s deadline" % args.ref_deadline
                                                 if rcodes[0] is None else rcodes[0], tail(routputs[0])), flush=True)
    if rcodes[0] != 0 or not os.path.exists(ref_out + ".pt"):
        result(["the reference process failed (exit %s)" % rcodes[0]], "")

    # 3. Compare.
    import torch

    ranks = [torch.load(o + ".pt", map_location="cpu") for o in outs]
    ref = torch.load(ref_out + ".pt", map_location="cpu")
    ddp = ranks[0]["params"]
    T = args.steps
    mu = args.momentum
    A = (args.k_ulps * (1.0 + mu) + 2.0) / (1.0 - mu)
    U, P = ref["U"], ref["P"]
    tau_lin = EPS32 * T * (A * U + P)
    tau = args.c_amp * tau_lin
    print("tolerance: eps=%.3g T=%d mu=%g k=%g A=(k(1+mu)+2)/(1-mu)=%.4g U=max|update|=%.4g P=max|p|=%.4g; "
          "eps*T*(A*U+P)=%.4g; c=%g; tau=%.4g" % (EPS32, T, mu, args.k_ulps, A, U, P, tau_lin, args.c_amp, tau))

    for name in ddp:  # ranks identical (checked in the workers too, over the process group)
        if not torch.equal(ranks[0]["params"][name], ranks[1]["params"][name]):
            problems.append("the ranks' saved %s differ" % name)

    # Loss curves: DDP's global loss is the mean of the ranks' half-batch means.
    l_ddp = (ranks[0]["losses"].double() + ranks[1]["losses"].double()) / NRANKS
    l_single = ref["losses_single"].double()
    l_emul = ref["losses_emulated"].double()
    print("%6s  %16s  %16s  %10s  %16s" % ("step", "loss single", "loss DDP", "|diff|", "loss emulated"))
    for t in list(range(0, T, PRINT_EVERY)) + ([T - 1] if (T - 1) % PRINT_EVERY else []):
        print("%6d  %16.9g  %16.9g  %10.3g  %16.9g" % (t, l_single[t].item(), l_ddp[t].item(),
                                                      abs(l_single[t] - l_ddp[t]).item(),
                                                      l_emul[t].mean().item()))
    loss_diff = (l_single - l_ddp).abs()
    print("loss curves: max |single - DDP| = %.4g at step %d (max relative %.4g)" % (
        loss_diff.max().item(), int(loss_diff.argmax()), (loss_diff / l_single.abs().clamp_min(1e-30)).max().item()))

    # Check 4: not vacuous.
    first = abs(l_single[0].item() - l_ddp[0].item())
    if first > INITIAL_LOSS_EPS * EPS32 * abs(l_single[0].item()):
        problems.append("step 0: DDP's loss %.9g is not the single run's %.9g (|diff| %.3g > %d eps L): the ranks did "
                        "not train on the two halves of the global batch" % (
                            l_ddp[0].item(), l_single[0].item(), first, INITIAL_LOSS_EPS))
    moved, moved_where = max_diff(torch, ref["single"], ref["initial"])
    print("training moved the parameters by up to %.4g (%s), %.3g x tau; loss %.6g -> %.6g" % (
        moved, moved_where, moved / tau if tau > 0 else float("inf"), l_single[0].item(), l_single[-1].item()))
    if not moved >= MOVE_FACTOR * tau:
        problems.append("training moved the parameters by %.3g only, less than %g x tau = %.3g: the comparison would "
                        "say nothing" % (moved, MOVE_FACTOR, MOVE_FACTOR * tau))
    window = min(DISTINCT_BATCHES, max(1, T // 2))
    early, late = l_single[:window].mean().item(), l_single[-window:].mean().item()
    print("mean loss over the first %d steps %.6g, over the last %d %.6g" % (window, early, window, late))
    if not late <= LOSS_DROP * early:
        problems.append("the single run's mean loss went %.6g (first %d steps) -> %.6g (last %d), not below %g x: the "
                        "model did not train" % (early, window, late, window, LOSS_DROP))

    # Check 2: DDP == emulated.
    if args.emulation != "off":
        off = bit_identical(torch, ddp, ref["emulated"])
        d_emul, where_emul = max_diff(torch, ddp, ref["emulated"])
        loss_same = torch.equal(torch.stack([ranks[r]["losses"] for r in range(NRANKS)], 1),
                                ref["losses_emulated"])
        print("DDP vs emulated: %s; max |diff| %.4g (%s); per-rank losses %s" % (
            "bit-identical" if not off else "%d of %d parameters differ" % (len(off), len(ddp)), d_emul, where_emul,
            "bit-identical at every step" if loss_same else "differ"))
        if args.emulation == "exact":
            if off or not loss_same:
                first_bad = None
                if not loss_same:
                    per_rank = torch.stack([ranks[r]["losses"] for r in range(NRANKS)], 1)
                    bad = (per_rank != ref["losses_emulated"]).any(1).nonzero()
                    first_bad = int(bad[0]) if len(bad) else None
                problems.append("DDP is not bit-identical to the emulation of its arithmetic: parameters %s (max "
                                "|diff| %.3g, %s tau), first step whose losses differ: %s" % (
                                    off[:4] or "equal", d_emul, "within" if d_emul <= tau else "beyond", first_bad))
        elif d_emul > tau:
            problems.append("DDP vs emulated: max |diff| %.4g beyond tau %.4g" % (d_emul, tau))

    # Check 3: DDP vs single within tau.
    d_single, where_single = max_diff(torch, ddp, ref["single"])
    d_es, _ = max_diff(torch, ref["emulated"], ref["single"])
    print("DDP vs single: max |p_ddp - p_single| = %.4g (%s) = %.3g x tau (tau %.4g); emulated vs single %.4g; %s" % (
        d_single, where_single, d_single / tau if tau > 0 else float("inf"), tau, d_es,
        "bit-identical" if not bit_identical(torch, ddp, ref["single"]) else "not bit-identical (expected: the "
        "summation orders differ)"))
    if not d_single <= tau:
        problems.append("DDP vs single: max |p_ddp - p_single| = %.4g beyond tau = %.4g (%s)" % (
            d_single, tau, where_single))

    # Check 5: against an earlier run.
    if args.compare_to and os.path.exists(args.compare_to):
        other = torch.load(args.compare_to, map_location="cpu")
        if not other.get("passed"):
            print("note: the run that wrote %s did not pass its own checks" % args.compare_to)
        if other.get("config") != config_of(args):
            problems.append("--compare-to %s: its run had another configuration: %s vs this run's %s" % (
                args.compare_to, other.get("config"), config_of(args)))
        else:
            off = bit_identical(torch, ddp, other["params"])
            d_other, where_other = max_diff(torch, ddp, other["params"])
            print("this run (backend %s) vs %s (backend %s): %s; max |diff| %.4g (%s), %.3g x tau" % (
                args.backend, args.compare_to, other.get("backend"),
                "bit-identical" if not off else "%d of %d parameters differ" % (len(off), len(ddp)),
                d_other, where_other, d_other / tau if tau > 0 else float("inf")))
            if args.compare_mode == "exact" and off:
                problems.append("not bit-identical to %s (backend %s): %s, max |diff| %.3g (%s tau)" % (
                    args.compare_to, other.get("backend"), off[:4], d_other, "within" if d_other <= tau else "beyond"))
            elif args.compare_mode == "tau" and d_other > tau:
                problems.append("vs %s: max |diff| %.4g beyond tau %.4g" % (args.compare_to, d_other, tau))
    if args.save:
        torch.save({"params": ddp, "config": config_of(args), "backend": args.backend,
                    "losses": l_ddp, "passed": not problems}, args.save)
        print("saved the final parameters to %s%s" % (args.save, "" if not problems else
                                                      " (this run has failed checks: marked so in the file)"))

    if args.backend == "nccl":
        for r in range(NRANKS):
            nccl = (metas[r] or {}).get("nccl", {})
            print("rank %d NCCL: %s" % (r, json.dumps(nccl, sort_keys=True)))
    summary = ("backend=%s device=%s steps=%d: max|p_ddp-p_single|=%.3g <= tau=%.3g (%.2g x tau), loss curves max "
               "|diff| %.3g, DDP %s emulation; DDP %.0f s, reference %.0f s" % (
                   args.backend, args.device, T, d_single, tau, d_single / tau if tau > 0 else float("inf"),
                   loss_diff.max().item(),
                   "skipped" if args.emulation == "off" else ("==" if not bit_identical(torch, ddp, ref["emulated"])
                                                              else "~="), ddp_s, ref_s))
    result(problems, summary)


def result(problems, summary):
    if problems:
        for p in problems:
            print("FAIL: " + p)
        print("RESULT FAIL gpu_ddp_test: %s%s" % (problems[0], " (and %d more)" % (len(problems) - 1)
                                                  if len(problems) > 1 else ""), flush=True)
        sys.exit(1)
    print("RESULT PASS gpu_ddp_test: " + summary, flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
