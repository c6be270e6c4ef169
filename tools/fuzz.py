"""Differential fuzzer: random short ATen programs run on PyTorch's CPU backend and on "tpu".

    python tools/fuzz.py --seed S --programs N --time-limit SEC [--out DIR]

A program is a list of Python statements over tensors named v0, v1, ... (inputs made by a
deterministic `make(shape, dtype, seed)`, then 3-8 ATen calls: elementwise unary/binary ops with
broadcasting, comparisons, where, clamp, reductions over random dims, mm/addmm, views, in-place
ops through views, dtype conversions, cat). The same statements run once with dev="cpu" and once
with dev="tpu"; after every step (or, for some programs, only at the end) every live tensor is
compared: dtype and shape exactly, values with a dtype-aware tolerance. When the CPU raises, the
tpu must raise an exception of the same type (RuntimeError vs one of its subclasses also counts as
the same) and leave every tensor as the CPU did; when the CPU does not raise, neither may the tpu.

Programs run in a persistent child process (`--worker`), one at a time with a timeout, so a crash
or a hang is caught (with Python and gdb stacks for a hang) and the child restarted. A failing
program is minimised (steps dropped, intermediates replaced by fresh inputs of the same shape and
dtype, input shapes shrunk) and saved as a standalone script under the out dir (default
fuzz-findings/), next to summary-seed<S>.json; the script exits with status 1 (or crashes) while
the problem persists. Everything is seeded: program i of seed S is always the same program
(`--only I` re-runs just that one, `--print` shows programs without running them). The exit
status is 1 when there was any finding.
"""
import argparse
import ast
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import warnings

import torch

import _child

# ---------------------------------------------------------------------------------------------
# The harness: input construction, comparison and the step runner. It is kept as source text so
# that every saved reproducer embeds exactly the code the fuzzer itself runs.
# ---------------------------------------------------------------------------------------------

HARNESS_SRC = r'''
import re
import sys

import torch

# Comparison tolerance per floating dtype: |tpu - cpu| <= tol * (|cpu| + max(1, max|cpu|)).
TOL = {torch.bfloat16: 2e-2, torch.float16: 4e-3, torch.float32: 2e-5, torch.float64: 1e-9}
SPECIALS = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e30, -1e-30]


def make(shape, dtype, seed, special=False):
    """A deterministic CPU tensor: floats in [-4, 4) (with inf/nan/0/huge/tiny sprinkled in when
    |special|), integers in [-4, 4] (uint8: [0, 8]), bools about half True."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=g, dtype=torch.float64) * 8 - 4
    if dtype == torch.bool:
        return x > 0
    if dtype == torch.uint8:
        x = x.abs() * 2
    if not dtype.is_floating_point:
        return x.round().to(dtype)
    if special:
        pick = torch.randint(0, 2 * len(SPECIALS), tuple(shape), generator=g)
        for i, s in enumerate(SPECIALS):
            x = torch.where(pick == i, torch.full_like(x, s), x)
    return x.to(dtype)


def same_error(ce, te):
    """The tpu raised 'the same' exception as the CPU: the same type, or RuntimeError vs one of
    its subclasses (NotImplementedError, torch.OutOfMemoryError, ...)."""
    if type(ce) is type(te):
        return True
    return (isinstance(ce, RuntimeError) and isinstance(te, RuntimeError)
            and (type(ce) is RuntimeError or type(te) is RuntimeError))


def describe(e):
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0][:200] if lines else ''}"


def compare(name, c, t, floor=0.0, values=True):
    """None when the tpu value |t| matches the CPU value |c|, else (kind, message). |floor|: the
    tolerance of the least precise floating dtype the program has used so far (an error made
    in bfloat16 survives a later conversion to float32)."""
    if isinstance(c, (tuple, list)):
        if not isinstance(t, (tuple, list)) or len(c) != len(t):
            return "structure", f"{name}: tpu gave {type(t).__name__}, CPU {type(c).__name__}"
        for i, (a, b) in enumerate(zip(c, t)):
            r = compare(f"{name}[{i}]", a, b, floor, values)
            if r:
                return r
        return None
    if not isinstance(c, torch.Tensor):
        if c == t or (c != c and t != t):
            return None
        return "value", f"{name}: tpu {t!r} != CPU {c!r}"
    if not isinstance(t, torch.Tensor):
        return "structure", f"{name}: tpu gave {type(t).__name__}, CPU a tensor"
    if t.device.type != "tpu":
        return "device", f"{name}: the tpu program's tensor is on {t.device}"
    try:
        t = t.cpu()
    except Exception as e:  # an asynchronous device error surfaces at the read-back
        return "readback_error", f"{name}: reading the tpu tensor back raised {describe(e)}"
    if c.dtype != t.dtype:
        return "dtype", f"{name}: tpu dtype {t.dtype} != CPU {c.dtype} (shape {tuple(c.shape)})"
    if c.shape != t.shape:
        return "shape", f"{name}: tpu shape {tuple(t.shape)} != CPU {tuple(c.shape)} ({c.dtype})"
    if c.numel() == 0 or not values:
        return None
    if not c.dtype.is_floating_point:
        bad = c != t
    else:
        c64, t64 = c.double(), t.double()
        tol = torch.full_like(c64, max(TOL.get(c.dtype, 1e-5), floor))
        if c.dtype == torch.float64:
            # A float64 result whose CPU and tpu values are both exact float32 values was computed
            # in float32 (e.g. an out= of float64 for a float32 computation): float32 tolerance.
            f32 = (c64.float().double() == c64) & (t64.float().double() == t64)
            tol = torch.where(f32, tol.clamp(min=TOL[torch.float32]), tol)
        fin = torch.isfinite(c64)
        scale = max(1.0, c64[fin].abs().max().item()) if bool(fin.any()) else 1.0
        same = (c64 == t64) | (c64.isnan() & t64.isnan())
        close = fin & ((c64 - t64).abs() <= tol * (c64.abs() + scale))
        bad = ~(same | close)
    if bool(bad.any()):
        i = tuple(bad.nonzero()[0].tolist())
        return "value", (f"{name}: {int(bad.sum())}/{c.numel()} values differ ({c.dtype}, shape "
                         f"{tuple(c.shape)}), first at {list(i)}: tpu {t[i].item()!r} vs CPU "
                         f"{c[i].item()!r}")
    return None


_NAME = re.compile(r"^v\d+$")
_REF = re.compile(r"\bv\d+\b")
# Steps whose result can jump when an input moves by an ulp (rounding, comparisons, indices).
_DISCONTINUOUS = re.compile(
    r"\b(floor|ceil|round|trunc|frac|sign|sgn|signbit|copysign|floor_divide|remainder|fmod|rounding_mode|"
    r"argmax|argmin|max|min|eq|ne|lt|le|gt|ge|isfinite|isnan|where|to|copy_)\b|\[|>")


def assigned_names(code):
    """Names a statement (re)defines: `v3 = ...`, `v3, v4 = ...`."""
    m = re.match(r"^\s*(v\d+(?:\s*,\s*v\d+)*)\s*=(?!=)", code)
    return set(re.findall(r"v\d+", m.group(1))) if m else set()


def written_names(code):
    """Names a statement writes through: out=vN, vN.op_(...), vN[...] = ..."""
    names = set(re.findall(r"\bout=(v\d+)", code))
    names |= set(re.findall(r"\b(v\d+)\.\w+_\(", code))
    names |= set(re.findall(r"^\s*(v\d+)\[", code))
    return names


def _inexact(c, t):
    """A float tensor whose CPU and tpu values differ at all (within tolerance, or it would have
    been reported already)."""
    if not (isinstance(c, torch.Tensor) and isinstance(t, torch.Tensor)) or \
            not c.dtype.is_floating_point or c.shape != t.shape or t.device.type != "tpu":
        return False
    t = t.cpu()
    # NaNs count as equal only with the same sign bit (XLA's 0/0 is -nan, glibc's often +nan)
    same_nan = c.isnan() & t.isnan() & (torch.signbit(c) == torch.signbit(t))
    return bool((~((c == t) | same_nan)).any())


def _aliases(ns, name):
    """Names of the tensors in |ns| that share storage with |name| (its views and bases)."""
    t = ns.get(name)
    if not isinstance(t, torch.Tensor):
        return {name}
    p = t.untyped_storage().data_ptr()
    return {n for n, v in ns.items() if _NAME.match(n) and isinstance(v, torch.Tensor)
            and v.untyped_storage().data_ptr() == p} | {name}


def run_program(steps, check="each", on_step=None):
    """Runs |steps| with dev="cpu" and dev="tpu" in lockstep. Returns None when they agree,
    else (step index, kind, message). |check|: "each" compares every live tensor after every
    step, "final" only after the last one (the device then runs ahead asynchronously)."""
    ns = {d: {"torch": torch, "make": make, "dev": d} for d in ("cpu", "tpu")}
    floor = 0.0
    # Tensors whose values legitimately differ: results of a step that jumps (rounding, a
    # comparison, an index) on float inputs that already differed within tolerance, and what is
    # computed from them. Only their dtype and shape are compared.
    tainted = set()
    for k, code in enumerate(steps):
        if on_step:
            on_step(k)
        errs = {}
        for d in ("cpu", "tpu"):
            try:
                exec(code, ns[d])
            except Exception as e:
                errs[d] = e
        ce, te = errs.get("cpu"), errs.get("tpu")
        if ce is not None and te is None:
            return k, "missing_error", f"CPU raised {describe(ce)}; tpu raised nothing"
        if te is not None and ce is None:
            return k, "unexpected_error", f"tpu raised {describe(te)}; CPU raised nothing"
        if ce is not None and not same_error(ce, te):
            return k, "error_type", f"CPU raised {describe(ce)}; tpu raised {describe(te)}"
        names = sorted((n for n in ns["cpu"] if _NAME.match(n)), key=lambda s: int(s[1:]))
        for n in names:
            for v in (ns["cpu"][n] if isinstance(ns["cpu"][n], tuple) else (ns["cpu"][n],)):
                if isinstance(v, torch.Tensor):
                    floor = max(floor, TOL.get(v.dtype, 0.0))
        made, written = assigned_names(code), written_names(code)
        inputs = set(_REF.findall(code)) - made
        if inputs & tainted:  # what the step computed from a tainted tensor is tainted too
            tainted |= made
            for n in written:
                tainted |= _aliases(ns["cpu"], n)
        # compare after every step ("each"), after the last, and after any step that raised
        touched = set(made)
        for w in written:
            touched |= _aliases(ns["cpu"], w)
        if check == "each" or k == len(steps) - 1 or ce is not None:
            for n in names:
                r = compare(n, ns["cpu"][n], ns["tpu"].get(n), floor, values=n not in tainted)
                if r and r[0] == "value" and ce is None and n in touched and \
                        _DISCONTINUOUS.search(code) and \
                        any(_inexact(ns["cpu"].get(u), ns["tpu"].get(u)) for u in inputs):
                    # e.g. erf(4.0) is 1.0 on CPU, 0.99999994 on tpu (within tolerance), so
                    # `erf(x) >= 1` differs: not a finding, but nothing built on it can be compared
                    tainted |= touched | _aliases(ns["cpu"], n)
                    continue
                if r and ce is not None:
                    # Both raised, but the tpu changed a tensor first (the CPU had not: the
                    # generator keeps only failing steps that leave the CPU's tensors alone).
                    return (k, "state_after_error",
                            f"{r[1]} -- after both raised {describe(ce)}")
                if r:
                    return (k,) + tuple(r)
    return None
'''

_harness = {}
exec(compile(HARNESS_SRC, "<tools/fuzz.py harness>", "exec"), _harness)
make = _harness["make"]
run_program = _harness["run_program"]
written_names = _harness["written_names"]

REPRO_MAIN = r'''

if __name__ == "__main__":
    r = run_program(STEPS, CHECK)
    if r is None:
        print("OK: CPU and tpu agree (the finding no longer reproduces)")
        sys.exit(0)
    k, kind, msg = r
    print(f"MISMATCH at step {k}: {STEPS[k]}\n  {kind}: {msg}")
    sys.exit(1)
'''

# ---------------------------------------------------------------------------------------------
# Program generation. Steps are run on CPU as they are generated, so each generator knows the
# shapes and dtypes it works with; a step that raises on CPU is kept now and then (the tpu must
# raise too), otherwise another is drawn.
# ---------------------------------------------------------------------------------------------

DTYPES = [torch.float32, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.uint8,
          torch.bool]
DTYPE_W = [5, 3, 2, 3, 2, 1, 1]
DIMS = [0, 1, 1, 2, 2, 3, 3, 4, 5]
_DT_NAME = {d: "torch." + str(d).split(".")[1] for d in DTYPES}

UNARY = ["abs", "neg", "exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "floor", "ceil",
         "round", "trunc", "reciprocal", "rsqrt", "relu", "sign", "logical_not", "bitwise_not",
         "square", "frac", "expm1", "log1p", "isnan", "isfinite", "erf", "sgn", "signbit"]
# Ops whose integer forms fail on a zero divisor, a value-dependent error the device cannot
# reproduce without a sync; they only get floating operands or a non-zero scalar divisor.
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "pow", "atan2", "fmod", "remainder",
          "bitwise_and", "bitwise_or", "bitwise_xor", "logical_and", "logical_or", "logical_xor",
          "hypot", "copysign", "fmax", "fmin", "floor_divide", "xlogy"]
_INT_DIV = {"fmod", "remainder", "floor_divide"}
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]
SCALARS = [2, -1, 0, 3, 1, 0.5, -2.5, 1.5, True, False, 7]


def _is_float(t):
    return t.dtype.is_floating_point


def _writable(t):
    """A target for in-place/out= writes: not one whose elements overlap in a way PyTorch cannot
    detect (unfold windows), where the CPU's result depends on its loop order (undefined)."""
    return torch._debug_has_internal_overlap(t) != 2


def _dt(t):
    return _DT_NAME.get(t.dtype, str(t.dtype))


class _Gen:
    def __init__(self, rng):
        self.rng = rng
        self.env = {}       # name -> CPU tensor (current value)
        self.views = set()  # names made by view ops
        self.steps = []
        self.n = 0

    # -- values --
    def fresh(self):
        self.n += 1
        return f"v{self.n - 1}"

    def rand_shape(self, rank=None):
        r = self.rng
        if rank is None:
            rank = r.choices([0, 1, 2, 3, 4], [1, 3, 4, 3, 1])[0]
        return [r.choice(DIMS) for _ in range(rank)]

    def rand_dtype(self):
        return self.rng.choices(DTYPES, DTYPE_W)[0]

    def add_input(self, shape=None, dtype=None):
        r = self.rng
        shape = self.rand_shape() if shape is None else list(shape)
        dtype = self.rand_dtype() if dtype is None else dtype
        special = dtype.is_floating_point and r.random() < 0.08
        name = self.fresh()
        code = make_code(name, shape, dtype, r.randrange(1 << 20), special)
        ns = {"torch": torch, "make": make, "dev": "cpu"}
        exec(code, ns)
        self.env[name] = ns[name]
        self.steps.append(code)
        return name

    def pick(self, pred=None, prefer_views=False):
        names = [n for n, t in self.env.items() if isinstance(t, torch.Tensor)
                 and (pred is None or pred(t))]
        if not names:
            return None
        if prefer_views:
            v = [n for n in names if n in self.views]
            if v and self.rng.random() < 0.6:
                return self.rng.choice(v)
        if self.rng.random() < 0.5:
            return self.rng.choice(names[-3:])  # favour recent values: chains of ops
        return self.rng.choice(names)

    def pick_or_make(self, pred=None, **kw):
        name = self.pick(pred, **kw)
        return name if name is not None else self.add_input()

    def operand_and_out(self):
        """An operand's name and CPU value (picked or made), then a fresh name for the result."""
        a = self.pick_or_make()
        return a, self.env[a], self.fresh()

    def partner(self, a, allow_scalar=True):
        """A second operand for |a|: a broadcast-compatible tensor (usually), a fresh input of a
        compatible shape, a Python scalar, or a 0-dim CPU tensor."""
        r = self.rng
        x = r.random()
        if allow_scalar and x < 0.25:
            return repr(r.choice(SCALARS))
        if allow_scalar and x < 0.29:
            return f"torch.tensor({r.choice(SCALARS)!r})"  # a CPU scalar tensor
        sa = self.env[a].shape

        def ok(t):
            try:
                torch.broadcast_shapes(sa, t.shape)
                return True
            except RuntimeError:
                return False
        if r.random() < 0.9:
            b = self.pick(ok)
            if b is not None and (b != a or r.random() < 0.3):
                return b
            shape = [d if r.random() < 0.7 else 1 for d in sa][r.randrange(len(sa) + 1):]
            if r.random() < 0.2:
                shape = [r.choice([1, 2])] + shape
            return self.add_input(shape)
        return self.add_input()

    def dims(self, t, allow_many=True):
        nd = max(t.dim(), 1)
        r = self.rng
        if r.random() < 0.03:
            return [nd + 1]  # out of range
        if not allow_many:
            d = r.randrange(nd)
            return [d - nd if r.random() < 0.3 else d]
        k = r.randrange(0, nd + 1) if r.random() < 0.9 else 0
        ds = sorted(r.sample(range(nd), k))
        return [d - nd if r.random() < 0.2 else d for d in ds]

    # -- step generators: each returns (code, made_a_view) or None --
    def g_unary(self):
        a = self.pick_or_make()
        fn = self.rng.choice(UNARY)
        if self.rng.random() < 0.1:  # out= variant
            return f"torch.{fn}({a}, out={self.pick_or_make(_writable, prefer_views=True)})", False
        o = self.fresh()
        return f"{o} = torch.{fn}({a})", False

    def g_binary(self):
        r = self.rng
        a = self.pick_or_make()
        fn = r.choice(BINARY)
        ta = self.env[a]
        if fn in _INT_DIV or fn == "div":
            mode = r.choice([None, None, "trunc", "floor"]) if fn == "div" else None
            b = self.partner(a)
            tb = self.env.get(b)
            int_result = not _is_float(ta) and (tb is None or not _is_float(tb))
            if int_result and (fn != "div" or mode):
                if tb is not None or b in ("0", "False") or b.startswith("torch.tensor"):
                    b = r.choice(["2", "-3", "7"])  # integer division: non-zero scalar divisor
            extra = f", rounding_mode={mode!r}" if mode else ""
            o = self.fresh()
            return f"{o} = torch.{fn}({a}, {b}{extra})", False
        if fn == "pow":
            if r.random() < 0.5 or not _is_float(ta):
                b = r.choice(["2", "3", "0", "0.5", "-1", "2.5", "-1.0"])
            else:
                b = self.partner(a, allow_scalar=False)
            o = self.fresh()
            return f"{o} = torch.pow({a}, {b})", False
        b = self.partner(a)
        if r.random() < 0.1:  # out= variant, often into a view or a tensor of another shape/dtype
            out = self.pick_or_make(_writable, prefer_views=True)
            return f"torch.{fn}({a}, {b}, out={out})", False
        o = self.fresh()
        if fn in ("add", "sub") and r.random() < 0.3:
            return f"{o} = torch.{fn}({a}, {b}, alpha={r.choice([2, -1, 0.5])!r})", False
        if fn in ("add", "sub", "mul") and r.random() < 0.2 and b not in self.env:
            op = {"add": "+", "sub": "-", "mul": "*"}[fn]
            return f"{o} = {b} {op} {a}", False  # scalar on the left (radd/rsub/rmul)
        return f"{o} = torch.{fn}({a}, {b})", False

    def g_compare(self):
        a = self.pick_or_make()
        b = self.partner(a)
        o = self.fresh()
        return f"{o} = torch.{self.rng.choice(COMPARE)}({a}, {b})", False

    def g_where(self):
        r = self.rng
        c = self.pick(lambda t: t.dtype == torch.bool)
        if c is None or r.random() < 0.3:
            c = f"({self.pick_or_make()} > 0)"
            cshape = None
        else:
            cshape = self.env[c].shape
        a = self.pick_or_make()
        if cshape is not None:
            try:
                torch.broadcast_shapes(cshape, self.env[a].shape)
            except RuntimeError:
                if r.random() < 0.8:
                    a = self.add_input(list(cshape))
        b = self.partner(a, allow_scalar=True)
        if r.random() < 0.2:
            a = repr(r.choice(SCALARS[:8]))
        o = self.fresh()
        return f"{o} = torch.where({c}, {a}, {b})", False

    def g_clamp(self):
        r = self.rng
        a, _, o = self.operand_and_out()
        x = r.random()
        lo, hi = sorted([r.choice([-3, -1, 0, 0.5, 1, 2.5]), r.choice([-2, 0, 1, 1.5, 3])])
        if r.random() < 0.1:
            lo, hi = hi, lo  # min > max: everything becomes max
        if x < 0.5:
            return f"{o} = torch.clamp({a}, min={lo!r}, max={hi!r})", False
        if x < 0.65:
            return f"{o} = torch.clamp({a}, min={lo!r})", False
        if x < 0.75:
            return f"{o} = torch.clamp_max({a}, {hi!r})", False
        if x < 0.78:
            return f"{o} = torch.clamp({a})", False  # error: no bound
        b = self.partner(a, allow_scalar=False)
        return f"{o} = torch.clamp({a}, min={b})", False

    def g_reduce(self):
        r = self.rng
        a, t, o = self.operand_and_out()
        kd = r.choice([True, False])
        fn = r.choice(["sum", "sum", "mean", "amax", "amin", "argmax", "argmin", "prod", "max_dim",
                       "any", "all", "logsumexp", "var", "std", "sum_dtype", "mean_dtype"])
        if fn in ("argmax", "argmin"):
            if r.random() < 0.3:
                return f"{o} = torch.{fn}({a})", False
            return f"{o} = torch.{fn}({a}, dim={self.dims(t, False)[0]}, keepdim={kd})", False
        if fn == "max_dim":
            o2 = self.fresh()
            fn2 = r.choice(["max", "min"])
            return f"{o}, {o2} = torch.{fn2}({a}, dim={self.dims(t, False)[0]}, keepdim={kd})", False
        if fn == "prod":
            if r.random() < 0.4:
                return f"{o} = torch.prod({a})", False
            return f"{o} = torch.prod({a}, dim={self.dims(t, False)[0]}, keepdim={kd})", False
        if fn in ("any", "all"):
            if r.random() < 0.3:
                return f"{o} = torch.{fn}({a})", False
            return f"{o} = torch.{fn}({a}, dim={self.dims(t, False)[0]}, keepdim={kd})", False
        if fn in ("var", "std"):
            return (f"{o} = torch.{fn}({a}, dim={self.dims(t)}, correction={r.choice([0, 1])}, "
                    f"keepdim={kd})"), False
        if fn in ("sum_dtype", "mean_dtype"):
            dts = ["torch.float64", "torch.float32", "torch.bfloat16"]
            if not _is_float(t):  # a float -> integer accumulation of inf/nan is undefined in C
                dts.append("torch.int64")
            dt = r.choice(dts)
            return f"{o} = torch.{fn[:-6]}({a}, dim={self.dims(t)}, keepdim={kd}, dtype={dt})", False
        if fn == "sum" and r.random() < 0.25:
            return f"{o} = torch.sum({a})", False
        dims = self.dims(t)
        if fn == "logsumexp" and not dims:
            # CPU's own logsumexp(dim=[]) raises on a 1-element input ("output with shape []
            # doesn't match the broadcast shape [1]"): a CPU quirk, not worth finding again.
            dims = [0]
        return f"{o} = torch.{fn}({a}, dim={dims}, keepdim={kd})", False

    def g_matmul(self):
        r = self.rng
        a = self.pick(lambda t: t.dim() == 2 and t.dtype != torch.bool)
        if a is None or r.random() < 0.3:
            a = self.add_input(self.rand_shape(2), r.choice(DTYPES[:5]))
        n, k = self.env[a].shape
        dt = self.env[a].dtype
        b = self.pick(lambda t: t.dim() == 2 and t.shape[0] == k and t.dtype == dt)
        if b is None or r.random() < 0.3:
            bdt = dt if r.random() < 0.9 else self.rand_dtype()
            bk = k if r.random() < 0.95 else k + 1
            b = self.add_input([bk, r.choice(DIMS)], bdt)
        m = self.env[b].shape[1]
        o = self.fresh()
        if r.random() < 0.6:
            return f"{o} = torch.mm({a}, {b})", False
        bias = self.add_input(r.choice([[n, m], [m], [1, m], [n, 1], []]), dt)
        if dt.is_floating_point:
            beta, alpha = r.choice([1, 0.5, 0]), r.choice([1, 2.0, -1])
        else:
            beta, alpha = r.choice([1, 0, 2]), r.choice([1, 2, -1])
        return f"{o} = torch.addmm({bias}, {a}, {b}, beta={beta!r}, alpha={alpha!r})", False

    def _target_shape(self, numel):
        r = self.rng
        if numel == 0:
            s = self.rand_shape(r.randint(1, 3))
            s[r.randrange(len(s))] = 0
            return s
        dims, left = [], numel
        for _ in range(r.randint(0, 3)):
            divs = [d for d in range(1, left + 1) if left % d == 0]
            d = r.choice(divs)
            dims.append(d)
            left //= d
        dims.append(left)
        r.shuffle(dims)
        if r.random() < 0.3:
            dims[r.randrange(len(dims))] = -1
        return dims

    def g_view(self):
        r = self.rng
        a, t, o = self.operand_and_out()
        nd = t.dim()
        kind = r.choice(["transpose", "permute", "slice", "narrow", "expand", "unsqueeze",
                         "reshape", "view", "squeeze", "flatten", "select", "t", "unfold",
                         "diagonal", "slice"])
        d = r.randrange(nd) if nd else 0
        if kind == "transpose":
            d1 = r.randrange(nd) if nd else 0
            return f"{o} = {a}.transpose({d}, {d1})", True
        if kind == "permute":
            p = list(range(nd))
            r.shuffle(p)
            return f"{o} = {a}.permute({p})", True
        if kind == "slice" and nd:
            size = t.shape[d]
            start = r.randint(0, size) if r.random() < 0.8 else -r.randint(1, size + 1)
            stop = r.choice([None, r.randint(0, size + 1)])
            step = r.choice([1, 2, 2, 3])
            sl = f"{start}:{'' if stop is None else stop}:{step}"
            idx = ", ".join([":"] * d + [sl])
            return f"{o} = {a}[{idx}]", True
        if kind == "narrow" and nd:
            size = t.shape[d]
            start = r.randint(0, size)
            length = r.randint(0, size - start) if r.random() < 0.95 else size + 1
            return f"{o} = {a}.narrow({d}, {start}, {length})", True
        if kind == "expand":
            shape = [s if s != 1 or r.random() < 0.3 else r.choice([0, 2, 3]) for s in t.shape]
            if r.random() < 0.5:
                shape = [r.choice([1, 2, 3])] + shape
            if shape and r.random() < 0.3:
                i = r.randrange(len(shape))
                if i >= len(shape) - nd:
                    shape[i] = -1
            return f"{o} = {a}.expand({shape})", True
        if kind == "unsqueeze":
            return f"{o} = {a}.unsqueeze({r.randint(-nd - 1, nd)})", True
        if kind in ("reshape", "view"):
            return f"{o} = {a}.{kind}({self._target_shape(t.numel())})", True
        if kind == "squeeze":
            return (f"{o} = {a}.squeeze({d})" if r.random() < 0.7 else f"{o} = {a}.squeeze()"), True
        if kind == "flatten":
            return f"{o} = {a}.flatten({r.randint(0, max(nd - 1, 0))})", True
        if kind == "select" and nd:
            size = t.shape[d]
            i = r.randint(-size, size - 1) if size and r.random() < 0.95 else size
            return f"{o} = {a}.select({d}, {i})", True
        if kind == "t" and nd <= 2:
            return f"{o} = {a}.t()", True
        if kind == "unfold" and nd:
            size = t.shape[d]
            return f"{o} = {a}.unfold({d}, {r.randint(0, size)}, {r.randint(1, 2)})", True
        if kind == "diagonal" and nd >= 2:
            return f"{o} = {a}.diagonal({r.randint(-1, 1)}, 0, 1)", True
        return f"{o} = {a}.unsqueeze(0)", True

    def g_inplace(self):
        r = self.rng
        a = self.pick_or_make(_writable, prefer_views=True)
        t = self.env[a]
        fn = r.choice(["add_", "sub_", "mul_", "div_", "fill_", "zero_", "clamp_", "copy_",
                       "copy_", "neg_", "abs_", "setitem", "relu_", "floor_"])
        if fn == "zero_" or fn in ("neg_", "abs_", "relu_", "floor_"):
            return f"{a}.{fn}()", False
        if fn == "fill_":
            v = r.choice(SCALARS)
            if r.random() < 0.2:
                return f"{a}.fill_(torch.tensor({v!r}))", False
            return f"{a}.fill_({v!r})", False
        if fn == "clamp_":
            lo, hi = sorted([r.choice([-2, 0, 1, 0.5]), r.choice([0, 1, 3, 2.5])])
            return f"{a}.clamp_({lo!r}, {hi!r})", False
        if fn == "setitem" and t.dim():
            d = r.randrange(t.dim())
            size = t.shape[d]
            start = r.randint(0, size)
            idx = ", ".join([":"] * d + [f"{start}::{r.choice([1, 2])}"])
            if r.random() < 0.5:
                return f"{a}[{idx}] = {r.choice(SCALARS)!r}", False
            return f"{a}[{idx}] = {self.guard(self.partner(a, allow_scalar=False), t.dtype)}", False
        if fn == "copy_":
            return f"{a}.copy_({self.converted_source(a)})", False
        b = self.partner(a)
        if fn == "div_" and not _is_float(t):
            b = r.choice(["2", "2.5"])
        if fn in ("add_", "sub_") and r.random() < 0.2:
            return f"{a}.{fn}({b}, alpha={r.choice([2, -1])})", False
        return f"{a}.{fn}({b})", False

    def converted_source(self, dst):
        """An operand broadcastable to |dst|, wrapped so that a float -> integer conversion only
        sees finite, representable values (anything else is undefined behaviour in C)."""
        r = self.rng
        td = self.env[dst]

        def ok(t):
            try:
                return torch.broadcast_shapes(t.shape, td.shape) == td.shape
            except RuntimeError:
                return False
        s = self.pick(ok) if r.random() < 0.7 else None
        if s is None or s == dst:
            shape = [d if r.random() < 0.7 else 1 for d in td.shape][r.randrange(td.dim() + 1):]
            s = self.add_input(shape)
        return self.guard(s, td.dtype)

    def guard(self, src, dtype):
        ts = self.env[src]
        if ts.dtype.is_floating_point and not dtype.is_floating_point and dtype != torch.bool:
            lo, hi = (0, 200) if dtype == torch.uint8 else (-100, 100)
            return f"torch.nan_to_num({src}, 0.0, 0.0, 0.0).clamp({lo}, {hi})"
        return src

    def g_convert(self):
        r = self.rng
        a, t, o = self.operand_and_out()
        dt = self.rand_dtype()
        x = r.random()
        if x < 0.45:
            return f"{o} = {self.guard(a, dt)}.to({_DT_NAME[dt]})", False
        if x < 0.55:
            return f"{o} = {a}.{r.choice(['contiguous', 'clone'])}()", False
        shape = list(t.shape)
        if r.random() < 0.3:
            shape = [r.choice([1, 2])] + shape
        return (f"{o} = torch.zeros({shape}, dtype={_DT_NAME[dt]}, device=dev); "
                f"{o}.copy_({self.guard(a, dt)})"), False

    def g_cat(self):
        r = self.rng
        a, t, o = self.operand_and_out()
        if t.dim() == 0:
            return f"{o} = torch.cat([{a}, {a}])", False  # error: zero-dim
        d = r.randrange(t.dim())
        parts = [a]
        for _ in range(r.randint(1, 2)):
            def ok(u):
                return (u.dim() == t.dim() and all(u.shape[i] == t.shape[i]
                                                   for i in range(t.dim()) if i != d))
            b = self.pick(ok) if r.random() < 0.5 else None
            if b is None:
                shape = list(t.shape)
                shape[d] = r.choice(DIMS)
                dt = t.dtype if r.random() < 0.7 else self.rand_dtype()
                b = self.add_input(shape, dt)
            parts.append(b)
        if r.random() < 0.1:
            parts.insert(r.randrange(len(parts) + 1),
                         f"torch.zeros(0, dtype={_dt(t)}, device=dev)")  # legacy empty 1-D
        r.shuffle(parts)
        fn = "stack" if r.random() < 0.15 else "cat"
        dim = d - t.dim() if r.random() < 0.2 else d
        return f"{o} = torch.{fn}([{', '.join(parts)}], dim={dim})", False

    def g_ctor(self):
        r = self.rng
        a, _, o = self.operand_and_out()
        x = r.random()
        if x < 0.4:
            return f"{o} = torch.full_like({a}, {r.choice(SCALARS)!r})", False
        if x < 0.7:
            return f"{o} = torch.{r.choice(['zeros_like', 'ones_like'])}({a})", False
        shape = self.rand_shape()
        return f"{o} = torch.ones({shape}, dtype={_DT_NAME[self.rand_dtype()]}, device=dev)", False

    GENS = [("g_unary", 10), ("g_binary", 16), ("g_compare", 6), ("g_where", 5), ("g_clamp", 5),
            ("g_reduce", 12), ("g_matmul", 5), ("g_view", 16), ("g_inplace", 16),
            ("g_convert", 7), ("g_cat", 5), ("g_ctor", 2)]

    def try_step(self, code, is_view, keep_error_p):
        """Runs |code| on the CPU env; keeps it when it works (or, rarely, when it raises)."""
        ns = {"torch": torch, "make": make, "dev": "cpu", **self.env}
        before = set(ns)
        targets = written_names(code)
        saved = {n: self.env[n].clone() for n in targets if n in self.env}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exec(code, ns)
        except Exception:
            if self.rng.random() >= keep_error_p:
                return False
            # PyTorch does not promise what a failed in-place/out= op leaves behind (CPU resizes
            # an out= tensor before finding the dtype unsupported): keep only clean failures.
            for n, old in saved.items():
                now = self.env[n]
                if now.shape != old.shape or not torch.equal(now.isnan(), old.isnan()) or \
                        not torch.equal(torch.nan_to_num(now), torch.nan_to_num(old)):
                    return False
            self.steps.append(code)
            return True
        for n in set(ns) - before:
            if re.match(r"^v\d+$", n):
                self.env[n] = ns[n]
                if is_view:
                    self.views.add(n)
        self.steps.append(code)
        return True


def make_code(name, shape, dtype, seed, special=False):
    sp = ", special=True" if special else ""
    return f"{name} = make({tuple(shape)!r}, {_DT_NAME[dtype]}, {seed}{sp}).to(dev)"


def generate(seed, index):
    """Program |index| of |seed|: {"steps": [...], "check": "each" | "final"}."""
    # The seed string still names the package module this was: kept, so program i of seed S is
    # the program that earlier findings and tests name.
    rng = random.Random(f"torch_pjrt.fuzz/{seed}/{index}")
    g = _Gen(rng)
    for _ in range(rng.randint(1, 3)):
        g.add_input()
    n_ops = rng.randint(3, 8)
    names, weights = zip(*_Gen.GENS)
    ops = tries = 0
    while ops < n_ops and tries < 200:
        tries += 1
        snapshot = (len(g.steps), g.n, dict(g.env))
        try:
            code, is_view = getattr(g, rng.choices(names, weights)[0])()
        except Exception:  # a generator that could not build a step here: draw again
            code = None
        if code is not None and g.try_step(code, is_view, keep_error_p=0.2):
            ops += 1
        else:  # drop the inputs made for a rejected step
            del g.steps[snapshot[0]:]
            g.n, g.env = snapshot[1], snapshot[2]
    return {"steps": g.steps, "check": "final" if rng.random() < 0.25 else "each"}


# ---------------------------------------------------------------------------------------------
# The worker: a child process that runs programs sent as JSON lines on stdin.
# ---------------------------------------------------------------------------------------------

def _worker_main():
    emit = _child.protocol()
    import faulthandler
    import signal
    import torch_pjrt  # noqa: F401  (already loaded by `import torch`; be explicit)
    faulthandler.enable(all_threads=True)  # a segfault prints the Python stack (the step)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the parent's hang report
    warnings.simplefilter("ignore")
    ok = torch.tpu.is_available()
    emit(ready=bool(ok), error=torch_pjrt.init_error())
    if not ok:
        return 2

    def on_step(k):  # so that a crash report can name the statement
        sys.stderr.write(f"@@fuzz-step {k}\n")
        sys.stderr.flush()
    for line in sys.stdin:
        prog = json.loads(line)
        try:
            r = run_program(prog["steps"], prog.get("check", "each"), on_step)
            out = {"status": "ok"} if r is None else {
                "status": "fail", "step": r[0], "kind": r[1], "detail": r[2]}
        except BaseException as e:  # a bug in the harness itself, not in the backend
            out = {"status": "harness_error", "detail": f"{type(e).__name__}: {e}"}
        emit(**out)
    return 0


class Worker:
    """A `--worker` child; run() gives each program |timeout| seconds."""

    def __init__(self, timeout=30.0, start_timeout=180.0):
        self.timeout, self.start_timeout = timeout, start_timeout
        self.diagnose = True  # on a hang, collect stacks before killing the worker
        self.child = None
        fd, self.log_path = tempfile.mkstemp(prefix="torch_pjrt_fuzz_", suffix=".log")
        os.close(fd)

    def _env(self):
        env = dict(os.environ)
        env["TORCH_PJRT_QUIET_FALLBACK"] = "1"
        env.pop("TORCH_PJRT_STRICT", None)
        env.setdefault("TORCH_PJRT_CACHE_DIR", "0")  # do not fill the user's on-disk cache
        env["PYTHONWARNINGS"] = "ignore"
        return env

    def start(self):
        for attempt in range(3):
            with open(self.log_path, "ab") as log:  # O_APPEND: the child never overwrites
                self.child = _child.Child("fuzz.py", "--worker", env=self._env(), stderr=log)
            msg = self._read(self.start_timeout)
            if msg is not None:
                if msg.get("ready"):
                    return
                raise RuntimeError(f"fuzz worker: the tpu device is unavailable: {msg}")
            # e.g. the extension being rebuilt under us: wait and retry
            self.kill()
            if attempt < 2:
                time.sleep(30)
        raise RuntimeError("fuzz worker failed to start:\n" + self.log_tail(0))

    def __del__(self):
        try:
            os.unlink(self.log_path)
        except (OSError, AttributeError):
            pass

    def _read(self, timeout):
        """The worker's next message, or None when it died or did not answer in time."""
        try:
            return self.child.read(timeout, gone=self.child.main_thread_dead)
        except _child.Late:
            return None

    def last_step(self, since):
        with open(self.log_path, "rb") as fh:
            fh.seek(since)
            steps = re.findall(rb"@@fuzz-step (\d+)", fh.read())
        return int(steps[-1]) if steps else None

    def log_tail(self, since, n=3000):
        with open(self.log_path, "rb") as fh:
            fh.seek(since)
            text = fh.read().decode(errors="replace")
        lines = [l for l in text.splitlines() if "absl::InitializeLog" not in l
                 and "cpu_device_count set" not in l and not l.startswith("@@fuzz-step")]
        return "\n".join(lines)[-n:]

    def run(self, program):
        if self.child is None or not self.child.running():
            self.start()
        since = os.path.getsize(self.log_path)
        self.child.send(program)
        msg = self._read(self.timeout)
        if msg is not None:
            return msg
        step = self.last_step(since)
        if self.child.running() and self.child.main_thread_dead():
            self.kill()
            return {"status": "crash", "log": self.log_tail(since), "at": step,
                    "detail": "worker died (its main thread exited, another thread lingered)"}
        if self.child.running():
            stacks = self.stacks() if self.diagnose else ""
            self.kill()
            return {"status": "hang", "detail": f"no answer within {self.timeout:.0f} s", "at": step,
                    "log": self.log_tail(since, 20000), "stacks": stacks}
        rc = self.child.wait()
        self.child = None
        what = f"signal {-rc}" if rc < 0 else f"exit status {rc}"
        return {"status": "crash", "detail": f"worker died ({what})", "log": self.log_tail(since),
                "at": step}

    def stacks(self):
        """Python (faulthandler, into the log) and native (gdb, returned) stacks of a hung worker."""
        import shutil
        import signal
        try:
            os.kill(self.child.pid, signal.SIGUSR1)
            time.sleep(1.0)
        except OSError:
            pass
        if not shutil.which("gdb"):
            return ""
        try:
            p = subprocess.run(["gdb", "-p", str(self.child.pid), "-batch", "-nx",
                                "-ex", "thread apply all bt 30"],
                               capture_output=True, text=True, timeout=120)
            return "\n".join(l for l in p.stdout.splitlines()
                             if l.startswith(("#", "Thread")))[-30000:]
        except Exception as e:
            return f"(gdb failed: {e})"

    def kill(self):
        if self.child is not None:
            self.child.kill()
            self.child = None

    def close(self):
        if self.child is not None and self.child.running():
            self.child.finish(10)
        self.kill()


# ---------------------------------------------------------------------------------------------
# Minimisation and reproducers.
# ---------------------------------------------------------------------------------------------

_ASSIGN = re.compile(r"^\s*(v\d+(?:\s*,\s*v\d+)*)\s*=(?!=)")
_MAKE = re.compile(r"make\((\(.*?\)), (torch\.\w+), (\d+)((?:, special=True)?)\)")


def step_outs(code):
    m = _ASSIGN.match(code)
    return set(re.findall(r"v\d+", m.group(1))) if m else set()


def step_uses(code):
    return set(re.findall(r"\bv\d+\b", code)) - step_outs(code)


def step_label(code):
    rhs = code.split("=", 1)[1] if _ASSIGN.match(code) else code
    m = re.search(r"torch\.(\w+)\(|\.(\w+)\(", rhs)
    if "make(" in rhs:
        return "make"
    if re.match(r"^\s*v\d+\[", code):
        return "setitem"
    if re.match(r"^\s*v\d+\[", rhs.strip()):
        return "slice"
    if m:
        return m.group(1) or m.group(2)
    m = re.search(r"[-+*/]", rhs)
    return {"+": "radd", "-": "rsub", "*": "rmul", "/": "rdiv"}.get(m.group(0) if m else "", "op")


def drop_step(steps, i):
    """|steps| without step i and everything that (transitively) reads what it defined."""
    gone = set(step_outs(steps[i]))
    out = []
    for k, s in enumerate(steps):
        if k == i:
            continue
        if step_uses(s) & gone:
            gone |= step_outs(s)
            continue
        out.append(s)
    return out


def signature(result, program):
    """What a minimisation must preserve: the failure kind at the very same statement."""
    st = result["status"]
    if st in ("crash", "hang"):
        at = result.get("at")
        return (st,) if at is None else (st, program["steps"][at])
    if st == "harness_error":
        return (st,)
    return (st, result["kind"], program["steps"][result["step"]])


def dedup_key(result, program):
    """Findings with the same key are counted as one: value/dtype/shape mismatches by the op of
    the failing statement, exception mismatches by their message with op names, variable names
    and numbers blanked out (so argmax/amax/max.dim hitting one check count once)."""
    st = result["status"]
    if st in ("crash", "hang"):
        at = result.get("at")
        return (st,) if at is None else (st, step_label(program["steps"][at]))
    if st == "harness_error":
        return (st,)
    kind = result["kind"]
    if kind in ("missing_error", "unexpected_error", "error_type", "readback_error"):
        msg = re.sub(r"[\w.]+\(\)|\bv\d+\b|\d+", "#", result["detail"])
        return (st, kind, msg[:120])
    return (st, kind, step_label(program["steps"][result["step"]]))


def cpu_values(steps):
    """{name: (shape, dtype)} of every tensor the steps define, run on CPU."""
    ns = {"torch": torch, "make": make, "dev": "cpu"}
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for code in steps:
            try:
                exec(code, ns)
            except Exception:
                continue
            for n in step_outs(code):
                t = ns.get(n)
                if isinstance(t, torch.Tensor) and t.dtype in _DT_NAME:
                    out[n] = (list(t.shape), t.dtype)
    return out


def minimize(worker, program, result, budget_s=60.0, log=None):
    """Greedy delta-debugging: drop steps, then shrink input shapes, while the same failure
    (same kind at the same statement, or any crash / any hang) persists."""
    deadline = time.monotonic() + budget_s
    if program.get("check") == "final" and result["status"] == "fail":
        each = dict(program, check="each")
        r = worker.run(each)
        if r["status"] == "fail" and r["kind"] == result["kind"]:
            program, result = each, r  # the same failure, pinned to the step that caused it
    sig = signature(result, program)
    evals = [0]
    worker.diagnose = False

    def interesting(steps):
        if time.monotonic() > deadline:
            return None
        evals[0] += 1
        cand = dict(program, steps=steps)
        r = worker.run(cand)
        if r["status"] in ("ok", "harness_error"):
            return False
        if sig[0] in ("crash", "hang"):
            return r["status"] == sig[0] and signature(r, cand) == sig and r
        return r["status"] == "fail" and signature(r, cand) == sig and r

    steps = list(program["steps"])
    best = result
    k = result.get("step", result.get("at"))
    if k is not None:
        cand = steps[: k + 1]
        if len(cand) < len(steps):
            r = interesting(cand)
            if r:
                steps, best = cand, r
    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        i = len(steps) - 1
        while i >= 0 and time.monotonic() < deadline:
            if steps[i] == sig[-1]:
                i -= 1
                continue
            cand = drop_step(steps, i)
            r = interesting(cand)
            if r:
                steps, best, changed = cand, r, True
                i = min(i, len(steps)) - 1
            else:
                i -= 1
        # Replace an intermediate by a fresh input of its shape and dtype (cuts chains).
        i = len(steps) - 1
        while i >= 0 and time.monotonic() < deadline:
            outs = sorted(step_outs(steps[i]))
            if not outs or "make(" in steps[i] or steps[i] == sig[-1]:
                i -= 1
                continue
            vals = cpu_values(steps[: i + 1])
            if not all(n in vals for n in outs):
                i -= 1
                continue
            code = "; ".join(make_code(n, vals[n][0], vals[n][1], 1000 + int(n[1:]))
                             for n in outs)
            cand = steps[:i] + [code] + steps[i + 1:]
            r = interesting(cand)
            if r:
                steps, best, changed = cand, r, True
            i -= 1
        if changed:
            continue
        for i, s in enumerate(steps):
            m = _MAKE.search(s)
            if not m:
                continue
            shape = list(ast.literal_eval(m.group(1)))
            cands = []
            for d in range(len(shape)):
                if shape[d] > 1:
                    cands += [shape[:d] + [1] + shape[d + 1:], shape[:d] + [shape[d] - 1] + shape[d + 1:]]
            if shape:
                cands.append(shape[1:])
            if m.group(4):
                cands.append(None)  # try without the special values
            for new in cands:
                if new is None:
                    code = s[:m.start()] + m.group(0).replace(", special=True", "") + s[m.end():]
                else:
                    code = s[:m.start()] + f"make({tuple(new)!r}, {m.group(2)}, {m.group(3)}{m.group(4)})" + s[m.end():]
                cand = steps[:i] + [code] + steps[i + 1:]
                r = interesting(cand)
                if r:
                    steps, best, changed = cand, r, True
                    break
            if changed:
                break
    worker.diagnose = True
    if log:
        log(f"    minimised to {len(steps)} steps in {evals[0]} runs")
    return dict(program, steps=steps), best


def repro_text(program, result, header):
    steps = ",\n".join("    " + repr(s) for s in program["steps"])
    what = result.get("detail", "")
    at = ""
    k = result.get("step", result.get("at"))
    if k is not None:
        at = f" at step {k}: {program['steps'][k]}"
    doc = (f'"""torch_pjrt fuzz finding: {result["status"]}'
           f'{" (" + result["kind"] + ")" if "kind" in result else ""}{at}\n'
           f"{what}\n\n{header}\n"
           "Run with the project's Python (.venv/bin/python FILE); it exits with status 1 (or\n"
           'crashes / hangs) while the problem persists, 0 once it is fixed.\n"""\n')
    return (doc + HARNESS_SRC.lstrip("\n")
            + f"\n\nCHECK = {program.get('check', 'each')!r}\nSTEPS = [\n{steps},\n]\n"
            + REPRO_MAIN)


# ---------------------------------------------------------------------------------------------
# Driver.
# ---------------------------------------------------------------------------------------------

def _statement(program, result):
    k = result.get("step", result.get("at"))
    return program["steps"][k] if k is not None else None


def run_fuzz(seed=0, programs=300, time_limit=120.0, out_dir="fuzz-findings", timeout=30.0,
             minimize_budget=60.0, max_minimize=12, only=None, log=print):
    """Runs the fuzzer; returns a summary dict (also written to OUT/summary-seed<S>.json)."""
    t0 = time.monotonic()
    worker = Worker(timeout=timeout)
    counts = {"ok": 0, "fail": 0, "crash": 0, "hang": 0, "harness_error": 0}
    findings = {}   # signature -> first finding
    dup = {}
    indices = [only] if only is not None else range(programs)
    n_run = 0
    try:
        worker.start()
        for i in indices:
            if time.monotonic() - t0 > time_limit:
                break
            prog = generate(seed, i)
            r = worker.run(prog)
            n_run += 1
            counts[r["status"]] = counts.get(r["status"], 0) + 1
            if r["status"] == "ok":
                continue
            sig = dedup_key(r, prog)
            dup.setdefault(sig, []).append(i)
            if sig not in findings:
                findings[sig] = {"index": i, "program": prog, "result": r}
                kind = f"{r['kind']} " if r.get("kind") else ""
                log(f"[{i}] {r['status']}: {kind}{r.get('detail', '')}".rstrip())
        fuzz_s = time.monotonic() - t0
        os.makedirs(out_dir, exist_ok=True)
        saved = []
        for n, (sig, f) in enumerate(findings.items()):
            prog, r = f["program"], f["result"]
            if n < max_minimize and minimize_budget > 0:
                if r["status"] in ("crash", "hang"):  # is it the program, or earlier state?
                    worker.kill()
                    again = worker.run(prog)
                    f["reproduces_alone"] = again["status"] == r["status"]
                if f.get("reproduces_alone", True):
                    log(f"  minimising finding from program {f['index']} ...")
                    prog, r = minimize(worker, prog, r, minimize_budget, log)
            k = r.get("step", r.get("at"))
            label = step_label(prog["steps"][k]) if k is not None else r["status"]
            name = f"{r['status']}-{r.get('kind', r['status'])}-{label}-s{seed}-p{f['index']}.py"
            path = os.path.join(out_dir, re.sub(r"[^\w.-]", "_", name))
            header = (f"Found by: python tools/fuzz.py --seed {seed} --only {f['index']}"
                      + ("" if f.get("reproduces_alone", True) else
                         "\n(did NOT reproduce in a fresh process: depends on earlier programs)"))
            text = repro_text(prog, r, header)
            with open(path, "w") as fh:
                fh.write(text)
            f.update(path=path, minimized=prog, minimized_result=r, count=len(dup[sig]),
                     indices=dup[sig],
                     reproducer=text)
            saved.append(path)
    finally:
        worker.close()
    summary = {
        "seed": seed, "programs_run": n_run, "counts": counts,
        "fuzz_seconds": round(fuzz_s, 1), "total_seconds": round(time.monotonic() - t0, 1),
        "findings": [{"signature": list(sig), "index": f["index"], "count": f["count"],
                      "statement": _statement(f["program"], f["result"]),
                      "indices": f["indices"], "stacks": f["result"].get("stacks"),
                      "status": f["result"]["status"], "kind": f["result"].get("kind"),
                      "detail": f["result"].get("detail"), "log": f["result"].get("log"),
                      "minimized_detail": f["minimized_result"].get("detail"),
                      "minimized_steps": f["minimized"]["steps"],
                      "reproduces_alone": f.get("reproduces_alone", True),
                      "path": f["path"]} for sig, f in findings.items()],
    }
    with open(os.path.join(out_dir, f"summary-seed{seed}.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    return summary


def main(argv=None):
    p = argparse.ArgumentParser(prog="python tools/fuzz.py", description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--programs", type=int, default=300)
    p.add_argument("--time-limit", type=float, default=120.0,
                   help="seconds of fuzzing (minimisation of findings comes after)")
    p.add_argument("--out", default="fuzz-findings")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per program")
    p.add_argument("--minimize-budget", type=float, default=60.0, help="seconds per finding")
    p.add_argument("--max-minimize", type=int, default=12)
    p.add_argument("--only", type=int, default=None, help="run just program ONLY of the seed")
    p.add_argument("--print", dest="print_only", action="store_true",
                   help="print the program(s) instead of running them")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        return _worker_main()
    if a.print_only:
        for i in ([a.only] if a.only is not None else range(a.programs)):
            prog = generate(a.seed, i)
            print(f"# program {i} (check={prog['check']})")
            print("\n".join(prog["steps"]) + "\n")
        return 0
    s = run_fuzz(a.seed, a.programs, a.time_limit, a.out, a.timeout, a.minimize_budget,
                 a.max_minimize, a.only)
    c = s["counts"]
    print(f"\nseed {a.seed}: {s['programs_run']} programs in {s['fuzz_seconds']} s: "
          f"{c.get('ok', 0)} ok, {c.get('fail', 0)} mismatching, {c.get('crash', 0)} crashed, "
          f"{c.get('hang', 0)} hung, {c.get('harness_error', 0)} harness errors; "
          f"{len(s['findings'])} distinct finding(s)")
    for f in s["findings"]:
        kind = f" {f['kind']}" if f["kind"] else ""
        print(f"  x{f['count']} {f['status']}{kind}: {f['minimized_detail'] or f['detail']}\n"
              f"      -> {f['path']}")
    return 1 if s["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
