"""The host transport: everything the device transport cannot run, in particular one process per
device under torchrun with XLA's CPU plugin, whose client does not span processes. Each collective
runs gloo's collective on CPU tensors: aliases of the tpu tensors' memory where the device's memory
is host memory (the CPU plugin), else copies whose results are copied back. The backend runs the
common collectives on aliases itself; the methods here are the rest. Every call is checked: the
ranks agree on it (_C.HostGroup, csrc/torch/distributed/host.cpp, which holds the protocol: the
call's digest posted on the group's board or compared through gloo, the wait on gloo that watches
the board, the exchange of the calls when they differ)."""
import datetime
import os

import torch
import torch.distributed as dist

from .. import _C
from ._base import ProcessGroupPjrt, _Later, _describe, _done, _note, _untraced

_CHECK = os.environ.get("TORCH_PJRT_COLLECTIVE_CHECK", "1") != "0"


def _alias(t):
    """A CPU tensor sharing |t|'s memory where the device's memory is host memory (the CPU
    plugin), else None. Valid until |t| is next written: held for one collective only."""
    if t.device.type == "cpu":
        return t
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


class _HostTransport(ProcessGroupPjrt):
    """Collectives through the host: gloo on CPU copies of the tpu tensors."""
    transport = "host"

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._gloo = dist.ProcessGroupGloo(store, rank, size, timeout)
        # The check of every call and the wait on gloo that watches it (the backend's native
        # calls use the same object).
        self._group = _C.HostGroup(store, self._gloo, rank, size, timeout.total_seconds(), _CHECK)

    def _agree(self, name, t=None, opts=None, shape=True):
        """Checks that all ranks are about to run the same call: |name| on tensors like |t| (its
        dtype, and its shape when |shape|), with |opts|' reduction; raises on every rank, naming
        each rank's call, when they are not (or once gloo's call is under way: _wait)."""
        self._group.agree(_describe(name, t, opts, shape))

    def _wait(self, name, work):
        """Waits for gloo's |work| of the call last agreed on, and checks that call."""
        _note("host", name)
        self._group.wait(work)

    def _reduce_op(self, opts):
        """gloo's op for |opts| (set in it) and what to do around it: the factor PREMUL_SUM
        scales each rank's copy by first (None when none), whether AVG divides afterwards."""
        op, scale, avg = opts.reduceOp, None, False
        if op == dist.ReduceOp.AVG:
            opts.reduceOp, avg = dist.ReduceOp.SUM, True
        elif op == dist.ReduceOp.PREMUL_SUM:
            scale, opts.reduceOp = op.factor, dist.ReduceOp.SUM
            scale = scale.cpu() if torch.is_tensor(scale) else scale
        return scale, avg

    def _average(self, hosts, avg):
        """AVG's last step, where gloo summed (_C.average: one rule with the backend's)."""
        if avg:
            for h in hosts:
                _C.average(h, self._size)

    def broadcast(self, tensors, opts):
        self._agree("broadcast", tensors[0])
        hosts = _host(tensors)
        self._wait("broadcast", self._gloo.broadcast(hosts, opts))
        _back(tensors, hosts)
        return _done(tensors)

    def _reduction(self, name, what, collective, tensors, opts, to_all=True):
        """all_reduce and reduce: |tensors| reduced in place (on every rank, or the root's)."""
        self._agree(what, tensors[0], opts)
        scale, avg = self._reduce_op(opts)
        # reduce may use a non-root rank's tensor as scratch: it gets a copy.
        hosts = _scaled(_host(tensors, alias=to_all), scale)
        self._wait(name, collective(hosts, opts))
        if to_all or self.rank() == opts.rootRank:
            self._average(hosts, avg)
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
        scale, avg = self._reduce_op(opts)
        me = self.rank()
        for k, out in enumerate(outputs):
            flat = _scaled([torch.stack(_host(input_lists[k]))], scale)[0]
            o = dist.AllreduceOptions()
            o.reduceOp, o.timeout = opts.reduceOp, opts.timeout
            self._wait("reduce_scatter", self._gloo.allreduce([flat], o))
            self._average([flat], avg)
            out.copy_(flat[me])
        return _done(outputs)

    def reduce_scatter_single(self, output, input, opts):
        self._agree("reduce_scatter_tensor", input, opts)
        scale, avg = self._reduce_op(opts)
        flat = _scaled([input.detach().cpu().contiguous()], scale)[0]
        o = dist.AllreduceOptions()
        o.reduceOp, o.timeout = opts.reduceOp, opts.timeout
        self._wait("reduce_scatter_single", self._gloo.allreduce([flat], o))
        self._average([flat], avg)
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


_untraced(_HostTransport)
