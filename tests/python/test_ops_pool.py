"""Average pooling (fixed windows and adaptive, 2d/3d, with backwards) and upsampling (nearest and
linear, with backwards) against CPU under strict mode: no CPU fallback where the op is native."""
import pytest
import torch
import torch.nn.functional as F

import torch_pjrt
from tpu_helpers import BF16, DEVICE, F32, I64, assert_same, make


def check(fn, x, *, backward=True):
    want = fn(x)
    xd = x.detach().to(DEVICE)
    if backward:
        x = x.detach().requires_grad_(True)
        xd.requires_grad_(True)
        want = fn(x)
    with torch_pjrt.strict():
        got = fn(xd)
        if backward:
            g = make(tuple(want.shape), x.dtype, seed=3)
            want.backward(g)
            got.backward(g.to(DEVICE))
        torch.tpu.synchronize()
    assert_same(got, want.detach())
    if backward:
        assert_same(xd.grad, x.grad)


AVG2D = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=2, stride=3, divisor_override=3),
]


@pytest.mark.parametrize("kw", AVG2D, ids=range(len(AVG2D)))
@pytest.mark.parametrize("dtype", [F32, I64], ids=["float32", "int64"])
def test_avg_pool2d(kw, dtype):
    x = make((2, 3, 7, 8), dtype, low=-50, high=50)
    check(lambda t: F.avg_pool2d(t, **kw), x, backward=dtype.is_floating_point)


def test_avg_pool2d_bf16_forward_unbatched():
    check(lambda t: F.avg_pool2d(t, 3, 2, 1, ceil_mode=True), make((3, 7, 8), BF16), backward=False)


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=(2, 1, 2), padding=1,
                                                          ceil_mode=True, count_include_pad=False)],
                         ids=["k2", "ceil_excl"])
def test_avg_pool3d(kw):
    check(lambda t: F.avg_pool3d(t, **kw), make((2, 2, 5, 6, 7), F32))


@pytest.mark.parametrize("size", [(1, 1), (3, 5), (4, 7), (9, 2)], ids=str)
def test_adaptive_avg_pool2d(size):
    check(lambda t: F.adaptive_avg_pool2d(t, size), make((2, 3, 7, 6), F32))


def test_adaptive_avg_pool3d():
    check(lambda t: F.adaptive_avg_pool3d(t, (2, 3, 5)), make((2, 3, 5, 4, 7), F32))


def test_empty_batch():
    check(lambda t: F.avg_pool2d(t, 2), make((0, 3, 4, 4), F32), backward=False)


def test_cpu_errors_stay_cpu_errors():
    x = make((1, 3, 4, 4), F32).to(DEVICE)
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        F.avg_pool2d(x, 2, padding=2)
    with pytest.raises(RuntimeError, match="not implemented for 'Int'"):
        F.avg_pool2d(x.int(), 2)


def test_inf_stays_in_its_windows():
    x = make((1, 2, 6, 6), F32)
    x[0, 0, 1, 1] = float("inf")
    x[0, 1, 4, 2] = float("-inf")
    check(lambda t: F.avg_pool2d(t, 2, 2), x, backward=False)
    check(lambda t: F.adaptive_avg_pool2d(t, (4, 3)), x, backward=False)


UPSAMPLE = [
    ("nearest", (2, 3, 5), dict(scale_factor=2.5)),
    ("nearest", (2, 3, 5, 4), dict(size=(3, 9))),
    ("nearest", (1, 2, 3, 4, 5), dict(scale_factor=(1.5, 0.5, 2.0))),
    ("nearest-exact", (2, 3, 7), dict(size=4)),
    ("nearest-exact", (2, 3, 5, 4), dict(scale_factor=1.7)),
    ("nearest-exact", (1, 2, 3, 4, 5), dict(size=(5, 3, 7))),
]


@pytest.mark.parametrize("mode,shape,kw", UPSAMPLE, ids=range(len(UPSAMPLE)))
@pytest.mark.parametrize("dtype", [F32, BF16], ids=["float32", "bfloat16"])
def test_upsample_nearest(mode, shape, kw, dtype):
    check(lambda t: F.interpolate(t, mode=mode, **kw), make(shape, dtype))


def test_upsample_nearest_uint8():
    x = make((1, 3, 4, 5), torch.uint8, low=0, high=255)
    check(lambda t: F.interpolate(t, scale_factor=1.5, mode="nearest"), x, backward=False)


LINEAR = [
    ("linear", (2, 3, 5), dict(scale_factor=2.5)),
    ("linear", (2, 3, 9), dict(size=4, align_corners=True)),
    ("bilinear", (2, 3, 5, 4), dict(size=(3, 9))),
    ("bilinear", (1, 2, 4, 6), dict(scale_factor=1.7, align_corners=True)),
    ("bilinear", (1, 2, 4, 6), dict(size=(4, 6))),
    ("trilinear", (1, 2, 3, 4, 5), dict(scale_factor=(1.5, 0.5, 2.0))),
    ("trilinear", (1, 2, 3, 4, 5), dict(size=(5, 3, 7), align_corners=True)),
]


@pytest.mark.parametrize("mode,shape,kw", LINEAR, ids=range(len(LINEAR)))
def test_upsample_linear(mode, shape, kw):
    check(lambda t: F.interpolate(t, mode=mode, **kw), make(shape, F32))
    check(lambda t: F.interpolate(t, mode=mode, **kw), make(shape, torch.float64), backward=False)


@pytest.mark.parametrize("mode,shape,kw", [m for m in LINEAR if m[0] != "bilinear"],
                         ids=[str(i) for i, m in enumerate(LINEAR) if m[0] != "bilinear"])
def test_upsample_linear_16bit_forward(mode, shape, kw):
    # CPU rounds each weight to the input's type; its bilinear kernel rounds its own way (falls back)
    for dtype in (BF16, torch.float16):
        check(lambda t: F.interpolate(t, mode=mode, **kw), make(shape, dtype), backward=False)


def test_upsample_bilinear_bf16_backward():
    x = make((2, 3, 5, 4), BF16).requires_grad_(True)
    xd = x.detach().to(DEVICE).requires_grad_(True)
    F.interpolate(x, size=(7, 9), mode="bilinear").sum().backward()
    F.interpolate(xd, size=(7, 9), mode="bilinear").sum().backward()
    assert_same(xd.grad, x.grad)
