"""NaN and +-inf propagate through the native ops as they do on CPU: users chase NaNs with these
ops, so a row that is NaN on CPU must be NaN here, and a value CPU keeps finite must stay finite.
Each test writes NaN/+inf/-inf into small inputs and compares with CPU (NaN equal to NaN)."""
import pytest
import torch
import torch.nn.functional as F

import torch_pjrt
from tpu_helpers import DEVICE, assert_same, make

NAN, INF = float("nan"), float("inf")
HALF_AND_FLOAT = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
DTYPE_IDS = ["f32", "bf16", "f16", "f64"]


def poisoned(shape, dtype, values=(NAN, INF, -INF), *, seed=0, every=5):
    """A CPU tensor of |dtype| whose elements 0, every, 2*every, ... cycle through |values|."""
    x = make(shape, torch.float64, seed=seed)
    flat = x.view(-1)
    for j, i in enumerate(range(0, flat.numel(), every)):
        flat[i] = values[j % len(values)]
    return x.to(dtype)


def on_device(tree):
    return [t.to(DEVICE) if isinstance(t, torch.Tensor) else t for t in tree]


def check(fn, *args, native=True, **kw):
    """fn(*args) on tpu equals fn(*args) on CPU; with |native|, no op fell back to CPU."""
    expected = fn(*args)
    torch_pjrt.reset_stats()
    actual = fn(*on_device(args))
    if native:
        assert not torch_pjrt.stats()["fallbacks"], torch_pjrt.stats()["fallbacks"]
    if isinstance(expected, torch.Tensor):
        expected, actual = [expected], [actual]
    for a, e in zip(actual, expected):
        assert_same(a, e, **kw)


def check_grad(fn, x, seed=1):
    """The gradient of sum(fn(x) * w) with respect to x, CPU vs tpu."""
    w = make(fn(x).shape, x.dtype, seed=seed)
    grads = []
    for dev in ("cpu", DEVICE):
        xd = x.detach().to(dev).requires_grad_()
        (fn(xd) * w.to(dev)).sum().backward()
        grads.append(xd.grad)
    assert_same(grads[1], grads[0])


# ----------------------------------------------------------------------------- softmax family

SOFTMAX_ROWS = [[1, INF, 2], [1, -INF, 2], [-INF, -INF, -INF], [INF, INF, 1], [1, NAN, INF],
                [INF, -INF, 1], [NAN, -INF, -INF], [-INF, 3, -INF]]


@pytest.mark.parametrize("dtype", HALF_AND_FLOAT, ids=DTYPE_IDS)
@pytest.mark.parametrize("dim", [0, 1])
def test_softmax_family_with_infinities(dtype, dim):
    x = torch.tensor(SOFTMAX_ROWS, dtype=dtype)
    x = x if dim == 1 else x.t().contiguous()
    check(lambda t: torch.softmax(t, dim), x)
    check(lambda t: torch.log_softmax(t, dim), x)
    check(lambda t: F.softmin(t, dim), x)
    check(lambda t: torch.softmax(t, dim, dtype=torch.float64), x)
    check(lambda t: torch.ops.aten._safe_softmax(t, dim), x)


def test_masked_softmax_with_infinities():
    x = torch.tensor(SOFTMAX_ROWS)
    mask = torch.tensor([[True, True, False]] * len(SOFTMAX_ROWS))
    for fn in (torch.masked._ops.softmax, torch.masked._ops.log_softmax, torch.masked._ops.softmin):
        check(lambda t, m: fn(t, 1, mask=m), x, mask, native=False)


def test_softmax_of_a_scalar_infinity():
    for v in (INF, -INF, NAN, 2.0):
        check(lambda t: torch.softmax(t, 0), torch.tensor(v))


@pytest.mark.parametrize("fn", [lambda t: torch.softmax(t, 1), lambda t: torch.log_softmax(t, 1)],
                         ids=["softmax", "log_softmax"])
def test_softmax_backward_with_infinities(fn):
    check_grad(fn, torch.tensor(SOFTMAX_ROWS))
    check_grad(fn, poisoned((4, 7), torch.float32, (-INF,), every=3))


# ----------------------------------------------------------------------------- activations

GELU_VALUES = [INF, -INF, NAN, 0.0, -0.0, 1.0, -3.0, 10.0, -10.0, 1e10, -1e10, -1e30, 1e30]


@pytest.mark.parametrize("dtype", HALF_AND_FLOAT, ids=DTYPE_IDS)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_with_infinities(dtype, approximate):
    x = torch.tensor(GELU_VALUES, dtype=dtype)
    # CPU hands a contiguous float input of more than one element to oneDNN, whose gelu(+inf)
    # depends on the machine (NaN with its AVX-512 kernels, +inf without): the reference is
    # PyTorch's own kernel, element by element, as tpu computes it on every machine.
    own = torch.stack([F.gelu(v, approximate=approximate) for v in x])
    torch_pjrt.reset_stats()
    assert_same(F.gelu(x.to(DEVICE), approximate=approximate), own)
    assert not torch_pjrt.stats()["fallbacks"]
    # one element, and a strided view: CPU runs its own kernel there, not oneDNN's
    check(lambda t: F.gelu(t, approximate=approximate), x[:1])
    check(lambda t: F.gelu(t.view(-1, 1).expand(-1, 2).t(), approximate=approximate), x)


@pytest.mark.parametrize("dtype", HALF_AND_FLOAT, ids=DTYPE_IDS)
@pytest.mark.parametrize("scale", [0.0, 1.0, 2.0])
def test_native_dropout_backward_keeps_nan_of_dropped_elements(dtype, scale):
    g = torch.tensor([NAN, -1.7, NAN, -2.4, INF, -INF, 3.0, -0.5], dtype=dtype)
    mask = torch.tensor([False, False, True, True, False, False, True, False])
    check(lambda a, m: torch.ops.aten.native_dropout_backward(a, m, scale), g, mask)
    expected = torch.ops.aten.native_dropout_backward(g, mask, scale)
    actual = torch.ops.aten.native_dropout_backward(g.to(DEVICE), mask.to(DEVICE), scale).cpu()
    assert torch.equal(torch.signbit(actual) | actual.isnan(), torch.signbit(expected) | expected.isnan())


# ----------------------------------------------------------------------------- statistics

def one_inf_at_each_position(shape, dtype, value=INF):
    base = make(shape, torch.float64)
    for p in range(base.numel()):
        x = base.clone()
        x.view(-1)[p] = value
        yield x.to(dtype)


@pytest.mark.filterwarnings("ignore:var_mean.*degrees of freedom:UserWarning")
@pytest.mark.parametrize("dtype", HALF_AND_FLOAT, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape,dim", [((3, 4), None), ((3, 4), 1), ((3, 4), 0), ((2, 3, 2), (0, 2)), ((), None)],
                         ids=["all", "dim1", "dim0", "dims02", "scalar"])
def test_var_mean_with_one_infinity(dtype, shape, dim):
    # CPU's Welford mean is NaN after an infinity, +-inf when it is the last element
    for value in (INF, -INF):
        for x in one_inf_at_each_position(shape, dtype, value):
            check(lambda t: torch.var_mean(t, dim), x, atol=1e-2, rtol=1e-2)
            check(lambda t: torch.std_mean(t, dim, correction=0), x, atol=1e-2, rtol=1e-2)
    check(lambda t: torch.var_mean(t, dim), poisoned(shape, dtype, every=2), atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("dtype", HALF_AND_FLOAT, ids=DTYPE_IDS)
@pytest.mark.parametrize("n", [3, 8, 17])
def test_layer_norm_with_one_infinity(dtype, n):
    # CPU's row moments keep +-inf as the mean only for the last element of its last whole vector
    w, bias = make((n,), dtype, seed=1), make((n,), dtype, seed=2)
    for x in one_inf_at_each_position((2, n), dtype):
        check(lambda t, a, c: torch.native_layer_norm(t, [n], a, c, 1e-5), x, w, bias, atol=1e-2, rtol=1e-2)
    x = poisoned((3, 4, 4), dtype, every=7)
    check(lambda t: torch.native_layer_norm(t, [4, 4], None, None, 1e-5), x, atol=1e-2, rtol=1e-2)


def test_layer_norm_backward_with_infinities():
    x = poisoned((4, 6), torch.float32, (INF, -INF), every=9)
    check_grad(lambda t: F.layer_norm(t, [6]), x)
    check_grad(lambda t: F.layer_norm(t, [6]), poisoned((4, 6), torch.float32, (NAN,), every=11))


@pytest.mark.parametrize("dtype", HALF_AND_FLOAT, ids=DTYPE_IDS)
def test_group_norm_with_infinities(dtype):
    n, c, hw, g = 2, 6, 4, 2
    for x in one_inf_at_each_position((n, c, hw), dtype):
        check(lambda t: torch.native_group_norm(t, None, None, n, c, hw, g, 1e-5), x, atol=1e-2, rtol=1e-2)
    # an infinite weight or bias: CPU's y = x * s + (bias - s * mean) is NaN over the channel
    x = make((n, c, hw), dtype)
    w = torch.tensor([INF, 1, 2, -INF, 1, 1], dtype=dtype)
    bias = torch.tensor([0, INF, 0, 1, 0, -INF], dtype=dtype)
    check(lambda t, a, b_: torch.native_group_norm(t, a, b_, n, c, hw, g, 1e-5), x, w, bias,
          atol=1e-2, rtol=1e-2)
    check(lambda t, a, b_: F.group_norm(t, g, a, b_), x, w, bias, atol=1e-2, rtol=1e-2)


# ----------------------------------------------------------------------------- losses

@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_nll_loss_ignores_nan_of_ignored_samples(reduction):
    x = torch.tensor([[NAN, -7.5, -0.6], [NAN, -1.9, NAN], [1, INF, 2], [3, 4, -INF]], dtype=torch.float64)
    t = torch.tensor([0, 1, 0, 2])
    for w in (None, torch.tensor([1.0, 0.0, 2.0], dtype=torch.float64)):
        for ignore in (0, -100):
            check(lambda a, b_, c: F.nll_loss(a, b_, weight=c, ignore_index=ignore, reduction=reduction), x, t, w)
    grads = []
    for dev in ("cpu", DEVICE):
        xd = x.detach().to(dev).requires_grad_()
        F.nll_loss(xd, t.to(dev), ignore_index=0, reduction=reduction).sum().backward()
        grads.append(xd.grad)
    assert_same(grads[1], grads[0])


def test_cross_entropy_with_infinities():
    x = torch.tensor([[1.0, INF, 2.0], [-INF, 0.5, 1.0], [NAN, 1.0, 2.0]], dtype=torch.float64)
    t = torch.tensor([1, 0, 2])
    for reduction in ("none", "sum", "mean"):
        check(lambda a, b_: F.cross_entropy(a, b_, reduction=reduction), x, t)


# ----------------------------------------------------------------------------- elementwise

PAIRS = [(INF, NAN), (-INF, NAN), (NAN, INF), (NAN, -INF), (INF, INF), (-INF, 2.0), (1.0, INF),
         (-1.0, INF), (0.0, INF), (-0.0, -INF), (INF, 3.0), (5.0, -INF), (-5.0, -INF), (5.0, INF),
         (-5.0, INF), (0.0, -2.0), (-0.0, 2.0), (NAN, 0.0), (3.0, 0.0), (-3.0, 0.0), (1.0, 0.1),
         (7.5, 2.5), (-7.5, 2.5), (1e30, 1e-10), (1e-30, 1e-30), (1e20, 1e20), (0.3, 0.1), (2.0, -0.0)]


def pair_tensors(dtype):
    a, b = zip(*PAIRS)
    return torch.tensor(a, dtype=dtype), torch.tensor(b, dtype=dtype)


@pytest.mark.parametrize("dtype", HALF_AND_FLOAT, ids=DTYPE_IDS)
def test_sign_of_nan_is_zero(dtype):
    x = torch.tensor([NAN, -NAN, INF, -INF, 0.0, -0.0, 2.0, -3.0], dtype=dtype)
    check(torch.sign, x)
    check(torch.sgn, x)


@pytest.mark.parametrize("dtype", HALF_AND_FLOAT, ids=DTYPE_IDS)
def test_floor_division_with_infinities(dtype):
    a, b = pair_tensors(dtype)
    for fn in (torch.floor_divide, lambda x, y: torch.div(x, y, rounding_mode="floor")):
        expected = fn(a, b)
        check(fn, a, b)
        actual = fn(a.to(DEVICE), b.to(DEVICE)).cpu()  # -1 // inf is -1, 1 // -inf -1, -0 kept
        assert torch.equal(torch.signbit(actual) | actual.isnan(), torch.signbit(expected) | expected.isnan())


@pytest.mark.parametrize("dtype", HALF_AND_FLOAT, ids=DTYPE_IDS)
def test_hypot_of_infinity_and_nan_is_inf(dtype):
    check(torch.hypot, *pair_tensors(dtype))
    check(torch.hypot, *pair_tensors(dtype)[::-1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_zeta_with_infinities(dtype):
    q = torch.tensor([-INF, -9.5, -5.42, -3.0004, -1.5, -0.5, 0.0, 0.3, 1.0, 1.5, 3.0, 20.0, INF, NAN],
                     dtype=dtype)
    for x in (INF, -INF, NAN, 1e300 if dtype == torch.float64 else 1e30, 400.0, 30.0, 2.0, 1.0, 0.5):
        check(torch.special.zeta, torch.full_like(q, x), q, atol=1e-12, rtol=1e-4)
        check(torch.special.zeta, q, torch.full_like(q, x), atol=1e-12, rtol=1e-4)


def test_renorm_inf_norm_of_a_nan_slice_keeps_it():
    x = poisoned((3, 4, 5), torch.float32, (NAN,), every=23)
    for p in (float("inf"), 1.0, 2.0):
        check(lambda t: torch.renorm(t, p, 1, 0.5), x)
