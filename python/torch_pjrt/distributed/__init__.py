"""torch.distributed for tpu tensors: the "pjrt" c10d backend, registered for the tpu device, so
init_process_group() with no backend, backend="pjrt" and "cpu:gloo,tpu:pjrt" all resolve to it.
The backend is a C++ c10d class (_C.backend, csrc/torch/distributed/) over one of the transports
below: it runs the common collectives itself, without the GIL, and calls the transport's method of
a collective's name for every other.

Two transports; each process group uses one, chosen when it is created (transport(group) says
which; TORCH_PJRT_COLLECTIVE_TRANSPORT=device|host|auto forces or frees the choice):
- device: every rank of the group lives in this process, each on a tpu device of its own (ranks
  as threads: run_threads() below, or PyTorch's thread-local world). A collective is one
  replicated device program over the group's devices (exec/collective.h): the ranks meet in
  process, the last to arrive runs the program for all of them, nothing crosses the host.
- host: everything else (one process per device, as torchrun launches, on a plugin whose client
  does not span processes, such as XLA's CPU plugin). Each collective copies its tpu tensors to
  CPU (or aliases their memory, on the CPU plugin), runs gloo's collective on them and copies the
  results back.
Every call is counted in torch_pjrt.stats()["collectives"] (transport -> collective -> calls), the
way an op that falls back to CPU is counted. The Work a collective returns is complete: its
results are enqueued on the device, ordered before any later use, as an op's are.

Safety: ranks check that they run the same collective (its kind, dtype, the shapes that must
agree, the reduction) before running it, so a rank that calls another collective or another shape
raises an error naming every rank's call instead of hanging or reducing mismatched buffers (gloo
adds tensors of different sizes without a word). The device transport compares the calls where
the ranks meet; the host transport posts a digest of each on a shared-memory page when the ranks
share a host, and looks at the others' while gloo runs, or exchanges the digests through gloo
first otherwise (TORCH_PJRT_COLLECTIVE_CHECK=0 turns the check off). After a mismatch the group
is broken, as NCCL's is. A rank that exits makes the others raise at their next collective.

The package, by concept: _backend (registration, the choice of transport), _device and _host (the
two transports), _base (what they share), _threads (run_threads), _replicated (compiled graphs'
collectives run as one replicated program, for torch_pjrt.compile). The host transport's protocol
(descriptions, digests, the board, the wait on gloo, AVG's division) is C++'s alone
(csrc/torch/distributed/host.cpp, dist/board.h): the backend's native calls need it without the
GIL, and the transport's Python calls the same code."""
from .. import _C
from ._backend import NAME, TRANSPORTS, register, transport, transport_of
from ._base import ProcessGroupPjrt
from ._threads import run_threads


def collective_counts():
    """{transport: {collective: calls}} since the last reset (the backend's native calls too)."""
    return {t: dict(calls) for t, calls in _C.collective_counts().items()}


def reset_collective_counts():
    _C.reset_collective_counts()


__all__ = ["NAME", "TRANSPORTS", "ProcessGroupPjrt", "collective_counts", "register",
           "reset_collective_counts", "run_threads", "transport", "transport_of"]
