"""What both transports share: the transport's base class, the Work of a call that finishes later,
a call's description (written by the C++ glue, csrc/torch/distributed/host.cpp, whose bytes the
host transport's digests hash), counting, and the rule that c10d's callbacks are never traced."""
import threading

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future

from .. import _C


def _note(transport, name):
    """Counts one call of collective |name| on |transport| (stats()["collectives"])."""
    _C.count_collective(transport, name)


def _op_name(op):
    """c10d's reduction |op| by name ("SUM", ..., "PREMUL_SUM"), as the C executor takes it."""
    return _C.reduce_op_name(op)


def _describe(name, t=None, opts=None, shape=True):
    """A call as ranks compare it: "all_reduce(float32[3, 4], SUM)" (|opts|' reduction, if it has
    one; the dtype alone without |shape|)."""
    op = opts.reduceOp if opts is not None and hasattr(opts, "reduceOp") else None
    return _C.describe_call(name, None if t is None else t.detach(), op, shape)


def _done(result):
    fut = torch.futures.Future()
    fut.set_result(result)
    return _create_work_from_future(fut)


def _premul(t, opts):
    """PREMUL_SUM as SUM (opts changed to it): |t| times the op's factor, a new tensor, or |t|
    itself for any other reduction."""
    if opts is None or not hasattr(opts, "reduceOp") or opts.reduceOp != dist.ReduceOp.PREMUL_SUM:
        return t
    factor = opts.reduceOp.factor
    opts.reduceOp = dist.ReduceOp.SUM
    return t * (factor.to(t.device) if torch.is_tensor(factor) else factor)


def _copy_error(e):
    """|e| for one more rank to raise: a copy of its type where the type allows (every rank
    raising the one object would tangle their tracebacks), else a RuntimeError saying it."""
    try:
        return type(e)(*e.args)
    except Exception:
        return RuntimeError(f"{type(e).__name__}: {e}")


class ProcessGroupPjrt:
    """A transport of the pjrt c10d backend, which is C++ (_C.backend: it runs the common
    collectives itself, without the GIL) and calls the transport's method of a collective's name
    for every other; _backend._create picks the subclass of the group's transport."""
    transport = None

    def __init__(self, rank, size):
        self._rank, self._size = rank, size

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def allgather_coalesced(self, output_lists, inputs, opts):
        return self.allgather(output_lists, inputs, opts)


class _Later:
    """The result of a send or recv that finishes later, as NCCL's do (both ranks of a pair may
    post their send before their recv, or their recv first): the backend wraps it as the call's
    Work. |poll|() says whether the data has arrived; |finish|(timeout) waits for it (seconds,
    None: the group's) and copies it in, once, when the Work is waited on."""

    def __init__(self, poll, finish):
        self._poll, self._finish = poll, finish
        self._lock = threading.Lock()
        self._done = False

    def is_completed(self):
        return self._done or self._poll()

    def wait(self, timeout=None):
        with self._lock:
            if not self._done:
                self._finish(timeout)
                self._done = True
        return True


def _untraced(*classes):
    """c10d calls the transports' methods from C++, also while a compiled (Dynamo) frame runs:
    they must run as plain Python, never be traced themselves."""
    for cls in classes:
        for name, fn in list(vars(cls).items()):
            if callable(fn) and not name.startswith("__"):
                setattr(cls, name, torch.compiler.disable(fn, recursive=True))


_untraced(ProcessGroupPjrt, _Later)
