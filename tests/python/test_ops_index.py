"""Indexing ops against CPU under strict mode. Ops whose result size depends on the values:
nonzero (and argwhere, torch.where(cond), as_tuple), masked_select (what printing a float tensor
calls), boolean-mask indexing, nonzero_static; their results equal CPU's exactly, order included.
Scatter and gather: scatter_reduce, index_reduce, index_fill, index_copy, masked_scatter, take,
put and isin."""
import pytest
import torch

import torch_pjrt
from tpu_helpers import BF16, DEVICE, F32, I64, assert_same, check_native, check_strict, dname, make


def sparse(shape, dtype, seed=0, density=0.4):
    """A tensor of |dtype| whose elements are zero with probability 1 - density."""
    g = torch.Generator().manual_seed(seed)
    keep = torch.rand(shape, generator=g) < density
    x = make(shape, torch.float32, seed=seed) if dtype != torch.bool else torch.ones(shape, dtype=torch.bool)
    return torch.where(keep, x, torch.zeros((), dtype=x.dtype)).to(dtype)


def strict_same(fn, *xs, strides=True):
    """fn on tpu under strict mode equals fn on CPU: values, dtype, shape and (|strides|)
    strides."""
    want = fn(*xs)
    with torch_pjrt.strict():
        got = fn(*[x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in xs])
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
            assert not strides or g.stride() == w.stride()
    else:
        assert_same(got, want)
        assert not strides or got.stride() == want.stride(), (got.stride(), want.stride())
    return got


def test_print_does_not_fall_back():
    torch.manual_seed(0)
    x = torch.randn(3, 3)
    xd = x.to(DEVICE)
    with torch_pjrt.strict():
        text = str(xd)
    assert text.replace(", device='tpu:0'", "") == str(x)
    # Mixed magnitudes, zeros and non-finite values take the formatter's other paths.
    y = torch.tensor([[0.0, 1e-8, float("inf")], [-float("inf"), float("nan"), 12345.678]])
    with torch_pjrt.strict():
        text = repr(y.to(DEVICE))
    assert text.replace(", device='tpu:0'", "") == repr(y)
    with torch_pjrt.strict():
        text = repr(torch.zeros(2, 2, device=DEVICE))
    assert text.replace(", device='tpu:0'", "") == repr(torch.zeros(2, 2))


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int32, torch.int64, torch.float16,
                                   torch.bfloat16, torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 5), (2, 3, 4, 5), (2, 0, 3)], ids=str)
def test_nonzero(dtype, shape):
    x = sparse(shape, dtype)
    strict_same(torch.nonzero, x, strides=False)
    strict_same(torch.argwhere, x, strides=False)
    strict_same(lambda t: torch.nonzero(t, as_tuple=True), x, strides=False)
    strict_same(lambda t: torch.where(t), x, strides=False)


def test_nonzero_nan_and_negative_zero():
    x = torch.tensor([0.0, -0.0, float("nan"), 1.0, float("-inf"), 0.0])
    strict_same(torch.nonzero, x, strides=False)


def test_nonzero_of_a_view():
    x = sparse((6, 8), torch.float32, seed=3)
    strict_same(lambda t: torch.nonzero(t.t()[1:5, ::2]), x, strides=False)


@pytest.mark.parametrize("n", [0, 1, 5, 64])
def test_nonzero_counts(n):
    x = torch.zeros(64)
    x[torch.randperm(64, generator=torch.Generator().manual_seed(n))[:n]] = 1
    got = strict_same(torch.nonzero, x, strides=False)
    assert got.shape == (n, 1)


def test_nonzero_one_sync_and_few_programs():
    """Two programs per call (the count, then the compaction); counts share programs by their
    power-of-two capacity, so 16 counts of one shape build at most 1 + 5 programs."""
    masks = [torch.arange(16) < k for k in range(1, 17)]
    torch_pjrt.reset_stats()
    before = torch_pjrt.stats()["cached_executables"]
    with torch_pjrt.strict():
        for m in masks:
            got = torch.nonzero(m.to(DEVICE))
            assert got.shape == (int(m.sum()), 1)
    s = torch_pjrt.stats()
    assert s["executes"] == 2 * len(masks)
    assert s["cached_executables"] - before <= 6


def test_nonzero_out():
    x = sparse((4, 5), torch.float32, seed=1)
    want = torch.nonzero(x)
    out = torch.empty(0, dtype=torch.int64, device=DEVICE)
    with torch_pjrt.strict():
        r = torch.nonzero(x.to(DEVICE), out=out)
    assert r is out
    assert_same(out, want)
    with pytest.raises(RuntimeError):
        torch.nonzero(x.to(DEVICE), out=torch.empty(0, dtype=torch.int32, device=DEVICE))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool], ids=str)
def test_masked_select(dtype):
    x = make((3, 4, 5), dtype)
    mask = sparse((3, 4, 5), torch.bool, seed=2)
    strict_same(torch.masked_select, x, mask)
    strict_same(torch.masked_select, x, mask[0])        # the mask broadcasts
    strict_same(torch.masked_select, x[:, :1], mask)    # so does self
    strict_same(torch.masked_select, x, torch.zeros(5, dtype=torch.bool))
    strict_same(torch.masked_select, x, torch.ones((), dtype=torch.bool))
    strict_same(torch.masked_select, x.transpose(0, 2), mask.transpose(0, 2))


def test_masked_select_backward():
    x = make((4, 6), torch.float32)
    mask = sparse((4, 6), torch.bool, seed=4)
    xc = x.clone().requires_grad_(True)
    xd = x.to(DEVICE).requires_grad_(True)
    torch.masked_select(xc, mask).square().sum().backward()
    with torch_pjrt.strict():
        torch.masked_select(xd, mask.to(DEVICE)).square().sum().backward()
    assert_same(xd.grad, xc.grad)


def test_masked_select_out_and_errors():
    x, mask = make((3, 4), torch.float32), sparse((3, 4), torch.bool, seed=5)
    out = torch.empty(0, device=DEVICE)
    with torch_pjrt.strict():
        torch.masked_select(x.to(DEVICE), mask.to(DEVICE), out=out)
    assert_same(out, torch.masked_select(x, mask))
    xd = x.to(DEVICE)
    for bad in [torch.ones(3, 4, dtype=torch.uint8), torch.ones(3, 4)]:
        with pytest.raises(RuntimeError, match="masked_select: expected BoolTensor for mask"):
            torch.masked_select(xd, bad.to(DEVICE))
    with pytest.raises(RuntimeError, match="must match the size"):
        torch.masked_select(xd, torch.ones(5, 4, dtype=torch.bool, device=DEVICE))


@pytest.mark.parametrize("size", [0, 3, 12, 20])
def test_nonzero_static(size):
    x = sparse((3, 4), torch.int32, seed=6)
    strict_same(lambda t: torch.nonzero_static(t, size=size), x, strides=False)
    strict_same(lambda t: torch.nonzero_static(t, size=size, fill_value=-7), x, strides=False)
    with pytest.raises(RuntimeError, match="'size' must be an non-negative integer"):
        torch.nonzero_static(x.to(DEVICE), size=-1)


def test_boolean_mask_indexing():
    x = make((4, 5, 3), torch.float32)
    m2 = sparse((4, 5), torch.bool, seed=7)
    m1 = sparse((4,), torch.bool, seed=8, density=0.6)
    strict_same(lambda t, m: t[m], x, m2)
    strict_same(lambda t, m: t[m], x, m1)
    strict_same(lambda t, m: t[m], x, x > 0)
    strict_same(lambda t, m: t[m], x, torch.zeros(4, 5, dtype=torch.bool))
    # A mask with an integer index after it: the mask's dims and the index broadcast together.
    strict_same(lambda t, m, i: t[m, :, i], x, m1, torch.tensor([2]))


def test_boolean_mask_indexing_errors():
    x = make((3, 4), torch.float32).to(DEVICE)
    with pytest.raises(IndexError, match=r"The shape of the mask \[4\] at index 0 does not match "
                                         r"the shape of the indexed tensor \[3, 4\] at index 0"):
        x[torch.ones(4, dtype=torch.bool, device=DEVICE)]
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 2"):
        x[torch.ones(3, 4, 5, dtype=torch.bool, device=DEVICE)]


def test_boolean_mask_indexing_backward():
    x = make((4, 5), torch.float32)
    m = sparse((4, 5), torch.bool, seed=9)
    xc = x.clone().requires_grad_(True)
    xd = x.to(DEVICE).requires_grad_(True)
    (xc[m] * 3).sum().backward()
    (xd[m.to(DEVICE)] * 3).sum().backward()
    assert_same(xd.grad, xc.grad)


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


@pytest.mark.parametrize("dtype", [F32, BF16, I64, torch.bool], ids=str)
def test_index_copy(dtype):
    x = make((5, 4, 3), dtype)
    src = make((5, 2, 3), dtype, seed=1)
    idx = torch.tensor([3, 0])
    check_strict(lambda a, i, s: a.index_copy(1, i, s), x, idx, src)
    check_strict(lambda a, i, s: a.clone().index_copy_(0, i, s), x, torch.tensor([4, 1, 0]), make((3, 4, 3), dtype, seed=2))


@pytest.mark.parametrize("dtype", [F32, BF16, I64, torch.bool], ids=str)
def test_masked_scatter(dtype):
    x = make((4, 5), dtype)
    mask = make((4, 5), torch.bool, seed=3)
    src = make((6, 5), dtype, seed=1)
    check_strict(lambda a, m, s: a.masked_scatter(m, s), x, mask, src)
    check_strict(lambda a, m, s: a.clone().masked_scatter_(m, s), x, mask[0], src)


# ------------------------------------------------------------ x[mask] = v with count-free values
# A value that broadcasts to the indexing result for any count of true elements (a scalar, a
# row of the trailing dims) is written natively, as a select; values with one entry per true
# element need the count and run on CPU.

def _setitem_both(fn, *tensors):
    cpu = [t.clone() for t in tensors]
    dev = [t.clone().to(DEVICE) for t in tensors]
    fn(*cpu)
    fn(*dev)
    for c, d in zip(cpu, dev):
        assert torch.equal(d.cpu(), c)


MASK_PUTS = {
    "scalar": lambda x, m: x.__setitem__(m, 0.0),
    "0-d tensor": lambda x, m: x.__setitem__(m, torch.tensor(3.0, device=x.device)),
    "row of the trailing dim": lambda x, m: x.__setitem__(m[:, 0], torch.arange(5.0, device=x.device)),
    "mask after a full slice": lambda x, m: x.__setitem__((slice(None), m[0]), -1.0),
    "accumulate": lambda x, m: x.index_put_((m,), torch.tensor(1.5, device=x.device), accumulate=True),
    "functional": lambda x, m: x.copy_(x.index_put((m,), torch.tensor(1.5, device=x.device))),
    "all false": lambda x, m: x.__setitem__(torch.zeros_like(m), 7.0),
}


@pytest.mark.parametrize("name", list(MASK_PUTS))
def test_mask_put_of_count_free_values_is_native(name):
    x = make((4, 5), torch.float32, seed=3)
    with torch_pjrt.strict():
        _setitem_both(MASK_PUTS[name], x, x > 0)


def test_mask_put_of_bools_and_of_per_element_values():
    b = torch.tensor([[True, False, True], [False, False, True]])
    with torch_pjrt.strict():
        _setitem_both(lambda t, m: t.__setitem__(m, True), b, ~b)
        _setitem_both(lambda t, m: t.index_put_((m,), torch.tensor(True, device=t.device), accumulate=True), b, ~b)
    x = make((4, 5), torch.float32, seed=4)  # one value per true element: the CPU serves it
    _setitem_both(lambda t, m: t.__setitem__(m, torch.arange(int(m.sum()), dtype=t.dtype, device=t.device)), x, x > 0)


def test_gather_and_scatter_count_a_0d_tensor_as_1d():
    # PyTorch's ensure_nonempty_dim: OpInfo's gather samples (and gather's backward, a
    # scatter_add into a 0-d zeros) mix 0-d and 1-d tensors; they must run, with CPU's values.
    calls = [lambda d: torch.gather(torch.tensor(5.0, device=d), 0, torch.tensor([0, 0], device=d)),
             lambda d: torch.gather(torch.tensor([5.0, 6.0], device=d), 0, torch.tensor(1, device=d)),
             lambda d: torch.zeros((), device=d).scatter_add(0, torch.tensor([0], device=d), torch.tensor([2.0], device=d)),
             lambda d: torch.zeros(3, device=d).scatter(0, torch.tensor(1, device=d), torch.tensor(2.0, device=d))]
    for call in calls:
        assert_same(call(DEVICE), call("cpu"))
    x = torch.tensor(3.0, requires_grad=True)
    xt = x.detach().to(DEVICE).requires_grad_()
    torch.gather(x, 0, torch.tensor([0, 0])).sum().backward()
    torch.gather(xt, 0, torch.tensor([0, 0], device=DEVICE)).sum().backward()
    assert_same(xt.grad, x.grad)


def test_masked_fill_with_a_mask_that_broadcasts_self():
    # The functional form takes the broadcast shape (OpInfo's sample: a 0-d self, a 1-d mask);
    # the in-place form raises, as on CPU.
    x, m = torch.tensor(0.5), torch.tensor([True, False, True])
    assert_same(torch.masked_fill(x.to(DEVICE), m.to(DEVICE), 1.0), torch.masked_fill(x, m, 1.0))
    with pytest.raises(RuntimeError):
        x.clone().masked_fill_(m, 1.0)
    with pytest.raises(RuntimeError):
        x.to(DEVICE).masked_fill_(m.to(DEVICE), 1.0)


def test_gather_and_indexing_of_complex_tensors_run_natively():
    # A RoPE cache is complex64, gathered per position (TorchTitan's llama3 gathers it from an
    # expanded view every layer); both used to fall back to CPU.
    c = torch.polar(make((10, 6), torch.float32), make((10, 6), torch.float32, seed=1) * 6)
    pos = torch.randint(0, 10, (2, 5), generator=torch.Generator().manual_seed(0))
    mask = make((10, 6), torch.float32, seed=2) > 0
    expanded = c[None, :, None, :].expand(2, -1, -1, -1)
    index = pos.view(2, 5, 1, 1).expand(2, 5, 1, 6)
    for dtype in (torch.complex64, torch.complex128):
        x, ex = c.to(dtype), expanded.to(dtype)
        with torch_pjrt.strict():
            assert_same(torch.gather(ex.to(DEVICE), 1, index.to(DEVICE)), torch.gather(ex, 1, index))
            assert_same(x.to(DEVICE)[pos.to(DEVICE)], x[pos])
            assert_same(x.to(DEVICE)[pos.to(DEVICE), 2:4], x[pos, 2:4])
            assert_same(x.to(DEVICE)[mask.to(DEVICE)], x[mask])


@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_extremes_keep_nan(reduce, include_self):
    # XLA's scatter with a max/min combiner dropped a NaN that CPU's kernel keeps (found by
    # segment_reduce's NaN samples): a NaN source or (with include_self) self value wins.
    nan = float("nan")
    src = torch.tensor([1.0, nan, 2, 7, 3, 0, 4, -1, 2, nan])
    index = torch.tensor([0, 0, 0, 2, 2, 3, 4, 4, 4, 4])
    self_ = torch.tensor([0.0, 0, nan, 0, 0, 0])
    want = self_.scatter_reduce(0, index, src, reduce, include_self=include_self)
    with torch_pjrt.strict():
        got = self_.to(DEVICE).scatter_reduce(0, index.to(DEVICE), src.to(DEVICE), reduce,
                                              include_self=include_self)
    assert_same(got, want)
