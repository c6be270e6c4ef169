"""Stand-alone ops against CPU under strict mode: equal, glu, prelu, elu's backward,
logcumsumexp, channel_shuffle, renorm, mode and norm's dim= forms."""
import pytest
import torch
import torch.nn.functional as F

import torch_pjrt
from tpu_helpers import DEVICE, assert_same, make

F32, BF16, I64 = torch.float32, torch.bfloat16, torch.int64
DTYPES = pytest.mark.parametrize("dtype", [F32, BF16], ids=["float32", "bfloat16"])


def check(fn, *xs, backward=False):
    want = fn(*xs)
    xd = [x.to(DEVICE) for x in xs]
    with torch_pjrt.strict():
        got = fn(*xd)
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            assert_same(g, w)
    else:
        assert_same(got, want)
    if not backward:
        return
    xs = [x.detach().requires_grad_(True) for x in xs]
    xd = [x.detach().requires_grad_(True) for x in xd]
    out = fn(*xs)
    g = make(tuple(out.shape), out.dtype, seed=5)
    out.backward(g)
    with torch_pjrt.strict():
        fn(*xd).backward(g.to(DEVICE))
    for a, b in zip(xd, xs):
        assert_same(a.grad, b.grad)


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
def test_glu(dtype):
    check(lambda t: F.glu(t, 1), make((4, 6, 5), dtype), backward=True)
    check(lambda t: F.glu(t), make((3, 8), dtype), backward=True)


@DTYPES
def test_prelu(dtype):
    check(lambda t, w: F.prelu(t, w), make((4, 6, 5), dtype), make((6,), dtype, seed=1), backward=True)
    check(lambda t, w: F.prelu(t, w), make((4, 6), dtype), make((1,), dtype, seed=1), backward=True)


@DTYPES
@pytest.mark.parametrize("fn", [lambda t: F.elu(t, 0.5), F.selu, lambda t: F.celu(t, 2.0)],
                         ids=["elu", "selu", "celu"])
def test_elu_backward(dtype, fn):
    check(fn, make((4, 6, 5), dtype), backward=True)


def test_elu_backward_from_result():
    # the in-place form's backward works from the result
    check(lambda t: F.elu(t * 1, 0.7, inplace=True), make((4, 5), F32), backward=True)


@DTYPES
def test_logcumsumexp(dtype):
    x = make((4, 37, 5), dtype)
    x[0, 0, 0] = float("inf")
    x[1, :, 1] = float("-inf")
    x[2, 3, 2] = float("nan")
    x[3, 5, 3] = -1000.0
    check(lambda t: torch.logcumsumexp(t, 1), x)
    check(lambda t: torch.logcumsumexp(t, 0), make((4, 6), dtype), backward=True)


@pytest.mark.parametrize("dtype", [F32, BF16, I64, torch.bool], ids=str)
def test_channel_shuffle(dtype):
    check(lambda t: F.channel_shuffle(t, 3), make((2, 6, 4, 3), dtype))


@DTYPES
@pytest.mark.parametrize("p,dim,maxnorm", [(2, 1, 1.5), (1, 0, 5.0), (3.0, 2, 2.0), (float("inf"), -1, 2.0),
                                           (2, 0, 1e6)], ids=str)
def test_renorm(dtype, p, dim, maxnorm):
    check(lambda t: torch.renorm(t, p, dim, maxnorm), make((4, 6, 5), dtype), backward=dtype == F32)


@pytest.mark.parametrize("dtype", [F32, BF16, I64, torch.bool], ids=str)
def test_mode(dtype):
    x = make((4, 6, 9), I64, low=0, high=4).to(dtype)
    check(lambda t: torch.mode(t, 1), x)
    check(lambda t: torch.mode(t, -1, True), x)
    check(lambda t: torch.mode(t, 0), make((7,), I64, low=0, high=3).to(dtype))


@DTYPES
def test_norm_dim_forms(dtype):
    x = make((3, 4, 5), dtype)
    check(lambda t: torch.ops.aten.norm.ScalarOpt_dim(t, None, [1]), x)
    check(lambda t: torch.ops.aten.norm.ScalarOpt_dim(t, 3, [0, 2], True), x)
    check(lambda t: torch.ops.aten.norm.ScalarOpt_dim_dtype(t, 1, [1], False, dtype=torch.float64), x)
    check(lambda a, b: torch.dist(a, b, 3), x, make((3, 4, 5), dtype, seed=2))
    check(lambda a, b: F.pairwise_distance(a, b), x[0], make((4, 5), dtype, seed=2), backward=True)


def test_norm_of_integers_is_cpu_error():
    with pytest.raises(RuntimeError, match="floating point"):
        torch.ops.aten.norm.ScalarOpt_dim(torch.ones(3, dtype=torch.long).to(DEVICE), 2, [0])


@pytest.mark.parametrize("dtype", [F32, BF16, I64], ids=str)
@pytest.mark.parametrize("right", [False, True], ids=["left", "right"])
def test_searchsorted_and_bucketize(dtype, right):
    seq = make((9,), dtype, low=-5, high=5).sort().values
    v = make((3, 4), dtype, seed=2, low=-7, high=7)
    v.view(-1)[0] = seq[3]  # a tie
    check(lambda s, t: torch.searchsorted(s, t, right=right), seq, v)
    check(lambda s, t: torch.bucketize(t, s, right=right, out_int32=True), seq, v)
    rows = make((3, 6), dtype, seed=4).sort(-1).values
    check(lambda s, t: torch.searchsorted(s, t, side="right" if right else "left"), rows, v)
    unsorted = seq[make((9,), F32, seed=7).argsort()]
    check(lambda s, t, p: torch.searchsorted(s, t, sorter=p, right=right), unsorted, v, unsorted.argsort(stable=True))


@pytest.mark.parametrize("dtype", [F32, BF16, I64], ids=str)
def test_median_values(dtype):
    x = make((5, 7), dtype)
    check(torch.median, x)
    check(torch.nanmedian, x)


@pytest.mark.parametrize("dtype", [F32, BF16, I64], ids=str)
def test_median_dim_ties(dtype):
    x = make((6, 33), I64, low=0, high=4).to(dtype)
    for fn in (torch.median, torch.nanmedian):
        check(lambda t: fn(t, 1), x)
        check(lambda t: fn(t, 0, True), x)


def test_median_dim_and_nans():
    x = make((4, 7), F32)
    check(lambda t: torch.median(t, 1), x)
    check(lambda t: torch.nanmedian(t, 0, True), x)
    x[1, 2] = x[1, 5] = x[2, 0] = float("nan")
    x[3, :5] = float("nan")  # (an all-NaN row's nanmedian index is CPU's selection artifact)
    for fn in (torch.median, torch.nanmedian):
        check(lambda t: fn(t, 1), x)
        check(fn, x)


@pytest.mark.parametrize("dtype", [F32, BF16, I64, torch.bool], ids=str)
def test_index_copy(dtype):
    x = make((5, 4, 3), dtype)
    src = make((5, 2, 3), dtype, seed=1)
    idx = torch.tensor([3, 0])
    check(lambda a, i, s: a.index_copy(1, i, s), x, idx, src)
    check(lambda a, i, s: a.clone().index_copy_(0, i, s), x, torch.tensor([4, 1, 0]), make((3, 4, 3), dtype, seed=2))


@pytest.mark.parametrize("dtype", [F32, BF16, I64, torch.bool], ids=str)
def test_masked_scatter(dtype):
    x = make((4, 5), dtype)
    mask = make((4, 5), torch.bool, seed=3)
    src = make((6, 5), dtype, seed=1)
    check(lambda a, m, s: a.masked_scatter(m, s), x, mask, src)
    check(lambda a, m, s: a.clone().masked_scatter_(m, s), x, mask[0], src)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.int8], ids=str)
def test_bitwise_shifts(dtype):
    a = make((6, 5), dtype, low=-100, high=100)
    s = torch.arange(-2, 28).reshape(6, 5).to(dtype) if dtype != torch.uint8 else torch.arange(0, 30).reshape(6, 5).to(dtype)
    if dtype == torch.int64:
        s = s * 3
    check(lambda x, y: x << y, a, s)
    check(lambda x, y: x >> y, a, s)
    check(lambda x, y: torch.bitwise_left_shift(x, y), a, s[0])


@DTYPES
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "weighted"])
def test_binary_cross_entropy(dtype, reduction, weighted):
    x = make((4, 5), F32, low=0.02, high=0.98).to(dtype)
    x[0, 0], x[0, 1] = 0.0, 1.0  # logs clamped at -100
    y = make((4, 5), F32, seed=1, low=0, high=1).to(dtype)
    w = make((5,), dtype, seed=2, low=0.1, high=2) if weighted else None
    check(lambda a, t: F.binary_cross_entropy(a, t, weight=w.to(a.device) if weighted else None,
                                              reduction=reduction), x, y, backward=True)


UNFOLD = [((2, 3, 7, 6), dict(kernel_size=2)),
          ((3, 6, 5), dict(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1)))]


@pytest.mark.parametrize("dtype", [F32, BF16, torch.bool], ids=str)
@pytest.mark.parametrize("shape,kw", UNFOLD, ids=["plain", "dilated_padded"])
def test_unfold_and_fold(dtype, shape, kw):
    x = make(shape, dtype)
    check(lambda t: F.unfold(t, **kw), x, backward=dtype == F32)
    if dtype == F32:  # CPU's 16-bit col2im adds overlaps in 16 bits: it falls back
        cols = F.unfold(x, **kw)
        check(lambda c: F.fold(c, output_size=shape[-2:], **kw), cols, backward=True)
