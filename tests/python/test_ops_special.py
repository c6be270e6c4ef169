"""Special functions, scalar-taking activations, index reductions, the added reductions and
sorting, each against PyTorch on CPU, with no CPU fallback where the op is native."""
import pytest
import torch

import torch_pjrt
from tpu_helpers import DEVICE, assert_same, fallbacks, make, to_dev

F32, BF16, I64, BOOL = torch.float32, torch.bfloat16, torch.int64, torch.bool


def dname(d):
    return str(d).replace("torch.", "")


def run_native(fn, *cpu_args):
    """fn on tpu copies under strict mode (no fallback allowed), and on CPU."""
    dev = [a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in cpu_args]
    with torch_pjrt.strict():
        got = fn(*dev)
        torch.tpu.synchronize()
    return got, fn(*cpu_args)


def check_native(fn, *cpu_args, **kw):
    got, want = run_native(fn, *cpu_args)
    if isinstance(want, torch.Tensor):
        got, want = (got,), (want,)
    for g, w in zip(got, want):
        assert_same(g, w, **kw)


SPECIAL_VALUES = torch.tensor([0.0, -0.0, 1.0, -1.0, -2.5, -0.5, 1e-3, 3.7, -3.7, 30.0,
                               float("inf"), -float("inf"), float("nan"), -8.4784, 12.5, 95.0])

# ---------------------------------------------------------------- special functions

UNARY_SPECIAL = {
    "sinc": torch.sinc,
    "entr": torch.special.entr,
    "i0": torch.i0,
    "i0e": torch.special.i0e,
    "i1": torch.special.i1,
    "i1e": torch.special.i1e,
    "erfcx": torch.special.erfcx,
    "log_ndtr": torch.special.log_ndtr,
    "digamma": torch.digamma,
    "hardsigmoid": torch.nn.functional.hardsigmoid,
    "hardswish": torch.nn.functional.hardswish,
    "mish": torch.nn.functional.mish,
    "logsigmoid": torch.nn.functional.logsigmoid,
}


@pytest.mark.parametrize("op", list(UNARY_SPECIAL))
def test_unary_special_values(op):
    check_native(UNARY_SPECIAL[op], SPECIAL_VALUES, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=dname)
@pytest.mark.parametrize("op", list(UNARY_SPECIAL))
def test_unary_special_random(op, dtype):
    if dtype == BF16 and op in ("erfcx", "log_ndtr"):
        with pytest.raises(NotImplementedError, match="not implemented for 'BFloat16'"):
            UNARY_SPECIAL[op](torch.ones(2, dtype=dtype, device=DEVICE))  # CPU's own error
        return
    kw = {"rtol": 2e-5, "atol": 1e-5} if dtype == F32 else {}
    check_native(UNARY_SPECIAL[op], make((4, 5), dtype, seed=1, low=-6, high=6), **kw)


@pytest.mark.parametrize("fn", [torch.sinc, torch.special.entr, torch.i0, torch.special.erfcx])
def test_float_result_of_integers(fn):
    check_native(fn, torch.tensor([[-3, 0, 2], [5, 1, -1]]))
    check_native(fn, torch.tensor([True, False]))


def test_ndtri():
    check_native(torch.special.ndtri, torch.tensor([0.0, 1e-3, 0.1, 0.5, 0.9, 0.999, 1.0, -0.5, 2.0]),
                 rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_polygamma(n):
    # Negative non-integer x sums terms that cancel to a few digits in f32 (CPU's own float
    # kernel lands closer to the exact value than its precision promises): 1e-3 there.
    check_native(lambda x: torch.polygamma(n, x), SPECIAL_VALUES, rtol=1e-3, atol=1e-5)
    check_native(lambda x: x.clone().polygamma_(n), make((3, 4), F32, seed=n, low=0.1, high=5), rtol=1e-4)


def test_polygamma_backward_and_errors():
    x = make((3, 4), F32, seed=5, low=0.5, high=4)
    grads = []
    for dev in ("cpu", DEVICE):
        xd = x.detach().to(dev).requires_grad_()
        torch.polygamma(2, xd).sum().backward()
        grads.append(xd.grad)
    assert_same(grads[1], grads[0], rtol=1e-4)
    with pytest.raises(RuntimeError, match="does not support negative n"):
        torch.polygamma(-1, x.to(DEVICE))


def test_zeta_rules():
    x = torch.tensor([1.0, 0.5, 2.0, 3.0, 2.0, 2.5, 4.0])
    q = torch.tensor([1.0, 1.0, 0.0, -2.5, -1.0, -2.5, 0.7])
    check_native(torch.special.zeta, x, q, rtol=1e-4)
    check_native(torch.special.zeta, torch.tensor([True, False]), torch.tensor([True, False]))


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


SCALAR_ACTIVATIONS = {
    "softplus": lambda x: torch.nn.functional.softplus(x, beta=2, threshold=5),
    "softshrink": lambda x: torch.nn.functional.softshrink(x, 0.7),
    "hardshrink": lambda x: torch.nn.functional.hardshrink(x, 0.7),
    "threshold": lambda x: torch.nn.functional.threshold(x, 0.5, -2.0),
    "logit": lambda x: torch.logit(x, eps=0.1),
}


@pytest.mark.parametrize("op", list(SCALAR_ACTIVATIONS))
def test_scalar_activation_forward_and_backward(op):
    fn = SCALAR_ACTIVATIONS[op]
    x = make((3, 5), F32, seed=10, low=-3, high=3) if op != "logit" else make((3, 5), F32, seed=10, low=0.01, high=0.99)
    check_native(fn, x)
    grads = []
    for dev in ("cpu", DEVICE):
        xd = x.detach().to(dev).requires_grad_()
        fn(xd).sum().backward()
        grads.append(xd.grad)
    assert_same(grads[1], grads[0])


def test_softshrink_negative_lambda_raises():
    with pytest.raises(RuntimeError, match="lambda must be greater or equal to 0"):
        torch.nn.functional.softshrink(torch.ones(2, device=DEVICE), -1.0)


# ---------------------------------------------------------------- index reductions

@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("dtype", [F32, I64], ids=dname)
def test_scatter_reduce(reduce, include_self, dtype):
    x = make((4, 5), dtype, seed=11)
    src = make((4, 5), dtype, seed=12)
    idx = torch.tensor([[0, 1, 0, 3, 4], [2, 2, 2, 0, 1], [1, 0, 3, 3, 3], [0, 0, 0, 0, 0]])
    check_native(lambda a, i, s: a.scatter_reduce(1, i, s, reduce, include_self=include_self), x, idx, src)
    check_native(lambda a, i, s: a.scatter_reduce(0, i[:2, :3], s, reduce, include_self=include_self),
                 x, idx.clamp(max=3), src)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
def test_index_reduce(reduce, include_self):
    x = make((5, 3), F32, seed=13)
    src = make((4, 3), F32, seed=14)
    idx = torch.tensor([0, 4, 0, 2])
    check_native(lambda a, i, s: a.index_reduce(0, i, s, reduce, include_self=include_self), x, idx, src)
    check_native(lambda a, i, s: a.clone().index_reduce_(0, i, s, reduce, include_self=include_self),
                 x, idx, src)


def test_index_reduce_mean_floors_integers():
    x = torch.tensor([5, -5, 7])
    check_native(lambda a, i, s: a.index_reduce(0, i, s, "mean"), x, torch.tensor([0, 1, 1]),
                 torch.tensor([2, 0, 1]))


def test_scatter_reduce_bad_reduce_raises():
    t = torch.zeros(3, device=DEVICE)
    with pytest.raises(RuntimeError, match="reduce argument must be"):
        t.scatter_reduce(0, torch.tensor([0], device=DEVICE), t, "max")


def test_index_fill():
    x = make((4, 5), F32, seed=15)
    check_native(lambda a, i: a.index_fill(1, i, -1.5), x, torch.tensor([0, -1, 2]))
    check_native(lambda a, i: a.clone().index_fill_(0, i, torch.tensor(3.0)), x, torch.tensor([1]))


# ---------------------------------------------------------------- reductions

@pytest.mark.parametrize("dim", [None, 0, (0, 1)], ids=str)
def test_var_std_mean(dim):
    x = make((3, 4, 2), F32, seed=16)
    check_native(lambda t: torch.var_mean(t, dim, correction=0), x)
    check_native(lambda t: torch.std_mean(t, dim, keepdim=True), x)


@pytest.mark.parametrize("dtype", [F32, BF16, I64, BOOL], ids=dname)
def test_aminmax_nansum_count_nonzero(dtype):
    x = make((3, 4), dtype, seed=17)
    if dtype.is_floating_point:
        x[1, 2] = float("nan")
    check_native(torch.aminmax, x)
    check_native(lambda t: torch.aminmax(t, dim=1, keepdim=True), x)
    check_native(lambda t: torch.nansum(t, 1), x)
    check_native(lambda t: torch.count_nonzero(t, (0, 1)), x)


def test_trace():
    check_native(torch.trace, make((3, 5), F32, seed=18))
    check_native(torch.trace, make((4, 2), I64, seed=19))


@pytest.mark.parametrize("dtype", [F32, I64, BOOL], ids=dname)
@pytest.mark.parametrize("fn", [torch.cummax, torch.cummin], ids=["cummax", "cummin"])
def test_cummax_cummin(fn, dtype):
    x = make((3, 8), dtype, seed=20, low=-2, high=2)
    if dtype == F32:
        x[0, 3] = float("nan")
        x[1, 2] = x[1, 1]
    check_native(lambda t: fn(t, 1), x)
    check_native(lambda t: fn(t, 0), x)


# ---------------------------------------------------------------- sorting

@pytest.mark.parametrize("descending", [False, True])
def test_sort_nan_largest_and_stable(descending):
    x = torch.tensor([[3.0, float("nan"), 1.0, 3.0, -float("inf"), 0.0, -0.0, 1.0]])
    check_native(lambda t: torch.sort(t, dim=1, descending=descending, stable=True), x)
    check_native(lambda t: torch.argsort(t, dim=1, descending=descending, stable=True), x)


@pytest.mark.parametrize("dtype", [I64, BOOL, BF16], ids=dname)
def test_stable_sort_ties(dtype):
    x = make((2, 40), dtype, seed=21, low=-3, high=3)
    check_native(lambda t: torch.sort(t, stable=True), x)


def test_topk_kthvalue():
    x = make((4, 9), F32, seed=22)
    check_native(lambda t: torch.topk(t, 3), x)
    check_native(lambda t: torch.topk(t, 2, dim=0, largest=False), x)
    check_native(lambda t: torch.kthvalue(t, 4, 1, keepdim=True), x)
    with pytest.raises(RuntimeError, match="out of range"):
        torch.topk(x.to(DEVICE), 10)


def test_unstable_sort_of_integers_falls_back_visibly(fresh_stats):
    x = make((50,), I64, seed=23, low=-3, high=3)
    got = torch.sort(x.to(DEVICE))
    want = torch.sort(x)
    assert torch.equal(got.indices.cpu(), want.indices)
    assert "sort" in fallbacks()


# ---------------------------------------------------------------- lookups, factories, cross

def test_take_put_isin():
    x = make((3, 4), F32, seed=24)
    idx = torch.tensor([[0, -1], [5, 11]])
    check_native(torch.take, x, idx)
    check_native(lambda a, i, s: a.put(i, s, accumulate=True), x, torch.tensor([1, 1, -2]), torch.ones(3))
    check_native(lambda a, i, s: a.clone().put_(i, s), x, torch.tensor([0, 3]), torch.tensor([7.0, 8.0]))
    e = make((3, 5), I64, seed=25, low=-3, high=3)
    check_native(torch.isin, e, torch.tensor([0, 2, -3]))
    check_native(lambda a: torch.isin(a, 1, invert=True), e)
    check_native(torch.isin, torch.tensor([1.0, float("nan")]), torch.tensor([float("nan"), 1.0]))


def test_eye_and_vdot():
    with torch_pjrt.strict():
        got = (torch.eye(3, device=DEVICE), torch.eye(2, 4, dtype=I64, device=DEVICE))
    assert_same(got[0], torch.eye(3))
    assert_same(got[1], torch.eye(2, 4, dtype=I64))
    check_native(torch.vdot, make((5,), F32, seed=26), make((5,), F32, seed=27))


@pytest.mark.parametrize("dtype", [F32, BF16, I64], ids=dname)
def test_linalg_cross(dtype):
    a = make((4, 3, 2), dtype, seed=28)
    b = make((1, 3, 2), dtype, seed=29)
    check_native(lambda x, y: torch.linalg.cross(x, y, dim=1), a, b)
    with pytest.raises(RuntimeError, match="must have length 3"):
        torch.linalg.cross(a.to(DEVICE), b.to(DEVICE), dim=2)


# ---------------------------------------------------------------- random

def test_normal_and_random_integers_distributions():
    with torch_pjrt.strict():
        x = torch.empty(50000, device=DEVICE).normal_(2.0, 3.0)
        r = torch.empty(8000, device=DEVICE, dtype=I64).random_(-3, 5)
        f = torch.empty(2000, device=DEVICE).random_(10)
    x, r, f = x.cpu(), r.cpu(), f.cpu()
    assert abs(x.mean().item() - 2.0) < 0.1 and abs(x.std().item() - 3.0) < 0.1
    assert r.min().item() == -3 and r.max().item() == 4
    assert torch.bincount(r + 3).min().item() > 800  # ~1000 each
    assert torch.equal(f.unique(), torch.arange(10.0))
    with pytest.raises(RuntimeError, match="expects 'from' to be less than 'to'"):
        torch.empty(3, device=DEVICE).random_(5, 2)
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        torch.empty(3, device=DEVICE).normal_(0.0, -1.0)


# ---------------------------------------------------------------- reflection / replication pads

@pytest.mark.parametrize("mode,pad,shape", [
    ("reflect", (2, 1), (2, 3, 5)), ("replicate", (3, 0), (3, 4)),
    ("reflect", (1, 2, 2, 0), (1, 2, 3, 4)), ("replicate", (2, 2, 1, 3), (2, 3, 4)),
    ("replicate", (-1, 2, 0, -2), (1, 2, 4, 5)), ("replicate", (1, 1, 1, 1, 1, 1), (1, 1, 2, 3, 2)),
], ids=str)
def test_mode_pads_forward_backward(mode, pad, shape):
    x = make(shape, F32, seed=30)
    check_native(lambda t: torch.nn.functional.pad(t, pad, mode=mode), x)
    grads = []
    for dev in ("cpu", DEVICE):
        xd = x.detach().to(dev).requires_grad_()
        y = torch.nn.functional.pad(xd, pad, mode=mode)
        (y * torch.arange(y.numel(), dtype=F32).reshape(y.shape).to(dev)).sum().backward()
        grads.append(xd.grad)
    assert_same(grads[1], grads[0])


def test_addbmm():
    s, b1, b2 = make((3, 4), F32, seed=31), make((5, 3, 2), F32, seed=32), make((5, 2, 4), F32, seed=33)
    check_native(lambda a, x, y: torch.addbmm(a, x, y, beta=0.5, alpha=2), s, b1, b2)
    check_native(lambda a, x, y: a.clone().addbmm_(x, y), s, b1, b2)
