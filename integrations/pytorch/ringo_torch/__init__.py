"""Ringo as a torch.distributed backend.

    import ringo_torch
    torch.distributed.init_process_group(backend="ringo")

Importing this package registers the backend "ringo"; every process group
made with it (the default group, new_group(backend="ringo") subgroups) gets
its own Ringo communicator, set up through the group's store. The timeout
given to init_process_group / new_group is the communicator's: a peer that
dies or stops makes the pending operation raise a RuntimeError naming it.
"""

import inspect

import torch
import torch.distributed as dist


def _check_torch():
    """Refuses a PyTorch other than the one the extension was built against
    (its major and minor version), before the extension loads: a C++
    extension of another PyTorch fails to load with a linker error, or
    worse, loads and misbehaves."""
    try:
        from . import _build
    except ImportError:
        raise ImportError("ringo_torch is not built: its ringo_torch/_build.py is missing (build it with "
                          "integrations/pytorch/install.sh, or pip wheel integrations/pytorch: docs/pytorch.md)")
    built, have = _build.TORCH_VERSION, torch.__version__
    if built.split("+")[0].split(".")[:2] != have.split("+")[0].split(".")[:2]:
        raise ImportError("ringo_torch was built against PyTorch %s, but this Python has PyTorch %s: build it again "
                          "against this one (integrations/pytorch/install.sh for Debian's PyTorch, pip wheel "
                          "integrations/pytorch for a pip install: docs/pytorch.md)" % (built, have))


_check_torch()

from . import _C  # noqa: E402

ProcessGroupRingo = _C.ProcessGroupRingo

#: Point-to-point and what is built on it (send/recv, all_to_all, gather,
#: scatter): available once Ringo has them.
HAS_P2P = _C.HAS_P2P
#: CUDA tensors on Ringo's GPU communicators (PyTorch 2.x builds with CUDA).
HAS_CUDA = _C.HAS_CUDA
#: The PyTorch version the extension was compiled against.
BUILT_WITH_TORCH = _C.BUILT_WITH_TORCH
#: Whether it was built as a c10d::Backend (PyTorch 2.x) rather than a ProcessGroup.
BACKEND_API = _C.BACKEND_API

BACKEND = "ringo"


def _create(store, rank, world_size, timeout):
    return _C.ProcessGroupRingo(store, rank, world_size, timeout)


def _register():
    if BACKEND.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    register = dist.Backend.register_backend
    if "devices" in inspect.signature(register).parameters:
        # PyTorch 2.x: one c10d::Backend object serves the listed devices.
        devices = ["cpu", "cuda"] if HAS_CUDA else ["cpu"]
        register(BACKEND, _create, devices=devices)
    else:
        register(BACKEND, _create)


def ringo_version():
    """Ringo's version as MAJOR * 10000 + MINOR * 100 + PATCH."""
    return _C.ringo_version()


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """torch.distributed.monitored_barrier for ringo groups (PyTorch 1.13's
    refuses every backend but gloo before it reaches one): rank 0 waits for
    every rank within `timeout` (a datetime.timedelta; default
    torch.distributed's default_pg_timeout, as there) and raises a
    RuntimeError naming the first rank that did not arrive, or all of them
    with wait_all_ranks=True; the other ranks raise when rank 0 reports a
    failure or does not answer. Also reachable as the group's own
    monitored_barrier(timeout, wait_all_ranks)."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if timeout is None:
        timeout = dist.distributed_c10d.default_pg_timeout
    return pg.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)


def shrink(group=None):
    """The group of the ranks of `group` (default: the default group) still
    alive, in the same processes, with no restart: every surviving rank
    calls it, typically after an operation raised because a rank died or
    stopped; they agree on the lost ranks and shrink the group's Ringo
    communicator (renumbered in order: the new group's rank() and size()).
    Use the new group explicitly (DDP(process_group=...), dist ops with
    group=...); it shares the old group's store, which must survive the lost
    ranks (init_method="file://...", or a TCPStore on a host that stays), and
    `group` stays failed. Host tensors, PyTorch 1.x."""
    if BACKEND_API:
        raise RuntimeError("ringo_torch.shrink: not yet with PyTorch 2.x (a ProcessGroup of backends)")
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    return _C.shrink(pg)


#: Ringo's wire formats between hosts (ringoWire_t; docs/wire.md).
WIRES = {"none": 0, "bf16": 1, "fp16": 2, "e4m3": 3, "fp8": 3, "e5m2": 4}


def _ringo_group(group):
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if isinstance(pg, ProcessGroupRingo):
        return pg
    if BACKEND_API:  # PyTorch 2.x: the ProcessGroup's backend for CPU tensors
        return pg._get_backend(torch.device("cpu"))
    raise RuntimeError("ringo_torch: the group is not a ringo group")


def set_wire(wire, group=None):
    """Sends the group's floating-point sums between hosts in `wire` ("none",
    "bf16", "fp16", "e4m3" (or "fp8"), "e5m2"): fp32, bf16 and fp16 sum and
    avg all-reduce and reduce-scatter of CPU tensors then cross the network
    in that format, summed in fp32, each rank's contribution rounded once
    and the result once whatever the rank count; within a host nothing is
    compressed. Every rank of the group calls it, in the same order with
    respect to its operations. RINGO_WIRE sets it for every group."""
    if wire not in WIRES:
        raise ValueError(f"ringo_torch.set_wire: wire is one of {', '.join(WIRES)}, not {wire!r}")
    _C.set_wire(_ringo_group(group), WIRES[wire])


def wire_round(tensor, group=None, average=False):
    """What this rank's `tensor` amounts to once sent in the group's wire as
    its contribution to an all-reduce (sum, or avg with average=True): the
    parts bound for ranks on other hosts rounded as that all-reduce rounds
    them, the rest unchanged. tensor - wire_round(tensor) is what the wire
    loses of it: error feedback adds that to the next step's gradient."""
    return _C.wire_round(_ringo_group(group), tensor, average)


class WireHookState:
    """State of `wire_hook`: the group (None: the default group), its wire
    (set on every rank when the state is made), and with error_feedback the
    rounding residual of each bucket, added to the bucket's gradient at the
    next step before it is sent."""

    def __init__(self, group=None, wire="bf16", error_feedback=True):
        self.group = group
        self.wire = wire
        self.error_feedback = error_feedback
        self.residuals = {}
        set_wire(wire, group)


def wire_hook(state, bucket):
    """A DDP communication hook (model.register_comm_hook(state, wire_hook))
    that averages each gradient bucket with Ringo's compressed wire between
    hosts, summed in fp32, with error feedback when state.error_feedback is
    set: what the wire lost of this rank's bucket last step is added before
    it is sent again. Compare PyTorch's fp16_compress_hook, which casts the
    whole bucket and sums in fp16 on every hop."""
    pg = state.group if state.group is not None else dist.distributed_c10d._get_default_group()
    world = dist.get_world_size(pg)
    grad = bucket.buffer()
    if state.error_feedback:
        # Queued with the group's other work, so the backward pass goes on:
        # the residual is added, the new one kept, then the all-reduce.
        key = bucket.index()
        residual = state.residuals.get(key)
        if residual is None or residual.shape != grad.shape:
            residual = state.residuals[key] = torch.zeros_like(grad)
        fut = _C.allreduce_feedback(_ringo_group(state.group), grad, residual).get_future()
    else:
        fut = dist.all_reduce(grad, group=pg, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0].div_(world))


_register()

__all__ = ["BACKEND", "HAS_CUDA", "HAS_P2P", "ProcessGroupRingo", "WIRES", "WireHookState", "monitored_barrier",
           "ringo_version", "set_wire", "shrink", "wire_hook", "wire_round"]
