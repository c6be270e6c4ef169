"""Tensor creation and filling against PyTorch on CPU: fill_ (rounding like CPU), full, zeros,
ones and their _like forms, copy_ and its out= form, eye, linspace and logspace."""
import pytest
import torch

import torch_pjrt
from tpu_helpers import (
    BF16, BOOL, DEVICE, F16, F32, F64, I32, I64, I8, U8, assert_same, check, check_native, dname,
    make, to_dev)


@pytest.mark.parametrize("dtype", [F32, BF16, F16, F64, I64, I32, I8, U8, BOOL], ids=dname)
@pytest.mark.parametrize("value", [0, 1, 2.75, -1, True], ids=str)
def test_fill(dtype, value):
    if dtype == U8 and value == -1:
        value = 255
    c = torch.zeros(3, 4, dtype=dtype)
    t = c.to(DEVICE)
    assert t.fill_(value) is t
    assert_same(t, c.fill_(value), rtol=0, atol=0)
    t2 = torch.empty(2, 6, dtype=dtype, device=DEVICE)
    t2[:, ::3].fill_(value)
    assert_same(t2[:, ::3], torch.empty(2, 2, dtype=dtype).fill_(value), rtol=0, atol=0)
    assert_same(t2[:, 1::3], torch.zeros(2, 2, dtype=dtype), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [F16, BF16, F32], ids=dname)
@pytest.mark.parametrize("value", [0.1, 1.1, -3.3e-3, 65504.0, 1e-8], ids=str)
def test_fill_rounds_like_cpu(dtype, value):
    check(lambda x: x.fill_(value), torch.zeros(4, dtype=dtype), rtol=0, atol=0)


def test_fill_float16_double_rounding_like_cpu():
    check(lambda x: x.fill_(1 + 2 ** -11 + 2 ** -40), torch.zeros(2, dtype=F16), rtol=0, atol=0)


def test_fill_with_zero_dim_tensor_value_and_functional_forms():
    t = torch.zeros(3, device=DEVICE)
    t.fill_(torch.tensor(2.5))
    assert_same(t, torch.full((3,), 2.5))
    c = make((2, 3), F32, seed=59)
    check(lambda x: torch.ops.aten.fill.Scalar(x, -4.5), c)
    o = torch.empty(2, 3, device=DEVICE)
    torch.ops.aten.fill.Scalar_out(c.to(DEVICE), 7, out=o)
    assert_same(o, torch.full((2, 3), 7.0))


def test_full_zeros_ones_like():
    assert_same(torch.full((2, 3), 1.5, device=DEVICE), torch.full((2, 3), 1.5))
    assert_same(torch.ones(4, dtype=I32, device=DEVICE), torch.ones(4, dtype=I32))
    t = make((3, 2), F32, seed=60).to(DEVICE)
    assert_same(torch.ones_like(t), torch.ones(3, 2))
    assert_same(torch.full_like(t, -2), torch.full((3, 2), -2.0))


def test_copy_functional_and_out():
    a = make((2, 3), F32, seed=61)
    b = make((3,), I64, seed=62)
    check(lambda x, y: torch.ops.aten.copy(x, y), a, b)
    ta, tb = to_dev(a, b)
    out = torch.empty(2, 3, device=DEVICE)
    torch.ops.aten.copy.out(ta, tb, out=out)
    assert_same(out, torch.ops.aten.copy(a, b))


def test_eye_and_vdot():
    with torch_pjrt.strict():
        got = (torch.eye(3, device=DEVICE), torch.eye(2, 4, dtype=I64, device=DEVICE))
    assert_same(got[0], torch.eye(3))
    assert_same(got[1], torch.eye(2, 4, dtype=I64))
    check_native(torch.vdot, make((5,), F32, seed=26), make((5,), F32, seed=27))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, BF16, torch.int64, torch.int32],
                         ids=str)
@pytest.mark.parametrize("start,end,steps", [(-3.5, 7.25, 1000), (10, -7, 17), (2, 2, 5), (1.5, 9, 1), (0, 1, 0)],
                         ids=str)
def test_linspace(dtype, start, end, steps):
    if dtype == BF16 and steps > 16:
        pytest.skip("16-bit linspace past 16 steps falls back: CPU's vectorized chunks round differently")
    want = torch.linspace(start, end, steps, dtype=dtype)
    with torch_pjrt.strict():
        got = torch.linspace(start, end, steps, dtype=dtype, device=DEVICE)
        out = torch.empty(3, dtype=dtype, device=DEVICE)
        torch.linspace(start, end, steps, out=out)
        torch.tpu.synchronize()
    assert_same(got, want, rtol=0, atol=0)
    assert_same(out, want, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, BF16, torch.int64], ids=str)
@pytest.mark.parametrize("start,end,steps,base", [(-3.5, 7.25, 100, 10.0), (10, -7, 17, 2.0), (1.5, 9, 1, 3.0),
                                                  (0, 1, 0, 10.0)], ids=str)
def test_logspace(dtype, start, end, steps, base):
    if dtype == BF16 and steps > 16:
        pytest.skip("16-bit logspace past 16 steps falls back: CPU rounds its exponents differently")
    want = torch.logspace(start, end, steps, base, dtype=dtype)
    with torch_pjrt.strict():
        got = torch.logspace(start, end, steps, base, dtype=dtype, device=DEVICE)
        torch.tpu.synchronize()
    assert_same(got, want)
