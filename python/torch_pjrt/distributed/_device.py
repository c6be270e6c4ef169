"""The device transport: every rank of the group runs in this process (threads), each on a tpu
device of its own. A collective is one replicated device program over the group's devices
(exec/collective.h): the ranks meet (_C.Meeting, csrc/torch/distributed/meeting.cpp: each brings
its call, in call order; the last checks that the calls agree and runs the program for all of
them), nothing crosses the host. The backend runs the common collectives on the meeting itself;
the methods here are the rest, and send/recv through an in-process mailbox."""
import collections
import threading
import time

import torch

from .. import _C
from ._base import ProcessGroupPjrt, _Later, _copy_error, _describe, _done, _note, _op_name, \
    _premul, _untraced


class _Mailbox:
    """The device transport's send/recv between the in-process ranks of one group: (receiver,
    sender, tag) -> the sent snapshots by number, and how many were sent and how many receives
    posted: the k-th receive posted gets the k-th send, whichever is waited on first."""

    def __init__(self):
        self.cond = threading.Condition()
        self.calls = {}
        self.sent = collections.Counter()
        self.posted = collections.Counter()
        self.broken = None

    def breaks(self, why):
        with self.cond:
            self.broken = self.broken or why
            self.cond.notify_all()


_meetings = {}
_meetings_lock = threading.Lock()


def _meeting(uid, make):
    """The group |uid|'s meeting point (_C.Meeting) or mailbox, made by |make| on first use."""
    with _meetings_lock:
        if uid not in _meetings:
            _meetings[uid] = make()
        return _meetings[uid]


def _break_meetings(why):
    """Makes every rank waiting in a group's collective or recv raise (a rank failed)."""
    with _meetings_lock:
        for m in _meetings.values():
            m.breaks(str(why))


def _forget_meetings():
    """Drops every group's meeting point (run_threads' ranks are done)."""
    with _meetings_lock:
        _meetings.clear()


class _DeviceTransport(ProcessGroupPjrt):
    """Collectives as replicated device programs over the group's devices (ranks in this process,
    a device each). The ranks meet (_C.Meeting: each brings its call, in call order; the last
    checks that the calls agree and runs the collective of the C executor for all of them)."""
    transport = "device"

    def __init__(self, store, rank, size, timeout, uid):
        super().__init__(rank, size)
        self._meeting = _meeting(uid, lambda: _C.Meeting(size))
        self._timeout = timeout.total_seconds()
        self._mailbox = _meeting(uid + "/mail", _Mailbox)

    def _meet(self, desc, payload, action):
        """action([every rank's payload]), run once the ranks all called |desc|: its result."""
        ok, value = self._meeting.join(self.rank(), desc, payload, action, self._timeout)
        if not ok:
            raise _copy_error(value)
        return value

    def _run(self, name, kind, t_in, t_out, opts=None, root=0, desc=None):
        """One collective of the C executor on this rank's |t_in| -> |t_out|."""
        _note("device", name)
        desc = desc or _describe(name, t_in, opts)
        t_in = _premul(t_in, opts)
        op = _op_name(opts.reduceOp) if opts is not None and hasattr(opts, "reduceOp") else "SUM"
        self._meeting.run(self.rank(), desc, kind, op, root, t_in.detach(), t_out.detach(), self._timeout)

    def _exchange(self, name, value):
        """Every rank's |value|, in rank order (a meeting that moves no tensor)."""
        return self._meet(f"{name}(sizes)", value, lambda payloads: list(payloads))

    def broadcast(self, tensors, opts):
        self._run("broadcast", "broadcast", tensors[0], tensors[0], root=opts.rootRank,
                  desc=_describe(f"broadcast@{opts.rootRank}", tensors[0]))
        return _done(tensors)

    def allreduce(self, tensors, opts):
        self._run("allreduce", "all_reduce", tensors[0], tensors[0], opts)
        return _done(tensors)

    def reduce(self, tensors, opts):
        t = tensors[0]
        out = t if self.rank() == opts.rootRank else torch.empty_like(t)
        self._run("reduce", "all_reduce", t, out, opts, desc=_describe(f"reduce@{opts.rootRank}", t, opts))
        return _done(tensors)

    def _gathered(self, name, t, desc=None):
        flat = torch.empty(self._size * t.numel(), dtype=t.dtype, device=t.device)
        self._run(name, "all_gather", t, flat, desc=desc)
        return flat.view(self._size, *t.shape)

    def allgather(self, output_lists, inputs, opts):
        flat = self._gathered("allgather", inputs[0])
        for j, o in enumerate(output_lists[0]):
            o.copy_(flat[j])
        return _done(output_lists)

    def all_gather_single(self, output, input, opts):
        self._run("all_gather_single", "all_gather", input, output)
        return _done([output])

    _allgather_base = all_gather_single

    def gather(self, output_lists, inputs, opts):
        flat = self._gathered("gather", inputs[0], _describe(f"gather@{opts.rootRank}", inputs[0]))
        if self.rank() == opts.rootRank:
            for j, o in enumerate(output_lists[0]):
                o.copy_(flat[j])
        return _done(output_lists)

    def reduce_scatter(self, outputs, input_lists, opts):
        inp = torch.cat([t.reshape(-1) for t in input_lists[0]])
        self._run("reduce_scatter", "reduce_scatter", inp, outputs[0], opts,
                  desc=_describe("reduce_scatter", outputs[0], opts))
        return _done(outputs)

    def reduce_scatter_single(self, output, input, opts):
        self._run("reduce_scatter_single", "reduce_scatter", input, output, opts)
        return _done([output])

    _reduce_scatter_base = reduce_scatter_single

    def scatter(self, outputs, input_lists, opts):
        out, root = outputs[0], opts.rootRank
        if self.rank() == root:
            flat = torch.cat([t.reshape(-1) for t in input_lists[0]])
        else:
            flat = torch.empty(self._size * out.numel(), dtype=out.dtype, device=out.device)
        self._run("scatter", "broadcast", flat, flat, root=root, desc=_describe(f"scatter@{root}", out))
        out.copy_(flat.view(self._size, *out.shape)[self.rank()])
        return _done(outputs)

    def all_to_all_single(self, output, input, output_splits, input_splits, opts):
        n, me = self._size, self.rank()
        if not output_splits and not input_splits:
            self._run("all_to_all_single", "all_to_all", input, output,
                      desc=_describe("all_to_all_single", input))
            return _done([output])
        # Uneven splits (rows of dim 0): every rank's chunks padded to the largest split of the
        # group, one all_to_all of the padded blocks, the padding cut off on the way out.
        row = input[0].numel() if input.dim() and input.shape[0] else max(input.numel(), 1)
        in_splits = list(input_splits) or [input.shape[0] // n] * n
        out_splits = list(output_splits) or [output.shape[0] // n] * n
        width = max(self._exchange("all_to_all_single", max(in_splits + out_splits)))
        blocks = torch.zeros(n, width * row, dtype=input.dtype, device=input.device)
        flat_in = input.reshape(-1)
        at = 0
        for j, s in enumerate(in_splits):
            blocks[j, :s * row] = flat_in[at:at + s * row]
            at += s * row
        got = torch.empty_like(blocks)
        self._run("all_to_all_single", "all_to_all", blocks, got,
                  desc=_describe("all_to_all_single(uneven)", blocks))
        flat_out = output.view(-1) if output.is_contiguous() else None
        parts = [got[j, :s * row] for j, s in enumerate(out_splits)]
        result = torch.cat(parts) if parts else got.new_empty(0)
        if flat_out is not None:
            flat_out.copy_(result)
        else:
            output.copy_(result.view(output.shape))
        return _done([output])

    alltoall_base = all_to_all_single

    def alltoall(self, outputs, inputs, opts):
        n = self._size
        sizes = [t.numel() for t in inputs]
        width = max(max(s) for s in self._exchange("all_to_all", sizes + [o.numel() for o in outputs]))
        ref = inputs[0]
        blocks = torch.zeros(n, width, dtype=ref.dtype, device=ref.device)
        for j, t in enumerate(inputs):
            blocks[j, :t.numel()] = t.reshape(-1)
        got = torch.empty_like(blocks)
        self._run("alltoall", "all_to_all", blocks, got, desc=_describe("all_to_all", blocks))
        for j, o in enumerate(outputs):
            o.copy_(got[j, :o.numel()].view(o.shape))
        return _done(outputs)

    def send(self, tensors, dst, tag):
        # In process, a send is a snapshot handed to the receiver, which copies it device to
        # device; the sender does not wait for the receive (as a buffered send).
        _note("device", "send")
        box, key = self._mailbox, (dst, self.rank(), tag)
        with box.cond:
            box.calls[key + (box.sent[key],)] = [t.detach().clone() for t in tensors]
            box.sent[key] += 1
            box.cond.notify_all()
        return _done(tensors)

    def recv(self, tensors, src, tag):
        _note("device", "recv")
        box, key = self._mailbox, (self.rank(), src, tag)
        with box.cond:
            key += (box.posted[key],)
            box.posted[key[:3]] += 1

        def arrived():
            with box.cond:
                return key in box.calls

        def finish(timeout):
            deadline = time.monotonic() + (self._timeout if timeout is None else timeout)
            with box.cond:
                while key not in box.calls:
                    left = deadline - time.monotonic()
                    if box.broken is not None or left <= 0:
                        raise RuntimeError(f"pjrt: recv from rank {src} (tag {tag}) abandoned: "
                                           f"{box.broken or 'timed out'}")
                    box.cond.wait(left)
                sent = box.calls.pop(key)
            for t, s in zip(tensors, sent):
                t.copy_(s)
        return _Later(arrived, finish)

    def barrier(self, opts):
        _note("device", "barrier")
        self._meet("barrier", None, lambda payloads: None)
        return _done([])


_untraced(_DeviceTransport)
