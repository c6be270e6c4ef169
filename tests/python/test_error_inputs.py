"""A bad argument raises on tpu the exception type CPU raises (PyTorch's OpInfo error inputs),
never returns silently or crashes, and the device works afterwards; the valid calls next to each
bad one still run and match CPU."""
import warnings

import pytest
import torch
import torch.nn.functional as F

from tpu_helpers import DEVICE, assert_same, make


def _still_works():
    c = make((3, 4), torch.float32, seed=99)
    t = c.to(DEVICE)
    assert_same((t * 2 + t) @ t.t(), (c * 2 + c) @ c.t())
    torch.tpu.synchronize()


def _host(result):
    """Every tensor of |result| copied to CPU (errors found on the device surface here)."""
    if isinstance(result, torch.Tensor):
        return result.cpu()
    if isinstance(result, (tuple, list)):
        return type(result)(_host(r) for r in result)
    return result


def _f(*shape, dtype=torch.float32, seed=0):
    return make(shape, dtype, seed=seed)


# Each case: a function of the device that makes its inputs there and makes the bad call.
BAD = {
    "mean of int64": lambda d: torch.mean(_f(3, 4, dtype=torch.int64).to(d)),
    "mean with dtype int64": lambda d: torch.mean(_f(3, 4).to(d), (), dtype=torch.int64),
    "neg of bool": lambda d: torch.neg(torch.tensor([True, False]).to(d)),
    "sub of bools": lambda d: torch.tensor([True]).to(d) - torch.tensor([False]).to(d),
    "amax over an empty dim": lambda d: torch.amax(_f(5, 0, 5).to(d), 1),
    "amin over empty dims": lambda d: torch.amin(_f(5, 0, 5).to(d), (0, 1)),
    "amax of an empty tensor": lambda d: torch.amax(_f(5, 0, 5).to(d)),
    "max.dim over an empty dim": lambda d: torch.max(_f(5, 0, 5).to(d), 1),
    "max of an empty tensor": lambda d: torch.max(_f(0, 3).to(d)),
    "argmax of an empty tensor": lambda d: torch.argmax(_f(0, 3).to(d)),
    "argmin over an empty dim": lambda d: torch.argmin(_f(0, 3).to(d), 0),
}

# Valid calls next to the bad ones: they must run, and match CPU.
GOOD = {
    "mean with dtype float64": lambda d: torch.mean(_f(3, 4).to(d), (0,), dtype=torch.float64),
    "amax over a non-empty dim of an empty tensor": lambda d: torch.amax(_f(5, 0, 5).to(d), 0),
    "max.dim over a non-empty dim of an empty tensor": lambda d: torch.max(_f(5, 0, 5).to(d), 2),
    "argmax over a non-empty dim of an empty tensor": lambda d: torch.argmax(_f(0, 3).to(d), 1),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_argument_raises_as_on_cpu(name):
    with pytest.raises(Exception) as cpu:
        BAD[name]("cpu")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"tpu: '.*' has no native lowering")
        with pytest.raises(type(cpu.value)):
            _host(BAD[name](DEVICE))
    _still_works()


@pytest.mark.parametrize("name", list(GOOD))
def test_valid_neighbour_runs(name):
    actual, expected = GOOD[name](DEVICE), GOOD[name]("cpu")
    if isinstance(expected, torch.Tensor):
        actual, expected = (actual,), (expected,)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert_same(a, e)
