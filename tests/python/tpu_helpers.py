"""Helpers shared by the torch_pjrt ("tpu" device) tests.

Every numeric test computes the same thing on PyTorch's CPU backend and on the tpu device and
compares the two with torch.testing.assert_close, using tolerances chosen by dtype.
"""
import json
import os
import subprocess
import sys

import pytest
import torch  # autoloads torch_pjrt through the torch.backends entry point

import torch_pjrt

DEVICE = "tpu"

ALL_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
              torch.float16, torch.bfloat16, torch.float32, torch.float64]
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]

F32, BF16, F16, F64 = torch.float32, torch.bfloat16, torch.float16, torch.float64
I64, I32, I16, I8, U8, BOOL = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
                               torch.bool)
# The two float types most op tests cover, as a parametrize mark.
DTYPES = pytest.mark.parametrize("dtype", [F32, BF16], ids=["float32", "bfloat16"])

# (rtol, atol) per result dtype. The device computes half types in f32 and rounds once, as
# PyTorch's CPU kernels do, so one or two ulps of the half type is enough; f32/f64 only differ by
# summation order and libm vs XLA transcendental implementations.
_TOL = {
    torch.bfloat16: (2e-2, 2e-2),
    torch.float16: (2e-3, 2e-3),
    torch.float32: (1e-5, 1e-5),
    torch.float64: (1e-10, 1e-10),
}


def tol(dtype):
    """(rtol, atol) for comparing results of |dtype| (exact for integer and bool types)."""
    return _TOL.get(dtype, (0, 0))


def assert_same(actual, expected, *, exact_dtype=True, **kw):
    """Compares a tpu result with the CPU reference: device, dtype, shape and values."""
    assert isinstance(actual, torch.Tensor), type(actual)
    assert actual.device.type == DEVICE, f"result is on {actual.device}, expected a tpu tensor"
    if exact_dtype:
        assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != CPU's {expected.dtype}"
    rtol, atol = tol(expected.dtype)
    kw.setdefault("rtol", rtol)
    kw.setdefault("atol", atol)
    kw.setdefault("equal_nan", True)
    torch.testing.assert_close(actual.cpu(), expected, check_dtype=exact_dtype, **kw)


def make(shape, dtype, *, seed=0, low=-5.0, high=5.0):
    """A deterministic CPU tensor of |dtype| with values in [low, high) (non-negative for
    unsigned types), never exactly zero for float types so division stays finite."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low
    if dtype == torch.bool:
        return x > (low + high) / 2
    if dtype == torch.uint8:
        x = x.abs()
    if dtype.is_floating_point:
        x = torch.where(x.abs() < 0.05, torch.full_like(x, 0.5), x)
        return x.to(dtype)
    return x.round().to(dtype)


def to_dev(*tensors):
    """The tensors copied to the tpu device (non-tensors pass through)."""
    out = tuple(t.to(DEVICE) if isinstance(t, torch.Tensor) else t for t in tensors)
    return out[0] if len(out) == 1 else out


def fallbacks():
    return dict(torch_pjrt.stats()["fallbacks"])


def child_env(**overrides):
    """A copy of this process's environment for a child interpreter, with |overrides|
    (a value of None removes the variable)."""
    env = dict(os.environ)
    for k, v in overrides.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    env.setdefault("TORCH_PJRT_QUIET_FALLBACK", "1")
    return env


def run_python(code, timeout=120, **env_overrides):
    """Runs |code| in a fresh interpreter; returns the CompletedProcess (text mode)."""
    return subprocess.run([sys.executable, "-c", code], env=child_env(**env_overrides),
                          capture_output=True, text=True, timeout=timeout)


def run_json(code, timeout=120, **env_overrides):
    """Runs |code|, which must print one JSON object as its last stdout line; returns it."""
    p = run_python(code, timeout=timeout, **env_overrides)
    assert p.returncode == 0, f"child failed (rc {p.returncode}):\n{p.stdout}\n{p.stderr}"
    lines = [l for l in p.stdout.splitlines() if l.strip()]
    assert lines, f"child printed nothing:\n{p.stderr}"
    return json.loads(lines[-1]), p


def dname(d):
    """A dtype's test id: "float32" for torch.float32."""
    return str(d).replace("torch.", "")


def both(fn, *cpu_args):
    """fn on the CPU args and on their tpu copies; returns (tpu_result, cpu_result)."""
    return fn(*to_dev(*cpu_args)) if len(cpu_args) > 1 else fn(to_dev(*cpu_args)), fn(*cpu_args)


def check(fn, *cpu_args, **kw):
    """fn on tpu copies of the CPU args equals fn on them (fallbacks allowed)."""
    got, want = both(fn, *cpu_args)
    assert_same(got, want, **kw)


def run_native(fn, *cpu_args):
    """fn on tpu copies under strict mode (no fallback allowed), and on CPU."""
    dev = [a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in cpu_args]
    with torch_pjrt.strict():
        got = fn(*dev)
        torch.tpu.synchronize()
    return got, fn(*cpu_args)


def check_native(fn, *cpu_args, **kw):
    """fn under strict mode on tpu copies of the CPU args (non-tensors pass through) equals fn on
    CPU; a tuple result is compared element by element, int32 ones (pivots, infos) exactly."""
    got, want = run_native(fn, *cpu_args)
    if isinstance(want, torch.Tensor):
        got, want = (got,), (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if w.dtype == torch.int32:
            assert g.dtype == torch.int32
            assert torch.equal(g.cpu(), w)
        else:
            assert_same(g, w, **kw)


def check_strict(fn, *xs, backward=False):
    """fn under strict mode on tpu copies of the CPU tensors |xs| equals fn on them (a tuple result
    element by element); with |backward|, so do the gradients of every input."""
    want = fn(*xs)
    xd = [x.to(DEVICE) for x in xs]
    with torch_pjrt.strict():
        got = fn(*xd)
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            assert_same(g, w)
    else:
        assert_same(got, want)
    if not backward:
        return
    xs = [x.detach().requires_grad_(True) for x in xs]
    xd = [x.detach().requires_grad_(True) for x in xd]
    out = fn(*xs)
    g = make(tuple(out.shape), out.dtype, seed=5)
    out.backward(g)
    with torch_pjrt.strict():
        fn(*xd).backward(g.to(DEVICE))
    for a, b in zip(xd, xs):
        assert_same(a.grad, b.grad)
