"""Reductions and scans against PyTorch on CPU: sum (dims, keepdim, dtype=, out=, promotion),
var/std/mean, aminmax, nansum, count_nonzero, equal, mode, median, norm's dim= forms, renorm,
cummax/cummin, logcumsumexp and histc, with no CPU fallback where the op is native."""
import pytest
import torch
import torch.nn.functional as F

import torch_pjrt
from tpu_helpers import (
    BF16, BOOL, DEVICE, DTYPES, F16, F32, F64, I32, I64, I8, U8, assert_same, both, check,
    check_native, check_strict, dname, make)


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


@pytest.mark.parametrize("dtype", [F32, I64, BOOL], ids=dname)
@pytest.mark.parametrize("fn", [torch.cummax, torch.cummin], ids=["cummax", "cummin"])
def test_cummax_cummin(fn, dtype):
    x = make((3, 8), dtype, seed=20, low=-2, high=2)
    if dtype == F32:
        x[0, 3] = float("nan")
        x[1, 2] = x[1, 1]
    check_native(lambda t: fn(t, 1), x)
    check_native(lambda t: fn(t, 0), x)


@pytest.mark.parametrize("dtype", [F32, BF16, I64, torch.bool], ids=str)
def test_equal(dtype):
    x = make((3, 4, 5), dtype)
    y = x.clone()
    y.view(-1)[7] = not y.view(-1)[7] if dtype == torch.bool else y.view(-1)[7] + 1
    with torch_pjrt.strict():
        xd = x.to(DEVICE)
        assert torch.equal(xd, x.clone().to(DEVICE)) is True
        assert torch.equal(xd, y.to(DEVICE)) is False
        assert torch.equal(xd, xd[:2]) is False
        assert torch.equal(xd.transpose(0, 2), x.transpose(0, 2).contiguous().to(DEVICE)) is True


def test_equal_nan_is_not_equal():
    x = torch.tensor([1.0, float("nan")]).to(DEVICE)
    with torch_pjrt.strict():
        assert torch.equal(x, x) is False


@DTYPES
def test_logcumsumexp(dtype):
    x = make((4, 37, 5), dtype)
    x[0, 0, 0] = float("inf")
    x[1, :, 1] = float("-inf")
    x[2, 3, 2] = float("nan")
    x[3, 5, 3] = -1000.0
    check_strict(lambda t: torch.logcumsumexp(t, 1), x)
    check_strict(lambda t: torch.logcumsumexp(t, 0), make((4, 6), dtype), backward=True)


@DTYPES
@pytest.mark.parametrize("p,dim,maxnorm", [(2, 1, 1.5), (1, 0, 5.0), (3.0, 2, 2.0), (float("inf"), -1, 2.0),
                                           (2, 0, 1e6)], ids=str)
def test_renorm(dtype, p, dim, maxnorm):
    check_strict(lambda t: torch.renorm(t, p, dim, maxnorm), make((4, 6, 5), dtype), backward=dtype == F32)


@pytest.mark.parametrize("dtype", [F32, BF16, I64, torch.bool], ids=str)
def test_mode(dtype):
    x = make((4, 6, 9), I64, low=0, high=4).to(dtype)
    check_strict(lambda t: torch.mode(t, 1), x)
    check_strict(lambda t: torch.mode(t, -1, True), x)
    check_strict(lambda t: torch.mode(t, 0), make((7,), I64, low=0, high=3).to(dtype))


@DTYPES
def test_norm_dim_forms(dtype):
    x = make((3, 4, 5), dtype)
    check_strict(lambda t: torch.ops.aten.norm.ScalarOpt_dim(t, None, [1]), x)
    check_strict(lambda t: torch.ops.aten.norm.ScalarOpt_dim(t, 3, [0, 2], True), x)
    check_strict(lambda t: torch.ops.aten.norm.ScalarOpt_dim_dtype(t, 1, [1], False, dtype=torch.float64), x)
    check_strict(lambda a, b: torch.dist(a, b, 3), x, make((3, 4, 5), dtype, seed=2))
    check_strict(lambda a, b: F.pairwise_distance(a, b), x[0], make((4, 5), dtype, seed=2), backward=True)


def test_norm_of_integers_is_cpu_error():
    with pytest.raises(RuntimeError, match="floating point"):
        torch.ops.aten.norm.ScalarOpt_dim(torch.ones(3, dtype=torch.long).to(DEVICE), 2, [0])


@pytest.mark.parametrize("dtype", [F32, BF16, I64], ids=str)
def test_median_values(dtype):
    x = make((5, 7), dtype)
    check_strict(torch.median, x)
    check_strict(torch.nanmedian, x)


@pytest.mark.parametrize("dtype", [F32, BF16, I64], ids=str)
def test_median_dim_ties(dtype):
    x = make((6, 33), I64, low=0, high=4).to(dtype)
    for fn in (torch.median, torch.nanmedian):
        check_strict(lambda t: fn(t, 1), x)
        check_strict(lambda t: fn(t, 0, True), x)


def test_median_dim_and_nans():
    x = make((4, 7), F32)
    check_strict(lambda t: torch.median(t, 1), x)
    check_strict(lambda t: torch.nanmedian(t, 0, True), x)
    x[1, 2] = x[1, 5] = x[2, 0] = float("nan")
    x[3, :5] = float("nan")  # (an all-NaN row's nanmedian index is CPU's selection artifact)
    for fn in (torch.median, torch.nanmedian):
        check_strict(lambda t: fn(t, 1), x)
        check_strict(fn, x)


@pytest.mark.parametrize("form", ["count", "range", "density", "weighted", "edges", "point"])
def test_histogram_runs_natively(form):
    # torch.histogram fell back to CPU: the edges (linspace over the range, or given), each
    # element's bin by a search of the edges, the counts by index_add, as CPU's kernel bins them.
    x = torch.randn(500, generator=torch.Generator().manual_seed(0))
    x[7] = float("nan")  # counts nothing on either side
    bins, kw = 17, {}
    if form == "range":
        kw = {"range": (-1.0, 1.5)}
    elif form == "density":
        kw = {"density": True}
    elif form == "weighted":
        kw = {"weight": torch.rand(500, generator=torch.Generator().manual_seed(1))}
    elif form == "edges":
        bins = torch.tensor([-2.0, -0.5, 0.0, 0.1, 3.0])
    elif form == "point":
        x = torch.full((4,), 2.5)
    if form != "range" and form != "edges" and form != "point":
        x = x.nan_to_num(0.25)  # the data's own range must be finite, as CPU requires
    want = torch.histogram(x, bins, **kw)

    def dev(v):
        return v.to(DEVICE) if isinstance(v, torch.Tensor) else v
    with torch_pjrt.strict():
        got = torch.histogram(x.to(DEVICE), dev(bins), **{k: dev(v) for k, v in kw.items()})
    assert_same(got.hist, want.hist, atol=1e-5, rtol=1e-5)
    assert_same(got.bin_edges, want.bin_edges)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
def test_segment_reduce_runs_natively(reduce):
    # segment_reduce and its backward fell back to CPU. Empty segments, an initial value, ties
    # (max/min share the gradient), a zero (prod's gradient), 2-d lengths along axis 1 and
    # offsets, forward and backward, in strict mode.
    data = torch.tensor([1.0, 5, 2, 7, 3, 0, 4, -1, 2, 4])
    lengths = torch.tensor([3, 0, 2, 1, 4])
    grid = torch.randn(3, 4, 2, generator=torch.Generator().manual_seed(8))
    cases = [(data, dict(lengths=lengths)), (data, dict(lengths=lengths, initial=2.0)),
             (grid, dict(lengths=torch.tensor([[2, 1, 1], [1, 3, 0], [4, 0, 0]]), axis=1)),
             (grid, dict(offsets=torch.tensor([0, 1, 3]), axis=0))]
    for x, kw in cases:
        out = []
        for dev in ("cpu", DEVICE):
            xd = x.to(dev).requires_grad_()
            kwd = {k: v.to(dev) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
            with torch_pjrt.strict(dev == DEVICE):
                y = torch.segment_reduce(xd, reduce, **kwd)
                finite = torch.where(y.isfinite(), y, 0)
                (g,) = torch.autograd.grad((finite * torch.arange(
                    float(y.numel()), device=dev).reshape(y.shape)).sum(), xd)
            out.append((y, g))
        (yc, gc), (yt, gt) = out
        assert_same(yt, yc)
        assert_same(gt, gc)
