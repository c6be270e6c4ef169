"""torch.distributed for tpu tensors: the "pjrt" c10d backend, registered for the tpu device, so
init_process_group() with no backend, backend="pjrt" and "cpu:gloo,tpu:pjrt" all resolve to it.

Transport, today: the host. Each collective copies its tpu tensors to CPU, runs gloo's collective
on the copies, and copies the results back into the tpu tensors; the Work it returns is complete.
Every such call is counted in torch_pjrt.stats()["collectives"] (transport -> op -> calls), the
way an op that falls back to CPU is counted. Reductions gloo lacks are composed: AVG is SUM
divided by the group size.

Safety: before each collective the ranks exchange what they are about to run (the collective,
its dtype, the shapes that must agree, the reduction), so a rank that calls another collective
or another shape raises an error naming every rank's call instead of hanging or reducing
mismatched buffers (gloo adds tensors of different sizes without a word).
TORCH_PJRT_COLLECTIVE_CHECK=0 turns the exchange off."""
import collections
import datetime
import os
import threading

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import Backend as _CBackend, _create_work_from_future

NAME = "pjrt"
TRANSPORT = "host"
_CHECK = os.environ.get("TORCH_PJRT_COLLECTIVE_CHECK", "1") != "0"
_FP_BYTES = 256  # a call's description, as exchanged between ranks

_lock = threading.Lock()
_counts = collections.defaultdict(collections.Counter)


def collective_counts():
    """{transport: {collective: calls}} since the last reset."""
    with _lock:
        return {t: dict(c) for t, c in _counts.items()}


def reset_collective_counts():
    with _lock:
        _counts.clear()


def _note(name):
    with _lock:
        _counts[TRANSPORT][name] += 1


def _op_name(op):
    for name in ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"):
        if op == getattr(dist.ReduceOp, name):
            return name
    return "?"


def _divide(hosts, by):
    """AVG's last step: the SUM divided by the group size (floored for integers, as NCCL)."""
    if by != 1:
        for h in hosts:
            h.div_(by) if h.is_floating_point() or h.is_complex() else h.floor_divide_(by)


def _done(result):
    fut = torch.futures.Future()
    fut.set_result(result)
    return _create_work_from_future(fut)


def _host(ts):
    return [t.detach().cpu() for t in ts]


def _back(devs, hosts):
    for d, h in zip(devs, hosts):
        if d.device.type != "cpu" or d.data_ptr() != h.data_ptr():
            d.copy_(h)


class ProcessGroupPjrt(_CBackend):
    """A c10d backend for tpu tensors over the host transport (gloo on host copies)."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._size = size
        self._gloo = dist.ProcessGroupGloo(store, rank, size, timeout)

    def _wait(self, name, work):
        _note(name)
        work.wait()

    def _agree(self, name, t=None, opts=None, shape=True):
        """Raises on every rank unless all ranks are about to run the same call: |name| on
        tensors like |t| (its dtype, and its shape when |shape|), with |opts|' reduction."""
        if not _CHECK or self._size == 1:
            return
        desc = name
        if t is not None:
            desc += f"({str(t.dtype).replace('torch.', '')}{list(t.shape) if shape else ''}"
            desc += f", {_op_name(opts.reduceOp)}" if opts is not None and hasattr(opts, "reduceOp") else ""
            desc += ")"
        raw = desc.encode()[:_FP_BYTES]
        mine = torch.zeros(_FP_BYTES, dtype=torch.uint8)
        mine[:len(raw)] = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
        every = [torch.empty(_FP_BYTES, dtype=torch.uint8) for _ in range(self._size)]
        self._gloo.allgather([every], [mine]).wait()
        calls = [bytes(e.tolist()).rstrip(b"\0").decode(errors="replace") for e in every]
        if any(c != desc for c in calls):
            raise RuntimeError("pjrt: the ranks of a process group called different collectives: "
                               + "; ".join(f"rank {r}: {c}" for r, c in enumerate(calls)))

    def _reduce_op(self, opts):
        """gloo's op for |opts|, and the divisor AVG needs afterwards (1 when none)."""
        op = opts.reduceOp
        if op == dist.ReduceOp.AVG:
            opts.reduceOp = dist.ReduceOp.SUM
            return self._size
        if op == dist.ReduceOp.PREMUL_SUM:
            raise NotImplementedError("pjrt (host transport): ReduceOp.PREMUL_SUM is not supported")
        return 1

    def getBackendName(self):
        return NAME

    def broadcast(self, tensors, opts):
        self._agree("broadcast", tensors[0])
        hosts = _host(tensors)
        self._wait("broadcast", self._gloo.broadcast(hosts, opts))
        _back(tensors, hosts)
        return _done(tensors)

    def _reduction(self, name, what, collective, tensors, opts, to_all=True):
        """all_reduce and reduce: |tensors| reduced in place (on every rank, or the root's)."""
        self._agree(what, tensors[0], opts)
        by = self._reduce_op(opts)
        hosts = _host(tensors)
        self._wait(name, collective(hosts, opts))
        if to_all or self.rank() == opts.rootRank:
            _divide(hosts, by)
            _back(tensors, hosts)
        return _done(tensors)

    def allreduce(self, tensors, opts):
        return self._reduction("allreduce", "all_reduce", self._gloo.allreduce, tensors, opts)

    def allreduce_coalesced(self, tensors, opts):
        for t in tensors:
            o = dist.AllreduceOptions()
            o.reduceOp, o.timeout = opts.reduceOp, opts.timeout
            self.allreduce([t], o)
        return _done(tensors)

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
        out = torch.empty(output.shape, dtype=output.dtype)
        self._wait("all_gather_single", self._gloo._allgather_base(out, input.detach().cpu(), opts))
        output.copy_(out)
        return _done([output])

    _allgather_base = all_gather_single

    def all_gather_single_coalesced(self, outputs, inputs, opts):
        for o, i in zip(outputs, inputs):
            self.all_gather_single(o, i, opts)
        return _done(outputs)

    def allgather_coalesced(self, output_lists, inputs, opts):
        return self.allgather(output_lists, inputs, opts)

    def reduce_scatter(self, outputs, input_lists, opts):
        # gloo has no list reduce_scatter: allreduce each rank's input list, keep this rank's.
        self._agree("reduce_scatter", outputs[0], opts)
        by = self._reduce_op(opts)
        me = self.rank()
        for k, out in enumerate(outputs):
            parts = _host(input_lists[k])
            flat = torch.stack(parts)
            o = dist.AllreduceOptions()
            o.reduceOp, o.timeout = opts.reduceOp, opts.timeout
            self._wait("reduce_scatter", self._gloo.allreduce([flat], o))
            _divide([flat], by)
            out.copy_(flat[me])
        return _done(outputs)

    def reduce_scatter_single(self, output, input, opts):
        self._agree("reduce_scatter_tensor", input, opts)
        by = self._reduce_op(opts)
        flat = input.detach().cpu().contiguous()
        o = dist.AllreduceOptions()
        o.reduceOp, o.timeout = opts.reduceOp, opts.timeout
        self._wait("reduce_scatter_single", self._gloo.allreduce([flat], o))
        _divide([flat], by)
        n = output.numel()
        output.copy_(flat.view(-1)[self.rank() * n:(self.rank() + 1) * n].view(output.shape))
        return _done([output])

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts):
        for o, i in zip(outputs, inputs):
            c = dist.ReduceScatterOptions()
            c.reduceOp, c.timeout = opts.reduceOp, opts.timeout
            self.reduce_scatter_single(o, i, c)
        return _done(outputs)

    def alltoall(self, outputs, inputs, opts):
        self._agree("all_to_all", inputs[0], shape=False)
        out_hosts = _host(outputs)
        self._wait("alltoall", self._gloo.alltoall(out_hosts, _host(inputs), opts))
        _back(outputs, out_hosts)
        return _done(outputs)

    def all_to_all_single(self, output, input, output_splits, input_splits, opts):
        self._agree("all_to_all_single", input, shape=False)
        out = torch.empty(output.shape, dtype=output.dtype)
        self._wait("all_to_all_single", self._gloo.alltoall_base(
            out, input.detach().cpu().contiguous(), output_splits, input_splits, opts))
        output.copy_(out)
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

    def send(self, tensors, dst, tag):
        self._wait("send", self._gloo.send(_host(tensors), dst, tag))
        return _done(tensors)

    def recv(self, tensors, src, tag):
        hosts = _host(tensors)
        self._wait("recv", self._gloo.recv(hosts, src, tag))
        _back(tensors, hosts)
        return _done(tensors)

    def barrier(self, opts):
        self._agree("barrier")
        self._wait("barrier", self._gloo.barrier(opts))
        return _done([])


# c10d calls these from C++, also while a compiled (Dynamo) frame runs: they must run as plain
# Python, never be traced themselves.
for _name, _fn in list(vars(ProcessGroupPjrt).items()):
    if callable(_fn) and not _name.startswith("__"):
        setattr(ProcessGroupPjrt, _name, torch.compiler.disable(_fn, recursive=True))


def _create(store, rank, size, timeout):
    return ProcessGroupPjrt(store, rank, size, timeout if timeout else datetime.timedelta(minutes=30))


def register():
    """Registers the backend once (torch_pjrt's import does it where torch.distributed is built)."""
    if dist.is_available() and not hasattr(dist.Backend, NAME.upper()):
        dist.Backend.register_backend(NAME, _create, devices=["tpu"])
