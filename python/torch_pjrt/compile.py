"""torch.compile(backend="tpu"): whole graphs as one device program.

Dynamo captures the Python code; AOTAutograd turns it into functional ATen forward and backward
graphs (core-ATen decompositions, except for ops the C op table lowers directly). Each graph is
cut into partitions of ops with a native lowering; a partition becomes one StableHLO program,
built by the C graph executor from the same emitters eager mode uses, compiled once and kept in
the executable cache (memory and disk: a second process compiles nothing). An op with no native
lowering splits the graph there: it runs eagerly, with the usual fallback accounting, and the
split is counted in stats().

Registered with Dynamo through the `torch_dynamo_backends` entry point, so nothing is imported
until a user asks for the backend.
"""
import collections
import functools
import operator
import threading
import warnings

import torch

_stats = {"graphs": 0, "partitions": 0, "host_ops": 0, "splits": collections.Counter(),
          "split_reasons": {}, "bucketed_graphs": 0, "bucket_refused": collections.Counter()}


def stats():
    """What the backend did: graphs captured (forward and backward count separately),
    partitions built, eager split ops by name, and device programs run/compiled for graphs
    (a graph program found in the memory or disk cache is not compiled again)."""
    from torch_pjrt import _C
    s = _C.stats()
    return {"graphs": _stats["graphs"], "partitions": _stats["partitions"],
            "host_ops": _stats["host_ops"],
            "splits": dict(_stats["splits"]), "split_reasons": dict(_stats["split_reasons"]),
            "bucketed_graphs": _stats["bucketed_graphs"],
            "bucket_refused": dict(_stats["bucket_refused"]),
            "graph_runs": s["graph_runs"],
            "graph_compiles": s["graph_compiles"]}


def reset_stats():
    _stats["graphs"] = _stats["partitions"] = _stats["host_ops"] = _stats["bucketed_graphs"] = 0
    _stats["splits"].clear()
    _stats["bucket_refused"].clear()
    _stats["split_reasons"].clear()


def _is_tpu_device(d):
    if d is None:
        return True
    return torch.device(d).type == "tpu"


class _Concrete(threading.local):
    """While a graph with symbolic shapes is specialized: fx node -> its value in one eager run.
    Per thread: ranks that are threads of one process share compiled closures, and one rank's
    specializing must not see (or clear) another's values."""

    def __init__(self):
        self.values = {}


_CONCRETE = _Concrete()


def _val(n):
    """An fx node's value for lowering: its traced (fake) value, or the concrete one."""
    return _CONCRETE.values[n] if n in _CONCRETE.values else n.meta.get("val")


# The most tensors one cat node takes (the op table's TP_MAX_ARGS, less the list's length and dim).
_CAT_CHUNK = 14


def _same_layout(node):
    """Whether as_strided(x, size, stride[, offset]) only restates x's own layout: the same sizes
    and offset, and x's strides wherever a size exceeds 1 (AOTAutograd writes one to give a
    reduction's [N, C, 1, 1] result channels-last strides). Then its value is x's."""
    x = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    if not isinstance(x, torch.Tensor):
        return False
    size, stride = list(node.args[1]), list(node.args[2])
    offset = node.args[3] if len(node.args) > 3 else node.kwargs.get("storage_offset")
    return (size == list(x.shape) and (offset is None or offset == x.storage_offset())
            and all(st == xs for n, st, xs in zip(size, stride, x.stride()) if n > 1))


class _Partition:
    """Consecutive graph nodes lowered into one program."""

    def __init__(self, fold=frozenset(), split_collectives=False):
        from torch_pjrt import _C
        self.fold = fold    # host nodes that may run here instead (see _foldable)
        self.split_collectives = split_collectives  # collectives run eagerly between programs
        self.split = None   # the plan that runs its nodes instead (see _diverged), once made
        self.graph = _C.Graph()
        self.inputs = []    # fx nodes whose runtime values feed the program, in input order
        self.values = {}    # fx node -> the meta tensor naming its value inside the program
        self.nodes = []     # fx nodes lowered here
        self.outputs = []   # fx nodes whose values leave the program
        self.eager = False  # the program failed to build: run the nodes one by one
        self.mutations = [] # (graph input, node): the input takes the node's value in place
        self.views = []     # view nodes PyTorch makes after a run, from program outputs/inputs
        self.group = None   # the device-transport backend of the group its collectives run over
        self.collectives = []  # their names, in order

    def _value(self, n):
        """The program value for fx node |n|, adding it as an input when it comes from outside."""
        if n in self.values:
            return self.values[n]
        val = _val(n)
        if not isinstance(val, torch.Tensor):
            raise _NotNative("a non-tensor value from outside the partition")
        if not all(isinstance(d, int) for d in val.shape):
            raise _NotNative("a symbolic shape")  # dynamic shapes: the node runs eagerly
        t = self.graph.input(val.dtype, list(val.shape))
        self.values[n] = t
        self.inputs.append(n)
        return t

    def add(self, node):
        """Lowers |node| here; raises _NotNative (the partition unchanged in meaning) if it can't."""
        if _on_host(node):
            if node not in self.fold:
                raise _HostOp("works on CPU tensors")
            try:
                return self._lower(node)
            except _NotNative as e:  # no lowering: it stays on CPU
                raise _HostOp(f"works on CPU tensors ({e})")
        self._lower(node)

    def _lower(self, node):
        if node.target is torch.ops.aten.copy_.default:
            # The write-back of a mutated graph input (optimizer state, ...): the program's
            # result goes straight into the input's storage.
            dst, src = node.args
            val, dval = _val(src), _val(dst)
            if (dst.op != "placeholder" or not isinstance(val, torch.Tensor) or
                    not isinstance(dval, torch.Tensor) or val.shape != dval.shape or
                    val.dtype != dval.dtype or node.kwargs):
                raise _NotNative("a copy_ that is not a plain write-back of an input")
            self._value(src)
            self.mutations.append((dst, src))
            self.values[node] = self.values[src]
            self.nodes.append(node)
            return
        if node.target is operator.getitem:
            src, idx = node.args
            if src not in self.values or not isinstance(self.values[src], list):
                raise _NotNative("getitem of a value from outside")
            self.values[node] = self.values[src][idx]
            self.nodes.append(node)
            return
        if not isinstance(node.target, torch._ops.OpOverload):
            raise _NotNative("not an ATen op")
        group = None
        if node.target.namespace == "_c10d_functional":
            if node.target is torch.ops._c10d_functional.wait_tensor.default:
                # The program's collectives are complete when it is: waiting is the identity.
                if node.args[0] not in self.values:
                    raise _NotNative("waits for a collective outside the program")
                self.values[node] = self.values[node.args[0]]
                self.nodes.append(node)
                return
            if self.split_collectives:
                raise _NotNative("the ranks' programs differ: collectives run between them")
            group = _device_group(node)
            if self.group is not None and group is not self.group:
                raise _NotNative("a collective over a second process group")
        if not _is_tpu_device(node.kwargs.get("device")):
            raise _NotNative("a result on another device")
        val = _val(node)
        vals = list(val) if isinstance(val, (list, tuple)) else [val]
        if not all(v is None or isinstance(v, torch.Tensor) for v in vals):
            raise _NotNative("a non-tensor result")  # (None: an output the graph doesn't want)
        if not all(v is None or all(isinstance(d, int) for d in v.shape) for v in vals):
            raise _NotNative("a symbolic shape")

        def lower(a):
            if isinstance(a, torch.fx.Node):
                v = _CONCRETE.values.get(a)
                if v is not None and not isinstance(v, torch.Tensor):
                    return v  # a size, specialized
                return self._value(a)
            if isinstance(a, (list, tuple)):
                return type(a)(lower(x) for x in a)
            if isinstance(a, torch.SymInt) or isinstance(a, torch.SymFloat):
                raise _NotNative("a symbolic size")
            return a

        args = lower(node.args)
        kwargs = {k: lower(v) for k, v in node.kwargs.items()}
        if node.target._schema.name.startswith("aten::_foreach_"):
            outs = self._foreach(node.target, args, kwargs)
        elif node.target is torch.ops.aten.cat.default and len(args[0]) > _CAT_CHUNK:
            outs = self._long_cat(*args, **kwargs)
        elif node.target.namespace == "torch_pjrt_kernels":  # a custom kernel: its module
            from . import kernels
            module = kernels.module_for_node(node.target._schema.name.split("::")[1],
                                             [_val(a) for a in node.args[0]])
            outs = self.graph.node(torch.ops.torch_pjrt.call_module.default, args[0], module)
        elif node.target is torch.ops.aten.lift_fresh_copy.default:  # a tensor constant's copy
            outs = self.graph.node(torch.ops.aten.clone.default, *args)
        elif node.target is torch.ops.aten.as_strided.default and _same_layout(node):
            outs = self.graph.node(torch.ops.aten.alias.default, args[0])
        else:
            outs = self.graph.node(node.target, *args, **kwargs)
        if isinstance(outs, str):
            raise _NotNative(outs)
        if len(outs) != len(vals) or any(v is not None and (o.dtype != v.dtype or o.shape != v.shape)
                                         for o, v in zip(outs, vals)):
            raise _NotNative("inferred outputs differ from the traced ones")
        self.values[node] = outs if isinstance(val, (list, tuple)) else outs[0]
        for o, v in zip(outs, vals):  # the layout eager gives it, which steers emitters' forms
            if v is not None and all(isinstance(s, int) for s in v.stride()) and not v.is_contiguous():
                self.graph.set_strides(o, list(v.stride()))
        self.nodes.append(node)
        if group is not None:
            self.group = group
            self.collectives.append(node.target._schema.name.split("::")[1])

    def _long_cat(self, tensors, dim=0):
        """cat of more tensors than one node takes (a DenseNet block's): the cat of the cats of
        consecutive chunks, the same values, as eager mode reduces such a list."""
        while len(tensors) > 1:
            parts = []
            for i in range(0, len(tensors), _CAT_CHUNK):
                chunk = tensors[i:i + _CAT_CHUNK]
                r = self.graph.node(torch.ops.aten.cat.default, list(chunk), dim) if len(chunk) > 1 else list(chunk)
                if isinstance(r, str):
                    raise _NotNative(r)
                parts.append(r[0])
            tensors = parts
        return [tensors[0]]

    def _foreach(self, target, args, kwargs):
        """A _foreach_ op as one node per list element, of the element op's first overload
        that takes the element arguments and has a lowering (add.Scalar for _foreach_add.Scalar,
        pow.Scalar for _foreach_pow.ScalarAndTensor, ...)."""
        lists = [a for a in args if isinstance(a, (list, tuple))
                 and a and all(isinstance(t, torch.Tensor) for t in a)]
        if not lists:
            raise _NotNative("a foreach op without a tensor list")
        n = len(lists[0])
        packet = getattr(torch.ops.aten, target._schema.name[len("aten::_foreach_"):], None)
        if packet is None:
            raise _NotNative("no element op")
        overloads = [o for o in packet.overloads() if "out" not in o]
        pick = lambda a, i: a[i] if isinstance(a, (list, tuple)) and len(a) == n else a
        names = [a.name for a in target._schema.arguments]
        outs = []
        for i in range(n):
            eargs = [pick(a, i) for a in args]
            ekw = {k: pick(v, i) for k, v in kwargs.items()}
            # Positionally, else by the foreach schema's names (addcmul's value is keyword-only).
            calls = [(eargs, ekw), ([], {**dict(zip(names, eargs)), **ekw})]
            r = None
            for o in overloads:
                for ca, ck in calls:
                    try:
                        r = self.graph.node(getattr(packet, o), *ca, **ck)
                    except RuntimeError:  # the element arguments don't fit this overload
                        r = None
                    if isinstance(r, list):
                        break
                if isinstance(r, list):
                    break
            if not isinstance(r, list):
                raise _NotNative(f"element {i} has no lowering")
            outs.append(r[0])
        return outs

    def rebuilt(self):
        """A fresh partition holding the same nodes (drops inputs or nodes of a failed add)."""
        p = _Partition(self.fold, self.split_collectives)
        for n in self.nodes:
            p.add(n)
        return p

    def finish(self, used_outside):
        copies = [n for n in self.nodes if n.target is torch.ops.aten.copy_.default]
        wanted = [n for n in self.nodes if n in used_outside and n not in copies
                  and isinstance(self.values[n], torch.Tensor)]
        # A wanted view of a value that exists outside the program anyway, or of a dense program
        # value, is not a program output: the program would copy it (a transposed weight saved
        # for the backward, ...). PyTorch makes the view from the real tensor instead.
        self.views = []
        outputs, mine = [], set(self.nodes)
        mutated = {dst for dst, _ in self.mutations}
        for n in wanted:
            chain = _view_chain(n, mine)
            # A view of an input this program overwrites would show the new values, not the
            # traced ones; one of a copy_ would view the program's copy, not the input it wrote.
            if chain is None or chain[0].args[0] in mutated or chain[0].args[0] in copies:
                outputs.append(n)
                continue
            root = chain[0].args[0]
            if root in mine and root not in outputs:
                outputs.append(root)
            self.views.extend(v for v in chain if v not in self.views)
        self.outputs = [n for n in self.nodes if n in outputs]
        self.graph.set_outputs([self.values[n] for n in self.outputs] +
                               [self.values[src] for _, src in self.mutations])
        # What run() does per call, worked out once (an optimizer step has hundreds of these).
        self.copies = [(n, n.args[0]) for n in copies]
        self.mutated = [dst for dst, _ in self.mutations]

    def run(self, env):
        ins = _to_device([env[n] for n in self.inputs])
        n_out = len(self.outputs)
        into = [None] * n_out + [env[dst] for dst in self.mutated]
        res = self.graph.run(ins, into) if self.group is None else self._run_replicated(ins, into)
        env.update(zip(self.outputs, res))
        for v in self.views:
            env[v] = v.target(*torch.fx.node.map_arg(v.args, env.__getitem__), **v.kwargs)
        for dst, r in zip(self.mutated, res[n_out:]):
            if r is not None:  # the input could not take the buffer (a view, ...): copy
                env[dst].copy_(r)
        for n, dst in self.copies:
            env[n] = env[dst]

    def _run_replicated(self, ins, into):
        """The program over every rank of its group, as one replicated program (see
        torch_pjrt.distributed._replicated); raises its diverged() where the ranks' programs
        differ in more than their collectives and inputs."""
        from torch_pjrt.distributed import _replicated
        return _replicated.run(self.group, self.graph, len(self.nodes), self.collectives, ins, into)


def _diverged():
    from torch_pjrt.distributed import _replicated
    return _replicated.diverged()


def _device_group(node):
    """The pjrt device-transport backend of a functional collective's group (its name is the
    node's last argument), else _NotNative: on the host transport, the collective runs eagerly
    between programs."""
    from torch_pjrt.distributed import _replicated
    backend, why = _replicated.device_group(node.args[-1] if node.args else None)
    if backend is None:
        raise _NotNative(why)
    return backend


def _view_chain(node, mine):
    """[root view, ..., node] when |node| is a chain of single-tensor view ops whose base is a
    graph input, or a program value traced as dense (then the real one, a program output, has
    the traced strides and every view in the chain applies as traced); else None."""
    chain = []
    while (isinstance(node, torch.fx.Node) and node in mine and
           isinstance(node.target, torch._ops.OpOverload) and
           (node.target.is_view or node.target is torch.ops.aten._unsafe_view.default) and
           isinstance(_val(node), torch.Tensor) and node.args and
           isinstance(node.args[0], torch.fx.Node)):
        chain.append(node)
        node = node.args[0]
    if not chain:
        return None
    base = _val(node)
    dense = node in mine and isinstance(base, torch.Tensor) and base.is_contiguous()
    return chain[::-1] if node.op == "placeholder" or dense else None


def _to_device(ins):
    """Program inputs on the device. CPU 0-dim tensors (an optimizer's bias corrections, one per
    parameter) travel together: one stacked copy per dtype, each input a view into it."""
    groups = {}
    for i, t in enumerate(ins):
        if t.device.type != "tpu":
            if t.dim() == 0:
                groups.setdefault(t.dtype, []).append(i)
            else:
                ins[i] = t.to("tpu")
    for idx in groups.values():
        packed = torch.stack([ins[i] for i in idx]).to("tpu")
        for i, v in zip(idx, packed.unbind(0)):
            ins[i] = v
    return ins


class _NotNative(Exception):
    pass


class _HostOp(_NotNative):
    """A node on CPU tensors (an optimizer's step counters, ...): it runs eagerly on CPU, as the
    user placed it; not a split of device work."""


def _on_host(node):
    """True when the node computes on CPU: its result is a CPU tensor, or all its tensor inputs
    are. (CPU 0-dim inputs of a device op are fine: the program gets them as inputs.)"""
    def flat(vals):
        out = []
        for v in vals:
            out.extend(v if isinstance(v, (list, tuple)) else [v])
        return [v for v in out if isinstance(v, torch.Tensor)]
    v = _val(node)
    if isinstance(v, (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True  # a size or a number: Python work
    res = flat([v])
    ins = flat([_val(a) for a in node.all_input_nodes])
    if any(v.device.type == "cpu" for v in res):
        return True
    return bool(ins) and all(v.device.type == "cpu" for v in ins)


def _foldable(gm):
    """Host nodes that may run inside a device program instead: scalar (0-dim) arithmetic on
    CPU tensors whose results only device work reads, like an optimizer's bias corrections from
    its CPU step counters. On CPU they cost an eager op per parameter per step; in the program
    they are free, and their CPU inputs travel with the program's other 0-dim inputs."""
    def tensors(v):
        vs = list(v) if isinstance(v, (list, tuple)) else [v]
        return [t for t in vs if t is not None]

    fold = set()
    for node in reversed(gm.graph.nodes):
        if node.op != "call_function" or not _on_host(node):
            continue
        if node.target is not operator.getitem and (
                not isinstance(node.target, torch._ops.OpOverload) or
                node.target._schema.is_mutable or "device" in node.kwargs):
            continue
        vals = tensors(_val(node)) + [t for a in node.all_input_nodes for t in tensors(_val(a))]
        if not vals or not all(isinstance(t, torch.Tensor) and t.dim() == 0 for t in vals):
            continue
        if all(u.op == "call_function" and (u in fold or not _on_host(u)) for u in node.users):
            fold.add(node)
    return frozenset(fold)


def _partition(gm, nodes=None, split_collectives=False):
    """Steps of the graph (or of its |nodes|, in order): partitions (lowered) and single nodes
    (run eagerly), in order. With |split_collectives| collectives are single nodes."""
    fold = _foldable(gm)
    new_part = lambda: _Partition(fold, split_collectives)
    steps, part = [], new_part()
    for node in gm.graph.nodes if nodes is None else nodes:
        if node.op != "call_function":
            continue
        if node.target is operator.getitem and node.args[0] not in part.values:
            steps.append(node)  # picks from an eager result: runs before the open partition
            continue
        inputs_before, nodes_before = len(part.inputs), part.graph.node_count
        try:
            part.add(node)
            continue
        except _NotNative as e:
            if len(part.inputs) != inputs_before or part.graph.node_count != nodes_before:
                part = part.rebuilt()  # drop what the failed add left behind
            made_here = set(part.values) - set(part.inputs)
            if isinstance(e, _HostOp) and not any(a in made_here for a in node.all_input_nodes):
                steps.append(node)  # independent of the open partition: runs before it
                _stats["host_ops"] += 1
                continue
            _stats["split_reasons"][str(node.target)] = str(e)
        if part.nodes:
            steps.append(part)
        steps.append(node)
        _stats["splits"][str(node.target)] += 1
        part = new_part()
    if part.nodes:
        steps.append(part)
    # Which values each partition must hand out: those any other step or the output reads.
    parts = [s for s in steps if isinstance(s, _Partition)]
    owner = {n: p for p in parts for n in p.nodes}
    used_outside = set()
    for node in gm.graph.nodes:
        for a in node.all_input_nodes:
            if a in owner and owner.get(node) is not owner[a]:
                used_outside.add(a)
    for p in parts:
        p.finish(used_outside)
    _stats["partitions"] += len(parts)
    return steps


def _is_dynamic(gm):
    for n in gm.graph.nodes:
        v = _val(n)
        if isinstance(v, (torch.SymInt, torch.SymFloat)):
            return True
        if isinstance(v, torch.Tensor) and not all(isinstance(d, int) for d in v.shape):
            return True
    return False


def _compile_graph(gm, example_inputs, kind="forward"):
    _stats["graphs"] += 1
    # What the profiler calls its programs: Dynamo's compile id ("0/1": frame 0, recompile 1).
    from torch._guards import CompileContext
    cid = CompileContext.current_compile_id()
    name = f"tpu graph {cid if cid is not None else '?'} {kind}"
    if _is_dynamic(gm):
        return _specializing(gm, name)
    return _compile_static(gm, name)


def _specializing(gm, name):
    """A graph with symbolic shapes (dynamic=True, or Dynamo's automatic dynamic shapes after a
    shape change): one program per shape bucket where the graph allows it (_graph_buckets),
    else each new set of input shapes specializes it into static programs, the sizes found by
    running the graph on fake tensors of those shapes."""
    cache = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    buckets = _bucketing(gm, name)

    def run(args):
        nonlocal buckets
        # Deterministic mode runs exact programs, as eager does (csrc/torch/kernel.cpp): a
        # bucketed program's padded reductions round unlike the exact one's.
        if buckets is not None and not torch.are_deterministic_algorithms_enabled():
            from torch_pjrt._graph_buckets import BucketRefused
            try:
                out = buckets(args)
                if out is not None:
                    return out
            except BucketRefused as e:  # raised before anything ran
                _stats["bucket_refused"][str(e)] += 1
                buckets = None
        key = tuple((tuple(a.shape), a.dtype, a.device) if isinstance(a, torch.Tensor) else a
                    for a in args)
        fn = cache.get(key)
        if fn is None:
            from torch._subclasses.fake_tensor import FakeTensorMode
            mode = FakeTensorMode(allow_non_fake_inputs=True)
            env = {p: mode.from_tensor(a) if isinstance(a, torch.Tensor) else a
                   for p, a in zip(placeholders, args)}
            load = lambda a: torch.fx.node.map_arg(a, lambda n: env[n])
            with mode:
                for n in gm.graph.nodes:
                    if n.op == "call_function":
                        env[n] = n.target(*load(n.args), **load(n.kwargs))
                    elif n.op == "get_attr":
                        env[n] = getattr(gm, n.target)
            try:
                _CONCRETE.values.update(env)
                fn = cache[key] = _compile_static(gm, name)
            finally:
                _CONCRETE.values.clear()
        return fn(args)

    run._boxed_call = True
    return run


def _bucketing(gm, name):
    """|gm|'s bucketed programs, or None where shape buckets are off or the graph can't pad."""
    from torch_pjrt import _C
    from torch_pjrt._graph_buckets import BucketRefused, GraphBuckets
    if not _C.bucket_enabled():
        return None

    def compile_bucket(rewritten):
        _stats["bucketed_graphs"] += 1
        return _compile_static(rewritten, name + " bucket")
    try:
        return GraphBuckets(gm, compile_bucket)
    except BucketRefused as e:
        _stats["bucket_refused"][str(e)] += 1
        return None


def _compile_static(gm, name="tpu graph"):
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    with unset_fake_temporarily():  # the C graph builder works on real (meta) tensors
        steps = _partition(gm)
    parts = [s for s in steps if isinstance(s, _Partition)]
    for k, p in enumerate(parts):
        p.graph.set_name(name if len(parts) == 1 else f"{name} (part {k + 1} of {len(parts)})")
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    output = next(n for n in gm.graph.nodes if n.op == "output")
    attrs = {n: getattr(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr"}

    plan = _plan(steps)

    def run(args):
        env = dict(zip(placeholders, args))
        env.update(attrs)
        args.clear()  # the caller's list: let inputs die as soon as the graph is done with them
        _run_plan(gm, plan, env)
        return torch.fx.node.map_arg(output.args[0], env.__getitem__)

    run._boxed_call = True  # AOTAutograd passes the argument list itself
    return run


def _plan(steps):
    """Per step: the partition (or None) and the functions that run its nodes eagerly."""
    plan, i = [], 0
    while i < len(steps):
        if isinstance(steps[i], _Partition):
            plan.append((steps[i], [_eager_step(n) for n in steps[i].nodes]))
            i += 1
            continue
        j = i
        while j < len(steps) and _is_host_copy(steps[j]):
            j += 1
        if j - i > 1:  # an optimizer's CPU step counters written back: one call, not one each
            plan.append((None, [_copy_run(steps[i:j])]))
            i = j
        else:
            plan.append((None, [_eager_step(steps[i])]))
            i += 1
    return plan


def _run_plan(gm, plan, env):
    """Runs |plan| (of graph |gm|) on |env|, the values by fx node, which it fills in."""
    from torch_pjrt._C import GraphBuildError
    for step, fns in plan:
        if step is not None and step.split is not None:
            _run_plan(gm, step.split, env)
            continue
        if step is not None and not step.eager:
            try:
                step.run(env)
                continue
            except _diverged():
                # Each rank's own program, the collectives run eagerly between them.
                _stats["splits"]["ranks whose programs differ"] += 1
                from torch._subclasses.fake_tensor import unset_fake_temporarily
                with unset_fake_temporarily():
                    step.split = _plan(_partition(gm, step.nodes, split_collectives=True))
                _run_plan(gm, step.split, env)
                continue
            except GraphBuildError as e:
                # A lowering bug must not stop the user's program: this partition runs
                # eagerly from now on, and says so once.
                step.eager = True
                _stats["splits"]["partition that failed to build"] += 1
                warnings.warn(f"tpu: a compiled partition of {len(step.nodes)} ops failed "
                              f"to build and runs eagerly instead: {e}")
        for fn in fns:
            fn(env)


def _eager_step(node):
    """A node run eagerly, as a function of the environment (built once per graph)."""
    if node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
        src, i = node.args  # picks from a list result: hundreds of them in an optimizer step

        def pick(env):
            env[node] = env[src][i]
        return pick
    target, args, kwargs = node.target, node.args, node.kwargs

    def call(env):
        load = env.__getitem__
        env[node] = target(*torch.fx.node.map_arg(args, load), **torch.fx.node.map_arg(kwargs, load))
    return call


def _is_host_copy(node):
    """A plain copy_ into a CPU tensor (functionalization's write-back of a mutated input)."""
    if isinstance(node, _Partition) or node.target is not torch.ops.aten.copy_.default:
        return False
    dst = _val(node.args[0]) if isinstance(node.args[0], torch.fx.Node) else None
    return len(node.args) == 2 and not node.kwargs and isinstance(dst, torch.Tensor) and \
        dst.device.type == "cpu"


def _copy_run(nodes):
    """Consecutive host copy_ nodes as one _foreach_copy_."""
    pairs = [(n, n.args[0], n.args[1]) for n in nodes]

    def copy(env):
        load = lambda a: env[a] if isinstance(a, torch.fx.Node) else a
        dsts = [env[d] for _, d, _ in pairs]
        torch._foreach_copy_(dsts, [load(s) for _, _, s in pairs])
        for (n, _, _), d in zip(pairs, dsts):
            env[n] = d
    return copy


def _decompositions():
    """Core-ATen decompositions, except for ops the op table lowers as they are."""
    from torch._decomp import core_aten_decompositions
    from torch_pjrt import _C
    native = {"aten::" + n for n in _C.native_ops()} | {"aten::" + n for n in _C.graph_ops()}
    from torch._decomp import decomposition_table
    from torch_pjrt._decompositions import _own_decompositions
    aten = torch.ops.aten
    table = core_aten_decompositions()
    # A core ATen op with no graph lowering that is views and a copy underneath. PyTorch's
    # decomposition clones the expanded input in the input's own layout and returns a view of
    # that; repeat's result is contiguous (as eager's is), else a permuted input (WavLM's
    # position bias) left it unviewable: `.view()` after it raised in the compiled graph.
    repeat = decomposition_table[aten.repeat.default]
    table[aten.repeat.default] = lambda a, repeats: repeat(a, repeats).contiguous()
    # The attention kernel scaled_dot_product_attention picks on tpu, in the ops a graph lowers.
    own = _own_decompositions()
    for op in (aten._scaled_dot_product_efficient_attention.default,
               aten._scaled_dot_product_efficient_attention_backward.default):
        table[op] = own[op]
    return {op: fn for op, fn in table.items()
            if op.name() not in native and op.name().split(".")[0] + ".default" not in native}


def backend(gm, example_inputs, **kwargs):
    """The Dynamo backend callable named "tpu"."""
    from torch._dynamo.backends.common import aot_autograd
    # Inference graphs (an optimizer step, a no_grad forward) keep their input mutations as
    # copy_ nodes, which the partition turns into in-place results.
    return aot_autograd(fw_compiler=_compile_graph,
                        bw_compiler=functools.partial(_compile_graph, kind="backward"),
                        decompositions=_decompositions(),
                        keep_inference_input_mutations=True)(gm, example_inputs)
