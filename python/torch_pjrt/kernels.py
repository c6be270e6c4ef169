"""Custom kernels as PyTorch ops on tpu: a StableHLO module (`stablehlo_op`) or a JAX function,
Pallas kernels included (`jax_op`).

Each becomes a PyTorch custom op (`torch.library`, namespace `torch_pjrt_kernels`) taking and
returning tpu tensors. The module runs through `torch.ops.torch_pjrt.call_module`: its functions
are taken into the program that calls it (one program per call in eager, cached like any other,
in memory and on disk; in a `torch.compile(backend="tpu")` graph, part of the graph's one
program). A fake implementation lets torch.compile, torch.export and FakeTensor tracing see the
op's outputs.

A JAX function is exported (`jax.export`) once per input signature (shapes and dtypes); its
gradient is JAX's VJP, exported the same way. JAX is optional: installing it is what `jax_op`
needs (`pip install jax==0.10.2`, the version the tests use). On the CPU plugin a Pallas kernel
must run in Pallas' interpret mode (`pallas_call(..., interpret=True)`); on a TPU it lowers to
Mosaic.
"""
import functools
import re

import torch

from . import _C

__all__ = ["stablehlo_op", "jax_op", "call_module"]

_LIB = torch.library.Library("torch_pjrt_kernels", "FRAGMENT")
_OPS = {}  # op name -> the module id for a call's input signature (the graph lowering asks)


@functools.lru_cache(maxsize=None)
def _signature(module):
    sig = _C.module_signature(module)
    return ([(getattr(torch, d), tuple(s)) for d, s in sig["params"]],
            [(getattr(torch, d), tuple(s)) for d, s in sig["results"]])


@torch.library.register_fake("torch_pjrt::call_module")
def _call_module_fake(inputs, module):
    device = inputs[0].device if inputs else torch.device("tpu")
    return [torch.empty(s, dtype=d, device=device) for d, s in _signature(module)[1]]


def call_module(module, *tensors):
    """Runs registered module |module| (an id from `_C.register_module`) on |tensors|: a list."""
    return torch.ops.torch_pjrt.call_module(list(tensors), module)


def _check_name(name):
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name or ""):
        raise ValueError(f"a kernel's name must be an identifier, got {name!r}")
    if name in _OPS:
        raise ValueError(f"a kernel named {name!r} exists already (torch_pjrt_kernels::{name})")
    return name


def _define(name, module_for, fake, vjp_for, exports):
    """torch_pjrt_kernels::|name|(Tensor[] inputs) -> Tensor[]: on tpu, the module |module_for|
    gives for the inputs' signature; |fake| gives the outputs' shapes; |vjp_for|, if given, the
    module of its VJP for the inputs' signature (inputs, then a gradient per output -> a gradient
    per input); else a backward through it raises."""
    _LIB.define(f"{name}(Tensor[] inputs) -> Tensor[]")
    qualified = f"torch_pjrt_kernels::{name}"

    def run(inputs):
        if any(t.device.type != "tpu" for t in inputs):
            raise RuntimeError(f"{qualified} runs on tpu tensors; got "
                               f"{[str(t.device) for t in inputs]}")
        return call_module(module_for(inputs), *inputs)

    torch.library.impl(qualified, "PrivateUse1", lib=_LIB)(run)
    torch.library.register_fake(qualified, lib=_LIB)(fake)

    def backward(inputs, outputs, grads):
        if vjp_for is None:
            raise RuntimeError(f"{qualified} has no backward: give stablehlo_op a vjp module")
        grads = [torch.zeros_like(o) if g is None else g for g, o in zip(grads, outputs)]
        return call_module(vjp_for(inputs), *inputs, *grads)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs[0], *output)
        ctx.n = len(inputs[0])

    def grad(ctx, grads):
        saved = ctx.saved_tensors
        return (backward(list(saved[:ctx.n]), list(saved[ctx.n:]), list(grads)),)

    torch.library.register_autograd(qualified, grad, setup_context=setup_context, lib=_LIB)
    _OPS[name] = module_for
    op = getattr(torch.ops.torch_pjrt_kernels, name)

    def call(*tensors):
        outs = op(list(tensors))
        return outs[0] if len(outs) == 1 else tuple(outs)

    call.op = op
    call.exports = exports  # how many modules JAX has exported for it (forward and VJP)
    call.__name__ = name
    return call


def module_for_node(name, inputs):
    """The module id op torch_pjrt_kernels::|name| runs for |inputs| (tensors or fake tensors
    of the call's signature), exporting it first if new: what a compiled graph calls."""
    return _OPS[name](inputs)


def stablehlo_op(module_text, *, name, vjp=None):
    """A PyTorch op running |module_text|, a StableHLO module whose public @main takes and returns
    static-shaped tensors (as `jax.export`'s `Exported.mlir_module()` prints it). Returns a
    callable taking tensors and returning a tensor (or a tuple, for several results); its
    `.op` is the `torch.ops.torch_pjrt_kernels.<name>` overload. |vjp|, a second module taking
    the inputs then a gradient per result and returning a gradient per input, makes it
    differentiable."""
    module = _C.register_module(module_text)  # a bad module raises here, saying why
    params, results = _signature(module)
    vjp_for = None
    if vjp is not None:
        vjp_module = _C.register_module(vjp)
        want = (params + results, params)
        if _signature(vjp_module) != want:
            raise ValueError(f"stablehlo_op {name}: the vjp module must take {_describe(want[0])} "
                             f"and return {_describe(want[1])}; its @main takes "
                             f"{_describe(_signature(vjp_module)[0])} and returns "
                             f"{_describe(_signature(vjp_module)[1])}")
        vjp_for = lambda inputs: vjp_module  # noqa: E731  (module_for checked the inputs)

    def module_for(inputs):
        got = [(t.dtype, tuple(t.shape)) for t in inputs]
        if got != params:
            raise ValueError(f"torch_pjrt_kernels::{name}: the module takes "
                             f"{_describe(params)}, got {_describe(got)}")
        return module

    def fake(inputs):
        module_for(inputs)
        device = inputs[0].device if inputs else torch.device("tpu")
        return [torch.empty(s, dtype=d, device=device) for d, s in results]

    return _define(_check_name(name), module_for, fake, vjp_for, exports=lambda: 0)


def _describe(sig):
    return "(" + ", ".join(f"{str(d).replace('torch.', '')}{list(s)}" for d, s in sig) + ")"


def _jax():
    try:
        import jax
        import jax.numpy  # noqa: F401
        from jax import export  # noqa: F401
    except ImportError as e:
        raise ImportError("torch_pjrt.kernels.jax_op needs JAX: pip install jax==0.10.2") from e
    return jax


def jax_op(fn, *, name=None):
    """A PyTorch op running JAX function |fn| (positional array arguments, an array or a tuple of
    arrays out; Pallas kernels allowed) on tpu tensors. Exported once per input signature;
    its gradient is JAX's VJP of |fn|, exported on first use. Returns a callable like
    `stablehlo_op`'s."""
    jax = _jax()
    name = _check_name(name or getattr(fn, "__name__", None))
    jitted = jax.jit(fn)

    def spec(inputs):
        return tuple(jax.ShapeDtypeStruct(tuple(t.shape), _jax_dtype(jax, t.dtype)) for t in inputs)

    @functools.lru_cache(maxsize=None)
    def forward_module(specs):
        return _C.register_module(_export(jax, jitted, specs, name))

    @functools.lru_cache(maxsize=None)
    def out_specs(specs):
        with jax.enable_x64(True):  # as exported
            out = jax.eval_shape(jitted, *specs)
        return out if isinstance(out, (tuple, list)) else (out,)

    @functools.lru_cache(maxsize=None)
    def backward_module(specs):
        n = len(specs)

        def vjp(*args):
            primals, cts = args[:n], args[n:]
            out, pullback = jax.vjp(fn, *primals)
            return pullback(tuple(cts) if isinstance(out, (tuple, list)) else cts[0])

        return _C.register_module(_export(jax, jax.jit(vjp), specs + tuple(out_specs(specs)),
                                          name + " (vjp)"))

    modules = {}  # (dtype, shape) per input -> module id: an eager call's one lookup

    def module_for(inputs):
        key = tuple((t.dtype, tuple(t.shape)) for t in inputs)
        module = modules.get(key)
        if module is None:
            module = modules[key] = forward_module(spec(inputs))
        return module

    def fake(inputs):
        device = inputs[0].device if inputs else torch.device("tpu")
        return [torch.empty(tuple(o.shape), dtype=_torch_dtype(o.dtype), device=device)
                for o in out_specs(spec(inputs))]

    def vjp_for(inputs):
        return backward_module(spec(inputs))

    def exports():
        return forward_module.cache_info().currsize + backward_module.cache_info().currsize

    return _define(name, module_for, fake, vjp_for, exports)


def _jax_dtype(jax, dtype):
    import jax.numpy as jnp
    table = {torch.float32: jnp.float32, torch.float16: jnp.float16,
             torch.bfloat16: jnp.bfloat16, torch.float64: jnp.float64, torch.int32: jnp.int32,
             torch.int64: jnp.int64, torch.int8: jnp.int8, torch.uint8: jnp.uint8,
             torch.int16: jnp.int16, torch.bool: jnp.bool_}
    if dtype not in table:
        raise TypeError(f"jax_op: no JAX dtype for {dtype}")
    return table[dtype]


def _torch_dtype(dtype):
    return getattr(torch, str(dtype)) if str(dtype) != "bool" else torch.bool


def _export(jax, jitted, specs, what):
    """|jitted| exported for |specs|: its StableHLO text. 64-bit types as given (JAX would
    narrow them to 32 bits by default)."""
    from jax import export
    try:
        with jax.enable_x64(True):
            exp = export.export(jitted)(*specs)
    except Exception as e:
        raise ValueError(f"jax_op {what}: JAX could not export the function for "
                         f"{[(str(s.dtype), s.shape) for s in specs]}: {e}") from e
    return exp.mlir_module()
