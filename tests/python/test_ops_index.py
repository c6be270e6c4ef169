"""Ops whose result size depends on the values, against CPU under strict mode: nonzero (and
argwhere, torch.where(cond), as_tuple), masked_select (what printing a float tensor calls),
boolean-mask indexing, nonzero_static. Results equal CPU's exactly, order included."""
import pytest
import torch

import torch_pjrt
from tpu_helpers import DEVICE, assert_same, make


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
