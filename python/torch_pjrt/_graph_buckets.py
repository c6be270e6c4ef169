"""Shape buckets for compiled graphs with symbolic shapes.

A graph Dynamo leaves symbolic (dynamic=True, mark_dynamic, automatic dynamic shapes after a
shape change) is compiled once per shape bucket instead of once per shape: each symbol is
rounded up by the eager bucket policy (TORCH_PJRT_SHAPE_BUCKETS), the inputs are padded to the
bucket's sizes, and the program takes the symbols' live values as one int64 input. The padding
is never read as a value: where an op reads across a padded dim (a reduction, a softmax, a
contraction, an index taken from a padded tensor) the graph is rewritten to read the padding as
the op's identity, built from `arange(n) < live`: which ops may, and with which fill, is the op
table's padding rule (csrc/ops/bucket.c, through _C.pad_rule), the one eager buckets follow.
This module chooses which symbols to pad and follows views, factories and joins. Outputs are the
live part of the program's.

A padded dim may be merged behind others by a view ([2, s] -> [2 * s], a batch of sequences
flattened for a linear layer): its padding then lies between live rows, which row-wise ops,
views and masked reductions take (_Program.scr). A graph with an op the table refuses on its
padded dims, a size that is not a multiple of one symbol plus a constant, or a view that splits a
padded dim, is refused (BucketRefused) before anything runs and compiled per shape, as before.
"""
import operator
import warnings

import sympy
import torch

aten = torch.ops.aten


class BucketRefused(Exception):
    """The graph cannot run on padded shapes; it is compiled per shape instead."""


# What the rewrite itself follows: ops that keep each position of every dim where it is (or
# broadcast it), views, factories and joins, whose padded dims pass through (_check_positional
# says where a live part would move off the front). Every other op runs on padded values as the
# op table's padding rule says (_table), the rule eager buckets follow too.
_LAYOUT = {
    "clone", "_to_copy", "alias", "detach", "lift_fresh_copy", "contiguous", "expand",
    "permute", "transpose", "t", "unsqueeze", "squeeze", "copy_", "copy",
    "full", "zeros", "ones", "empty", "empty_strided", "new_zeros", "new_ones", "new_empty",
    "new_full", "full_like", "zeros_like", "ones_like", "empty_like", "scalar_tensor",
    "_unsafe_view", "view", "reshape", "slice", "select", "cat", "split", "split_with_sizes",
    "unbind", "arange", "slice_scatter", "select_scatter",
}
# Ops that reduce dims or read across one (their fills are the table's): padding between rows
# follows them (_rows).
_REDUCE = {"sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "any", "all",
           "logsumexp", "_softmax", "_log_softmax"}
_VIEWS = {"view", "_unsafe_view", "reshape"}


def _fill(fill, dtype):
    """The value padding reads as: the op table's fill ("zero", "one", "lowest", "highest") or a
    value (an int)."""
    if not isinstance(fill, str):
        return fill
    if fill in ("zero", "one"):
        return (fill == "one") if dtype == torch.bool else int(fill == "one")
    high = fill == "highest"
    if dtype == torch.bool:
        return high
    if dtype.is_floating_point:
        return float("inf") if high else float("-inf")
    info = torch.iinfo(dtype)
    return info.max if high else info.min


def _name(target):
    return target.overloadpacket.__name__ if isinstance(target, torch._ops.OpOverload) else None


class GraphBuckets:
    """One symbolic graph's bucketed programs. Called with the graph's arguments: its outputs, or
    None where this call should run an exact program; raises BucketRefused (before running
    anything) when the graph cannot be bucketed at all.

    Which symbols are padded: all of them at first (Dynamo's automatic dynamic shapes make only
    sizes that changed symbolic); if the graph can't pad them all (dynamic=True makes a batch
    size symbolic too, and a view merges it with the sequence), those whose values have changed
    since the first call, as eager buckets pad the dims that change at a call site."""

    def __init__(self, gm, compile_static):
        from torch_pjrt import _C
        self.gm = gm
        self.compile_static = compile_static
        self.bucket_size = _C.bucket_size
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.output = next(n for n in gm.graph.nodes if n.op == "output")
        # Each symbol and where a call's arguments give its value: (placeholder index, dim or None).
        self.symbols, self.source = [], {}
        for i, p in enumerate(self.placeholders):
            v = p.meta.get("val")
            sizes = [(None, v)] if isinstance(v, torch.SymInt) else \
                list(enumerate(v.shape)) if isinstance(v, torch.Tensor) else []
            for d, s in sizes:
                e = s.node.expr if isinstance(s, torch.SymInt) else None
                if e is not None and e.is_Symbol and e not in self.source:
                    self.source[e] = (i, d)
                    self.symbols.append(e)
        if not self.symbols:
            raise BucketRefused("no symbol to bucket")
        if any(isinstance(n.target, torch._ops.OpOverload) and
               n.target.namespace in ("_c10d_functional", "c10d_functional", "c10d")
               for n in gm.graph.nodes):
            # Ranks must run the same programs around their collectives: a rank on an exact
            # program and another on a bucket's would call different collectives.
            raise BucketRefused("a collective")
        self.mutated = {n.args[0] for n in gm.graph.nodes
                        if n.op == "call_function" and n.target is aten.copy_.default
                        and isinstance(n.args[0], torch.fx.Node) and n.args[0].op == "placeholder"}
        self.all = frozenset(range(len(self.symbols)))
        # Tried in turn until one rewrites: (pad every symbol, or only those that changed;
        # an input dim m * s is [m, s] merged (a batch of sequences), or [s, m]).
        self.modes = [(True, True), (True, False), (False, True), (False, False)]
        self.first, self.varying = None, set()
        self.programs = {}  # (padded symbols, bucket values) -> _Program
        self.layouts = {}   # live values -> per output its live (sizes, strides), or its value

    def __call__(self, args):
        live = []
        for s in self.symbols:
            i, d = self.source[s]
            live.append(int(args[i]) if d is None else int(args[i].shape[d]))
        if self.first is None:
            self.first = live
        self.varying |= {k for k, (v, f) in enumerate(zip(live, self.first)) if v != f}
        if not self.modes:
            raise BucketRefused(self.refused)
        every, batches = self.modes[0]
        padded = self.all if every else frozenset(self.varying)
        if not padded:
            return None
        key = (padded, batches,
               tuple(self.bucket_size(v) if k in padded else v for k, v in enumerate(live)))
        prog = self.programs.get(key)
        if prog is None:
            try:
                prog = self.programs[key] = _Program(self, padded, batches, key[2], args)
            except BucketRefused as e:  # the next mode, if any
                self.modes.pop(0)
                self.refused = str(e)
                return self(args)
            except Exception as e:  # a gap in the rewrite must not stop the user's program
                warnings.warn(f"tpu: shape buckets could not rewrite a compiled graph; it "
                              f"compiles per shape instead: {type(e).__name__}: {e}")
                self.modes = []
                raise BucketRefused(f"the rewrite failed: {type(e).__name__}") from e
        return prog.run(args, live)

    def live_outputs(self, outs, live, prog):
        """The program's outputs cut to their live sizes (copied where PyTorch expects other
        strides than the cut's)."""
        layouts = self.layouts.get(live)
        if layouts is None:
            subs = {s: sympy.Integer(v) for s, v in zip(self.symbols, live)}
            ev = lambda s: int(s.node.expr.xreplace(subs)) if isinstance(s, torch.SymInt) else int(s)
            layouts = self.layouts[live] = []
            for n in self.output.args[0]:
                v = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
                layouts.append(([ev(s) for s in v.shape], [ev(s) for s in v.stride()])
                               if isinstance(v, torch.Tensor) else
                               ev(v) if isinstance(v, torch.SymInt) else None)
        result = []
        for o, lay, scr in zip(outs, layouts, prog.out_scr):
            if isinstance(lay, int):
                o = lay
            elif scr:  # padding between rows: [outer, padded, inner] cut, then merged again
                shape, cut = [], []
                for d, n in enumerate(o.shape):
                    if d in scr:
                        outer, k, m, c, inner = scr[d]
                        shape += [outer, n // (outer * inner), inner]
                        cut += [slice(None), slice(0, m * live[k] + c), slice(None)]
                    else:
                        shape.append(n)
                        cut.append(slice(0, lay[0][d]))
                o = torch.empty_strided(lay[0], lay[1], dtype=o.dtype, device=o.device).copy_(
                    o.reshape(shape)[tuple(cut)].reshape(lay[0]))
            elif lay is not None and isinstance(o, torch.Tensor) and list(o.shape) != lay[0]:
                o = o[tuple(slice(0, n) for n in lay[0])]
                if any(n > 1 and st != want for n, st, want in zip(lay[0], o.stride(), lay[1])):
                    o = torch.empty_strided(lay[0], lay[1], dtype=o.dtype,
                                            device=o.device).copy_(o)
            result.append(o)
        return result


class _Program:
    """The graph rewritten for one bucket: symbols |padded| (indices) at bucket sizes, the others
    at their exact sizes |values|; traced on fake tensors and compiled."""

    def __init__(self, graph, padded, batches, values, args):
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.proxy_tensor import make_fx
        self.g, self.values = graph, values
        self.fixed = {s: sympy.Integer(v) for k, (s, v) in enumerate(zip(graph.symbols, values))
                      if k not in padded}
        self.at_bucket = {s: sympy.Integer(v) for s, v in zip(graph.symbols, values)}
        # Dims that merge a padded dim behind others ([2, s] -> [2 * s]), whose padding lies
        # between live rows: node -> {dim: (outer, symbol, m, c, inner)}. Only row-wise ops
        # and views take them.
        self.scr = {}
        self.multi = {}  # an op with several results padded between rows -> per result its scr
        self.big = {s: sympy.Integer(1000003 + 1000 * k) for k, s in enumerate(graph.symbols)}
        for p in graph.placeholders:
            if batches:  # m * s: m sequences of s, each padded
                merged = {d: (m, k, 1, 0, 1) for d, (k, m, c) in self.pads(p).items()
                          if m > 1 and c == 0}
                if merged:
                    self.scr[p] = merged
        self.input_pads = [self._ent(p) for p in graph.placeholders]
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        examples = []
        with mode:
            for p, a, pads in zip(graph.placeholders, args, self.input_pads):
                if isinstance(a, torch.Tensor):
                    examples.append(torch.empty(self._split(a.shape, pads)[2], dtype=a.dtype,
                                                device=a.device) if pads else mode.from_tensor(a))
            examples.append(torch.zeros(len(values), dtype=torch.int64, device=_device(args)))
            rewritten = make_fx(lambda *xs: self._interpret(list(xs)))(*examples)
        self.fn = graph.compile_static(rewritten)

    def _split(self, shape, pads):
        """For a live |shape| with padded dims |pads| (see _ent): the live shape with each dim
        padded between rows split into [outer, padded, inner], the bucket's shape so split,
        the bucket's shape, and the live part's index in the split bucket."""
        live, bucket, whole, cut = [], [], [], []
        for d, n in enumerate(shape):
            e = pads.get(d)
            if e is None:
                live.append(n), bucket.append(n), whole.append(n), cut.append(slice(None))
                continue
            outer, (k, m, c), inner = (1, e, 1) if len(e) == 3 else (e[0], e[1:4], e[4])
            size = m * self.values[k] + c
            live += [outer, n // (outer * inner), inner]
            bucket += [outer, size, inner]
            whole.append(outer * size * inner)
            cut += [slice(None), slice(0, n // (outer * inner)), slice(None)]
        return live, bucket, whole, tuple(cut)

    def pads(self, node):
        """{dim: (symbol, m, c)} for |node|'s tensor value: its dims of live size m * symbol + c,
        padded to m * bucket + c. Raises BucketRefused for a padded size of another form."""
        v = node.meta.get("val") if isinstance(node, torch.fx.Node) else node
        if not isinstance(v, torch.Tensor):
            return {}
        out, scr = {}, self.scr.get(node, {})
        for d, s in enumerate(v.shape):
            if isinstance(s, torch.SymInt) and d not in scr:
                lin = self._linear(s.node.expr)
                if lin is not None:
                    out[d] = lin
        return out

    def _linear(self, e):
        """(symbol index, m, c) for an expression m * symbol + c of one padded symbol; None for a
        constant one (after the exact symbols' values)."""
        e = e.xreplace(self.fixed)
        if e.is_Integer:
            return None
        syms = e.free_symbols
        if len(syms) != 1:
            raise BucketRefused(f"a size {e} of more than one padded symbol")
        (sym,) = syms
        if sym not in self.g.symbols:
            raise BucketRefused(f"a size {e} of a symbol no input gives")
        m = e.diff(sym)
        c = e - m * sym
        if not (m.is_Integer and m > 0 and c.is_Integer):
            raise BucketRefused(f"a size {e} that is not a multiple of a symbol plus a constant")
        return self.g.symbols.index(sym), int(m), int(c)

    def run(self, args, live):
        inputs, padded = [], []
        for p, a, pads in zip(self.g.placeholders, args, self.input_pads):
            if not isinstance(a, torch.Tensor):
                continue
            if pads:
                split, bucket, whole, cut = self._split(a.shape, pads)
                buf = torch.zeros(whole, dtype=a.dtype, device=a.device)
                if all(len(e) == 3 for e in pads.values()):  # padded at the end: a prefix
                    part = buf[tuple(slice(0, n) for n in a.shape)]
                    part.copy_(a)
                else:
                    part = buf.view(bucket)[cut]
                    part.copy_(a.reshape(split))
                if p in self.g.mutated:
                    padded.append((a, part))
                a = buf
            inputs.append(a)
        inputs.append(torch.tensor(live, dtype=torch.int64, device=_device(args)))
        args.clear()
        outs = self.fn(inputs)
        for a, part in padded:  # write-backs into a padded input: its live part is the input's
            a.copy_(part.reshape(a.shape))
        return self.g.live_outputs(outs, tuple(live), self)

    # ---- the rewrite ----
    def _interpret(self, inputs):
        """Runs the graph at bucket sizes on (fake) |inputs|, the live values last."""
        live = inputs.pop()
        env = {}
        it = iter(inputs)
        for p in self.g.placeholders:
            v = p.meta.get("val")
            env[p] = int(v.node.expr.xreplace(self.at_bucket)) if isinstance(v, torch.SymInt) \
                else next(it) if isinstance(v, torch.Tensor) else v
        for n in self.g.gm.graph.nodes:
            if n.op == "get_attr":
                env[n] = getattr(self.g.gm, n.target)
            elif n.op == "call_function":
                env[n] = self._node(n, env, live)
        self.out_scr = [self.scr.get(a) for a in self.g.output.args[0]]
        return [env[a] if isinstance(a, torch.fx.Node) else a for a in self.g.output.args[0]]

    def _number(self, e, live):
        """Expression |e| of the symbols as a value: a 0-d tensor from the live values."""
        e = e.xreplace(self.fixed)
        if e.is_Integer:
            return int(e)
        if e.is_Symbol:
            return live[self.g.symbols.index(e)]
        if e.is_Add or e.is_Mul:
            parts = [self._number(a, live) for a in e.args]
            out = parts[0]
            for q in parts[1:]:
                out = out + q if e.is_Add else out * q
            return out
        if e.is_Pow and e.exp.is_Integer and e.exp > 0:
            return self._number(e.base, live) ** int(e.exp)
        raise BucketRefused(f"a number {e} of the symbols")

    def _ent(self, a):
        """All of node |a|'s padded dims: (symbol, m, c) at the end, (outer, symbol, m, c, inner)
        between rows."""
        return {**self.pads(a), **self.scr.get(a, {})} if isinstance(a, torch.fx.Node) else {}

    def _mask(self, x, pads, fill, live):
        """|x| with the padding of |pads| (see _ent) replaced by |fill|."""
        ok = None
        for d, e in pads.items():
            outer, (k, m, c), inner = (1, e, 1) if len(e) == 3 else (e[0], e[1:4], e[4])
            lim = live[k] * m + c if (m, c) != (1, 0) else live[k]
            pos = torch.arange(0, x.shape[d], 1, device=x.device)
            if outer > 1 or inner > 1:  # [outer, padded, inner] flattened: the padded index
                pos = torch.remainder(torch.div(pos, inner, rounding_mode="floor"),
                                      x.shape[d] // (outer * inner))
            keep = pos < lim
            keep = keep.view([x.shape[d] if i == d else 1 for i in range(x.dim())])
            ok = keep if ok is None else ok & keep
        return x if ok is None else x.masked_fill(ok.logical_not(), fill)

    def _node(self, n, env, live):
        val = n.meta.get("val")
        if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            if not isinstance(val, torch.SymInt) and val.node.expr.free_symbols:
                raise BucketRefused(f"a symbolic {type(val).__name__} ({n.target})")
            e = val.node.expr.xreplace(self.at_bucket)
            return int(e) if isinstance(val, torch.SymInt) else \
                float(e) if isinstance(val, torch.SymFloat) else bool(e)
        load = lambda a: torch.fx.node.map_arg(a, env.__getitem__)
        args, kwargs = load(n.args), load(n.kwargs)
        if not isinstance(n.target, torch._ops.OpOverload):
            if n.target is operator.getitem:
                src, i = n.args
                if src in self.multi and self.multi[src][i]:
                    self.scr[n] = self.multi[src][i]
                return n.target(*args, **kwargs)
            raise BucketRefused(f"a call to {n.target}")
        sym_args = [a for a in n.all_input_nodes if isinstance(a.meta.get("val"), torch.SymInt)
                    and a.meta["val"].node.expr.xreplace(self.fixed).free_symbols]
        in_pads = {a: self.pads(a) for a in n.all_input_nodes}
        outs = val if isinstance(val, (tuple, list)) else [val]
        name = _name(n.target)
        if name in ("_assert_scalar", "sym_constrain_range", "sym_constrain_range_for_size"):
            return None  # Dynamo's checks on the live sizes, not the bucket's
        scrambled = any(a in self.scr for a in n.all_input_nodes)
        if not any(in_pads.values()) and not any(self.pads(v) for v in outs) and not sym_args \
                and not scrambled:
            return n.target(*args, **kwargs)
        if scrambled:
            return self._rows(n, name, args, kwargs, in_pads, live)
        if torch.Tag.nondeterministic_seeded in n.target.tags:
            raise BucketRefused(f"a random op ({name}) on padded shapes")
        if torch.Tag.pointwise in n.target.tags:
            if not sym_args:
                return n.target(*args, **kwargs)
            # A symbol used as a number: its live value, from the program's input.
            nums = {a: self._number(a.meta["val"].node.expr, live) for a in sym_args}
            args = torch.fx.node.map_arg(n.args, lambda a: nums.get(a, env[a]))
            kwargs = torch.fx.node.map_arg(n.kwargs, lambda a: nums.get(a, env[a]))
            return n.target.overloadpacket(*args, **kwargs)
        if name in _LAYOUT:
            self._check_positional(n, name, in_pads)
            return n.target(*args, **kwargs)
        # Every other op: as the op table's padding rule says (ops/op.h: tp_op_pad_rule).
        padded = [(env[a], p) for a, p in in_pads.items() if p and isinstance(env[a], torch.Tensor)]
        fills, needs_live = self._table(n, name, args, kwargs, padded)
        masked = {id(t): self._mask(t, p, _fill(f, t.dtype), live)
                  for (t, p), f in zip(padded, fills) if f is not None}
        if masked:
            swap = lambda v: masked.get(id(v), v) if isinstance(v, torch.Tensor) else v
            args = torch.fx.node.map_aggregate(args, swap)
            kwargs = torch.fx.node.map_aggregate(kwargs, swap)
        if not needs_live:
            return n.target(*args, **kwargs)
        if name == "mean":
            return self._mean(args, kwargs, in_pads[n.args[0]], live)
        if name == "constant_pad_nd":
            # Padding after the live part: the bucket's sits behind it, so the live part's end
            # reads as the pad value up to the new live size.
            pad, value = list(n.args[1]), (n.args[2] if len(n.args) > 2 else 0)
            xp, nd = in_pads[n.args[0]], args[0].dim()
            if any(p < 0 for p in pad):
                raise BucketRefused("constant_pad_nd that crops")
            out = n.target(*args, **kwargs)
            shifted = {}
            for d, (k, m, c) in xp.items():
                i = 2 * (nd - 1 - d)
                shifted[d] = (k, m, c + (pad[i] if i < len(pad) else 0))
            return self._mask(out, shifted, value, live)
        raise BucketRefused(f"{name} with its live sizes (padded where it joins or counts)")

    def _table(self, n, name, args, kwargs, padded):
        """The op table's padding rule for |n|'s call on |args| whose tensors |padded| ((tensor,
        {dim: entry}), see _ent) are padded: per entry the fill its padding must read as (None:
        anything) and whether the call needs its live sizes. Raises BucketRefused where the
        table refuses or has no row."""
        from torch_pjrt import _C
        bits = [(t, sum(1 << d for d in p)) for t, p in padded]
        rule = _C.pad_rule(n.target, bits, *args, **kwargs)
        if rule is None:
            raise BucketRefused(f"{name}: the op table's padding rule refuses these padded dims")
        if rule is False:
            raise BucketRefused(f"{name} on padded shapes (no op table row)")
        return rule

    def _mean(self, args, kwargs, pads, live):
        """mean over padded dims (their padding already read as 0): the sum over the live
        elements / their count."""
        x = args[0]
        d = args[1] if len(args) > 1 else kwargs.get("dim")
        dims = None if d is None or d == [] else [d] if isinstance(d, int) else list(d)
        dims = list(range(x.dim())) if dims is None else [d % max(x.dim(), 1) for d in dims]
        keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
        total = torch.sum(x, dims, keepdim=keepdim, dtype=kwargs.get("dtype"))
        count = 1
        for d in dims:
            k, m, c = pads.get(d, (None, 0, x.shape[d]))
            count = count * (live[k] * m + c if k is not None else c)
        return total / count

    def _check_positional(self, n, name, in_pads):
        """Refuses a positional op that moves a padded dim's live part off the front."""
        x = n.args[0] if n.args else None
        xp = in_pads.get(x, {}) if isinstance(x, torch.fx.Node) else {}
        if name in _VIEWS:
            self._view(n)
        elif name in ("slice", "select", "slice_scatter", "select_scatter"):
            a = n.args[1:] if name in ("slice", "select") else n.args[2:]  # dim, start, end, step
            dim = (a[0] if a else 0) % max(x.meta["val"].dim(), 1)
            if dim in xp:
                start = a[1] if len(a) > 1 else (0 if name.startswith("slice") else None)
                step = a[3] if len(a) > 3 else 1
                if not isinstance(start, int) or start < 0 or step != 1:
                    raise BucketRefused(f"{name} of a padded dim from {start}")
                end = a[2] if name.startswith("slice") and len(a) > 2 else None
                if isinstance(end, torch.fx.Node) or (isinstance(end, int) and end < 0):
                    # An end relative to the padded size: reading, the live part stays a prefix
                    # (x[:, :-1]); writing, the source's padding would land on live elements.
                    ev = end.meta["val"] if isinstance(end, torch.fx.Node) else end
                    size = x.meta["val"].shape[dim].node.expr
                    off = (ev.node.expr - size).xreplace(self.fixed) if \
                        isinstance(ev, torch.SymInt) else sympy.Integer(ev)
                    if not off.is_Integer or (name == "slice_scatter" and off < 0):
                        raise BucketRefused(f"{name} of a padded dim to {ev}")
        elif name == "cat":
            tensors, dim = n.args[0], (n.args[1] if len(n.args) > 1 else 0)
            for t in tensors[:-1]:
                if dim % t.meta["val"].dim() in in_pads.get(t, {}):
                    raise BucketRefused("cat after a tensor padded along its dim")
        elif name in ("split", "split_with_sizes", "unbind"):
            dim = (n.args[1] if len(n.args) > 1 else 0) if name == "unbind" else \
                (n.args[2] if len(n.args) > 2 else 0)
            if dim % x.meta["val"].dim() in xp:
                raise BucketRefused(f"{name} along a padded dim")
        elif name == "arange" and len(n.args) > 1 and isinstance(n.args[0], torch.fx.Node):
            raise BucketRefused("arange from a symbolic start")

    def _rows(self, n, name, args, kwargs, in_pads, live):
        """An op on a value whose padding lies between rows ([2, s] -> [2 * s]): ops that keep
        rows apart, views, and reductions that read the padding as their identity."""
        x = n.args[0]
        xs = self.scr.get(x, {}) if isinstance(x, torch.fx.Node) else {}
        carry = lambda out: self.scr.__setitem__(n, out) if out else None
        if name in _VIEWS or name in ("unsqueeze", "squeeze"):
            self._view(n)
        elif name in ("clone", "_to_copy", "alias", "detach", "contiguous"):
            carry(xs)
        elif name in ("t", "transpose", "permute"):
            nd = x.meta["val"].dim()
            perm = list(range(nd))
            if name == "permute":
                perm = [d % nd for d in n.args[1]]
            elif nd == 2 or name == "transpose":
                i, j = ((0, 1) if name == "t" else (n.args[1] % nd, n.args[2] % nd))
                perm[i], perm[j] = perm[j], perm[i]
            carry({j: xs[d] for j, d in enumerate(perm) if d in xs})
        elif name == "expand":
            shift = n.meta["val"].dim() - x.meta["val"].dim()
            carry({d + shift: e for d, e in xs.items()})
        elif name in ("mm", "addmm"):
            a, b = n.args[-2], n.args[-1]
            if name == "addmm" and n.args[0] in self.scr:
                raise BucketRefused("addmm with a bias padded between rows")
            ea, eb = self._ent(a), self._ent(b)
            if ea.get(1) != eb.get(0):
                raise BucketRefused(f"{name} contracting a dim padded unlike on its sides")
            args = list(args)
            if 1 in ea:
                args[-2] = self._mask(args[-2], {1: ea[1]}, 0, live)
                args[-1] = self._mask(args[-1], {0: eb[0]}, 0, live)
            carry({d: e for d, e in ((0, self.scr.get(a, {}).get(0)),
                                     (1, self.scr.get(b, {}).get(1))) if e})
            return n.target(*args, **kwargs)
        elif name in _REDUCE or name in ("_softmax_backward_data", "_log_softmax_backward_data"):
            ent, nd = self._ent(x), x.meta["val"].dim()
            dims, keepdim = self._reduced(name, args, kwargs, nd)
            hit = {d: ent[d] for d in dims if d in ent}
            args = list(args)
            if name.endswith("_backward_data"):
                args[0] = self._mask(args[0], hit, 0, live)
                if name == "_softmax_backward_data":
                    args[1] = self._mask(args[1], hit, 0, live)
            elif hit:
                if name in ("mean", "argmax", "argmin"):
                    raise BucketRefused(f"{name} over a dim padded between rows")
                (fill,), _ = self._table(n, name, args, kwargs, [(args[0], hit)])
                args[0] = self._mask(args[0], hit, _fill(fill, args[0].dtype), live)
            if not name.endswith("softmax") and not name.endswith("_backward_data"):
                gone = [] if keepdim else dims
                carry({d - sum(g < d for g in gone): e for d, e in xs.items() if d not in dims})
            else:
                carry(xs)
            if isinstance(n.meta["val"], (tuple, list)):
                raise BucketRefused(f"{name} with several results, padded between rows")
        elif name in ("nll_loss_forward", "nll_loss_backward"):
            return self._nll(n, name, args, kwargs, live)
        elif name in ("native_layer_norm", "native_layer_norm_backward"):
            # Row-wise over its trailing dims; the weight's and bias's gradients sum over rows.
            x = n.args[1] if name.endswith("backward") else x
            xs = self.scr.get(x, {})
            rank = len(n.args[2] if name.endswith("backward") else n.args[1])
            if any(d >= x.meta["val"].dim() - rank for d in xs):
                raise BucketRefused("layer norm over a dim padded between rows")
            if name.endswith("backward"):
                args = list(args)
                for j in (0, 1, 3, 4):
                    args[j] = self._mask(args[j], self._ent(n.args[j]), 0, live)
            # (output, mean, rstd) or (grad_input, grad_weight, grad_bias): which have x's rows
            self.multi[n] = [xs, {}, {}] if name.endswith("backward") else [xs, xs, xs]
            return n.target(*args, **kwargs)
        elif torch.Tag.pointwise in n.target.tags and not torch.Tag.nondeterministic_seeded \
                in n.target.tags:
            nd, res = n.meta["val"].dim(), {}
            for a in n.all_input_nodes:
                v = a.meta.get("val")
                if not isinstance(v, torch.Tensor):
                    continue
                for d in range(v.dim()):
                    if isinstance(v.shape[d], int) and v.shape[d] == 1:
                        continue
                    sc, od = self.scr.get(a, {}).get(d), d + nd - v.dim()
                    if od in res and res[od] != sc:
                        raise BucketRefused("an op mixing padding between rows with other")
                    res[od] = sc
            carry({d: sc for d, sc in res.items() if sc})
            if any(a.meta["val"].node.expr.xreplace(self.fixed).free_symbols
                   for a in n.all_input_nodes if isinstance(a.meta.get("val"), torch.SymInt)):
                raise BucketRefused("a symbol as a number next to padding between rows")
        else:
            raise BucketRefused(f"{name} on a value with padding between its rows")
        return n.target(*args, **kwargs)

    def _reduced(self, name, args, kwargs, nd):
        """The dims reduction |name| reads across, and whether it keeps them."""
        if name in ("_softmax", "_log_softmax"):
            return [args[1] % nd], True
        if name.endswith("_backward_data"):
            return [args[2] % nd], True
        if name in ("max", "min") and len(args) == 1:
            return list(range(nd)), False
        d = args[1] if len(args) > 1 else kwargs.get("dim")
        keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
        dims = None if d is None or d == [] else [d] if isinstance(d, int) else list(d)
        return (list(range(nd)) if dims is None else [d % max(nd, 1) for d in dims]), keepdim

    def _nll(self, n, name, args, kwargs, live):
        """nll_loss over rows padded between others: the table's rule (a padded sample's target
        reads as ignore_index, so it counts nowhere)."""
        t = 2 if name == "nll_loss_backward" else 1
        ent = self._ent(n.args[t])
        args = list(args)
        if ent:
            (fill,), _ = self._table(n, name, args, kwargs, [(args[t], ent)])
            args[t] = self._mask(args[t], ent, _fill(fill, args[t].dtype), live)
        if name == "nll_loss_backward" and n.args[1] in self.scr:
            self.scr[n] = self.scr[n.args[1]]
        return n.target(*args, **kwargs)

    def _view(self, n):
        """Checks view |n| and records where its output's padding lies. The input's dims are
        split into factors (a padded dim one factor; padding between rows three: outer, padded,
        inner), the output's dims take them in order, sized with large stand-ins for the padded
        symbols. A padded factor must fall whole into one output dim; at its front the output dim
        is padded at its end (rows [s, 4] -> [4 * s]), behind others between rows."""
        x = n.args[0]
        num = lambda e: int(e.xreplace(self.fixed).xreplace(self.big)) \
            if isinstance(e, sympy.Basic) else int(e)
        factors, scr = [], self.scr.get(x, {})
        for d, size in enumerate(x.meta["val"].shape):
            e = size.node.expr if isinstance(size, torch.SymInt) else size
            outer, inner = 1, 1
            if d in scr:
                outer, k, m, c, inner = scr[d]
                lin = (k, m, c)
            else:
                lin = self._linear(e) if isinstance(e, sympy.Basic) else None
            if lin is None:
                factors.append([num(e), None])
                continue
            k, m, c = lin
            if c == 0 and m > 1:  # m * s: rows of m
                lin, inner = (k, 1, 0), m * inner
            factors += [[outer, None], [lin[1] * num(self.g.symbols[k]) + lin[2], lin],
                        [inner, None]]
        factors = [f for f in factors if f[0] != 1 or f[1] is not None]
        out = {}
        for j, size in enumerate(n.meta["val"].shape):
            need = num(size.node.expr if isinstance(size, torch.SymInt) else size)
            parts = []
            while need > 1 or (factors and factors[0][0] == 1 and factors[0][1] is None):
                if not factors:
                    raise BucketRefused("a view whose sizes do not pair up")
                f = factors[0]
                if f[1] is None and f[0] % need == 0 and f[0] != need:
                    f[0] //= need
                    parts.append((need, None))
                    need = 1
                elif need % f[0] == 0:
                    need //= f[0]
                    parts.append(tuple(factors.pop(0)))
                else:
                    raise BucketRefused("a view that splits a padded dim")
            at = [i for i, (_, lin) in enumerate(parts) if lin is not None]
            if len(at) > 1:
                raise BucketRefused("a view that merges two padded dims")
            if at and at[0] > 0:
                i = at[0]
                prod = lambda ps: int(torch.tensor([p for p, _ in ps] or [1]).prod())
                out[j] = (prod(parts[:i]), *parts[i][1], prod(parts[i + 1:]))
        if factors:
            raise BucketRefused("a view whose sizes do not pair up")
        if out:
            self.scr[n] = out


def _device(args):
    return next((a.device for a in args if isinstance(a, torch.Tensor) and
                 a.device.type != "cpu"), None)
