"""Op compatibility sweep: PyTorch's OpInfo database run on the "tpu" device against the CPU oracle.

    python tools/compat.py ops [--quick] [--shard i/n] [--ops NAME,...] [--dtypes float32,...]
                               [--tiers clean,nonfinite,error_inputs] [--samples N]
                               [--timeout S] [--jobs N] [--update] [--out DIR] [--md PATH]
    python tools/compat.py merge [--out DIR] [--md PATH]
    python tools/compat.py modules ...  (ModuleInfo sweep: see compat_modules.py)
    python tools/compat.py models ...   (the model harness: see compat_models.py)

For every OpInfo, every dtype it supports on CPU and each of its first sample inputs, a case is one
variant of the call: `function`, `noncontiguous` (the same inputs as strided views), `inplace`,
`out` and `backward` (gradients of a randomly weighted sum of the outputs). The CPU result is the
oracle; the tpu result must match it with `torch.testing.assert_close` (default dtype-aware
tolerances, widened only by the OpInfo's own CPU tolerance overrides, equal_nan, exact dtype and
shape). Each case ends as:

    native       passed, and no op fell back to CPU during the tpu call
    fallback     passed, but some op ran through the CPU fallback (their names are recorded)
    fail         mismatch or exception on tpu (first line of the reason), or a crash / timeout
    cpu-invalid  the CPU call itself raised: the case is recorded but not counted

Those are the "clean" tier. Two more tiers run the same OpInfos on inputs PyTorch's own tests
use to probe edge behaviour:

    nonfinite     each floating sample with NaN (variant `nan`), +inf (`posinf`), -inf
                  (`neginf`), or all three (`mixed`: NaN, +inf, -inf in turn, shifted by one for
                  each further tensor so that binary ops see NaN against inf) written into every
                  floating tensor input at fixed positions (the first, middle and last element in
                  flat order), the same on both sides; the plain call, compared as above
                  (equal_nan), and by value also for a shapes-only op when the sample's CPU
                  result does not depend on the seed (attention with dropout_p=0...).
    error_inputs  the OpInfo's own error inputs (`error_inputs_func`), once per op whatever the
                  dtypes asked for, recorded under the dtype of their first tensor; variant
                  `error`. The CPU call must raise (else cpu-invalid); the tpu call passes when
                  it raises an instance of the CPU exception's type, and fails when it returns,
                  raises another type, crashes or hangs. Calls that involve no tpu tensor or
                  device (all-Python arguments) are not run.

The cases run in child processes (`worker`) that stream JSON lines back; a child that crashes or
hangs costs only its current case, and a new child resumes after it. The same driver runs the
ModuleInfo sweep (compat_modules.py). Results go to DIR/<tier>.json (ops.json for the clean tier,
nonfinite.json, error_inputs.json, modules.json; DIR/<tier>.shard-i-of-n.json with --shard,
which `merge` combines) and to COMPAT.md. COMPAT.md is rendered from whichever of those files
and DIR/models.json exist, so each sweep rewrites it without losing the others' results.
`--update` reruns only the entries selected (--ops, --modules) and replaces their records in the
existing file, which lists the update in its metadata and report header.
"""
import argparse
import collections
import glob
import itertools
import json
import os
import sys
import threading
import time
import zlib

import torch

import _child
from _child import ROOT

DTYPES = ["float32", "bfloat16", "float16", "float64", "int64", "int32", "int8", "uint8", "bool"]
VARIANTS = ["function", "noncontiguous", "inplace", "out", "backward"]
FLOATING = ["float32", "bfloat16", "float16", "float64"]
# Values the nonfinite tier writes into floating inputs, by variant name: the k-th floating tensor
# gets values[(j + k) % len(values)] at its j-th position, so "mixed" pairs NaN with +inf, +inf
# with -inf and -inf with NaN across the tensors of a binary op.
_NAN, _INF = float("nan"), float("inf")
NONFINITE = {"nan": (_NAN,), "posinf": (_INF,), "neginf": (-_INF,), "mixed": (_NAN, _INF, -_INF)}
ERROR_VARIANT = "error"
CLEAN_FAILS = "the clean sample fails too: "  # prefixes a nonfinite failure that is not NaN/inf's
# Tiers of the op sweep, and the JSON file (in DIR) each writes; "modules" is compat_modules.py's.
TIERS = ("clean", "nonfinite", "error_inputs")
MODULE_VARIANTS = ["train.forward", "train.backward", "eval.forward", "eval.backward"]
ALL_VARIANTS = VARIANTS + list(NONFINITE) + [ERROR_VARIANT] + MODULE_VARIANTS
TIER_FILES = {"clean": "ops", "nonfinite": "nonfinite", "error_inputs": "error_inputs", "modules": "modules"}
COUNTED = ("native", "fallback", "fail")
QUICK_OPS = [
    "add", "sub", "mul", "div", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "tanh",
    "sigmoid", "pow", "maximum", "minimum", "clamp", "where", "eq", "lt", "sum", "mean", "amax",
    "argmax", "cumsum", "mm", "matmul", "addmm", "bmm", "softmax", "nn.functional.relu",
    "nn.functional.gelu", "nn.functional.linear", "nn.functional.layer_norm", "reshape",
    "transpose", "permute", "cat", "index_select", "masked_fill",
]
DEFAULT_SAMPLES, QUICK_SAMPLES = 8, 2
MAX_CRASHES_PER_OP = 3
SHAPES_ONLY = "shapes and dtypes only: the output is random or uninitialized"


# ----------------------------------------------------------------------------- the OpInfo side

def load_op_db():
    """PyTorch's OpInfo list (its test utilities need the pinned `expecttest`)."""
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def op_name(op):
    """Unique name of an OpInfo: its name, plus '.variant' for the named variants."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def select_ops(op_db, names=None, quick=False, shard=(0, 1)):
    """The OpInfos to sweep, in op_db order: those named (by full or base name) or the quick set,
    then every n-th one for shard i/n."""
    wanted = set(names or (QUICK_OPS if quick else []))
    ops = [op for op in op_db if not wanted or op_name(op) in wanted or op.name in wanted]
    i, n = shard
    return ops[i::n]


def _decorate_infos(op, dtype):
    """The DecorateInfos of `op` that apply on CPU to `dtype`."""
    from torch.testing._internal.opinfo.core import DecorateInfo
    for info in op.decorators:
        if not isinstance(info, DecorateInfo) or not info.active_if:
            continue
        devices = info.device_type if isinstance(info.device_type, (tuple, list)) else (info.device_type,)
        if (None in devices or "cpu" in devices) and (info.dtypes is None or dtype in info.dtypes):
            yield info


def tolerance(op, dtype):
    """(atol, rtol) widened by the OpInfo's own toleranceOverride/precisionOverride for CPU and
    `dtype` (any test), or None to keep assert_close's per-dtype defaults."""
    from torch.testing._comparison import default_tolerances
    atol, rtol = default_tolerances(dtype)
    widened = False
    for info in _decorate_infos(op, dtype):
        for dec in info.decorators:
            kind = type(dec).__name__
            if kind == "toleranceOverride" and dtype in dec.d:
                atol, rtol = max(atol, dec.d[dtype].atol), max(rtol, dec.d[dtype].rtol)
                widened = True
            elif kind == "precisionOverride" and dtype in dec.d:
                atol, widened = max(atol, dec.d[dtype]), True
    return (atol, rtol) if widened else None


# Random factories whose OpInfo seeds the global generator and declares nothing more: their values
# come from the device's own generator on tpu (as on CUDA), so they cannot equal CPU's draws.
DEVICE_RNG_OPS = {"randn", "randint"}


def values_comparable(op):
    """False for ops whose values cannot match CPU (random or uninitialized outputs), as the OpInfo
    declares by has_nondeterministic_output or by skipping TestCommon.test_compare_cpu; for those
    only dtypes and shapes are compared."""
    if op.has_nondeterministic_output or op.name in DEVICE_RNG_OPS:
        return False
    for info in op.decorators:
        skips = [d for d in getattr(info, "decorators", []) if "skip" in getattr(d, "__qualname__", "")]
        if getattr(info, "test_name", None) == "test_compare_cpu" and skips and info.device_type is None:
            return False
    return True


# Value mismatches whose cause has been traced and lies outside the lowering's arithmetic (CPU's
# own rounding order, a decomposition PyTorch applies): {(op, dtype): (variants, cause)}. They
# stay failures; COMPAT.md gives the cause before the mismatch.
_COL2IM = ("CPU accumulates the overlapping taps (col2im) in bfloat16; the tpu rounds once from "
           "float and is nearer the float64 result")
_STRIDED_BN = ("CPU's kernel for strided input rounds the per-channel scale and shift to bfloat16; "
               "its contiguous kernel does not, and the tpu matches that one bit for bit")
KNOWN_CAUSES = {
    **{(f"nn.functional.conv_transpose{d}d", "bfloat16"): (("function", "noncontiguous"), _COL2IM)
       for d in (1, 2, 3)},
    ("nn.functional.conv_transpose3d", "float32"): (
        ("function", "noncontiguous"),
        "summation order: CPU and tpu are both a few float32 ulps from float64 where terms cancel"),
    ("nn.functional.conv2d", "bfloat16"): (("backward",), _COL2IM + " (grad_input)"),
    **{(name, "bfloat16"): (("noncontiguous",), _STRIDED_BN)
       for name in ("native_batch_norm", "_native_batch_norm_legit", "_batch_norm_with_update",
                    "nn.functional.batch_norm")},
    ("nn.functional.instance_norm", "bfloat16"): (
        ("function", "noncontiguous"),
        "the bfloat16 saved statistics are one ulp from CPU's on some channels (CPU's reduction "
        "and rounding of the sum of squares is not reproduced bit for bit)"),
    **{(name, "bfloat16"): (
        ("function", "noncontiguous"),
        "group_norm has no tpu lowering: PyTorch's decomposition (var_mean, rsqrt, sub, mul in "
        "bfloat16) rounds each step, CPU's fused kernel computes in float and rounds once")
       for name in ("native_group_norm", "nn.functional.group_norm")},
    **{(name, "bfloat16"): (
        ("function", "noncontiguous", "backward"),
        "one bfloat16 ulp: the loss is a chain of bfloat16 ops (linear, log_softmax, the "
        "weighted sum) and CPU's kernels round some intermediates at other steps")
       for name in ("nn.functional.cross_entropy", "nn.functional.linear_cross_entropy",
                    "nn.functional.linear_cross_entropy.chunked_none")},
    **{(name, "bfloat16"): (
        ("backward",),
        "CPU accumulates each input pixel's and grid point's gradient in bfloat16, in its own "
        "order; the tpu accumulates in float and rounds once (10-300x nearer the float64 result "
        "on these samples)")
       for name in ("grid_sampler_2d", "grid_sampler_3d", "nn.functional.grid_sample")},
    ("grid_sampler_3d", "float32"): (
        ("backward",), "summation order of the grid's gradient (CPU adds the 8 corners' terms "
        "channel by channel; a few float32 ulps where terms cancel)"),
    ("matrix_exp", "float32"): (
        ("function", "noncontiguous", "backward"),
        "another approximation: CPU picks a polynomial degree by the norm and evaluates an "
        "optimized degree-18 form; the tpu scales to the degree-18 Taylor bound. On these samples "
        "(|A|_1 = 28) both are 0.6-5e-7 of the largest entry from the float64 result, each nearer "
        "on one"),
    ("matrix_exp", "bfloat16"): (
        ("function", "noncontiguous", "backward"),
        "CPU's bfloat16 kernel returns NaN on these samples; the tpu (float math, rounded once) "
        "is within 0.15% of the float64 result"),
    ("nn.functional.ctc_loss", "float32"): (
        ("backward",),
        "float32 cancellation in the gradient exp(lp) - exp(lcab + nll - lp): CPU and the tpu "
        "are each 7.6e-5 from the float64 gradient on these samples, and up to 2.7e-5 from each "
        "other (CPU adds the states of a class pairwise, the tpu shifted by their largest)"),
    ("kron", "float32"): (("backward",), "summation order of the gradient's reduction (2 float32 ulps)"),
    ("erfinv", "float32"): (
        ("backward",),
        "XLA's float32 erfinv is a few ulps from CPU's near +-1, and the gradient "
        "exp(erfinv(x)^2) amplifies it"),
}


def known_cause(name, dtype, variant):
    variants, cause = KNOWN_CAUSES.get((name, dtype), ((), None))
    return cause if variant in variants else None


# ----------------------------------------------------------------------------- one case

class NotApplicable(Exception):
    """The variant does not apply to this sample (no in-place form, nothing differentiable...)."""


def _tree_map(fn, tree):
    from torch.utils._pytree import tree_map_only
    return tree_map_only(torch.Tensor, fn, tree)


def _tensors(tree):
    from torch.utils._pytree import tree_leaves
    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


def host_tensors(op, dtype, count):
    """For each of the first `count` samples, the positions (in tree order) of the tensors the
    OpInfo makes on CPU whatever device it is asked for, as tensor_split's indices: those stay on
    CPU on the device side too, as they do when PyTorch tests CUDA. Found by making the samples on
    the meta device; empty sets when that fails or the samples differ in structure."""
    return _host_positions(lambda: itertools.islice(op.sample_inputs("meta", dtype, requires_grad=False), count),
                           count)


def _host_positions(make_meta_samples, count):
    """host_tensors for any source of samples: `make_meta_samples()` makes them on meta."""
    try:
        torch.manual_seed(0)
        made = list(make_meta_samples())[:count]
    except Exception:
        return [frozenset()] * count
    return [frozenset(i for i, t in enumerate(_tensors((s.input, s.args, s.kwargs))) if t.device.type == "cpu")
            for s in made] + [frozenset()] * (count - len(made))


class Inputs:
    """One side's copy of a sample: input, args, kwargs, plus what the variant needs. On the
    device side, the tensors at positions `on_host` stay on CPU."""

    def __init__(self, sample, device, variant, ref, on_host=frozenset()):
        from torch.utils._pytree import tree_flatten, tree_unflatten
        from torch.testing._internal.common_utils import noncontiguous_like
        self.device = device
        leaves, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
        tensors = [i for i, t in enumerate(leaves) if isinstance(t, torch.Tensor)]
        for k, i in enumerate(tensors):
            t = leaves[i].detach()
            leaves[i] = t.clone() if device == "cpu" or k in on_host else t.to(device)
        self.input, self.args, self.kwargs = tree_unflatten(leaves, spec)
        if "device" in self.kwargs:  # factory functions: make them on this side's device
            self.kwargs["device"] = device
        # A device argument names the device the samples were made for (`to(device, dtype)`): on
        # CUDA the OpInfo passes cuda there, so this side passes its own.
        self.args = tuple(device if isinstance(a, (str, torch.device)) and str(a) == "cpu" else a
                          for a in self.args)  # (noncontiguous_like below keeps each tensor's device)
        if variant == "noncontiguous":
            self.input, self.args, self.kwargs = _tree_map(noncontiguous_like, (self.input, self.args, self.kwargs))
        if variant == "out":
            self.kwargs["out"] = _tree_map(lambda t: torch.empty(t.shape, dtype=t.dtype, device=device), ref)
        self.leaves = []
        if variant == "backward":
            self.leaves = [t.requires_grad_() for t in _tensors((self.input, self.args, self.kwargs))
                           if t.is_floating_point()]
        self.output_process_fn_grad = sample.output_process_fn_grad


def call_variant(op, variant, x, seed):
    """Runs `variant` of `op` on prepared Inputs `x`; returns what is compared with the oracle."""
    def call(**extra):
        return op(x.input, *x.args, **x.kwargs, **extra)

    if variant in ("function", "noncontiguous"):
        return call()
    if variant == "out":
        call()
        return x.kwargs["out"]
    if variant == "inplace":
        result = op.inplace_variant(x.input, *x.args, **x.kwargs)
        if result is not x.input:
            raise AssertionError("the in-place variant did not return its input")
        return x.input
    if variant == "backward":
        outs = [t for t in _tensors(x.output_process_fn_grad(call())) if t.requires_grad]
        if not x.leaves or not outs:
            raise NotApplicable("no floating input or no differentiable output")
        gen = torch.Generator().manual_seed(seed)  # same weights on both sides, made on CPU
        weights = [torch.randn(t.shape, dtype=t.dtype, generator=gen).to(t.device) for t in outs]
        return torch.autograd.grad(outs, x.leaves, weights, allow_unused=True)
    raise ValueError(f"unknown variant {variant}")


def variant_applies(op, variant, dtype):
    """Whether the OpInfo declares `variant` at all for `dtype`."""
    if variant == "inplace":
        return op.inplace_variant is not None
    if variant == "out":
        return op.supports_out
    if variant == "backward":
        return op.supports_autograd and dtype.is_floating_point
    return True


def to_host(result):
    """The tpu result with every tensor copied to CPU; a tensor left on another device is an error."""
    def host(t):
        if t.device.type != "tpu":
            raise AssertionError(f"a result tensor is on {t.device}, not on tpu")
        return t.detach().cpu()
    return _tree_map(host, result)


def compare(actual, expected, tol, values=True):
    """assert_close with exact dtypes and shapes, equal_nan, and `tol` = (atol, rtol) or None."""
    if not values:
        actual, expected = (_tree_map(lambda t: (tuple(t.shape), t.dtype), r) for r in (actual, expected))
        if actual != expected:
            raise AssertionError(f"dtype/shape mismatch: {actual} vs {expected}")
        return
    atol, rtol = tol if tol else (None, None)
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=True,
                               check_dtype=True)


# Ops whose unstable form leaves the order of equal elements unspecified (CUDA's is not CPU's):
# {op: position of the indices in the result, None for the result itself}.
TIE_ORDER_OPS = {"sort": 1, "argsort": None}
TIES = "tie order differs from CPU's (unspecified for an unstable sort)"


def same_up_to_ties(op, sample, actual, expected):
    """Whether an unstable sort's result differs from CPU's only in the order of ties: the other
    outputs equal, and the indices a permutation along the dim that picks the same values."""
    name = op_name(op)
    if name not in TIE_ORDER_OPS or sample.kwargs.get("stable") or sample.input.ndim == 0:
        return False
    at = TIE_ORDER_OPS[name]
    pick = (lambda r: r) if at is None else (lambda r: r[at])
    dim = sample.args[0] if sample.args else sample.kwargs.get("dim", -1)
    x, got, want = sample.input.detach(), pick(actual), pick(expected).detach()
    if at is not None:
        for k, (a, e) in enumerate(zip(actual, expected)):
            if k != at and not torch.equal(a, e.detach()):
                return False
    n = x.shape[dim]
    iota = torch.arange(n).view([-1 if d == dim % x.ndim else 1 for d in range(x.ndim)])
    return (got.shape == want.shape and torch.equal(got.sort(dim).values, iota.expand_as(got))
            and torch.equal(x.gather(dim, got), x.gather(dim, want)))


def reason_of(exc):
    """First line of an exception, plus the mismatch count and greatest difference for
    assert_close failures."""
    return _child.reason_of(exc, 300, ("Mismatched", "Greatest absolute"))


def cpu_done():
    """Called by a case once its CPU (oracle) side has run: in a worker it tells the driver, so a
    crash or hang after it is the device's and one before it is CPU's."""
    if _cpu_done_hook is not None:
        _cpu_done_hook()


_cpu_done_hook = None


# ATen ops that draw random numbers (their name, or its start): a sample that runs one is random
# even when two seeds happen to give one result (two channels of dropout3d, a tiny pooling grid).
RNG_SOURCES = ("rand", "bernoulli", "normal", "uniform", "exponential", "cauchy", "geometric",
               "log_normal", "random", "multinomial", "poisson", "binomial", "native_dropout",
               "_fused_dropout", "rrelu", "_standard_gamma", "_sample_dirichlet")


def seed_independent(op, variant, sample, ref, seed, expected):
    """For an op whose values are not compared (values_comparable): whether this sample's CPU
    call draws no random number (no RNG_SOURCES op runs in it) and its result is the same under
    another seed (attention or dropout with p=0, an embedding), so its values can be compared
    after all. OpInfos of random ops re-seed inside the call (PyTorch's wrapper_set_seed), so
    torch.manual_seed seeds otherwise during that second call. Never for ops whose output is
    uninitialized memory, nor for integer results (Tensor.int() and the other conversions, whose
    OpInfos compare shapes only: a float outside the integer range converts to anything)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Draws(TorchDispatchMode):
        found = False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.name().split("::")[-1]
            Draws.found = Draws.found or name.startswith(RNG_SOURCES)
            return func(*args, **(kwargs or {}))

    if "empty" in op.name or not all(t.is_floating_point() or t.is_complex() for t in _tensors(expected)):
        return False  # uninitialized memory, or a conversion to integers (undefined for NaN/inf)
    manual_seed = torch.manual_seed
    torch.manual_seed = lambda _: manual_seed(seed + 2)
    try:
        manual_seed(seed + 1)
        with Draws():
            again = call_variant(op, variant, Inputs(sample, "cpu", variant, ref), seed + 1)
        compare(again, _tree_map(torch.Tensor.detach, expected), (0.0, 0.0))
        return not Draws.found
    except Exception:
        return False
    finally:
        torch.manual_seed = manual_seed


def run_case(op, variant, sample, dtype, ref, seed, on_host=frozenset(), known=True, probe_values=False):
    """One case: CPU oracle, then tpu. Returns (status, reason, fallback op names, cpu result),
    or None when the variant does not apply. `known`: label mismatches with KNOWN_CAUSES (traced
    on clean samples only). `probe_values`: compare the values of a shapes-only op where this
    sample's CPU result does not depend on the seed (seed_independent)."""
    import torch_pjrt
    try:
        torch.manual_seed(seed)
        expected = call_variant(op, variant, Inputs(sample, "cpu", variant, ref), seed)
    except NotApplicable:
        return None
    except Exception as e:
        return "cpu-invalid", reason_of(e), [], None
    values = values_comparable(op) or (probe_values and seed_independent(op, variant, sample, ref, seed, expected))
    cpu_done()
    fallbacks = []
    try:
        x = Inputs(sample, "tpu", variant, ref, on_host)
        torch.manual_seed(seed)
        torch_pjrt.reset_stats()
        actual = to_host(call_variant(op, variant, x, seed))
        fallbacks = sorted(torch_pjrt.stats()["fallbacks"])
        try:
            compare(actual, _tree_map(torch.Tensor.detach, expected), tolerance(op, dtype), values)
        except AssertionError:
            if variant == "backward" or not same_up_to_ties(op, sample, actual, expected):
                raise
            return ("fallback" if fallbacks else "native"), TIES, fallbacks, expected
    except Exception as e:
        fallbacks = fallbacks or sorted(torch_pjrt.stats()["fallbacks"])
        cause = known and known_cause(op_name(op), str(dtype).replace("torch.", ""), variant)
        if cause and isinstance(e, AssertionError):
            return "fail", f"known: {cause}; {reason_of(e)}"[:400], fallbacks, expected
        return "fail", reason_of(e), fallbacks, expected
    note = "" if values else SHAPES_ONLY
    return ("fallback" if fallbacks else "native"), note, fallbacks, expected


def case_id(name, dtype, index, variant):
    return f"{name}|{dtype}|{index}|{variant}"


# ----------------------------------------------------------------------------- non-finite inputs

def nonfinite_positions(shape):
    """The flat positions the nonfinite tier writes: first, middle and last element."""
    n = 1
    for size in shape:
        n *= size
    return sorted({0, n // 2, n - 1}) if n else []


def inject_nonfinite(sample, values):
    """A copy of `sample` (input, args, kwargs) whose floating (strided) tensors hold `values` at
    nonfinite_positions (rotated by one per tensor, see NONFINITE), or None when it has no
    non-empty one."""
    import types
    hit = []

    def put(t):
        if not t.is_floating_point() or t.numel() == 0 or t.layout != torch.strided:
            return t
        t = t.detach().clone()
        for j, pos in enumerate(nonfinite_positions(t.shape)):
            index = []
            for size in reversed(t.shape):
                index.append(pos % size)
                pos //= size
            t[tuple(reversed(index))] = values[(j + len(hit)) % len(values)]
        hit.append(t)
        return t

    args = _tree_map(put, (sample.input, sample.args, sample.kwargs))
    if not hit:
        return None
    return types.SimpleNamespace(input=args[0], args=args[1], kwargs=args[2],
                                 output_process_fn_grad=sample.output_process_fn_grad)


# ----------------------------------------------------------------------------- error inputs

def error_input_dtype(sample):
    """The dtype an error input is recorded under: its first tensor's, else its `dtype`
    argument's, else "none"."""
    tensors = _tensors((sample.input, sample.args, sample.kwargs))
    dtype = tensors[0].dtype if tensors else sample.kwargs.get("dtype")
    return str(dtype).replace("torch.", "") if isinstance(dtype, torch.dtype) else "none"


def error_side(sample, device, on_host=frozenset()):
    """One side's (input, args, kwargs) of an error input. The CPU side is a deep copy; on the
    device side each CPU tensor is copied to `device` (those at `on_host` stay on CPU, tensors
    on other devices such as meta stay where they are) with its layout: tensors that share a
    storage still share one and an expanded tensor still overlaps itself (an `out=` aliasing its
    input is the error some inputs probe); requires_grad is kept, and the device arguments name
    `device`. None when nothing in the call would touch `device`."""
    import copy
    from torch.utils._pytree import tree_flatten, tree_unflatten
    tree = copy.deepcopy((sample.input, sample.args, sample.kwargs))
    if device == "cpu":
        return tree
    leaves, spec = tree_flatten(tree)
    positions = [i for i, t in enumerate(leaves) if isinstance(t, torch.Tensor)]
    groups = collections.defaultdict(list)  # storage -> positions of the tensors that share it
    for k, i in enumerate(positions):
        t = leaves[i]
        if t.device.type == "cpu" and k not in on_host and t.numel():
            groups[t.untyped_storage().data_ptr()].append(i)
    shared = [g for g in groups.values() if (len(g) > 1 or not _plain(leaves[g[0]]))
              and len({leaves[j].dtype for j in g}) == 1 and not any(leaves[j].requires_grad for j in g)]
    grouped = {j for g in shared for j in g}
    touches = bool(shared)
    for k, i in enumerate(positions):
        t = leaves[i]
        if t.device.type != "cpu" or k in on_host or i in grouped:
            continue
        moved = t.detach().to(device)
        leaves[i] = moved.requires_grad_() if t.requires_grad else moved
        touches = True
    for members in shared:
        first = leaves[members[0]]
        base = torch.empty(0, dtype=first.dtype).set_(first.untyped_storage()).to(device)  # the whole storage
        for j in members:
            t = leaves[j]
            leaves[j] = base.as_strided(t.shape, t.stride(), t.storage_offset())
    input, args, kwargs = tree_unflatten(leaves, spec)
    if kwargs.get("device") is not None and str(kwargs["device"]) == "cpu":
        kwargs["device"], touches = device, True
    named = [device if isinstance(a, (str, torch.device)) and str(a) == "cpu" else a for a in args]
    touches = touches or any(a is not b for a, b in zip(named, args))
    return (input, tuple(named), kwargs) if touches else None


def _plain(t):
    """Whether copying `t` with .to() keeps its layout: it alone fills its storage, densely."""
    if t.storage_offset() or t.untyped_storage().nbytes() != t.numel() * t.element_size():
        return False
    expected = 1  # dense and non-overlapping: each stride, smallest first, spans the dims below
    for stride, size in sorted((st, sz) for st, sz in zip(t.stride(), t.shape) if sz > 1):
        if stride != expected:
            return False
        expected *= size
    return True


def run_error_case(op, sample, seed, on_host=frozenset()):
    """One error input: CPU must raise; tpu must raise an instance of CPU's exception type.
    Returns (status, reason, fallback op names), or None when the call touches no tpu tensor."""
    import torch_pjrt
    try:
        torch.manual_seed(seed)
        x, args, kwargs = error_side(sample, "cpu")
        op(x, *args, **kwargs)
    except Exception as e:
        expected = e
    else:
        return "cpu-invalid", "the CPU call did not raise", []
    cpu_done()
    try:
        side = error_side(sample, "tpu", on_host)
    except Exception as e:
        return "fail", "the inputs could not be copied to tpu: " + reason_of(e), []
    if side is None:
        return None
    x, args, kwargs = side
    torch.manual_seed(seed)
    torch_pjrt.reset_stats()
    try:
        result = op(x, *args, **kwargs)
        _tree_map(lambda t: t.cpu(), result)  # errors found on the device surface at a sync
    except Exception as e:
        fallbacks = sorted(torch_pjrt.stats()["fallbacks"])
        if isinstance(e, type(expected)):
            return ("fallback" if fallbacks else "native"), f"raised {type(e).__name__}", fallbacks
        return "fail", f"raised {reason_of(e)}; CPU raised {reason_of(expected)}"[:400], fallbacks
    fallbacks = sorted(torch_pjrt.stats()["fallbacks"])
    return "fail", f"returned without raising; CPU raised {reason_of(expected)}"[:400], fallbacks


# ----------------------------------------------------------------------------- cases per tier
# Each yields the records of one op; `begin(case id)` announces a case to the driver and returns
# False when the case is to be skipped (it crashed or hung a previous child).

def _samples(op, dtype, count):
    torch.manual_seed(0)
    return list(itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=False), count))


def _supported(op, dtype_names):
    supported = op.supported_dtypes("cpu")
    return [(d, getattr(torch, d)) for d in dtype_names if getattr(torch, d) in supported]


def _dtype_samples(op, name, job, dtype_names):
    """(dtype_name, dtype, samples, on_host) per supported dtype; a record instead (a dict) where
    the OpInfo cannot make its samples."""
    for dtype_name, dtype in _supported(op, dtype_names):
        try:
            samples = _samples(op, dtype, job["samples"])
        except Exception as e:
            yield dict(op=name, variant="*", dtype=dtype_name, sample=-1,
                       status="cpu-invalid", reason="sample_inputs: " + reason_of(e), fallbacks=[])
            continue
        yield dtype_name, dtype, samples, host_tensors(op, dtype, len(samples))


def clean_cases(op, name, job, begin):
    for item in _dtype_samples(op, name, job, job["dtypes"]):
        if isinstance(item, dict):
            yield item
            continue
        dtype_name, dtype, samples, on_host = item
        for index, sample in enumerate(samples):
            ref = None
            for variant in VARIANTS:
                cid = case_id(name, dtype_name, index, variant)
                if not variant_applies(op, variant, dtype):
                    continue
                if variant != "function" and ref is None:
                    break  # the plain call is invalid on CPU (or crashed): nothing else to try
                if not begin(cid):
                    continue
                outcome = run_case(op, variant, sample, dtype, ref, zlib.crc32(cid.encode()), on_host[index])
                if outcome is None:
                    continue
                status, reason, fallbacks, expected = outcome
                if variant == "function":
                    ref = expected
                yield dict(op=name, variant=variant, dtype=dtype_name, sample=index,
                           status=status, reason=reason, fallbacks=fallbacks)


def nonfinite_cases(op, name, job, begin):
    for item in _dtype_samples(op, name, job, [d for d in job["dtypes"] if d in FLOATING]):
        if isinstance(item, dict):
            yield item
            continue
        dtype_name, dtype, samples, on_host = item
        for index, sample in enumerate(samples):
            clean = None  # the clean sample's own status, found when a nonfinite case fails
            for variant, values in NONFINITE.items():
                injected = inject_nonfinite(sample, values)
                cid = case_id(name, dtype_name, index, variant)
                if injected is None or not begin(cid):
                    continue
                seed = zlib.crc32(cid.encode())
                outcome = run_case(op, "function", injected, dtype, None, seed, on_host[index], known=False,
                                   probe_values=True)
                if outcome is None:
                    continue
                status, reason, fallbacks, _ = outcome
                if status == "fail":
                    clean = clean or (run_case(op, "function", sample, dtype, None, seed, on_host[index],
                                               known=False, probe_values=True) or ("",))[0]
                    if clean == "fail":
                        reason = CLEAN_FAILS + reason
                yield dict(op=name, variant=variant, dtype=dtype_name, sample=index,
                           status=status, reason=reason, fallbacks=fallbacks)


def error_inputs_of(op, device="cpu"):
    """The samples of the OpInfo's error inputs made for `device`, with their expected types."""
    if op.error_inputs_func is None:
        return []
    torch.manual_seed(0)
    return list(op.error_inputs(device))


def error_cases(op, name, job, begin):
    try:
        inputs = error_inputs_of(op)
    except Exception as e:
        yield dict(op=name, variant=ERROR_VARIANT, dtype="none", sample=-1,
                   status="cpu-invalid", reason="error_inputs: " + reason_of(e), fallbacks=[])
        return
    on_host = _host_positions(lambda: (e.sample_input for e in error_inputs_of(op, "meta")), len(inputs))
    for index, error_input in enumerate(inputs):
        sample = error_input.sample_input
        dtype_name = error_input_dtype(sample)
        cid = case_id(name, dtype_name, index, ERROR_VARIANT)
        if not begin(cid):
            continue
        outcome = run_error_case(op, sample, zlib.crc32(cid.encode()), on_host[index])
        if outcome is None:
            continue
        status, reason, fallbacks = outcome
        yield dict(op=name, variant=ERROR_VARIANT, dtype=dtype_name, sample=index,
                   status=status, reason=reason, fallbacks=fallbacks)


def tier_entries(tier):
    """{name: entry} and the case generator for `tier`."""
    if tier == "modules":
        import compat_modules
        return {info.name: info for info in compat_modules.load_module_db()}, compat_modules.module_cases
    cases = {"clean": clean_cases, "nonfinite": nonfinite_cases, "error_inputs": error_cases}[tier]
    return {op_name(op): op for op in load_op_db()}, cases


# ----------------------------------------------------------------------------- the child process

def worker():
    """Child process: reads a job {tier, ops, dtypes, samples, skip} as JSON on stdin and writes
    JSON lines on its (private) stdout: {"ready"}, {"start": id} before each case, {"cpu_done"}
    once its CPU side has run, {"record": ...} after it, {"done": op} after each op (or module).
    Anything else printed goes to stderr."""
    import warnings
    emit = _child.protocol()
    warnings.simplefilter("ignore")
    job = json.load(sys.stdin)
    skip = set(job["skip"])
    by_name, cases = tier_entries(job.get("tier", "clean"))

    def begin(cid):
        if cid in skip:
            return False
        emit(start=cid)
        return True

    global _cpu_done_hook
    _cpu_done_hook = lambda: emit(cpu_done=True)  # noqa: E731

    emit(ready=True)
    for name in job["ops"]:
        for record in cases(by_name[name], name, job, begin):
            emit(record=record)
        emit(done=name)


# ----------------------------------------------------------------------------- the driver

def _run_child(tier, remaining, dtypes, samples, skip, timeout, on_record, on_op_done):
    """One child process over the `remaining` op names (removed as they finish). Returns None when
    it got through them all, else (id of the case it was running or None, "crash ..."/"timeout",
    whether the case's CPU side had completed)."""
    child = _child.Child("compat.py", "worker",
                         job=dict(tier=tier, ops=remaining, dtypes=dtypes, samples=samples, skip=skip))
    current, on_cpu, ready = None, False, False
    for msg in child.messages(timeout, first=timeout + 120):  # the first waits for imports too
        ready = ready or "ready" in msg
        if "start" in msg:
            current, on_cpu = msg["start"], True
        elif "cpu_done" in msg:
            on_cpu = False
        elif "record" in msg:
            on_record(msg["record"])
            current = None
        elif "done" in msg:
            remaining.remove(msg["done"])
            on_op_done(msg["done"])
            current = None
    if not child.timed_out:  # the child exited
        if not remaining:
            return None
        if not ready:
            raise RuntimeError(f"the compat worker exited ({child.code}) before it was ready; "
                               "run `python tools/compat.py worker` to see why")
    return current, child.lost(timeout), on_cpu


def drive(ops, dtypes, samples, timeout, on_record, on_op_done, tier="clean"):
    """Runs `ops` (names of the tier's entries: OpInfos, or ModuleInfos for "modules") in child
    processes. The case a child crashed or timed out on is recorded as a failure (as cpu-invalid
    when it was still on its CPU side) and skipped by the next child; an op that does it too often
    (or outside a case) is abandoned."""
    remaining, skip, crashes, seen = list(ops), [], collections.Counter(), set()

    def record(rec):  # a child after a crash runs the op's earlier cases again: keep the first
        cid = case_id(rec["op"], rec["dtype"], rec["sample"], rec["variant"])
        if cid not in seen:
            seen.add(cid)
            on_record(rec)

    while remaining:
        lost = _run_child(tier, remaining, dtypes, samples, skip, timeout, record, on_op_done)
        if lost is None:
            break
        current, why, on_cpu = lost
        name, dtype, index, variant = (current or case_id(remaining[0], "*", -1, "*")).split("|")
        status, why = ("cpu-invalid", f"the CPU call: {why}") if current and on_cpu else ("fail", why)
        record(dict(op=name, variant=variant, dtype=dtype, sample=int(index),
                    status=status, reason=why, fallbacks=[]))
        crashes[name] += 1
        if current is None or crashes[name] >= MAX_CRASHES_PER_OP:
            remaining.remove(name)
            on_op_done(name)
        else:
            skip.append(current)


def sweep(ops, dtypes, samples, timeout, jobs, tier="clean"):
    """Runs every op of `tier` over `jobs` parallel drivers; returns the records in op, dtype,
    sample, variant order. Prints one progress line per op to stderr."""
    records, lock, started, done = [], threading.Lock(), time.time(), [0]

    def on_record(rec):
        with lock:
            records.append(rec)

    def on_op_done(name):
        with lock:
            done[0] += 1
            mine = [r for r in records if r["op"] == name]
            counts = collections.Counter(r["status"] for r in mine)
            print(f"[{tier} {done[0]}/{len(ops)} {time.time() - started:6.1f}s] {name}: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=sys.stderr, flush=True)

    _child.in_parallel(lambda share: drive(share, dtypes, samples, timeout, on_record, on_op_done, tier),
                       ops, jobs)
    order = {name: i for i, name in enumerate(ops)}
    rank = {name: i for i, name in enumerate(DTYPES + ALL_VARIANTS)}
    records.sort(key=lambda r: (order[r["op"]], rank.get(r["dtype"], -1), r["sample"],
                                rank.get(r["variant"], -1)))
    return records


# ----------------------------------------------------------------------------- reports

def metadata(command, dtypes, samples):
    """How a sweep was made: command, torch version, plugin platform, native op table."""
    import torch_pjrt
    return dict(command=command, torch=torch.__version__, platform=torch_pjrt.plugin_info()["platform"],
                dtypes=dtypes, samples=samples, native_ops=torch_pjrt.native_ops(),
                date=time.strftime("%Y-%m-%d"))


def cell(records):
    """One op x dtype summary: 'native n/n', 'fallback k/n: a, b', 'fail k/n: reason' or '-'."""
    counted = [r for r in records if r["status"] in COUNTED]
    if not counted:
        return "-"
    fails = [r for r in counted if r["status"] == "fail"]
    if fails:
        return f"fail {len(fails)}/{len(counted)}: {fails[0]['reason'][:80]}"
    fell_back = [r for r in counted if r["status"] == "fallback"]
    if fell_back:
        names = sorted({f for r in fell_back for f in r["fallbacks"]})
        return f"fallback {len(fell_back)}/{len(counted)}: " + ", ".join(names)
    return f"native {len(counted)}/{len(counted)}"


def render(meta, records):
    """COMPAT.md text: generation, per-dtype summary, per-op table, failures, native op table."""
    dtypes = [d for d in meta["dtypes"] if any(r["dtype"] == d for r in records)]
    ops = sorted({r["op"] for r in records})
    by = collections.defaultdict(list)
    for r in records:
        by[r["op"], r["dtype"]].append(r)
    out = ["# Op compatibility of the tpu device", "",
           "Generated by `" + meta["command"] + "` with torch " + meta["torch"]
           + ", PJRT plugin platform `" + meta["platform"] + "`, on " + meta["date"] + "."
           + updates_text(meta),
           f"Each OpInfo of PyTorch's `op_db`, each supported dtype, up to {meta['samples']} sample inputs, "
           "variants " + ", ".join(VARIANTS) + ", compared with the CPU result. **native**: passed with "
           "no CPU fallback; **fallback**: passed, but some op ran on CPU; **fail**: mismatch, "
           "error, crash or timeout. Cases whose CPU call raises are not counted. For ops marked "
           "(shapes only) the OpInfo declares the output random or uninitialized: only dtypes and "
           "shapes are compared.", "",
           "## Summary", "", "| dtype | cases | native | fallback | fail |", "| --- | ---: | ---: | ---: | ---: |"]
    for d in dtypes + ["all"]:
        counts = collections.Counter(r["status"] for r in records if d in ("all", r["dtype"]))
        n = sum(counts[s] for s in COUNTED)
        pct = [f"{100 * counts[s] / n:.1f}%" if n else "-" for s in COUNTED]
        out.append(f"| {d} | {n} | " + " | ".join(pct) + " |")
    out += ["", "## Per op", "", "| op | " + " | ".join(dtypes) + " |", "| --- |" + " --- |" * len(dtypes)]
    for op in ops:
        mark = " (shapes only)" if any(r["reason"] == SHAPES_ONLY for d in dtypes for r in by[op, d]) else ""
        out.append(f"| {op}{mark} | " + " | ".join(_child.md(cell(by[op, d])) for d in dtypes) + " |")
    out += ["", "## Failures", ""]
    failures = collections.defaultdict(list)
    for r in records:
        if r["status"] == "fail":
            failures[r["op"], r["reason"]].append(f"{r['dtype']} {r['variant']}")
    for (op, reason), where in failures.items():
        shown = ", ".join(dict.fromkeys(where))
        out.append(f"- `{op}` ({shown}): {_child.md(reason)}")
    if not failures:
        out.append("None.")
    out += ["", "## Native op table", "",
            f"`torch_pjrt.native_ops()`, from the C op table ({len(meta['native_ops'])} entries):", ""]
    out += [", ".join(f"`{n}`" for n in meta["native_ops"]), ""]
    return "\n".join(out)


def write_json(path, meta, records):
    """Writes {meta..., "cases": [...]} with one case per line, so diffs stay readable."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    head = json.dumps(meta)[:-1]
    with open(path, "w") as f:
        f.write(head + ', "cases": [\n' + ",\n".join(json.dumps(r) for r in records) + "\n]}\n")


def dtype_order(records):
    """The dtypes of `records`: DTYPES' order first, then any other (error inputs' complex64, none)."""
    found = {r["dtype"] for r in records}
    return [d for d in DTYPES if d in found] + sorted(found - set(DTYPES))


def summary_table(records, dtypes, extra=None):
    """| dtype | cases | native | fallback | fail | rows, plus 'all'. `extra` = (title, test): one
    more column, the share of the counted cases whose record passes `test`."""
    head, rule = "| dtype | cases | native | fallback | fail |", "| --- | ---: | ---: | ---: | ---: |"
    out = [head + (f" {extra[0]} |" if extra else ""), rule + (" ---: |" if extra else "")]
    for d in dtypes + ["all"]:
        mine = [r for r in records if d in ("all", r["dtype"]) and r["status"] in COUNTED]
        counts = collections.Counter(r["status"] for r in mine)
        n = len(mine)
        pct = [f"{100 * counts[s] / n:.1f}%" if n else "-" for s in COUNTED]
        if extra:
            pct.append(f"{100 * sum(map(extra[1], mine)) / n:.1f}%" if n else "-")
        out.append(f"| {d} | {n} | " + " | ".join(pct) + " |")
    return out


def reason_kind(reason):
    """A failure reason without what varies from sample to sample (mismatch counts, indices,
    finite differences), so the cases of one op that fail the same way group together."""
    import re
    text = re.sub(r"Mismatched elements: \d+ / \d+ \([\d.]+%\)", "Mismatched elements: some", reason)
    text = re.sub(r" at index \([^)]*\)", "", text)
    text = re.sub(r"difference: [-+\d.e]+ ", "difference: finite ", text)
    return re.sub(r"\(up to [^)]* allowed\)", "", text).strip()


def failure_list(records):
    """Per failing op (or module), the cases that fail in one way (reason_kind) on one line each:
    their dtype and variant (xN for N samples), then the first such case's reason."""
    by_op = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in records:
        if r["status"] == "fail":
            by_op[r["op"]][reason_kind(r["reason"])].append(r)
    out = []
    for op in sorted(by_op):
        kinds = by_op[op]
        n = sum(len(w) for w in kinds.values())
        out.append(f"- `{op}` ({n} case{'s' if n > 1 else ''})")
        for cases in kinds.values():
            where = collections.Counter(f"{r['dtype']} {r['variant']}" for r in cases)
            shown = ", ".join(f"{w} x{c}" if c > 1 else w for w, c in where.items())
            out.append(f"  - {shown}: {_child.md(cases[0]['reason'])}")
    return out or ["None."]


TIER_TEXT = {
    "nonfinite": ("Non-finite inputs",
                  "Each floating sample of each OpInfo, with NaN (`nan`), +inf (`posinf`), -inf "
                  "(`neginf`) or all three in turn (`mixed`, shifted by one per tensor so binary ops "
                  "meet NaN against inf) written into every floating tensor input at its first, middle "
                  "and last element, the same on both sides; the plain call compared with the CPU "
                  "result (NaN equal to NaN, infinities exact; also for ops otherwise compared by shape "
                  "only, when the sample's CPU result is the same under another seed). **fail, NaN/inf "
                  "only**: the failures whose clean sample passes (the others are marked \"the clean "
                  "sample fails too\")."),
    "error_inputs": ("Error inputs",
                     "Each OpInfo's own error inputs (arguments PyTorch's tests expect to raise). The CPU "
                     "call must raise (else the case is cpu-invalid, not counted); the tpu call passes when "
                     "it raises an instance of the same exception type, and fails when it returns, raises "
                     "another type, crashes or hangs. Run once per op, counted under the dtype of the first "
                     "tensor argument (`none`: no tensor)."),
}


def render_tier(doc):
    """A COMPAT.md section for one extra tier of the op sweep (nonfinite.json, error_inputs.json)."""
    records = doc["cases"]
    title, text = TIER_TEXT[doc["tier"]]
    fails = sorted({r["op"] for r in records if r["status"] == "fail"})
    dtypes = [d for d in dtype_order(records) if any(r["dtype"] == d and r["status"] in COUNTED for r in records)]
    seconds = f" ({doc['seconds']} s)" if "seconds" in doc else ""
    out = [f"## {title}", "",
           "Generated by `" + doc["command"] + "` with torch " + doc["torch"] + ", on " + doc["date"]
           + seconds + "." + updates_text(doc) + " " + text
           + f" Details per case: `compat/{TIER_FILES[doc['tier']]}.json`.", ""]
    if doc["tier"] == "nonfinite":
        def own(r):
            return r["status"] == "fail" and not r["reason"].startswith(CLEAN_FAILS)
        out += [*summary_table(records, dtypes, ("fail, NaN/inf only", own)), "",
                "| variant | cases | fail | fail, NaN/inf only |", "| --- | ---: | ---: | ---: |"]
        for v in NONFINITE:
            mine = [r for r in records if r["variant"] == v and r["status"] in COUNTED]
            n = len(mine) or 1
            out.append(f"| {v} | {len(mine)} | {100 * sum(r['status'] == 'fail' for r in mine) / n:.1f}% | "
                       f"{100 * sum(map(own, mine)) / n:.1f}% |")
    else:
        out += summary_table(records, dtypes)
    out += ["", f"### {title}: failing ops ({len(fails)})", "", *failure_list(records)]
    fell = collections.Counter(f for r in records if r["status"] == "fallback" for f in r["fallbacks"])
    if fell:
        out += ["", "Ops that fell back, by cases: " + ", ".join(f"`{op}` ({n})" for op, n in sorted(fell.items()))]
    return "\n".join(out) + "\n"


def tier_path(out_dir, tier, shard=None):
    """DIR/<file>.json, or DIR/<file>.shard-i-of-n.json for shard (i, n)."""
    base = TIER_FILES[tier]
    return os.path.join(out_dir, f"{base}.shard-{shard[0]}-of-{shard[1]}.json" if shard else f"{base}.json")


def write_report(meta, records, out_dir, md_path, tier="clean"):
    """Writes the tier's JSON in out_dir and the markdown report."""
    path = tier_path(out_dir, tier)
    write_json(path, dict(meta, tier=tier) if tier != "clean" else meta, records)
    write_markdown(out_dir, md_path)
    print(f"wrote {path} and {md_path}", file=sys.stderr)


def write_markdown(out_dir, md_path):
    """COMPAT.md from whichever of out_dir's ops.json, nonfinite.json, error_inputs.json,
    modules.json, host_reads.json and models.json exist, in that order."""
    from compat_host import render as render_host_reads
    from compat_models import render_models
    from compat_modules import render_modules
    parts = []
    for tier in TIERS + ("modules", "host_reads", "models"):
        name = tier if tier in ("models", "host_reads") else TIER_FILES[tier]
        path = os.path.join(out_dir, name + ".json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            doc = json.load(f)
        if tier == "clean":
            parts.append(render({k: v for k, v in doc.items() if k != "cases"}, doc["cases"]))
        elif tier == "modules":
            parts.append(render_modules(doc))
        elif tier == "models":
            parts.append(render_models(doc))
        elif tier == "host_reads":
            parts.append(render_host_reads(doc))
        else:
            parts.append(render_tier(doc))
    if parts and not os.path.exists(os.path.join(out_dir, "ops.json")):
        parts.insert(0, "# Compatibility of the tpu device\n")
    with open(md_path, "w") as f:
        f.write("\n".join(parts))


def merge(out_dir, md_path):
    """Combines each tier's out_dir/<file>.shard-*-of-*.json into <file>.json and the markdown."""
    merged = 0
    for tier in TIERS + ("modules",):
        paths = sorted(glob.glob(os.path.join(out_dir, TIER_FILES[tier] + ".shard-*-of-*.json")))
        if not paths:
            continue
        shards = []
        for p in paths:
            with open(p) as f:
                shards.append(json.load(f))
        meta = {k: v for k, v in shards[0].items() if k not in ("cases", "tier")}
        meta["command"] = meta["command"].split(" --shard")[0] + " --shard i/n (merged)"
        if "seconds" in meta:
            meta["seconds"] = sum(s.get("seconds", 0) for s in shards)
        records = sorted((r for s in shards for r in s["cases"]), key=lambda r: r["op"])  # stable
        write_report(meta, records, out_dir, md_path, tier)
        merged += 1
    if not merged:
        raise SystemExit(f"no shard files in {out_dir}")


def updated(path, meta, records, names, order):
    """The existing file at `path` with the records of the entries `names` replaced by `records`;
    its own metadata kept but the native op table (this run's), with this run listed under
    "updates"."""
    if not os.path.exists(path):
        raise SystemExit(f"--update: no {path} to update; run the tier in full first")
    with open(path) as f:
        doc = json.load(f)
    kept = [r for r in doc.pop("cases") if r["op"] not in names]
    if "native_ops" in meta:  # the op table as it is now, not as the first run found it
        doc["native_ops"] = meta["native_ops"]
    doc["updates"] = doc.get("updates", []) + [dict(command=meta["command"], date=meta["date"],
                                                    entries=len(names), seconds=meta["seconds"])]
    merged = sorted(kept + records, key=lambda r: order.get(r["op"], len(order)))  # stable within an op
    return doc, merged


def updates_text(doc):
    """' Since then N entries rerun by M updates ..., the last on DATE.': the --update runs of a
    report's file (each one's command, date and entries are in its JSON)."""
    ups = doc.get("updates", [])
    if not ups:
        return ""
    n = sum(u["entries"] for u in ups)
    return (f" Since then {n} entries rerun by {len(ups)} update{'s' if len(ups) > 1 else ''} "
            f"(`--update`), the last on {ups[-1]['date']} (each one's command and entries in the "
            "JSON).")


# ----------------------------------------------------------------------------- command line

def main(argv=None):
    parser = argparse.ArgumentParser(prog="python tools/compat.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    ops_p = sub.add_parser("ops", help="sweep the OpInfo database")
    ops_p.add_argument("--quick", action="store_true", help=f"{len(QUICK_OPS)} common ops, {QUICK_SAMPLES} samples")
    ops_p.add_argument("--shard", default="0/1", help="i/n: every n-th op from the i-th (0-based)")
    ops_p.add_argument("--ops", help="comma-separated op names (full 'name.variant' or base name)")
    ops_p.add_argument("--dtypes", default=",".join(DTYPES), help="comma-separated, from " + ",".join(DTYPES))
    ops_p.add_argument("--samples", type=int, help=f"samples per op and dtype (default {DEFAULT_SAMPLES})")
    ops_p.add_argument("--tiers", default=",".join(TIERS), help="comma-separated, from " + ",".join(TIERS))
    ops_p.add_argument("--timeout", type=float, default=60, help="seconds one case may take")
    ops_p.add_argument("--jobs", type=int, default=1, help="child processes in parallel")
    mod_p = sub.add_parser("modules", help="sweep the ModuleInfo database (nn.Module classes)")
    mod_p.add_argument("--shard", default="0/1", help="i/n: every n-th module from the i-th (0-based)")
    mod_p.add_argument("--modules", help="comma-separated module names (nn.LSTM or LSTM)")
    mod_p.add_argument("--dtypes", default=",".join(FLOATING), help="comma-separated, from " + ",".join(FLOATING))
    mod_p.add_argument("--samples", type=int,
                       help=f"module inputs per module, dtype and mode (default {DEFAULT_SAMPLES})")
    mod_p.add_argument("--timeout", type=float, default=60, help="seconds one case may take")
    mod_p.add_argument("--jobs", type=int, default=1, help="child processes in parallel")
    for p in (ops_p, mod_p):
        p.add_argument("--update", action="store_true",
                       help="replace only the selected entries' records in the existing DIR/<tier>.json")
    for p in (ops_p, mod_p, sub.add_parser("merge", help="combine per-shard JSON into <tier>.json + COMPAT.md")):
        p.add_argument("--out", default=os.path.join(ROOT, "compat"), help="directory for the JSON")
        p.add_argument("--md", default=os.path.join(ROOT, "COMPAT.md"), help="markdown report path")
    models_p = sub.add_parser("models", help="run whole models (Transformers, torchvision, timm)")
    models_p.add_argument("--suites", default="transformers,torchvision,timm", help="comma-separated suites")
    models_p.add_argument("--only", help="comma-separated model names (`name` or `suite/name`)")
    models_p.add_argument("--limit", help="at most N models per suite: N, or suite=N,... ('*' for the rest)")
    models_p.add_argument("--timeout", type=float, default=180, help="seconds one model may take")
    models_p.add_argument("--jobs", type=int, default=1, help="worker processes in parallel")
    models_p.add_argument("--shuffle", action="store_true", help="run in a fixed mixed order (a cut-short run is a sample)")
    models_p.add_argument("--time-limit", type=float, help="seconds: start no model after this")
    models_p.add_argument("--resume", action="store_true",
                          help="keep the results in DIR/models.progress.jsonl; run the rest and the cpu-invalid (or only --only)")
    models_p.add_argument("--no-compile", action="store_true",
                          help="skip the torch.compile(backend='tpu') forward check of each model")
    models_p.add_argument("--out", default=os.path.join(ROOT, "compat"), help="directory for models.json")
    models_p.add_argument("--md", default=os.path.join(ROOT, "COMPAT.md"), help="markdown report path")
    sub.add_parser("worker", help=argparse.SUPPRESS)
    sub.add_parser("models-worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.cmd == "worker":
        return worker()
    if args.cmd == "merge":
        return merge(args.out, args.md)
    if args.cmd in ("models", "models-worker"):
        import compat_models
        if args.cmd == "models-worker":
            return compat_models.worker()
        command = "python tools/compat.py " + " ".join(sys.argv[1:] if argv is None else argv)
        only = set(args.only.split(",")) if args.only else None
        limit = None
        if args.limit:
            limit = ({k: int(v) for k, v in (item.split("=") for item in args.limit.split(","))}
                     if "=" in args.limit else int(args.limit))
        os.makedirs(args.out, exist_ok=True)
        doc = compat_models.run(args.suites.split(","), only, limit, args.jobs, args.timeout, command,
                                os.path.join(args.out, "models.progress.jsonl"), args.shuffle,
                                args.resume, args.time_limit, not args.no_compile)
        path = compat_models.write(doc, args.out)
        write_markdown(args.out, args.md)
        print(f"wrote {path} and {args.md}", file=sys.stderr)
        return

    dtypes = args.dtypes.split(",")
    unknown = set(dtypes) - set(DTYPES if args.cmd == "ops" else FLOATING)
    if unknown:
        parser.error(f"unknown dtypes {sorted(unknown)}")
    i, n = (int(v) for v in args.shard.split("/"))
    command = "python tools/compat.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.cmd == "modules":
        import compat_modules
        names = args.modules.split(",") if args.modules else None
        entries = compat_modules.select_modules(compat_modules.load_module_db(), names, (i, n))
        if names and not entries:
            parser.error(f"no ModuleInfo named {names}")
        tiers, todo = ["modules"], [info.name for info in entries]
    else:
        tiers = args.tiers.split(",")
        if set(tiers) - set(TIERS):
            parser.error(f"unknown tiers {sorted(set(tiers) - set(TIERS))}")
        names = args.ops.split(",") if args.ops else None
        todo = [op_name(op) for op in select_ops(load_op_db(), names, args.quick, (i, n))]
        if names and not todo:
            parser.error(f"no OpInfo named {names}")
    samples = args.samples or (QUICK_SAMPLES if getattr(args, "quick", False) else DEFAULT_SAMPLES)
    if args.update and n > 1:
        parser.error("--update replaces entries in the full file: it takes no --shard")
    if args.cmd == "modules":
        order = {info.name: k for k, info in enumerate(compat_modules.load_module_db())}
    else:
        order = {op_name(op): k for k, op in enumerate(load_op_db())}
    for tier in tiers:
        started = time.time()
        records = sweep(todo, dtypes, samples, args.timeout, args.jobs, tier)
        meta = metadata(command, dtypes, samples)
        meta["seconds"] = round(time.time() - started)
        print(f"{tier}: {len(todo)} entries, {len(records)} cases in {meta['seconds']} s", file=sys.stderr)
        if args.update:
            meta, records = updated(tier_path(args.out, tier), meta, records, set(todo), order)
            write_report(meta, records, args.out, args.md, tier)
        elif n > 1:
            path = tier_path(args.out, tier, (i, n))
            write_json(path, dict(meta, tier=tier), records)
            print(f"wrote {path}; combine the shards with `python tools/compat.py merge`", file=sys.stderr)
        else:
            write_report(meta, records, args.out, args.md, tier)


if __name__ == "__main__":
    # Run as the module `compat` that compat_modules imports, not as a copy of it named __main__:
    # a module case calls compat.cpu_done(), which must see the hook this worker sets.
    import compat
    compat.main()
