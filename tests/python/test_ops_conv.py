"""Convolution against CPU: integer convolutions (int64 exact, int32 falling back like CPU) and
unfold/fold (im2col, col2im) under strict mode."""
import pytest
import torch
import torch.nn.functional as F

from tpu_helpers import BF16, DEVICE, F32, assert_same, check_strict, make


@pytest.mark.parametrize("fn,wshape", [(F.conv1d, (4, 3, 2)), (F.conv2d, (4, 3, 2, 3)),
                                       (F.conv_transpose1d, (3, 4, 3)), (F.conv_transpose2d, (3, 4, 2, 2))],
                         ids=["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d"])
def test_int64_convolution_is_exact(fn, wshape):
    nd = len(wshape) - 2
    x = make((2, 3) + (7,) * nd, torch.int64, low=-100, high=100)
    w = make(wshape, torch.int64, seed=1, low=-100, high=100)
    b = make((wshape[1] if "transpose" in fn.__name__ else wshape[0],), torch.int64, seed=2)
    for kw in ({}, {"stride": 2, "padding": 1}, {"dilation": 2}):
        expected = fn(x, w, b, **kw)
        assert_same(fn(x.to(DEVICE), w.to(DEVICE), b.to(DEVICE), **kw), expected)


def test_int32_convolution_falls_back_like_cpu():
    x, w = make((1, 2, 5), torch.int32), make((3, 2, 2), torch.int32, seed=1)
    assert_same(F.conv1d(x.to(DEVICE), w.to(DEVICE)), F.conv1d(x, w))


UNFOLD = [((2, 3, 7, 6), dict(kernel_size=2)),
          ((3, 6, 5), dict(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1)))]


@pytest.mark.parametrize("dtype", [F32, BF16, torch.bool], ids=str)
@pytest.mark.parametrize("shape,kw", UNFOLD, ids=["plain", "dilated_padded"])
def test_unfold_and_fold(dtype, shape, kw):
    x = make(shape, dtype)
    check_strict(lambda t: F.unfold(t, **kw), x, backward=dtype == F32)
    if dtype == F32:  # CPU's 16-bit col2im adds overlaps in 16 bits: it falls back
        cols = F.unfold(x, **kw)
        check_strict(lambda c: F.fold(c, output_size=shape[-2:], **kw), cols, backward=True)
