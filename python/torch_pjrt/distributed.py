"""torch.distributed for tpu tensors: the "pjrt" c10d backend, registered for the tpu device, so
init_process_group() with no backend, backend="pjrt" and "cpu:gloo,tpu:pjrt" all resolve to it.
The backend is a C++ c10d class (_C.backend, csrc/torch/collective.cpp) over one of the transports
below: it runs the device transport's common collectives itself, without the GIL, and calls the
transport's method of a collective's name for every other.

Two transports; each process group uses one, chosen when it is created (transport(group) says
which; TORCH_PJRT_COLLECTIVE_TRANSPORT=device|host|auto forces or frees the choice):
- device: every rank of the group lives in this process, each on a tpu device of its own (ranks
  as threads: run_threads() below, or PyTorch's thread-local world). A collective is one
  replicated device program over the group's devices (exec/collective.h): the ranks meet in
  process, the last to arrive runs the program for all of them, nothing crosses the host.
- host: everything else (one process per device, as torchrun launches, on a plugin whose client
  does not span processes, such as XLA's CPU plugin). Each collective copies its tpu tensors to
  CPU, runs gloo's collective on the copies and copies the results back.
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
is broken, as NCCL's is. A rank that exits makes the others raise at their next collective."""
import collections
import datetime
import json
import os
import socket
import threading
import time

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future

NAME = "pjrt"
TRANSPORTS = ("device", "host")
_CHECK = os.environ.get("TORCH_PJRT_COLLECTIVE_CHECK", "1") != "0"

_DESC_BYTES = 256  # a call's description, as ranks exchange it when their calls differ

_lock = threading.Lock()
_counts = collections.defaultdict(collections.Counter)


def collective_counts():
    """{transport: {collective: calls}} since the last reset (the backend's native calls too)."""
    from . import _C
    with _lock:
        counts = {t: dict(c) for t, c in _counts.items()}
    for t, calls in _C.collective_counts().items():
        mine = counts.setdefault(t, {})
        for name, n in calls.items():
            mine[name] = mine.get(name, 0) + n
    return counts


def reset_collective_counts():
    from . import _C
    with _lock:
        _counts.clear()
    _C.reset_collective_counts()


def _note(transport, name):
    with _lock:
        _counts[transport][name] += 1


def transport_of(backend):
    """The transport object (ProcessGroupPjrt) of a c10d backend; None for another backend."""
    from . import _C
    return _C.backend_transport(backend)


def transport(group=None):
    """The transport ("device" or "host") of |group|'s tpu backend (default: the default group)."""
    return transport_of((group or dist.group.WORLD)._get_backend(torch.device("tpu"))).transport


_OPS = ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM")


def _op_name(op):
    for name in _OPS:
        if op == getattr(dist.ReduceOp, name):
            return name
    return "?"


def _layout(t, shape=True):
    """A tensor as ranks compare it: "float32[3, 4]"."""
    return str(t.dtype).replace('torch.', '') + (str(list(t.shape)) if shape else '')


def _describe(name, t=None, opts=None, shape=True):
    """A call as ranks compare it: "all_reduce(float32[3, 4], SUM)"."""
    desc = name
    if t is not None:
        desc += f"({_layout(t, shape)}"
        desc += f", {_op_name(opts.reduceOp)}" if opts is not None and hasattr(opts, "reduceOp") else ""
        desc += ")"
    return desc


def _mismatch(calls):
    return RuntimeError("pjrt: the ranks of a process group called different collectives: "
                        + "; ".join(f"rank {r}: {c}" for r, c in enumerate(calls)))


def _divide(hosts, by):
    """AVG's last step: the SUM divided by the group size (floored for integers, as NCCL)."""
    if by != 1:
        for h in hosts:
            h.div_(by) if h.is_floating_point() or h.is_complex() else h.floor_divide_(by)


def _done(result):
    fut = torch.futures.Future()
    fut.set_result(result)
    return _create_work_from_future(fut)


def _alias(t):
    """A CPU tensor sharing |t|'s memory where the device's memory is host memory (the CPU
    plugin), else None. Valid until |t| is next written: held for one collective only."""
    if t.device.type == "cpu":
        return t
    from . import _C
    a = _C.host_alias(t.detach())
    if a is not None:
        a._pjrt_alias = True  # _back: nothing to copy back
    return a


def _host(ts, alias=True):
    """CPU tensors gloo can use for |ts|: aliases of their memory where possible (|alias|),
    else copies."""
    out = []
    for t in ts:
        a = _alias(t) if alias else None
        out.append(a if a is not None else t.detach().cpu())
    return out


def _back(devs, hosts):
    for d, h in zip(devs, hosts):
        if not getattr(h, "_pjrt_alias", False) and (d.device.type != "cpu" or d.data_ptr() != h.data_ptr()):
            d.copy_(h)


def _into(t):
    """A CPU tensor of |t|'s shape and dtype to receive a result for |t|: its alias where
    possible, else a fresh one (_back copies it over)."""
    a = _alias(t)
    return a if a is not None else torch.empty(t.shape, dtype=t.dtype)


def _scaled(hosts, scale):
    """Host copies scaled in place by PREMUL_SUM's factor (|scale| None: as they are)."""
    if scale is not None:
        for h in hosts:
            h.mul_(scale)
    return hosts


def _premul(t, opts):
    """PREMUL_SUM as SUM (opts changed to it): |t| times the op's factor, a new tensor, or |t|
    itself for any other reduction."""
    if opts is None or not hasattr(opts, "reduceOp") or opts.reduceOp != dist.ReduceOp.PREMUL_SUM:
        return t
    factor = opts.reduceOp.factor
    opts.reduceOp = dist.ReduceOp.SUM
    return t * (factor.to(t.device) if torch.is_tensor(factor) else factor)


class ProcessGroupPjrt:
    """A transport of the pjrt c10d backend, which is C++ (_C.backend: it runs the device
    transport's common collectives itself, without the GIL) and calls the transport's method of
    a collective's name for every other; _create picks the subclass of the group's transport."""
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


def _copy_error(e):
    """|e| for one more rank to raise: a copy of its type where the type allows (every rank
    raising the one object would tangle their tracebacks), else a RuntimeError saying it."""
    try:
        return type(e)(*e.args)
    except Exception:
        return RuntimeError(f"{type(e).__name__}: {e}")


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


class _DeviceTransport(ProcessGroupPjrt):
    """Collectives as replicated device programs over the group's devices (ranks in this process,
    a device each). The ranks meet (_C.Meeting: each brings its call, in call order; the last
    checks that the calls agree and runs the collective of the C executor for all of them)."""
    transport = "device"

    def __init__(self, store, rank, size, timeout, uid):
        super().__init__(rank, size)
        from . import _C
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


class _Board:
    """The host transport's check on one host: a shared memory page where each rank of a group
    posts the digest of its next call and reads the others' (dist/board.h; _C.Board numbers
    the calls), with no network round trip (gloo's cheapest costs as much as a small collective).
    A rank that must wait for a post sleeps on a futex the post wakes, never polls (measured:
    napping 50 us between looks added 100-250 us to every call of 2 ranks on 2 cores, a spin
    three times that). open() returns None where the ranks cannot share it (other hosts, other
    PID namespaces, no shared file): the check then goes through gloo."""

    _SLICE_MS = 100  # how long a wait sleeps before it looks for dead ranks and the timeout

    def __init__(self, page, rank, pids, timeout, descs):
        from . import _C
        self._page, self._words, self._descs = page, memoryview(page).cast("Q"), descs
        self._c = _C.Board(page, len(pids), rank)  # posts and waits; numbers the calls
        self._rank, self._pids = rank, pids
        self._timeout = timeout.total_seconds()

    @classmethod
    def open(cls, store, rank, size, timeout):
        import mmap
        import tempfile
        # dist/board.h's TP_BOARD_POSTS_BYTES, a token naming the file, each rank's description
        words = 8 * (1 + 2 * size)
        nbytes = -(-(words + 16 + size * _DESC_BYTES) // mmap.PAGESIZE) * mmap.PAGESIZE
        path, token = None, os.urandom(8).hex()
        if rank == 0:
            fd, path = tempfile.mkstemp(prefix="torch_pjrt_board_",
                                        dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
            os.ftruncate(fd, nbytes)
            os.pwrite(fd, token.encode(), words)
            os.close(fd)
            store.set("pjrt_board", f"{path}\n{token}")
        else:
            path, token = store.get("pjrt_board").decode().split("\n")
        mine = {"ok": False, "pid": os.getpid(), "ns": _pid_namespace(), "host": socket.gethostname()}
        mapped = None
        try:
            with open(path, "r+b") as f:
                mapped = mmap.mmap(f.fileno(), nbytes)
            mine["ok"] = mapped[words:words + len(token)] == token.encode()
        except OSError:
            pass
        store.set(f"pjrt_board/{rank}", json.dumps(mine))
        ranks = [json.loads(store.get(f"pjrt_board/{r}")) for r in range(size)]
        if rank == 0:
            os.unlink(path)  # every rank has it open or gave up on it: nothing left behind
        if not all(r["ok"] and (r["ns"], r["host"]) == (mine["ns"], mine["host"]) for r in ranks):
            return None
        return cls(mapped, rank, [r["pid"] for r in ranks], timeout, words + 16)

    def post(self, digest):
        """Posts |digest| (56 bits) as this rank's next call; returns the call's number."""
        return self._c.post(digest)

    def state(self, seq, wait_ms=0):
        """Within |wait_ms|: True when every rank posted call |seq| with one digest, False when
        their digests differ, None when some rank has not posted it yet."""
        got = self._c.state(seq, wait_ms)
        return None if got < 0 else got == 1

    def settle(self, seq):
        """Waits until every rank posted call |seq|: whether they posted one digest. Raises when
        a rank died or the group's timeout passed first."""
        started = time.monotonic()
        while True:
            same = self.state(seq, self._SLICE_MS)
            if same is not None:
                return same
            self.raise_if_dead(seq)
            late = self._late(seq)
            if late and time.monotonic() - started > self._timeout:
                raise RuntimeError(f"pjrt: rank {late[0]} did not reach the next collective "
                                   f"within the group's timeout ({self._timeout:.0f} s)")

    def exchange(self, desc):
        """Every rank's description of its last call, when their digests differed: each writes
        its own, then posts one more call (the group is broken anyway) to say it did."""
        at = self._descs + self._rank * _DESC_BYTES
        self._page[at:at + _DESC_BYTES] = desc.encode()[:_DESC_BYTES].ljust(_DESC_BYTES, b"\0")
        self.settle(self.post(0))
        return [self._page[self._descs + r * _DESC_BYTES:self._descs + (r + 1) * _DESC_BYTES]
                .rstrip(b"\0").decode(errors="replace") for r in range(len(self._pids))]

    def _late(self, seq):
        """The ranks that have not posted call |seq|."""
        return [r for r in range(len(self._pids))
                if self._words[1 + 2 * r + (seq & 1)] & 0xFF != seq & 0xFF]

    def raise_if_dead(self, seq):
        """Raises when a rank that has not posted call |seq| exited."""
        dead = [r for r in self._late(seq) if not _alive(self._pids[r])]
        if dead:
            raise RuntimeError(f"pjrt: rank {dead[0]} of the process group exited before its "
                               "next collective")


def _pid_namespace():
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _alive(pid):
    """Whether process |pid| still runs: an exited rank its launcher has not reaped yet (a
    zombie) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True


class _HostTransport(ProcessGroupPjrt):
    """Collectives through the host: gloo on CPU copies of the tpu tensors."""
    transport = "host"

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._gloo = dist.ProcessGroupGloo(store, rank, size, timeout)
        self._checked = _CHECK and size > 1
        self._board = _Board.open(store, rank, size, timeout) if self._checked else None
        self._pending = None  # (number, description) of the call posted but not yet checked

    _SLICE = datetime.timedelta(milliseconds=20)  # how long a checked gloo call waits between looks

    def _agree(self, name, t=None, opts=None, shape=True):
        """Checks that all ranks are about to run the same call: |name| on tensors like |t| (its
        dtype, and its shape when |shape|), with |opts|' reduction; raises on every rank, naming
        each rank's call, when they are not.
        On one host the ranks post a digest of the call on the group's shared page (_Board) and
        do not wait for each other there: the last rank to post sees every post and raises before
        its gloo call; the others, whose gloo call then cannot finish, look at the page while
        they wait for it (_wait) and raise too. Waiting for each other first would line the
        ranks up before every gloo call (measured: twice the time of a 4 KiB all_gather, 2 ranks
        on 2 cores). Across hosts, one MAX all_reduce of (digest, -digest) through gloo first."""
        if not _CHECK or self._size == 1:
            return
        if self._pending is not None:  # a call that raised before its gloo wait: settle it first
            self._settle()
        from . import _C
        desc = _describe(name, t, opts, shape)
        digest = _C.call_digest(desc)
        if self._board is not None:
            seq = self._board.post(digest)
            same = self._board.state(seq)
            if same is False:
                self._mismatch(desc)
            self._pending = None if same else (seq, desc)
            return
        both = torch.tensor([digest, -digest])
        o = dist.AllreduceOptions()
        o.reduceOp = dist.ReduceOp.MAX
        self._gloo.allreduce([both], o).wait()
        if both[0] != -both[1]:
            self._mismatch(desc)

    def _mismatch(self, desc):
        """Raises the mismatch of this rank's call |desc|, naming every rank's call, exchanged on
        the board (the group's gloo may be stuck in a call a rank never joined) or through gloo."""
        if self._board is not None:
            raise _mismatch(self._board.exchange(desc))
        raw = desc.encode()[:_DESC_BYTES]
        mine = torch.zeros(_DESC_BYTES, dtype=torch.uint8)
        mine[:len(raw)] = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
        calls = [torch.empty(_DESC_BYTES, dtype=torch.uint8) for _ in range(self._size)]
        self._gloo.allgather([calls], [mine]).wait()
        raise _mismatch([bytes(e.tolist()).rstrip(b"\0").decode(errors="replace") for e in calls])

    # The backend's native calls (_C.backend) end here when they must: a rank gone, a late post.
    def _raise_if_dead(self, seq):
        self._board.raise_if_dead(seq)

    def _settle_call(self, seq, desc):
        self._pending = (seq, desc)
        self._settle()

    def _settle(self):
        """Waits until every rank posted the pending call; raises if they differ."""
        (seq, desc), self._pending = self._pending, None
        if not self._board.settle(seq):
            self._mismatch(desc)

    def _wait(self, name, work):
        """Waits for gloo's |work|; for a call not yet checked, looks at the board meanwhile (a
        rank that called another collective leaves it unfinished) and checks it after."""
        _note("host", name)
        if self._pending is None:
            work.wait()
            return
        seq, desc = self._pending
        while True:
            try:
                work.wait(self._SLICE)
                break
            except RuntimeError:
                if work.is_completed():  # done since, or gloo's own error
                    try:
                        work.wait()
                        break
                    except RuntimeError:  # a rank's exit, named, comes first
                        self._board.raise_if_dead(seq)
                        raise
                if self._board.state(seq) is False:
                    self._pending = None
                    self._mismatch(desc)
                self._board.raise_if_dead(seq)
        self._settle()

    def _reduce_op(self, opts):
        """gloo's op for |opts| (set in it) and what to do around it: the factor PREMUL_SUM
        scales each rank's copy by first (None when none), the divisor AVG needs afterwards."""
        op, scale, by = opts.reduceOp, None, 1
        if op == dist.ReduceOp.AVG:
            opts.reduceOp, by = dist.ReduceOp.SUM, self._size
        elif op == dist.ReduceOp.PREMUL_SUM:
            scale, opts.reduceOp = op.factor, dist.ReduceOp.SUM
            scale = scale.cpu() if torch.is_tensor(scale) else scale
        return scale, by

    def broadcast(self, tensors, opts):
        self._agree("broadcast", tensors[0])
        hosts = _host(tensors)
        self._wait("broadcast", self._gloo.broadcast(hosts, opts))
        _back(tensors, hosts)
        return _done(tensors)

    def _reduction(self, name, what, collective, tensors, opts, to_all=True):
        """all_reduce and reduce: |tensors| reduced in place (on every rank, or the root's)."""
        self._agree(what, tensors[0], opts)
        scale, by = self._reduce_op(opts)
        # reduce may use a non-root rank's tensor as scratch: it gets a copy.
        hosts = _scaled(_host(tensors, alias=to_all), scale)
        self._wait(name, collective(hosts, opts))
        if to_all or self.rank() == opts.rootRank:
            _divide(hosts, by)
            _back(tensors, hosts)
        return _done(tensors)

    def allreduce(self, tensors, opts):
        return self._reduction("allreduce", "all_reduce", self._gloo.allreduce, tensors, opts)

    def reduce(self, tensors, opts):
        return self._reduction("reduce", "reduce", self._gloo.reduce, tensors, opts, to_all=False)

    def _into_lists(self, name, what, collective, output_lists, inputs, opts):
        """all_gather and gather: |inputs| gathered into each list of |output_lists|."""
        self._agree(what, inputs[0])
        out_hosts = [_host(l) for l in output_lists]
        self._wait(name, collective(out_hosts, _host(inputs), opts))
        for d, h in zip(output_lists, out_hosts):
            _back(d, h)
        return _done(output_lists)

    def allgather(self, output_lists, inputs, opts):
        return self._into_lists("allgather", "all_gather", self._gloo.allgather, output_lists, inputs, opts)

    def all_gather_single(self, output, input, opts):
        self._agree("all_gather_into_tensor", input)
        out = _into(output)
        self._wait("all_gather_single", self._gloo._allgather_base(out, _host([input])[0], opts))
        _back([output], [out])
        return _done([output])

    _allgather_base = all_gather_single

    def reduce_scatter(self, outputs, input_lists, opts):
        # gloo has no list reduce_scatter: allreduce each rank's input list, keep this rank's.
        self._agree("reduce_scatter", outputs[0], opts)
        scale, by = self._reduce_op(opts)
        me = self.rank()
        for k, out in enumerate(outputs):
            flat = _scaled([torch.stack(_host(input_lists[k]))], scale)[0]
            o = dist.AllreduceOptions()
            o.reduceOp, o.timeout = opts.reduceOp, opts.timeout
            self._wait("reduce_scatter", self._gloo.allreduce([flat], o))
            _divide([flat], by)
            out.copy_(flat[me])
        return _done(outputs)

    def reduce_scatter_single(self, output, input, opts):
        self._agree("reduce_scatter_tensor", input, opts)
        scale, by = self._reduce_op(opts)
        flat = _scaled([input.detach().cpu().contiguous()], scale)[0]
        o = dist.AllreduceOptions()
        o.reduceOp, o.timeout = opts.reduceOp, opts.timeout
        self._wait("reduce_scatter_single", self._gloo.allreduce([flat], o))
        _divide([flat], by)
        n = output.numel()
        out = _into(output)
        out.copy_(flat.view(-1)[self.rank() * n:(self.rank() + 1) * n].view(output.shape))
        _back([output], [out])
        return _done([output])

    _reduce_scatter_base = reduce_scatter_single

    def alltoall(self, outputs, inputs, opts):
        self._agree("all_to_all", inputs[0], shape=False)
        out_hosts = _host(outputs)
        self._wait("alltoall", self._gloo.alltoall(out_hosts, _host(inputs), opts))
        _back(outputs, out_hosts)
        return _done(outputs)

    def all_to_all_single(self, output, input, output_splits, input_splits, opts):
        self._agree("all_to_all_single", input, shape=False)
        out = _into(output)
        self._wait("all_to_all_single", self._gloo.alltoall_base(
            out, _host([input])[0].contiguous(), output_splits, input_splits, opts))
        _back([output], [out])
        return _done([output])

    alltoall_base = all_to_all_single

    def gather(self, output_lists, inputs, opts):
        return self._into_lists("gather", "gather", self._gloo.gather, output_lists, inputs, opts)

    def scatter(self, outputs, input_lists, opts):
        self._agree("scatter", outputs[0])
        out_hosts = _host(outputs)
        self._wait("scatter", self._gloo.scatter(out_hosts, [_host(l) for l in input_lists], opts))
        _back(outputs, out_hosts)
        return _done(outputs)

    # send and recv finish later (gloo's send waits for the peer's recv): gloo's Work holds the
    # host copies; a recv copies into the tpu tensors when waited on.
    def send(self, tensors, dst, tag):
        _note("host", "send")
        return self._gloo.send(_host(tensors), dst, tag)

    def recv(self, tensors, src, tag):
        _note("host", "recv")
        hosts = _host(tensors)
        work = self._gloo.recv(hosts, src, tag)

        def finish(timeout):
            work.wait() if timeout is None else work.wait(datetime.timedelta(seconds=timeout))
            _back(tensors, hosts)
        return _Later(work.is_completed, finish)

    def barrier(self, opts):
        self._agree("barrier")
        self._wait("barrier", self._gloo.barrier(opts))
        return _done([])


# c10d calls these from C++, also while a compiled (Dynamo) frame runs: they must run as plain
# Python, never be traced themselves.
for _cls in (ProcessGroupPjrt, _DeviceTransport, _HostTransport, _Later):
    for _name, _fn in list(vars(_cls).items()):
        if callable(_fn) and not _name.startswith("__"):
            setattr(_cls, _name, torch.compiler.disable(_fn, recursive=True))


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
    from . import _C
    timeout = timeout if timeout else datetime.timedelta(minutes=30)
    kind, uid = _choose(store, rank, size, timeout)
    if kind == "device":
        return _C.backend(rank, size, _DeviceTransport(store, rank, size, timeout, uid))
    return _C.backend(rank, size, _HostTransport(store, rank, size, timeout))


def run_threads(fn, world_size=None, args=(), backend=None, timeout=datetime.timedelta(minutes=5)):
    """Runs fn(rank, *args) as |world_size| ranks (default: every tpu device) in threads of this
    process, rank r on tpu:r with the default process group initialized (init_process_group with
    |backend|, None: PyTorch's choice per device), and returns their results in rank order: many
    devices in one process, with collectives on the device transport. Each thread sees its own
    torch.distributed world (PyTorch's thread-local world, as its own multi-threaded tests use).
    An exception in a rank stops the others' collectives and is raised here. Ranks should not share
    a leaf tensor that is a view: PyTorch's autograd can deadlock on one used by two threads."""
    from torch.testing._internal.distributed.multi_threaded_pg import (
        _install_threaded_pg, _uninstall_threaded_pg)
    n = world_size or torch.tpu.device_count()
    if n > torch.tpu.device_count():
        raise ValueError(f"run_threads: {n} ranks need {n} tpu devices, there are "
                         f"{torch.tpu.device_count()} (TORCH_PJRT_CPU_DEVICES sets the CPU plugin's)")
    store = dist.HashStore()
    results, errors = [None] * n, []  # errors in the order they happened: the first is the cause

    def rank_main(rank):
        torch.tpu.set_device(rank)
        try:
            dist.init_process_group(backend, rank=rank, world_size=n, store=store, timeout=timeout)
            try:
                # Backward on this thread, not autograd's thread for the device, which has no
                # world of its own (dist.get_rank() in a backward failed: context parallelism).
                # PyTorch's threaded process groups turn this off too, for the installing thread.
                with torch.autograd.set_multithreading_enabled(False):
                    results[rank] = fn(rank, *args)
            finally:
                dist.destroy_process_group()
        except BaseException as e:  # noqa: B036 - handed to the caller
            errors.append(e)
            _break_meetings(RuntimeError(f"rank {rank} raised {type(e).__name__}: {e}"))

    # Dynamo loads the "tpu" compile backend from its entry point on first use, and two threads
    # doing that at once both register it ("duplicate name: tpu"): load it here, once.
    from torch._dynamo.backends.registry import lookup_backend
    lookup_backend("tpu")
    torch._C._distributed_c10d._set_thread_isolation_mode(True)
    _install_threaded_pg()
    try:
        threads = [threading.Thread(target=rank_main, args=(r,), name=f"pjrt-rank-{r}") for r in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        _uninstall_threaded_pg()
        torch._C._distributed_c10d._set_thread_isolation_mode(False)
        with _meetings_lock:
            _meetings.clear()
    if errors:
        raise errors[0]
    return results


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
