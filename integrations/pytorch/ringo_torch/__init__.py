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


_register()

__all__ = ["BACKEND", "HAS_CUDA", "HAS_P2P", "ProcessGroupRingo", "monitored_barrier", "ringo_version", "shrink"]
