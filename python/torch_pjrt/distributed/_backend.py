"""The "pjrt" c10d backend's registration: the backend a new group gets (its transport chosen
where its ranks run), the transport of a group, and two changes to c10d's Python for groups made
with no backend name and for TORCH_DISTRIBUTED_DEBUG=DETAIL."""
import datetime
import os
import socket
import time

import torch
import torch.distributed as dist

from .. import _C
from ._device import _DeviceTransport
from ._host import _HostTransport

NAME = "pjrt"
TRANSPORTS = ("device", "host")


def transport_of(backend):
    """The transport object (ProcessGroupPjrt) of a c10d backend; None for another backend."""
    return _C.backend_transport(backend)


def transport(group=None):
    """The transport ("device" or "host") of |group|'s tpu backend (default: the default group)."""
    return transport_of((group or dist.group.WORLD)._get_backend(torch.device("tpu"))).transport


def _choose(store, rank, size, timeout):
    """The group's transport and, for the device transport, the id its ranks meet under. Every
    rank publishes where it runs (host, process, current tpu device) in the group's store; the
    device transport needs every rank in this process on a device of its own."""
    want = os.environ.get("TORCH_PJRT_COLLECTIVE_TRANSPORT", "auto")
    if want not in ("auto",) + TRANSPORTS:
        raise ValueError(f"TORCH_PJRT_COLLECTIVE_TRANSPORT={want!r}: expected auto, device or host")
    if want == "host":
        return "host", None
    here = f"{socket.gethostname()}/{os.getpid()}"
    device = torch.tpu.current_device()
    store.set(f"pjrt/where/{rank}", f"{here}/{device}")
    store.wait([f"pjrt/where/{r}" for r in range(size)], timeout)
    where = [store.get(f"pjrt/where/{r}").decode().rsplit("/", 1) for r in range(size)]
    devices = [int(d) for _, d in where]
    why = None
    if any(h != here for h, _ in where):
        why = "its ranks run in more than one process (the plugin's client does not span processes)"
    elif len(set(devices)) != size:
        why = f"its ranks share tpu devices ({devices}); torch.tpu.set_device(rank) gives each its own"
    if why is None:
        # The group's ranks are this process's threads: they meet under one id, rank 0's.
        if rank == 0:
            store.set("pjrt/uid", f"{here}/{id(store)}/{time.monotonic_ns()}")
        store.wait(["pjrt/uid"], timeout)
        return "device", store.get("pjrt/uid").decode()
    if want == "device":
        raise RuntimeError(f"pjrt: TORCH_PJRT_COLLECTIVE_TRANSPORT=device, but {why}")
    return "host", None


def _create(store, rank, size, timeout):
    """The pjrt c10d backend of one rank of a new group (c10d calls it): the C++ class, given its
    transport's objects."""
    timeout = timeout if timeout else datetime.timedelta(minutes=30)
    kind, uid = _choose(store, rank, size, timeout)
    if kind == "device":
        t = _DeviceTransport(store, rank, size, timeout, uid)
        return _C.backend(rank, size, t, meeting=t._meeting, timeout=t._timeout)
    t = _HostTransport(store, rank, size, timeout)
    return _C.backend(rank, size, t, host=t._group)


def _no_wrapper_for_pjrt(create_wrapper):
    """TORCH_DISTRIBUTED_DEBUG=DETAIL wraps a plugin backend in PyTorch's ProcessGroupWrapper,
    which checks each collective across ranks with a gloo round trip first (when the backend was
    Python, every collective failed: "getBackendName is not implemented"). pjrt checks each
    collective itself, cheaper, so it is left unwrapped; other backends are wrapped as before."""
    def create(wrapped_pg, *args, **kwargs):
        if transport_of(wrapped_pg) is not None:
            return wrapped_pg
        return create_wrapper(wrapped_pg, *args, **kwargs)
    return create


def _named_backend(get_backend):
    """get_backend() of a group made by init_process_group() with no backend says "undefined":
    PyTorch resolves such a group to the current accelerator's backend (pjrt here, nccl on
    CUDA) but records the name it was given. Code that branches on the name (DDP helpers,
    Lightning, torch.distributed.nn) then takes no backend's path. Such a group answers the one
    backend it resolved to; a group with several ("cpu:gloo,tpu:pjrt") keeps PyTorch's answer."""
    def named(group=None):
        name = get_backend(group)
        if name == dist.Backend.UNDEFINED:
            c10d = dist.distributed_c10d
            config = c10d._world.pg_backend_config.get(group or c10d._get_default_group(), "")
            names = {pair.split(":", 1)[1] for pair in config.split(",") if ":" in pair}
            if len(names) == 1:
                return dist.Backend(names.pop())
        return name
    named.__doc__, named.__wrapped__ = get_backend.__doc__, get_backend
    return named


def register():
    """Registers the backend once (torch_pjrt's import does it where torch.distributed is built)."""
    if dist.is_available() and not hasattr(dist.Backend, NAME.upper()):
        dist.Backend.register_backend(NAME, _create, devices=["tpu"])
        c10d = dist.distributed_c10d
        c10d._create_process_group_wrapper = _no_wrapper_for_pjrt(c10d._create_process_group_wrapper)
        c10d.get_backend = dist.get_backend = _named_backend(c10d.get_backend)
