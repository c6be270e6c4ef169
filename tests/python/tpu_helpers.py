"""Helpers shared by the torch_pjrt ("tpu" device) tests.

Every numeric test computes the same thing on PyTorch's CPU backend and on the tpu device and
compares the two with torch.testing.assert_close, using tolerances chosen by dtype.
"""
import json
import os
import subprocess
import sys

import torch  # autoloads torch_pjrt through the torch.backends entry point

import torch_pjrt

DEVICE = "tpu"

ALL_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
              torch.float16, torch.bfloat16, torch.float32, torch.float64]
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]

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
