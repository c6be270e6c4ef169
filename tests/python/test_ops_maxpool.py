"""Max pooling against CPU under strict mode: max_pool3d, adaptive max pooling 1d/2d/3d (values,
indices and backward, NaN windows included) and max_unpool 1d/2d/3d."""
import pytest
import torch
import torch.nn.functional as F

import torch_pjrt
from tpu_helpers import DEVICE, assert_same, make

F32, BF16, I64 = torch.float32, torch.bfloat16, torch.int64
DTYPES = pytest.mark.parametrize("dtype", [F32, BF16], ids=["float32", "bfloat16"])


def with_nans(x):
    x = x.clone()
    flat = x.view(-1)
    flat[3] = flat[7] = flat[8] = float("nan")
    return x


def check(fn, x, *, backward=True):
    """fn returns (values, indices); both match CPU, and so does the gradient of the values."""
    want = fn(x)
    xd = x.detach().to(DEVICE)
    with torch_pjrt.strict():
        got = fn(xd)
    for g, w in zip(got, want):
        assert_same(g, w)
    if not backward:
        return
    x = x.detach().requires_grad_(True)
    xd = xd.detach().requires_grad_(True)
    g = make(tuple(want[0].shape), x.dtype, seed=3)
    fn(x)[0].backward(g)
    with torch_pjrt.strict():
        fn(xd)[0].backward(g.to(DEVICE))
    assert_same(xd.grad, x.grad)


@DTYPES
@pytest.mark.parametrize("size", [(1, 1), (3, 4), (9, 5)], ids=str)
def test_adaptive_max_pool2d(dtype, size):
    check(lambda t: F.adaptive_max_pool2d(t, size, return_indices=True), make((2, 3, 7, 6), dtype))


@DTYPES
def test_adaptive_max_pool_nan_and_1d(dtype):
    x = with_nans(make((2, 3, 9), dtype))
    check(lambda t: F.adaptive_max_pool1d(t, 4, return_indices=True), x, backward=False)
    check(lambda t: F.adaptive_max_pool1d(t, 4, return_indices=True), make((3, 9), dtype))


@DTYPES
def test_adaptive_max_pool3d(dtype):
    check(lambda t: F.adaptive_max_pool3d(t, (2, 4, 3), return_indices=True), make((2, 2, 5, 6, 7), dtype))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=(2, 3, 2), stride=(1, 2, 2), padding=1,
                                                          ceil_mode=True),
                                dict(kernel_size=3, stride=1, dilation=2)], ids=["k2", "ceil_pad", "dilated"])
@DTYPES
def test_max_pool3d(kw, dtype):
    check(lambda t: F.max_pool3d(t, return_indices=True, **kw), make((2, 2, 6, 7, 8), dtype))


def test_max_pool3d_int64_and_nan():
    check(lambda t: F.max_pool3d(t, 2, return_indices=True), make((1, 2, 4, 5, 6), I64), backward=False)
    check(lambda t: F.max_pool3d(t, 3, 2, 1, return_indices=True), with_nans(make((2, 5, 6, 7), F32)),
          backward=False)


def test_max_pool2d_takes_the_last_nan():
    x = torch.tensor([[[1.0, float("nan"), 3.0, float("nan"), 2.0, 5.0]]])
    check(lambda t: F.max_pool1d(t, 6, return_indices=True), x, backward=False)


def unpool_check(fn, x, idx):
    want = fn(x, idx)
    with torch_pjrt.strict():
        got = fn(x.to(DEVICE), idx.to(DEVICE))
    assert_same(got, want)


@DTYPES
def test_max_unpool(dtype):
    x = make((2, 3, 8, 7), dtype)
    v, i = F.max_pool2d(x, 2, return_indices=True)
    unpool_check(lambda a, b: F.max_unpool2d(a, b, 2, output_size=(8, 7)), v, i)
    v, i = F.max_pool1d(x[0], 3, return_indices=True)
    unpool_check(lambda a, b: F.max_unpool1d(a, b, 3), v, i)
    x3 = make((2, 2, 5, 6, 7), dtype)
    v, i = F.max_pool3d(x3, 2, return_indices=True)
    unpool_check(lambda a, b: F.max_unpool3d(a, b, 2, output_size=(5, 6, 7)), v, i)


def test_max_unpool_duplicate_indices_last_wins():
    # CPU's result for duplicate indices depends on its threads (either write can win), so this
    # checks ours against the sequential rule, and that it does not change between runs.
    x = torch.tensor([[[1.0, 2.0, 3.0, 4.0]]])
    idx = torch.tensor([[[0, 2, 2, 5]]])
    want = torch.tensor([[[1.0, 0.0, 3.0, 0.0, 0.0, 4.0, 0.0]]])
    for _ in range(3):
        with torch_pjrt.strict():
            got = F.max_unpool1d(x.to(DEVICE), idx.to(DEVICE), 2, output_size=(7,))
        assert_same(got, want)
