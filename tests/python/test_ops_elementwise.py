"""Each native op against PyTorch on CPU: dtypes, broadcasting, scalars, 0-dim tensors, type
promotion, in-place and out= forms; and none of them falls back to CPU."""
import warnings

import pytest
import torch

import torch_pjrt
from tpu_helpers import DEVICE, assert_same, fallbacks, make, to_dev

F32, BF16, F16, F64 = torch.float32, torch.bfloat16, torch.float16, torch.float64
I64, I32, I16, I8, U8, BOOL = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
                               torch.bool)


def dname(d):
    return str(d).replace("torch.", "")


def both(fn, *cpu_args):
    """fn on the CPU args and on their tpu copies; returns (tpu_result, cpu_result)."""
    return fn(*to_dev(*cpu_args)) if len(cpu_args) > 1 else fn(to_dev(*cpu_args)), fn(*cpu_args)


def check(fn, *cpu_args, **kw):
    got, want = both(fn, *cpu_args)
    assert_same(got, want, **kw)


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


# ---------------------------------------------------------------- mm / addmm

@pytest.mark.parametrize("dtype", [F32, BF16, F64, I64, I32], ids=dname)
def test_mm(dtype):
    a = make((5, 7), dtype, seed=31, low=-3, high=3)
    b = make((7, 3), dtype, seed=32, low=-3, high=3)
    got, want = both(torch.mm, a, b)
    assert_same(got, want, **({"rtol": 2e-2, "atol": 1e-1} if dtype == BF16 else {}))
    assert_same(to_dev(a) @ to_dev(b), a @ b,
                **({"rtol": 2e-2, "atol": 1e-1} if dtype == BF16 else {}))


def test_mm_noncontiguous_and_out():
    a = make((7, 5), F32, seed=33)
    b = make((3, 7), F32, seed=34)
    ta, tb = to_dev(a, b)
    assert_same(ta.t() @ tb.t(), a.t() @ b.t())
    assert_same(ta[::2].t() @ ta[::2], a[::2].t() @ a[::2])
    out = torch.empty(5, 3, device=DEVICE)
    assert torch.mm(ta.t(), tb.t(), out=out) is out
    assert_same(out, a.t() @ b.t())


def test_mm_degenerate_shapes():
    check(torch.mm, torch.empty(2, 0), torch.empty(0, 3))
    check(torch.mm, torch.ones(1, 1), torch.full((1, 1), 3.0))
    check(torch.mm, make((0, 4), F32), make((4, 2), F32))


def test_mm_larger_float32():
    a = make((64, 128), F32, seed=35)
    b = make((128, 32), F32, seed=36)
    check(torch.mm, a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bias_shape", [(4, 3), (3,), (1, 3), (4, 1), ()], ids=str)
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2), (0, 1), (2, 0)], ids=str)
def test_addmm(bias_shape, beta, alpha):
    bias = make(bias_shape, F32, seed=37)
    m1 = make((4, 5), F32, seed=38)
    m2 = make((5, 3), F32, seed=39)
    check(lambda s, x, y: torch.addmm(s, x, y, beta=beta, alpha=alpha), bias, m1, m2)


def test_addmm_beta_zero_ignores_nan_self():
    bias = torch.full((2, 2), float("nan"))
    check(lambda s, x, y: torch.addmm(s, x, y, beta=0), bias, torch.ones(2, 3), torch.ones(3, 2))


def test_addmm_inplace_out_and_types():
    bias = make((4, 3), F32, seed=40)
    m1 = make((4, 5), F32, seed=41)
    m2 = make((5, 3), F32, seed=42)
    tb, t1, t2 = to_dev(bias, m1, m2)
    assert tb.addmm_(t1, t2, beta=2, alpha=3) is tb
    assert_same(tb, bias.clone().addmm_(m1, m2, beta=2, alpha=3))
    out = torch.empty(4, 3, device=DEVICE)
    assert torch.addmm(to_dev(bias), t1, t2, out=out) is out
    assert_same(out, torch.addmm(bias, m1, m2))
    check(lambda s, x, y: torch.addmm(s, x, y, beta=2, alpha=3),
          make((2, 2), I64, seed=43), make((2, 3), I64, seed=44), make((3, 2), I64, seed=45))
    check(torch.addmm, make((3,), BF16, seed=46), make((2, 4), BF16, seed=47),
          make((4, 3), BF16, seed=48), rtol=2e-2, atol=1e-1)


def test_linear_layer_matches_cpu():
    torch.manual_seed(0)
    lin = torch.nn.Linear(6, 4)
    x = make((3, 6), F32, seed=49)
    want = lin(x).detach()
    lin.to(DEVICE)
    assert_same(lin(x.to(DEVICE)).detach(), want)


def test_mm_errors():
    a = torch.ones(3, 4, device=DEVICE)
    with pytest.raises((RuntimeError, ValueError), match="cannot be multiplied"):
        torch.mm(a, a)
    with pytest.raises((RuntimeError, ValueError), match="dtype"):
        torch.mm(a, torch.ones(4, 2, dtype=F64, device=DEVICE))
    with pytest.raises((RuntimeError, ValueError)):
        torch.mm(torch.ones(4, device=DEVICE), a)


# ---------------------------------------------------------------- sum

@pytest.mark.parametrize("dtype", [F32, BF16, F16, F64, I64, I32, U8, BOOL], ids=dname)
def test_sum_full(dtype):
    c = make((4, 5, 3), dtype, seed=50, low=0, high=4)
    got, want = both(torch.sum, c)
    assert got.dim() == 0
    assert_same(got, want)


@pytest.mark.parametrize("dim", [0, 1, -1, (0, 2), [1, 0], (), (-3, -1, 1)], ids=str)
def test_sum_dims(dim):
    c = make((4, 5, 3), F32, seed=51)
    check(lambda x: x.sum(dim), c)
    check(lambda x: x.t().sum(dim) if isinstance(dim, int) and dim in (0, 1) else x.sum(dim),
          make((4, 5), F32, seed=52) if isinstance(dim, int) and dim in (0, 1) else c)


def test_sum_integer_and_bool_promote_to_int64():
    for dt in (I32, I8, U8, BOOL):
        c = make((6, 4), dt, seed=53, low=0, high=100)
        got, want = both(lambda x: x.sum(1), c)
        assert want.dtype == I64
        assert_same(got, want)


def test_sum_half_types_accumulate_in_float32():
    for dt in (BF16, F16):
        c = torch.full((1000,), 0.1, dtype=dt)
        check(torch.sum, c)


def test_sum_of_views_empty_and_zero_dim():
    c = make((6, 8), F32, seed=54)
    check(lambda x: x[::2, 1::3].sum(), c)
    check(lambda x: x.t()[2:].sum(0), c)
    check(lambda x: x.sum(0), torch.empty(0, 3))
    check(torch.sum, torch.empty(0))
    check(lambda x: x.sum(), torch.tensor(2.5))


def test_sum_out():
    c = make((4, 5), F32, seed=55)
    t = c.to(DEVICE)
    out = torch.empty(4, device=DEVICE)
    assert torch.sum(t, 1, out=out) is out
    assert_same(out, c.sum(1))
    out64 = torch.empty(5, dtype=F64, device=DEVICE)
    torch.sum(t, 0, out=out64)
    # CPU accumulates in out's dtype (f64); the device may accumulate in the input's (f32)
    assert_same(out64, torch.sum(c, 0, out=torch.empty(5, dtype=F64)), rtol=1e-6, atol=1e-6)
    o0 = torch.empty((), device=DEVICE)
    torch.ops.aten.sum.out(t, out=o0)
    assert_same(o0, c.sum())


def test_sum_bad_dim_raises():
    t = torch.ones(2, 3, device=DEVICE)
    with pytest.raises((RuntimeError, ValueError, IndexError), match="[Dd]imension out of range"):
        t.sum(2)
    with pytest.raises((RuntimeError, ValueError), match="multiple times"):
        t.sum((0, 0))


def test_sum_keepdim():
    c = make((3, 4), F32, seed=56)
    check(lambda x: x.sum(0, keepdim=True), c)
    check(lambda x: x.sum(-1, keepdim=True), c)
    check(lambda x: x.sum((0, 1), keepdim=True), c)
    check(lambda x: x.sum(1, keepdim=False), c)
    check(lambda x: x.t().sum(0, keepdim=True), c)


def test_sum_dtype_argument():
    c = make((3, 4), F32, seed=57)
    check(lambda x: x.sum(dtype=F64), c)
    check(lambda x: x.sum(1, dtype=F64), c)
    check(lambda x: x.sum(1, dtype=F32), make((3, 4), I32, seed=58))
    check(lambda x: x.sum(dtype=BF16), c)
    check(lambda x: x.sum((0, 1), keepdim=True, dtype=F64), c)


# ---------------------------------------------------------------- fill, copy, threshold_backward

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


@pytest.mark.parametrize("dtype", [F32, BF16, I64], ids=dname)
@pytest.mark.parametrize("threshold", [0, 0.5, -1], ids=str)
def test_threshold_backward(dtype, threshold):
    g = make((4, 5), dtype, seed=63)
    x = make((4, 5), dtype, seed=64)
    x[0, 0] = threshold  # the boundary: x == threshold gives 0
    check(lambda a, b: torch.ops.aten.threshold_backward(a, b, threshold), g, x)
    check(lambda a, b: torch.ops.aten.threshold_backward(a, b[:1], threshold), g, x)


def test_threshold_backward_grad_input():
    g = make((3, 4), F32, seed=65)
    x = make((3, 4), F32, seed=66)
    tg, tx = to_dev(g, x)
    out = torch.empty(3, 4, device=DEVICE)
    ret = torch.ops.aten.threshold_backward.grad_input(tg, tx, 0.0, grad_input=out)
    assert ret is out
    assert_same(out, torch.ops.aten.threshold_backward(g, x, 0.0))


def test_relu_backward_through_autograd():
    x = make((3, 4), F32, seed=67)
    w = make((4, 2), F32, seed=68)
    grads = []
    for dev in ("cpu", DEVICE):
        xd = x.detach().to(dev).requires_grad_()
        wd = w.detach().to(dev).requires_grad_()
        (torch.relu(xd) @ wd).sum().backward()
        grads.append((xd.grad, wd.grad))
    assert_same(grads[1][0], grads[0][0])
    assert_same(grads[1][1], grads[0][1])


# ---------------------------------------------------------------- no fallback

NATIVE_CALLS = {
    "abs": lambda a, b, m: (torch.abs(a), a.clone().abs_(), torch.abs(a, out=a.new_empty(3, 4))),
    "add": lambda a, b, m: (a + b, a + 1, torch.add(a, b, alpha=2), a.clone().add_(b),
                            torch.add(a, b, out=a.new_empty(3, 4)), a.clone().add_(0.5)),
    "sub": lambda a, b, m: (a - b, a - 1, a.clone().sub_(b, alpha=2),
                            torch.sub(a, b, out=a.new_empty(3, 4))),
    "mul": lambda a, b, m: (a * b, a * 0.5, a.clone().mul_(b), a.clone().mul_(2),
                            torch.mul(a, b, out=a.new_empty(3, 4))),
    "div": lambda a, b, m: (a / b, a / 2, a.clone().div_(b),
                            torch.div(a, b, out=a.new_empty(3, 4))),
    "maximum_minimum": lambda a, b, m: (torch.maximum(a, b), torch.minimum(a, b),
                                        torch.maximum(a, b, out=a.new_empty(3, 4))),
    "mm_addmm": lambda a, b, m: (a @ m, torch.mm(a, m), torch.addmm(b[:, :2], a, m),
                                 b[:, :2].clone().addmm_(a, m),
                                 torch.mm(a, m, out=a.new_empty(3, 2))),
    "unary": lambda a, b, m: (a.exp(), a.neg(), a.relu(), a.sigmoid(), a.abs().sqrt(), a.tanh(),
                              a.clone().exp_(), a.clone().relu_(), a.clone().tanh_()),
    "sum": lambda a, b, m: (a.sum(), a.sum(0), a.sum((0, 1)),
                            torch.sum(a, 1, out=a.new_empty(3))),
    "fill_copy": lambda a, b, m: (a.new_empty(3).fill_(2),
                                  torch.zeros_like(a).copy_(b), a.to(F64), a.t().contiguous(),
                                  a.clone(), torch.full((2,), 3.0, device=a.device)),
    "threshold_backward": lambda a, b, m: (torch.ops.aten.threshold_backward(a, b, 0.0),),
    "views_and_transfers": lambda a, b, m: (a[1:].view(-1)[::2], a.t()[1:].unsqueeze(0),
                                            a.cpu().to(a.device), a.sum().item(),
                                            torch.tensor([1.0, 2.0], device=a.device)),
}


@pytest.mark.parametrize("group", list(NATIVE_CALLS))
def test_native_ops_do_not_fall_back(group, fresh_stats):
    a = make((3, 4), F32, seed=69)
    b = make((3, 4), F32, seed=70)
    m = make((4, 2), F32, seed=71)
    ta, tb, tm = to_dev(a, b, m)
    with torch_pjrt.strict():
        results = NATIVE_CALLS[group](ta, tb, tm)
        torch.tpu.synchronize()
    assert fallbacks() == {}
    # and they computed the CPU answer
    for got, want in zip(results, NATIVE_CALLS[group](a, b, m)):
        if isinstance(want, torch.Tensor):
            assert_same(got, want)
        else:
            assert got == pytest.approx(want, rel=1e-5)
    assert torch_pjrt.stats()["executes"] > 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_group_norm_forward_backward_native(dtype):
    torch.manual_seed(0)
    ref = torch.nn.GroupNorm(3, 6).to(dtype)
    with torch.no_grad():
        ref.weight.normal_()
        ref.bias.normal_()
    dev = torch.nn.GroupNorm(3, 6).to(dtype)
    dev.load_state_dict(ref.state_dict())
    dev = dev.to("tpu")
    x = torch.randn(2, 6, 4, 5, dtype=dtype)
    xc, xt = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    with torch_pjrt.strict():
        yt = dev(xt)
        (yt * yt).sum().backward()
    y = ref(xc)
    (y * y).sum().backward()
    tol = dict(atol=1e-5, rtol=1e-4) if dtype == torch.float32 else dict(atol=2e-2, rtol=2e-2)
    assert_same(yt, y, **tol)
    assert_same(xt.grad, xc.grad, **tol)
    assert_same(dev.weight.grad, ref.weight.grad, atol=1e-4 if dtype == torch.float32 else 5e-2, rtol=1e-3)
    assert_same(dev.bias.grad, ref.bias.grad, atol=1e-4 if dtype == torch.float32 else 5e-2, rtol=1e-3)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_and_triangular_solves_native(upper):
    torch.manual_seed(0)
    a = torch.randn(3, 4, 4, dtype=torch.float64)
    a = a @ a.mT + 4 * torch.eye(4, dtype=torch.float64)
    b = torch.randn(3, 4, 2, dtype=torch.float64)
    with torch_pjrt.strict():
        lt, info = torch.linalg.cholesky_ex(a.to(DEVICE), upper=upper)
        xt = torch.linalg.solve_triangular(lt, b.to(DEVICE), upper=upper)
        st = torch.cholesky_solve(b.to(DEVICE), lt, upper=upper)
    l = torch.linalg.cholesky(a, upper=upper)
    assert_same(lt, l, atol=1e-12, rtol=1e-10)
    assert info.cpu().tolist() == [0, 0, 0]
    assert_same(xt, torch.linalg.solve_triangular(l, b, upper=upper), atol=1e-12, rtol=1e-10)
    assert_same(st, torch.cholesky_solve(b, l, upper=upper), atol=1e-12, rtol=1e-10)


def test_cholesky_of_a_non_positive_definite_matrix_raises():
    a = torch.eye(3)
    a[2, 2] = -1.0
    assert torch.linalg.cholesky_ex(a.to(DEVICE)).info.item() != 0
    with pytest.raises(torch.linalg.LinAlgError, match="positive-definite"):
        torch.linalg.cholesky(a.to(DEVICE))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("lo,hi", [(0, 0), (-1, 1), (0.5, 0.5)])
def test_histc_native(dtype, lo, hi):
    a = make((500,), dtype, seed=3)
    with torch_pjrt.strict():
        got = torch.histc(a.to(DEVICE), bins=7, min=lo, max=hi)
    assert_same(got, torch.histc(a, bins=7, min=lo, max=hi))


def test_histc_of_integers_counts_as_on_cuda():
    # CPU has no integer histc kernel (Transformers' MoE code casts to float there only);
    # CUDA counts integers, and so does tpu.
    x = torch.tensor([0, 1, 1, 3], dtype=torch.int32, device=DEVICE)
    got = torch.histc(x, bins=4, min=0, max=3)
    assert got.dtype == torch.int32 and got.cpu().tolist() == [1, 2, 0, 1]
