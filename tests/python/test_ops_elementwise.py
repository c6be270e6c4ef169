"""Elementwise ops against PyTorch on CPU: unary and binary math, dtypes, broadcasting, Python
scalars, 0-dim tensors, type promotion, in-place and out= forms, special values, logaddexp,
heaviside, round(decimals), nan_to_num, bit shifts and frexp."""
import warnings

import pytest
import torch

import torch_pjrt
from tpu_helpers import (
    BF16, BOOL, DEVICE, F16, F32, F64, I16, I32, I64, I8, U8, assert_same, both, check,
    check_native, check_strict, dname, make, to_dev)


# ---------------------------------------------------------------- unary

UNARY = {
    "abs": torch.abs,
    "exp": torch.exp,
    "neg": torch.neg,
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "sqrt": lambda x: torch.sqrt(x.abs()) if x.dtype != BOOL else torch.sqrt(x),
    "tanh": torch.tanh,
}


@pytest.mark.parametrize("dtype", [F32, BF16, F16, F64, I64, I32, I8], ids=dname)
@pytest.mark.parametrize("op", list(UNARY))
def test_unary(op, dtype):
    c = make((3, 5), dtype, seed=1, low=-3, high=3)
    check(UNARY[op], c)


@pytest.mark.parametrize("op", list(UNARY))
def test_unary_noncontiguous_and_zero_dim(op):
    c = make((4, 6), F32, seed=2, low=-3, high=3)
    check(lambda x: UNARY[op](x.t()[1:, ::2]), c)
    s = make((), F32, seed=3, low=-3, high=3)
    got, want = both(UNARY[op], s)
    assert got.dim() == 0
    assert_same(got, want)


def test_unary_special_values():
    c = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-30, 88.0, -88.0])
    for name, f in UNARY.items():
        check(f, c)


@pytest.mark.parametrize("op", ["abs", "exp", "neg", "sigmoid", "sqrt", "tanh"])
def test_unary_inplace_and_out(op):
    c = make((3, 4), F32, seed=4, low=0.1, high=3)
    t = c.to(DEVICE)
    ret = getattr(t, op + "_")()
    assert ret is t
    assert_same(t, getattr(c.clone(), op + "_")())
    # out=
    t2 = c.to(DEVICE)
    out = torch.empty(3, 4, device=DEVICE)
    ret = getattr(torch, op)(t2, out=out)
    assert ret is out
    assert_same(out, getattr(torch, op)(c))
    # out= into a strided region of a bigger tensor
    big = torch.zeros(6, 8, device=DEVICE)
    getattr(torch, op)(t2, out=big[::2, ::2])
    ref = torch.zeros(6, 8)
    getattr(torch, op)(c, out=ref[::2, ::2])
    assert_same(big, ref)


def test_relu_inplace():
    c = make((3, 4), F32, seed=5)
    t = c.to(DEVICE)
    assert t.relu_() is t
    assert_same(t, c.clone().relu_())
    ti = make((6,), I64, seed=5).to(DEVICE)
    assert_same(ti.relu_(), make((6,), I64, seed=5).relu_())


@pytest.mark.parametrize("op", ["exp", "sigmoid", "sqrt", "tanh"])
@pytest.mark.parametrize("dtype", [I64, I32, U8, BOOL], ids=dname)
def test_float_result_unary_promotes_integers(op, dtype):
    c = make((7,), dtype, seed=6, low=0, high=4)
    got, want = both(getattr(torch, op), c)
    assert want.dtype == F32
    assert_same(got, want)


@pytest.mark.parametrize("op", ["exp", "sigmoid", "sqrt", "tanh"])
def test_float_result_inplace_on_integer_raises(op):
    t = torch.tensor([1, 2], device=DEVICE)
    with pytest.raises((RuntimeError, ValueError), match="can't be cast"):
        getattr(t, op + "_")()
    assert torch.equal(t.cpu(), torch.tensor([1, 2]))


def test_neg_of_bool_raises():
    with pytest.raises((RuntimeError, ValueError), match="bool"):
        torch.neg(torch.tensor([True, False], device=DEVICE))


def test_abs_uint8():
    check(torch.abs, torch.tensor([0, 7, 200, 255], dtype=U8))


def test_relu_of_bool_raises_like_cpu():
    with pytest.raises(NotImplementedError):
        torch.relu(torch.tensor([True, False]))
    with pytest.raises((RuntimeError, ValueError, NotImplementedError)):
        torch.relu(torch.tensor([True, False], device=DEVICE))


# ---------------------------------------------------------------- binary

BINARY = {
    "add": torch.add,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=2),
    "sub": torch.sub,
    "sub_alpha": lambda a, b: torch.sub(a, b, alpha=3),
    "mul": torch.mul,
    "div": torch.div,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
}

SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1)),
          ((5,), (2, 1, 5)), ((3, 4), ())]


@pytest.mark.parametrize("dtype", [F32, BF16, I64], ids=dname)
@pytest.mark.parametrize("shapes", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("op", list(BINARY))
def test_binary(op, shapes, dtype):
    a = make(shapes[0], dtype, seed=7)
    b = make(shapes[1], dtype, seed=8)
    check(BINARY[op], a, b)


@pytest.mark.parametrize("dtype", [F16, F64, I32, I16, I8, U8], ids=dname)
@pytest.mark.parametrize("op", list(BINARY))
def test_binary_more_dtypes(op, dtype):
    a = make((4, 5), dtype, seed=9, low=1, high=9)
    b = make((5,), dtype, seed=10, low=1, high=9)
    check(BINARY[op], a, b)


@pytest.mark.parametrize("op", ["add", "mul", "maximum", "minimum"])
def test_binary_bool(op):
    a = make((4, 5), BOOL, seed=11)
    b = make((4, 5), BOOL, seed=12)
    check(BINARY[op], a, b)


def test_sub_of_two_bools_raises():
    a = torch.tensor([True, False], device=DEVICE)
    with pytest.raises((RuntimeError, ValueError), match="bool"):
        a - a


def test_sub_with_one_bool_raises_like_cpu():
    with pytest.raises(RuntimeError):
        torch.tensor([True, False]) - torch.tensor([1, 2])
    with pytest.raises((RuntimeError, ValueError)):
        torch.tensor([True, False], device=DEVICE) - torch.tensor([1, 2], device=DEVICE)


def test_binary_noncontiguous_operands():
    a = make((6, 4), F32, seed=13)
    b = make((4, 6), F32, seed=14)
    for name, f in BINARY.items():
        check(lambda x, y: f(x[::2], y.t()[1::2]), a, b)


def test_binary_special_values():
    a = torch.tensor([float("nan"), 1.0, -0.0, float("inf"), 2.0, 0.0, -float("inf")])
    b = torch.tensor([1.0, float("nan"), 0.0, float("inf"), 0.0, 0.0, 3.0])
    for name, f in BINARY.items():
        if name in ("maximum", "minimum"):
            continue  # NaN propagation has its own test below
        check(f, a, b)
    # maximum/minimum without NaN operands, including infinities and signed zeros
    a2 = torch.tensor([1.0, -0.0, float("inf"), 2.0, -float("inf")])
    b2 = torch.tensor([2.0, 0.0, float("inf"), 0.0, 3.0])
    check(torch.maximum, a2, b2)
    check(torch.minimum, a2, b2)


def test_maximum_minimum_nan_in_first_operand():
    a = torch.tensor([float("nan"), 1.0])
    b = torch.tensor([1.0, 2.0])
    check(torch.maximum, a, b)
    check(torch.minimum, a, b)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_propagate_nan_from_second_operand(op):
    a = torch.tensor([1.0, 2.0, float("nan")])
    b = torch.tensor([float("nan"), float("nan"), 1.0])
    check(getattr(torch, op), a, b)


def test_integer_division_is_true_division():
    a = torch.tensor([7, -7, 1, 0], dtype=I64)
    b = torch.tensor([2, 2, 3, 5], dtype=I64)
    got, want = both(torch.div, a, b)
    assert want.dtype == F32
    assert_same(got, want)
    check(lambda x: x / 0, a)


def test_integer_overflow_wraps_like_cpu():
    a = torch.tensor([2 ** 30, -(2 ** 31)], dtype=I32)
    check(lambda x: x * 4, a)
    check(lambda x: x + x, a)
    check(lambda x: x - 1, a)
    check(lambda x: torch.add(x, 2 ** 40), torch.tensor([2 ** 40, -5], dtype=I64))


# ---------------------------------------------------------------- scalars and promotion

SCALAR_CASES = {
    "mul_half": lambda x: x * 0.5,
    "add_one": lambda x: x + 1,
    "sub_two": lambda x: x - 2,
    "div_four": lambda x: x / 4,
    "radd": lambda x: 3 + x,
    "rmul": lambda x: 2.5 * x,
    "rdiv": lambda x: 2 / x,
    "add_true": lambda x: x + True,
    "mul_big_int": lambda x: x * (2 ** 33),
    "add_alpha_scalar": lambda x: torch.add(x, 2, alpha=3),
    "sub_alpha_scalar": lambda x: torch.sub(x, 2, alpha=3),
    "add_Scalar_overload": lambda x: torch.ops.aten.add.Scalar(x, 1.5, 2),
    "mul_Scalar_overload": lambda x: torch.ops.aten.mul.Scalar(x, -1.5),
    "maximum_0dim": lambda x: torch.maximum(x, torch.tensor(0.5, dtype=x.dtype,
                                                            device=x.device)),
}


@pytest.mark.parametrize("dtype", [F32, BF16, F16, F64, I64, I32, U8], ids=dname)
@pytest.mark.parametrize("case", list(SCALAR_CASES))
def test_python_scalars(case, dtype):
    c = make((3, 4), dtype, seed=15, low=1, high=9)
    f = SCALAR_CASES[case]
    try:
        want = f(c)
    except RuntimeError:
        with pytest.raises((RuntimeError, ValueError)):
            f(c.to(DEVICE))
        return
    assert_same(f(c.to(DEVICE)), want)


def test_scalar_value_is_not_truncated_to_tensor_dtype_for_float_results():
    c = torch.tensor([1, 2, 3])
    got, want = both(lambda x: x * 0.5, c)
    assert want.dtype == F32
    assert_same(got, want)
    got, want = both(lambda x: x + 0.25, torch.tensor([1, 2], dtype=U8))
    assert_same(got, want)


def test_bfloat16_with_python_scalar_stays_bfloat16():
    c = make((5,), BF16, seed=16)
    got, want = both(lambda x: x * 0.1 + 1, c)
    assert want.dtype == BF16
    assert_same(got, want)


PROMOTION_PAIRS = [(I32, I64), (U8, I8), (F16, BF16), (I64, F32), (BOOL, I32), (BOOL, F16),
                   (I8, F64), (U8, BOOL), (I16, BF16), (F32, F64)]


@pytest.mark.parametrize("op,da,db", [
    (op, da, db) for op in ("add", "sub", "mul", "div", "maximum") for da, db in PROMOTION_PAIRS
    # PyTorch rejects sub with a bool operand: test_sub_with_one_bool_raises_like_cpu
    if not (op == "sub" and BOOL in (da, db))], ids=str)
def test_tensor_tensor_promotion(op, da, db):
    a = make((3, 4), da, seed=17, low=1, high=9)
    b = make((4,), db, seed=18, low=1, high=9)
    check(BINARY[op], a, b)
    check(BINARY[op], b, a)


@pytest.mark.parametrize("dim_dtype,zero_dtype", [(F32, F64), (I32, I64), (I32, F64), (I8, F32),
                                                  (F16, F32), (BOOL, I8), (U8, F16),
                                                  (BF16, F64)], ids=str)
@pytest.mark.parametrize("op", ["add", "mul", "div", "minimum"])
def test_zero_dim_device_tensor_promotion(op, dim_dtype, zero_dtype):
    a = make((3, 4), dim_dtype, seed=19, low=1, high=9)
    s = make((), zero_dtype, seed=20, low=1, high=9)
    check(BINARY[op], a, s)
    check(BINARY[op], s, a)


def test_zero_dim_with_zero_dim():
    a = torch.tensor(1.5)
    b = torch.tensor(2, dtype=I64)
    for name, f in BINARY.items():
        got, want = both(f, a, b)
        assert got.dim() == 0
        assert_same(got, want)


def test_cpu_zero_dim_tensor_as_second_operand_same_category():
    c = make((3, 4), F32, seed=21)
    t = c.to(DEVICE)
    assert_same(t * torch.tensor(2.0), c * torch.tensor(2.0))
    assert_same(t + torch.tensor(3), c + torch.tensor(3))
    assert_same(t.clone().add_(torch.tensor(1.5)), c.clone().add_(torch.tensor(1.5)))


def test_cpu_zero_dim_tensor_keeps_its_dtype_in_promotion():
    c = torch.tensor([1, 2, 3])
    s = torch.tensor(2.5, dtype=F64)
    assert_same(c.to(DEVICE) * s, c * s)
    b = torch.tensor([True, False])
    s8 = torch.tensor(3, dtype=I8)
    assert_same(b.to(DEVICE) + s8, b + s8)


def test_scalar_as_first_operand():
    c = make((3, 4), F32, seed=22)
    t = c.to(DEVICE)
    assert_same(1 - t, 1 - c)  # rsub
    assert_same(torch.tensor(2.0) * t, torch.tensor(2.0) * c)
    assert_same(torch.add(2, t), torch.add(2, c))


def test_integer_alpha_must_not_be_float():
    a = torch.tensor([1, 2], device=DEVICE)
    with pytest.raises((RuntimeError, ValueError), match="alpha"):
        torch.add(a, a, alpha=0.5)


# ---------------------------------------------------------------- in-place and out= (binary)

INPLACE = {
    "add_": lambda x, y: x.add_(y),
    "add_alpha_": lambda x, y: x.add_(y, alpha=-2),
    "sub_": lambda x, y: x.sub_(y),
    "sub_alpha_": lambda x, y: x.sub_(y, alpha=0.5),
    "mul_": lambda x, y: x.mul_(y),
    "div_": lambda x, y: x.div_(y),
    "add_scalar_": lambda x, y: x.add_(1.5),
    "mul_scalar_": lambda x, y: x.mul_(-3),
    "sub_scalar_": lambda x, y: x.sub_(2, alpha=2),
    "iadd_op": lambda x, y: x.__iadd__(y),
    "imul_op": lambda x, y: x.__imul__(0.5),
}


@pytest.mark.parametrize("dtype", [F32, BF16], ids=dname)
@pytest.mark.parametrize("op", list(INPLACE))
def test_binary_inplace(op, dtype):
    a = make((3, 4), dtype, seed=23)
    b = make((4,), dtype, seed=24)  # broadcast second operand
    ta, tb = to_dev(a, b)
    ret = INPLACE[op](ta, tb)
    assert ret is ta
    want = INPLACE[op](a.clone(), b)
    assert_same(ta, want)
    assert_same(tb, b)  # untouched


def test_binary_inplace_integer():
    a = make((3, 4), I64, seed=25)
    b = make((3, 4), I64, seed=26)
    for op in ("add_", "sub_", "mul_", "add_scalar_"):
        if op == "add_scalar_":
            f = lambda x, y: x.add_(2)  # noqa: E731
        else:
            f = INPLACE[op]
        ta, tb = to_dev(a, b)
        f(ta, tb)
        assert_same(ta, f(a.clone(), b))


def test_inplace_with_broadcast_to_self_shape_fails():
    t = torch.ones(3, 1, device=DEVICE)
    with pytest.raises((RuntimeError, ValueError)):
        t.add_(torch.ones(3, 4, device=DEVICE))
    assert torch.equal(t.cpu(), torch.ones(3, 1))


def test_inplace_promotes_within_float():
    t = torch.ones(3, dtype=BF16, device=DEVICE)
    t.add_(torch.full((3,), 0.5, dtype=F32, device=DEVICE))
    assert t.dtype == BF16
    assert_same(t, torch.ones(3, dtype=BF16).add_(torch.full((3,), 0.5)))
    f = torch.ones(3, device=DEVICE)
    f.mul_(torch.tensor([1, 2, 3], device=DEVICE))
    assert_same(f, torch.tensor([1., 2., 3.]))


OUT = {
    "add": lambda x, y, o: torch.add(x, y, out=o),
    "add_alpha": lambda x, y, o: torch.add(x, y, alpha=2, out=o),
    "sub": lambda x, y, o: torch.sub(x, y, out=o),
    "mul": lambda x, y, o: torch.mul(x, y, out=o),
    "div": lambda x, y, o: torch.div(x, y, out=o),
    "maximum": lambda x, y, o: torch.maximum(x, y, out=o),
    "minimum": lambda x, y, o: torch.minimum(x, y, out=o),
    "add_Scalar_out": lambda x, y, o: torch.ops.aten.add.Scalar_out(x, 2.5, 2, out=o),
    "mul_Scalar_out": lambda x, y, o: torch.ops.aten.mul.Scalar_out(x, 0.5, out=o),
}


@pytest.mark.parametrize("op", list(OUT))
def test_binary_out(op):
    a = make((3, 4), F32, seed=27)
    b = make((3, 1), F32, seed=28)
    ta, tb = to_dev(a, b)
    out = torch.empty(3, 4, device=DEVICE)
    ret = OUT[op](ta, tb, out)
    assert ret is out
    assert_same(out, OUT[op](a, b, torch.empty(3, 4)))
    if op.endswith("Scalar_out"):
        return  # CPU's Scalar_out kernels require out's dtype to equal the result's
    # out= of another (wider) dtype and into a view
    out64 = torch.zeros(6, 4, dtype=F64, device=DEVICE)
    OUT[op](ta, tb, out64[::2])
    ref = torch.zeros(6, 4, dtype=F64)
    OUT[op](a, b, ref[::2])
    assert_same(out64, ref)


def test_out_is_resized_from_empty():
    a = make((3, 4), F32, seed=29)
    out = torch.empty(0, device=DEVICE)
    torch.mul(a.to(DEVICE), 2, out=out)
    assert out.shape == (3, 4)
    assert_same(out, a * 2)


def test_out_resize_of_nonempty_warns_like_cpu():
    a = make((3, 4), F32, seed=30)
    out = torch.empty(5, device=DEVICE)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        torch.add(a.to(DEVICE), 1, out=out)
    assert any("resized" in str(x.message) for x in w)
    assert_same(out, a + 1)


def test_out_with_uncastable_dtype_raises():
    a = torch.ones(3, device=DEVICE)
    out = torch.zeros(3, dtype=I64, device=DEVICE)
    with pytest.raises((RuntimeError, ValueError), match="can't be cast"):
        torch.add(a, 1.5, out=out)
    assert torch.equal(out.cpu(), torch.zeros(3, dtype=I64))


def test_out_on_cpu_raises():
    with pytest.raises(RuntimeError, match="tpu"):
        torch.add(torch.ones(3, device=DEVICE), 1, out=torch.empty(3))


# ---------------------------------------------------------------- more binary ops, rounding, bits

BINARY_SPECIAL = {
    "logaddexp": torch.logaddexp,
    "logaddexp2": torch.logaddexp2,
    "xlog1py": torch.special.xlog1py,
    "heaviside": torch.heaviside,
    "rsub": lambda a, b: torch.rsub(a, b, alpha=2),
}


@pytest.mark.parametrize("op", list(BINARY_SPECIAL))
def test_binary_special(op):
    a = make((3, 4), F32, seed=6)
    b = make((4,), F32, seed=7)
    a[0, 0], b[1] = 0.0, float("nan")
    check_native(BINARY_SPECIAL[op], a, b)


def test_logaddexp_infinities_and_rsub_scalar():
    inf = float("inf")
    a = torch.tensor([inf, -inf, inf, 1.0])
    b = torch.tensor([inf, -inf, -inf, -inf])
    check_native(torch.logaddexp, a, b)
    check_native(lambda x: torch.rsub(x, 3), make((2, 3), I64, seed=8))


def test_heaviside_dtype_mismatch_raises_like_cpu():
    with pytest.raises(RuntimeError, match="different dtypes"):
        torch.heaviside(torch.ones(2, device=DEVICE), torch.ones(2, device=DEVICE, dtype=I64))


@pytest.mark.parametrize("decimals", [0, 2, -1])
@pytest.mark.parametrize("dtype", [F32, BF16], ids=dname)
def test_round_decimals(decimals, dtype):
    check_native(lambda x: torch.round(x, decimals=decimals), make((4, 5), dtype, seed=9, low=-50, high=50))


def test_nan_to_num():
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.5])
    check_native(torch.nan_to_num, x)
    check_native(lambda t: torch.nan_to_num(t, nan=2.0, posinf=9.0, neginf=-9.0), x)
    check_native(torch.nan_to_num, x.to(BF16))
    check_native(torch.nan_to_num, torch.tensor([1, 2]))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.int8], ids=str)
def test_bitwise_shifts(dtype):
    a = make((6, 5), dtype, low=-100, high=100)
    s = torch.arange(-2, 28).reshape(6, 5).to(dtype) if dtype != torch.uint8 else torch.arange(0, 30).reshape(6, 5).to(dtype)
    if dtype == torch.int64:
        s = s * 3
    check_strict(lambda x, y: x << y, a, s)
    check_strict(lambda x, y: x >> y, a, s)
    check_strict(lambda x, y: torch.bitwise_left_shift(x, y), a, s[0])
    # a number shifted by a tensor (the Scalar_Tensor forms; a conformance suite found them
    # refused with "self must be a tensor")
    check_strict(lambda y: torch.bitwise_right_shift(64, y), s)
    check_strict(lambda y: torch.bitwise_left_shift(-3, y), s)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, BF16, torch.float16], ids=str)
def test_frexp_special_values(dtype):
    info = torch.finfo(dtype)
    x = torch.tensor([0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -1e-3, 7.5e2, float("inf"), -float("inf"),
                      float("nan"), info.max, info.tiny, info.tiny / 4, -info.tiny / 8], dtype=dtype)
    want_m, want_e = torch.frexp(x)
    with torch_pjrt.strict():
        m, e = torch.frexp(x.to(DEVICE))
        torch.tpu.synchronize()
    assert_same(m, want_m)
    assert_same(e, want_e)
