#!/usr/bin/env python3
"""CuPy's NCCL bindings (cupy.cuda.nccl) on Ringo's libnccl.so.2, two processes
on one GPU.

What it checks
--------------
Two processes (multiprocessing, spawn), each cupy.cuda.Device(0).use() (both on
the one GPU). Rank 0 makes the unique id with cupy.cuda.nccl.get_unique_id()
and hands it to rank 1 through a multiprocessing Queue; each makes
cupy.cuda.nccl.NcclCommunicator(2, uid, rank) (CuPy 14 calls
ncclCommInitRankConfig with no config). Then, every call on one non-default
stream (cupy.cuda.Stream(non_blocking=True)), synchronised before its result is
read back and compared with numpy's result on the host, bit for bit (with two
ranks every reduction is one correctly rounded operation, so numpy's float32
a+b, a*b, max, min and a/2+b/2 are the exact expected values), over the sizes
--sizes (default 1, 7, 4099 and 1048576 elements):
  * comm.rank_id(), size(), device_id();
  * allReduce: sum, prod, max, min, avg over float32 and int32 (int avg truncates,
    as NCCL's), out of place, and sum in place;
  * broadcast from root 0 and root 1 (float32, int32), and bcast in place;
  * reduce to root 0 and root 1 (sum float32/int32, max float32), checked on the root;
  * reduceScatter (sum, max; float32, int32), each rank's chunk;
  * allGather (float32, int32);
  * send/recv: both ranks exchange inside groupStart()/groupEnd() (float32,
    int32), and one-way sends (rank 0 -> 1, then 1 -> 0) without a group;
  * comm.check_async_error() at the end, then comm.destroy().
Output buffers start as a sentinel (NaN or -123456789), so an unwritten output
fails. It prints the NCCL version CuPy reports (get_version(), and
get_build_version()), and which libnccl the process loaded: the libnccl files in
/proc/self/maps and the file whose ncclGetVersion the global symbol scope
resolves (dladdr), which is the one CuPy's calls bind to when a library is
preloaded. --expect-lib PATH fails the run unless that file is PATH;
--expect-version N unless get_version() is N (Ringo's shim reports 22809).
NVIDIA's NCCL refuses two ranks on one GPU ("Duplicate GPU detected"), so this
test cannot pass on it: run it with Ringo's libnccl.so.2 preloaded.

--ringo-trace DIR additionally reads Ringo's flight recorder (RINGO_TRACE_DIR,
dumped on SIGUSR1 through RINGO_TRACE_SIGNAL): each rank must have a GPU
("device":"cuda") communicator that recorded at least as many AllReduce,
Broadcast, Reduce, ReduceScatter, AllGather, Send and Recv operations as the
test issued, none failed.

A failed check is reported and the next case runs (both ranks made the same
calls); a failed NCCL call stops the rank's remaining cases (the ranks may be out
of step) and aborts its communicator. The last line is "RESULT PASS ..." or
"RESULT FAIL <why>"; the exit status is non-zero on failure.

How it is run
-------------
  LD_PRELOAD=$BUNDLE/lib/libnccl.so.2 python3 tests/gpu_clients/cupy_nccl_test.py \\
      --expect-lib $BUNDLE/lib/libnccl.so.2 --expect-version 22809 [--ringo-trace /tmp/cupy_trace]

The children get RINGO_SOCKET_IFNAME=lo, RINGO_TIMEOUT_MS=--timeout x 1000 (at
most 60 s: a stuck collective fails within that) and RINGO_DEVICE=cuda (GPU
memory or an error, never a silent host fallback), unless already set. Every
process is killed at --deadline (default 120 s). Expected time on one H100:
10-20 s (CuPy and CUDA start-up in each process; about 130 operations, a few
milliseconds each with the two processes time-sliced on the GPU without MPS).
Needs only the standard library, numpy and cupy.
"""

import argparse
import ctypes
import json
import multiprocessing
import os
import queue
import signal
import sys
import time
import traceback
import zlib

NRANKS = 2
INT_SENTINEL = -123456789


# ---- where NCCL comes from ---------------------------------------------------------


def nccl_provenance():
    """The libnccl files mapped into this process, the file whose ncclGetVersion
    the global symbol scope resolves, and the version that function reports."""
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
    except (OSError, TypeError):
        return False


# ---- Ringo's flight recorder --------------------------------------------------------


def signal_caught(signo):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool((int(line.split()[1], 16) >> (signo - 1)) & 1)
    except OSError:
        pass
    return False


def dump_ringo_trace(trace_dir, rank, wait_s=15.0):
    """Makes Ringo write this process's flight records and reads them back:
    (list of per-communicator summaries, None) or (None, why)."""
    signo = int(os.environ.get("RINGO_TRACE_SIGNAL", "0") or 0)
    if signo <= 0:
        return None, "RINGO_TRACE_SIGNAL is not set"
    if not signal_caught(signo):
        return None, ("nothing in this process catches signal %d: Ringo installs that handler when it makes a "
                      "communicator, so no Ringo communicator was made here (is the NCCL in use Ringo's?)" % signo)
    me = os.getpid()
    os.kill(me, signo)
    found, settle_at = {}, None
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
            found[path] = (header, [json.loads(line) for line in lines[1:] if line.strip()])
            settle_at = time.monotonic() + 1.0
        if found and time.monotonic() >= settle_at:
            break
        time.sleep(0.1)
    if not found:
        return None, "no flight record of process %d appeared in %s within %.0f s" % (me, trace_dir, wait_s)
    summaries = []
    for path, (header, entries) in sorted(found.items()):
        kinds, states = {}, {}
        for e in entries:
            kinds[e.get("op")] = kinds.get(e.get("op"), 0) + 1
            states[e.get("state")] = states.get(e.get("state"), 0) + 1
        summaries.append({"file": os.path.basename(path), "comm": header.get("comm"), "device": header.get("device"),
                          "rank": header.get("rank"), "nranks": header.get("nranks"),
                          "capacity": header.get("capacity"), "entries": len(entries), "kinds": kinds,
                          "states": states})
    return summaries, None


# ---- the plan: every case, in order, the same on both ranks --------------------------


def plan():
    cases = [("comm.properties", "props", {})]
    for dt in ("float32", "int32"):
        for op in ("sum", "prod", "max", "min", "avg"):
            cases.append(("allreduce.%s.%s" % (op, dt), "allreduce", {"dtype": dt, "op": op, "inplace": False}))
        cases.append(("allreduce.sum.%s.inplace" % dt, "allreduce", {"dtype": dt, "op": "sum", "inplace": True}))
    for dt in ("float32", "int32"):
        for root in range(NRANKS):
            cases.append(("broadcast.%s.root%d" % (dt, root), "broadcast", {"dtype": dt, "root": root}))
    for root in range(NRANKS):
        cases.append(("bcast.float32.root%d.inplace" % root, "bcast", {"dtype": "float32", "root": root}))
    for op, dt in (("sum", "float32"), ("sum", "int32"), ("max", "float32")):
        for root in range(NRANKS):
            cases.append(("reduce.%s.%s.root%d" % (op, dt, root), "reduce", {"dtype": dt, "op": op, "root": root}))
    for op in ("sum", "max"):
        for dt in ("float32", "int32"):
            cases.append(("reducescatter.%s.%s" % (op, dt), "reducescatter", {"dtype": dt, "op": op}))
    for dt in ("float32", "int32"):
        cases.append(("allgather.%s" % dt, "allgather", {"dtype": dt}))
    for dt in ("float32", "int32"):
        cases.append(("sendrecv.grouped.%s" % dt, "sendrecv_grouped", {"dtype": dt}))
    cases.append(("sendrecv.oneway.float32", "sendrecv_oneway", {"dtype": "float32"}))
    cases.append(("check_async_error", "async_error", {}))
    return cases


# ---- a rank ---------------------------------------------------------------------------


def worker(rank, cfg, uid_q, res_q):
    out = {"rank": rank, "cases": [], "error": None, "info": {}, "problems": []}
    try:
        run_rank(rank, cfg, uid_q, out)
    except BaseException:
        out["error"] = traceback.format_exc()[-4000:]
        print("[rank %d] %s" % (rank, out["error"]), flush=True)
    res_q.put(out)
    res_q.close()
    res_q.join_thread()  # the result is in the pipe
    sys.stdout.flush()
    sys.stderr.flush()
    # Out without Python's teardown (CuPy's pools, destructors at exit): not
    # what is tested, and the communicator was destroyed above.
    os._exit(0)


def run_rank(rank, cfg, uid_q, out):
    import numpy as np
    import cupy
    from cupy.cuda import nccl

    say = lambda *a: print("[rank %d]" % rank, *a, flush=True)  # noqa: E731
    if not getattr(nccl, "available", False) or not hasattr(nccl, "NcclCommunicator"):
        raise RuntimeError("cupy.cuda.nccl is not available: CuPy loaded no NCCL")
    cupy.cuda.Device(0).use()
    info = out["info"]
    info["cupy"] = cupy.__version__
    info["cuda_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
    try:
        props = cupy.cuda.runtime.getDeviceProperties(0)
        info["gpu"] = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    except Exception as e:  # informational only
        info["gpu"] = "? (%s)" % e
    info["nccl_version"] = nccl.get_version()
    info["nccl_build_version"] = nccl.get_build_version()
    info["provenance"] = nccl_provenance()
    info["ld_preload"] = os.environ.get("LD_PRELOAD", "")
    say("cupy %s, CUDA runtime %s, GPU %s, pid %d" % (info["cupy"], info["cuda_runtime"], info["gpu"], os.getpid()))
    say("NCCL: cupy.cuda.nccl.get_version() = %s (built against %s); ncclGetVersion resolves to %s; libnccl mapped: "
        "%s; LD_PRELOAD=%r" % (info["nccl_version"], info["nccl_build_version"], info["provenance"]["resolved"],
                               info["provenance"]["mapped"] or "none", info["ld_preload"]))
    # Checked on both ranks before the unique id moves, so both stop here alike.
    if cfg["expect_lib"]:
        got = info["provenance"]["resolved"]
        if got is None or not same_file(got, cfg["expect_lib"]):
            raise RuntimeError("ncclGetVersion comes from %s, not from the expected %s (libnccl mapped: %s)" % (
                got, cfg["expect_lib"], info["provenance"]["mapped"]))
    if cfg["expect_version"] is not None and info["nccl_version"] != cfg["expect_version"]:
        raise RuntimeError("cupy.cuda.nccl.get_version() is %s, expected %s" % (
            info["nccl_version"], cfg["expect_version"]))

    if rank == 0:
        uid = nccl.get_unique_id()
        for _ in range(NRANKS - 1):
            uid_q.put(uid)
    else:
        try:
            uid = uid_q.get(timeout=cfg["timeout"])
        except queue.Empty:
            raise RuntimeError("rank 0 handed over no unique id within %.0f s" % cfg["timeout"])
    start = time.monotonic()
    comm = nccl.NcclCommunicator(NRANKS, uid, rank)
    say("communicator made in %.2f s" % (time.monotonic() - start))

    stream = cupy.cuda.Stream(non_blocking=True)
    sizes = cfg["sizes"]
    peer = 1 - rank
    issued = {}
    np_types = {"float32": np.float32, "int32": np.int32}
    nccl_types = {"float32": nccl.NCCL_FLOAT32, "int32": nccl.NCCL_INT32}
    nccl_ops = {"sum": nccl.NCCL_SUM, "prod": nccl.NCCL_PROD, "max": nccl.NCCL_MAX, "min": nccl.NCCL_MIN,
                "avg": getattr(nccl, "NCCL_AVG", 4)}  # ncclAvg

    def count(kind, n=1):
        issued[kind] = issued.get(kind, 0) + n

    def host_input(tag, dt, n, r, op=None):
        rng = np.random.default_rng([cfg["seed"], r, n, zlib.crc32(tag.encode())])
        if dt == "float32":
            x = rng.standard_normal(n).astype(np.float32)
            if op == "prod":
                x = (np.float32(0.5) + np.abs(x)).astype(np.float32)
            return x
        if op == "prod":
            return (rng.integers(1, 4, n) * rng.choice([-1, 1], n)).astype(np.int32)
        return rng.integers(-100000, 100000, n).astype(np.int32)

    def reduce2(op, a, b):
        if op == "sum":
            return a + b
        if op == "prod":
            return a * b
        if op == "max":
            return np.maximum(a, b)
        if op == "min":
            return np.minimum(a, b)
        if op == "avg":
            if a.dtype == np.float32:  # NCCL and Ringo: each input times 1/n, then the sum
                return a * np.float32(0.5) + b * np.float32(0.5)
            s = a.astype(np.int64) + b.astype(np.int64)
            return (np.sign(s) * (np.abs(s) // 2)).astype(np.int32)  # the sum / n, truncated
        raise ValueError(op)

    def sentinel(dt, n):
        return cupy.asarray(np.full(n, np.nan if dt == "float32" else INT_SENTINEL, dtype=np_types[dt]))

    def ready():
        # The inputs were copied on `stream`; the device sync makes sure of it
        # whatever stream CuPy used (one rank per process: nothing else waits).
        cupy.cuda.runtime.deviceSynchronize()

    def fetch(arr):
        stream.synchronize()
        return cupy.asnumpy(arr, stream=stream)

    def same(got, want, what, failures):
        if got.dtype != want.dtype or got.shape != want.shape:
            failures.append("%s: got %s %s, want %s %s" % (what, got.dtype, got.shape, want.dtype, want.shape))
            return
        a = got.view(np.uint32) if got.dtype == np.float32 else got
        b = want.view(np.uint32) if want.dtype == np.float32 else want
        if not np.array_equal(a, b):
            bad = np.nonzero(a != b)[0]
            failures.append("%s: %d of %d elements differ, first at %d: %r vs %r" % (
                what, len(bad), len(a), bad[0], got[bad[0]].item(), want[bad[0]].item()))

    def c_props(p, failures):
        if comm.rank_id() != rank:
            failures.append("rank_id() %s, want %d" % (comm.rank_id(), rank))
        if comm.size() != NRANKS:
            failures.append("size() %s, want %d" % (comm.size(), NRANKS))
        if comm.device_id() != 0:
            failures.append("device_id() %s, want 0" % comm.device_id())

    def c_allreduce(p, failures):
        dt, op = p["dtype"], p["op"]
        for n in sizes:
            mine = host_input("ar", dt, n, rank, op)
            want = reduce2(op, host_input("ar", dt, n, 0, op), host_input("ar", dt, n, 1, op))
            send = cupy.asarray(mine)
            recv = send if p["inplace"] else sentinel(dt, n)
            ready()
            comm.allReduce(send.data.ptr, recv.data.ptr, n, nccl_types[dt], nccl_ops[op], stream.ptr)
            count("AllReduce")
            same(fetch(recv), want, "%d elements" % n, failures)

    def c_broadcast(p, failures):
        dt, root = p["dtype"], p["root"]
        for n in sizes:
            send = cupy.asarray(host_input("bc", dt, n, rank))
            recv = sentinel(dt, n)
            ready()
            comm.broadcast(send.data.ptr, recv.data.ptr, n, nccl_types[dt], root, stream.ptr)
            count("Broadcast")
            same(fetch(recv), host_input("bc", dt, n, root), "%d elements" % n, failures)

    def c_bcast(p, failures):
        dt, root = p["dtype"], p["root"]
        for n in sizes:
            buf = cupy.asarray(host_input("bci", dt, n, rank))
            ready()
            comm.bcast(buf.data.ptr, n, nccl_types[dt], root, stream.ptr)
            count("Broadcast")
            same(fetch(buf), host_input("bci", dt, n, root), "%d elements" % n, failures)

    def c_reduce(p, failures):
        dt, op, root = p["dtype"], p["op"], p["root"]
        for n in sizes:
            send = cupy.asarray(host_input("rd", dt, n, rank, op))
            recv = sentinel(dt, n)
            ready()
            comm.reduce(send.data.ptr, recv.data.ptr, n, nccl_types[dt], nccl_ops[op], root, stream.ptr)
            count("Reduce")
            got = fetch(recv)
            if rank == root:  # recvbuff matters on the root only
                want = reduce2(op, host_input("rd", dt, n, 0, op), host_input("rd", dt, n, 1, op))
                same(got, want, "%d elements at the root" % n, failures)

    def c_reducescatter(p, failures):
        dt, op = p["dtype"], p["op"]
        for n in sizes:  # n = recvcount; each rank sends 2n
            send = cupy.asarray(host_input("rs", dt, NRANKS * n, rank, op))
            recv = sentinel(dt, n)
            ready()
            comm.reduceScatter(send.data.ptr, recv.data.ptr, n, nccl_types[dt], nccl_ops[op], stream.ptr)
            count("ReduceScatter")
            full = reduce2(op, host_input("rs", dt, NRANKS * n, 0, op), host_input("rs", dt, NRANKS * n, 1, op))
            same(fetch(recv), full[rank * n:(rank + 1) * n], "recvcount %d" % n, failures)

    def c_allgather(p, failures):
        dt = p["dtype"]
        for n in sizes:
            send = cupy.asarray(host_input("ag", dt, n, rank))
            recv = sentinel(dt, NRANKS * n)
            ready()
            comm.allGather(send.data.ptr, recv.data.ptr, n, nccl_types[dt], stream.ptr)
            count("AllGather")
            want = np.concatenate([host_input("ag", dt, n, r) for r in range(NRANKS)])
            same(fetch(recv), want, "sendcount %d" % n, failures)

    def c_sendrecv_grouped(p, failures):
        dt = p["dtype"]
        grouped = hasattr(nccl, "groupStart") and hasattr(nccl, "groupEnd")
        for n in sizes:
            send = cupy.asarray(host_input("sr", dt, n, rank))
            recv = sentinel(dt, n)
            ready()
            if grouped:
                nccl.groupStart()
                comm.send(send.data.ptr, n, nccl_types[dt], peer, stream.ptr)
                comm.recv(recv.data.ptr, n, nccl_types[dt], peer, stream.ptr)
                nccl.groupEnd()
            elif rank == 0:  # no groups in this CuPy: opposite orders on the two ranks
                comm.send(send.data.ptr, n, nccl_types[dt], peer, stream.ptr)
                comm.recv(recv.data.ptr, n, nccl_types[dt], peer, stream.ptr)
            else:
                comm.recv(recv.data.ptr, n, nccl_types[dt], peer, stream.ptr)
                comm.send(send.data.ptr, n, nccl_types[dt], peer, stream.ptr)
            count("Send")
            count("Recv")
            same(fetch(recv), host_input("sr", dt, n, peer), "%d elements%s" % (
                n, "" if grouped else " (no groupStart in this CuPy: ordered send/recv)"), failures)

    def c_sendrecv_oneway(p, failures):
        dt = p["dtype"]
        for n in [s for s in sizes if s > 1][-2:] or sizes:
            for src in range(NRANKS):
                dst = 1 - src
                data = cupy.asarray(host_input("ow%d" % src, dt, n, src) if rank == src else np.zeros(0, np.float32))
                recv = sentinel(dt, n) if rank == dst else None
                ready()
                if rank == src:
                    comm.send(data.data.ptr, n, nccl_types[dt], dst, stream.ptr)
                    count("Send")
                    stream.synchronize()
                else:
                    comm.recv(recv.data.ptr, n, nccl_types[dt], src, stream.ptr)
                    count("Recv")
                    same(fetch(recv), host_input("ow%d" % src, dt, n, src), "%d elements from rank %d" % (n, src),
                         failures)

    def c_async_error(p, failures):
        comm.check_async_error()  # raises NcclError on an asynchronous error

    runners = {"props": c_props, "allreduce": c_allreduce, "broadcast": c_broadcast, "bcast": c_bcast,
               "reduce": c_reduce, "reducescatter": c_reducescatter, "allgather": c_allgather,
               "sendrecv_grouped": c_sendrecv_grouped, "sendrecv_oneway": c_sendrecv_oneway,
               "async_error": c_async_error}
    broken = None
    with stream:
        for name, kind, params in plan():
            if broken:
                out["cases"].append({"name": name, "ok": False, "msg": "not run: " + broken, "s": 0.0})
                continue
            failures = []
            t0 = time.monotonic()
            try:
                runners[kind](params, failures)
            except Exception as e:  # an NCCL call failed: the ranks may be out of step now
                failures.append("%s: %s" % (type(e).__name__, str(e)[:1000]))
                broken = "an NCCL call failed in %s (%s)" % (name, type(e).__name__)
            out["cases"].append({"name": name, "ok": not failures, "msg": "; ".join(failures)[:2000],
                                 "s": time.monotonic() - t0})
    out["issued"] = issued
    say("%d cases, %d failed; operations issued: %s" % (
        len(out["cases"]), sum(1 for c in out["cases"] if not c["ok"]), issued))

    if cfg["ringo_trace"] and not broken:
        summaries, why = dump_ringo_trace(cfg["ringo_trace"], rank)
        out["trace"] = summaries
        if summaries is None:
            out["problems"].append("rank %d: Ringo flight record: %s" % (rank, why))
        else:
            for s in summaries:
                say("Ringo flight record %s: communicator %s, device %s, rank %s of %s, %d operations: %s; "
                    "states %s" % (s["file"], s["comm"], s["device"], s["rank"], s["nranks"], s["entries"],
                                   s["kinds"], s["states"]))
            gpu = [s for s in summaries if s["device"] == "cuda"]
            if not gpu:
                out["problems"].append("rank %d: no GPU communicator in Ringo's flight records" % rank)
            recorded = {}
            for s in gpu:
                for k, v in s["kinds"].items():
                    recorded[k] = recorded.get(k, 0) + v
            for kind, n in sorted(issued.items()):
                if recorded.get(kind, 0) < n:
                    out["problems"].append("rank %d: Ringo recorded %d %s operations, the test issued %d" % (
                        rank, recorded.get(kind, 0), kind, n))
            failed = sum(s["states"].get("failed", 0) for s in summaries)
            if failed:
                out["problems"].append("rank %d: %d failed operations in Ringo's flight records" % (rank, failed))

    if broken:
        comm.abort()
        say("communicator aborted")
    else:
        comm.destroy()
        say("communicator destroyed")


# ---- the parent -------------------------------------------------------------------------


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1,7,4099,1048576", help="element counts, comma-separated")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds: RINGO_TIMEOUT_MS and the id hand-over")
    p.add_argument("--deadline", type=float, default=120.0, help="seconds before the ranks are killed")
    p.add_argument("--expect-lib", metavar="PATH", help="fail unless ncclGetVersion comes from this file")
    p.add_argument("--expect-version", type=int, help="fail unless cupy.cuda.nccl.get_version() is this")
    p.add_argument("--ringo-trace", metavar="DIR", help="read and check Ringo's flight records (see above)")
    args = p.parse_args()
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        p.error("--sizes: comma-separated integers")
    if not sizes or min(sizes) < 1:
        p.error("--sizes: positive counts")
    if not 0 < args.timeout <= 60:
        p.error("--timeout must be in (0, 60] seconds")

    os.environ["PYTHONUNBUFFERED"] = "1"
    os.environ.setdefault("RINGO_SOCKET_IFNAME", "lo")
    os.environ.setdefault("RINGO_TIMEOUT_MS", str(int(args.timeout * 1000)))
    os.environ.setdefault("RINGO_DEVICE", "cuda")
    trace_dir = None
    if args.ringo_trace:
        trace_dir = os.path.abspath(args.ringo_trace)
        os.makedirs(trace_dir, exist_ok=True)
        for name in os.listdir(trace_dir):  # an earlier run's records would confuse the counts
            if name.startswith("ringo-trace-"):
                os.remove(os.path.join(trace_dir, name))
        os.environ["RINGO_TRACE_DIR"] = trace_dir
        os.environ["RINGO_TRACE_SIGNAL"] = str(int(signal.SIGUSR1))
        os.environ.setdefault("RINGO_TRACE_BUFFER", "20000")
    cfg = {"sizes": sizes, "seed": args.seed, "timeout": args.timeout,
           "expect_lib": os.path.abspath(args.expect_lib) if args.expect_lib else None,
           "expect_version": args.expect_version, "ringo_trace": trace_dir}
    print("cupy_nccl_test: 2 processes on GPU 0, sizes %s, LD_PRELOAD=%r" % (sizes, os.environ.get("LD_PRELOAD", "")),
          flush=True)

    ctx = multiprocessing.get_context("spawn")
    uid_q, res_q = ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, cfg, uid_q, res_q), name="rank%d" % r) for r in range(NRANKS)]
    start = time.monotonic()
    for proc in procs:
        proc.start()
    results = {}
    while len(results) < NRANKS and time.monotonic() - start < args.deadline:
        try:
            res = res_q.get(timeout=0.5)
            results[res["rank"]] = res
            if res["error"] or any(not c["ok"] for c in res["cases"]):
                # Its peer may now wait in a collective that will not come.
                args.deadline = min(args.deadline, time.monotonic() - start + 15.0)
        except queue.Empty:
            if any(not proc.is_alive() and proc.exitcode != 0 for proc in procs):
                # A rank died without reporting: the other gets a few seconds.
                args.deadline = min(args.deadline, time.monotonic() - start + 10.0)
    for proc in procs:
        proc.join(timeout=max(0.0, min(10.0, args.deadline - (time.monotonic() - start))))
    killed = []
    for r, proc in enumerate(procs):
        if proc.is_alive():
            proc.kill()
            proc.join(5)
            killed.append(r)
    elapsed = time.monotonic() - start

    problems = []
    names = [c[0] for c in plan()]
    for r in range(NRANKS):
        if r not in results:
            problems.append("rank %d reported nothing (exit %s%s)" % (
                r, procs[r].exitcode, ", killed at the %.0f s deadline" % args.deadline if r in killed else ""))
            continue
        res = results[r]
        if res["error"]:
            problems.append("rank %d stopped: %s" % (r, res["error"].strip().splitlines()[-1]))
        problems.extend(res["problems"])
        got = [c["name"] for c in res["cases"]]
        if res["error"] is None and got != names:
            problems.append("rank %d ran cases %s, not the plan's %d" % (r, len(got), len(names)))
        if r in killed:
            problems.append("rank %d reported but did not exit (killed)" % r)
    reported = [r for r in sorted(results) if results[r]["cases"]]
    if reported:
        # Every case of the plan, as the ranks that got that far report it (a
        # rank that reported nothing is a failure above already).
        by_name = {r: {c["name"]: c for c in results[r]["cases"]} for r in reported}
        for name in names:
            cs = {r: by_name[r].get(name) for r in reported}
            bad = ["rank %d: %s" % (r, "not reported" if c is None else c["msg"])
                   for r, c in sorted(cs.items()) if c is None or not c["ok"]]
            seconds = max((c["s"] for c in cs.values() if c), default=0.0)
            print("%s %s (%.2f s)%s%s" % ("FAIL" if bad else "PASS", name, seconds,
                                          "" if len(reported) == NRANKS else " [ranks %s only]" % reported,
                                          ": " + " | ".join(bad) if bad else ""))
            if bad:
                problems.append("%s: %s" % (name, bad[0]))
    info = results.get(0, {}).get("info", {})
    for r in sorted(results):
        print("rank %d: %s" % (r, json.dumps(results[r]["info"], sort_keys=True)))
    if problems:
        for prob in problems:
            print("FAIL: " + prob)
        print("RESULT FAIL cupy_nccl_test: %s%s" % (problems[0], " (and %d more)" % (len(problems) - 1)
                                                    if len(problems) > 1 else ""), flush=True)
        sys.exit(1)
    print("RESULT PASS cupy_nccl_test: %d cases x %d ranks, sizes %s; NCCL %s (cupy %s) from %s; %.0f s" % (
        len(names), NRANKS, sizes, info.get("nccl_version"), info.get("cupy"),
        info.get("provenance", {}).get("resolved"), elapsed), flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
