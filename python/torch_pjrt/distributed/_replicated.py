"""Compiled graphs' collectives on the device transport (torch_pjrt.compile): a partition of a
graph that holds functional collectives runs as one replicated program over every rank of its
group. The ranks (threads of this process, a device each) meet as for any collective, and the last
to arrive runs the program for all of them, compiled once."""
import torch
import torch.distributed as dist

from ._backend import transport_of
from ._base import _note

_DIVERGED = []


def diverged():
    """The GraphBuildError of ranks whose replicated partition differs in more than its
    collectives and inputs (a class made once: the native module loads after this one)."""
    if not _DIVERGED:
        from torch_pjrt._C import GraphBuildError
        _DIVERGED.append(type("RanksDivergedError", (GraphBuildError,), {}))
    return _DIVERGED[0]


def device_group(name):
    """(the device transport of the process group named |name|, None), or (None, why) when the
    group has none: on the host transport, the collective runs eagerly between programs."""
    try:
        pg = dist.distributed_c10d._resolve_process_group(name)
        backend = transport_of(pg._get_backend(torch.device("tpu")))
    except Exception as e:  # noqa: BLE001 - any failure: no lowering
        return None, f"no tpu backend for group {name!r} ({e})"
    if getattr(backend, "transport", None) != "device":
        return None, "its group runs collectives through the host"
    return backend, None


def run(group, graph, n_ops, collectives, ins, into):
    """|graph| (a _C.Graph of |n_ops| ops holding |collectives|, by name) run over every rank of
    its |group| (a device transport) as one replicated program, on this rank's |ins| and |into|:
    this rank's results. Ranks whose graphs call different collectives or take different inputs
    raise, naming each one's. Graphs that differ otherwise (a rank's own constants, as DTensor's
    vocabulary-parallel embedding traces its row range) cannot be one program: every rank raises
    diverged(), and the caller runs the partition split around its collectives from then on."""
    for name in collectives:
        _note("device", name)
    shapes = ", ".join(str(t.dtype).replace("torch.", "") + str(list(t.shape)) for t in ins)
    desc = f"compiled graph({shapes}) of {n_ops} ops with {', '.join(collectives)}"

    def run_all(calls):
        if len({c[0].fingerprint for c in calls}) > 1:
            raise diverged()(
                "the ranks traced different programs around the same collectives ("
                + ", ".join(f"rank {r}: #{c[0].fingerprint:016x}" for r, c in enumerate(calls))
                + "), constants of their own: they cannot run as one replicated program")
        graph, ins, devices, intos = calls[0][0], [c[1] for c in calls], [c[2] for c in calls], \
            [c[3] for c in calls]
        return graph.run_replicated(ins, devices, intos)
    mine = (graph, ins, torch.tpu.current_device(), into)
    return group._meet(desc, mine, run_all)[group.rank()]
