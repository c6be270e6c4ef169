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
    "gelu approximate": lambda d: F.gelu(_f(3).to(d), approximate="asdf"),
    "gelu_backward approximate": lambda d: torch.ops.aten.gelu_backward(
        _f(3).to(d), _f(3, seed=1).to(d), approximate="asdf"),
    "roll no shifts": lambda d: torch.roll(_f(5).to(d), ()),
    "roll shifts/dims differ": lambda d: torch.roll(_f(5, 5).to(d), (2, 1), 0),
    "roll dim out of range": lambda d: torch.roll(_f(5).to(d), 0, 2),
    "roll dim of a 0-dim": lambda d: torch.roll(_f().to(d), 0, 0),
    "uniform_ from > to": lambda d: _f(10).to(d).uniform_(3, -1),
    "max_pool2d output too small": lambda d: F.max_pool2d(_f(1, 1, 4).to(d), kernel_size=2),
    "max_pool3d output too small": lambda d: F.max_pool3d(_f(1, 1, 1, 4, 4).to(d), kernel_size=2),
    "max_unpool3d zero stride": lambda d: F.max_unpool3d(
        _f(1, 1, 4, 4, 4).to(d), torch.zeros(1, 1, 4, 4, 4, dtype=torch.long).to(d), 3, stride=0),
    "layer_norm empty normalized_shape": lambda d: torch.native_layer_norm(_f(1, 2, 3).to(d), (), None, None, 1e-5),
    "layer_norm weight shape": lambda d: torch.native_layer_norm(
        _f(1, 2, 3).to(d), (1, 2, 3), _f(1, 2).to(d), None, 1e-5),
    "layer_norm bias shape": lambda d: torch.native_layer_norm(
        _f(1, 2, 3).to(d), (1, 2, 3), None, _f(1, 2).to(d), 1e-5),
    "layer_norm input shape": lambda d: torch.native_layer_norm(_f(2, 4).to(d), (3,), None, None, 1e-5),
    "gather index larger than self": lambda d: torch.gather(
        _f(1, 1).to(d), 1, torch.zeros(2, 2, dtype=torch.long).to(d)),
    "scatter self/src dtypes": lambda d: torch.scatter(
        _f(3, 5, dtype=torch.float64).to(d), 0, torch.zeros(2, 2, dtype=torch.long).to(d), _f(2, 5).to(d)),
    "scatter_add self/src dtypes": lambda d: torch.scatter_add(
        _f(3, 5, dtype=torch.float64).to(d), 0, torch.zeros(2, 2, dtype=torch.long).to(d), _f(2, 5).to(d)),
    "scatter index larger than src": lambda d: torch.scatter(
        _f(3, 5).to(d), 0, torch.zeros(2, 3, dtype=torch.long).to(d), _f(2, 2).to(d)),
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
    "index_put_ of float64 values into float32": lambda d: _f(4).to(d).index_put_(
        (torch.tensor([1, 2]).to(d),), _f(2, dtype=torch.float64).to(d)),
    "index_put of int64 values, accumulate": lambda d: _f(4).to(d).index_put(
        (torch.tensor([1, 2]).to(d),), torch.tensor([1, 2]).to(d), accumulate=True),
    # out= tensors: a dtype the op does not write, memory an input holds.
    "gather out= of another dtype": lambda d: torch.gather(
        _f(2, 3).to(d), 1, torch.zeros(2, 2, dtype=torch.long).to(d), out=torch.empty(2, 2, dtype=torch.float64).to(d)),
    "amax out= of another dtype": lambda d: torch.amax(_f(2, 3).to(d), 0, out=torch.empty(3, dtype=torch.float64).to(d)),
    "aminmax out= of another dtype": lambda d: torch.aminmax(
        _f(2, 3).to(d), dim=0, out=(torch.empty(3, dtype=torch.int64).to(d), torch.empty(3).to(d))),
    "add out= float into int": lambda d: torch.add(_f(3).to(d), 1, out=torch.empty(3, dtype=torch.int64).to(d)),
    "index_select out= is the input": lambda d: (lambda x: torch.index_select(
        x, 0, torch.tensor([0, 1]).to(d), out=x))(_f(2, 2).to(d)),
    "cat out= is an input": lambda d: (lambda x: torch.cat([x, x], out=x))(_f(4).to(d)),
    "aminmax out= tensors overlap": lambda d: (lambda o: torch.aminmax(_f(2, 3).to(d), dim=0, out=(o, o)))(
        torch.empty(3).to(d)),
}

# Valid calls next to the bad ones: they must run, and match CPU.
GOOD = {
    "gelu tanh": lambda d: F.gelu(_f(3).to(d), approximate="tanh"),
    "roll flattened": lambda d: torch.roll(_f(2, 3).to(d), 2),
    "roll two dims": lambda d: torch.roll(_f(2, 3).to(d), (1, -1), (0, -1)),
    "roll of a 0-dim": lambda d: torch.roll(_f().to(d), 1),
    "max_pool2d ceil_mode": lambda d: F.max_pool2d(_f(1, 3, 5).to(d), kernel_size=2, ceil_mode=True),
    "avg_pool2d ceil_mode": lambda d: F.avg_pool2d(_f(1, 3, 5).to(d), kernel_size=2, ceil_mode=True),
    "layer_norm": lambda d: torch.native_layer_norm(
        _f(2, 3).to(d), (3,), _f(3, seed=1).to(d), _f(3, seed=2).to(d), 1e-5),
    "gather": lambda d: torch.gather(_f(2, 3).to(d), 1, torch.tensor([[0, 2], [1, 1]]).to(d)),
    "scatter": lambda d: torch.scatter(_f(3, 5).to(d), 0, torch.tensor([[0, 1], [2, 0]]).to(d), _f(2, 5).to(d)),
    "mean with dtype float64": lambda d: torch.mean(_f(3, 4).to(d), (0,), dtype=torch.float64),
    "amax over a non-empty dim of an empty tensor": lambda d: torch.amax(_f(5, 0, 5).to(d), 0),
    "max.dim over a non-empty dim of an empty tensor": lambda d: torch.max(_f(5, 0, 5).to(d), 2),
    "argmax over a non-empty dim of an empty tensor": lambda d: torch.argmax(_f(0, 3).to(d), 1),
    "index with cpu indices": lambda d: _f(5).to(d)[torch.tensor([4, 0])],
    "index_put_ with cpu indices": lambda d: _f(5).to(d).index_put_((torch.tensor([4, 0]),), _f(2, seed=1).to(d)),
    "add out= float into float64 (a cast)": lambda d: torch.add(_f(3).to(d), 1, out=torch.empty(3, dtype=torch.float64).to(d)),
    "sin out= of its dtype": lambda d: torch.sin(_f(3).to(d), out=_f(3).to(d)),
    "amax out= of its dtype, resized": lambda d: torch.amax(_f(2, 3).to(d), 0, out=torch.empty(0).to(d)),
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


# CUDA's rule, which CPU alone cannot show: a list of tensors on two devices raises.
MIXED = {
    "cat": lambda: torch.cat([_f(2).to(DEVICE), _f(3)]),
    "stack": lambda: torch.stack([_f(2), _f(2).to(DEVICE)]),
    "cat of three": lambda: torch.cat([_f(2).to(DEVICE), _f(2).to(DEVICE), _f(2)]),
}


@pytest.mark.parametrize("name", list(MIXED))
def test_tensor_list_on_two_devices_raises(name):
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        _host(MIXED[name]())
    _still_works()
