"""Sorting and searching against PyTorch on CPU: sort (NaN order, stability), topk, kthvalue,
searchsorted and bucketize, unique and unique_consecutive, with no CPU fallback where the op is
native."""
import pytest
import torch

import torch_pjrt
from tpu_helpers import (
    BF16, BOOL, DEVICE, F32, I64, check_native, check_strict, dname, fallbacks, make)


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


@pytest.mark.parametrize("dtype", [I64, BOOL, torch.int8], ids=dname)
def test_unstable_sort_of_integers_is_native_with_valid_ties(dtype):
    # An unstable sort's tie order is unspecified (CUDA's is not CPU's): values equal CPU's and
    # the indices are a permutation that sorts the input, the stable one.
    x = make((3, 50), dtype, seed=23, low=-3, high=3)
    with torch_pjrt.strict():
        got = torch.sort(x.to(DEVICE), dim=1, descending=True)
        arg = torch.argsort(x.to(DEVICE), dim=1)
    want = torch.sort(x, dim=1, descending=True)
    assert torch.equal(got.values.cpu(), want.values)
    assert torch.equal(x.gather(1, got.indices.cpu()), want.values)
    assert torch.equal(got.indices.cpu(), torch.sort(x, dim=1, descending=True, stable=True).indices)
    assert torch.equal(arg.cpu(), torch.argsort(x, dim=1, stable=True))


def test_unstable_sort_of_half_floats_falls_back_visibly(fresh_stats):
    x = make((50,), BF16, seed=23, low=-3, high=3)
    got = torch.sort(x.to(DEVICE))
    want = torch.sort(x)
    assert torch.equal(got.indices.cpu(), want.indices)
    assert "sort" in fallbacks()


@pytest.mark.parametrize("dtype", [F32, BF16, I64], ids=str)
@pytest.mark.parametrize("right", [False, True], ids=["left", "right"])
def test_searchsorted_and_bucketize(dtype, right):
    seq = make((9,), dtype, low=-5, high=5).sort().values
    v = make((3, 4), dtype, seed=2, low=-7, high=7)
    v.view(-1)[0] = seq[3]  # a tie
    check_strict(lambda s, t: torch.searchsorted(s, t, right=right), seq, v)
    check_strict(lambda s, t: torch.bucketize(t, s, right=right, out_int32=True), seq, v)
    rows = make((3, 6), dtype, seed=4).sort(-1).values
    check_strict(lambda s, t: torch.searchsorted(s, t, side="right" if right else "left"), rows, v)
    unsorted = seq[make((9,), F32, seed=7).argsort()]
    check_strict(lambda s, t, p: torch.searchsorted(s, t, sorter=p, right=right), unsorted, v, unsorted.argsort(stable=True))


def _same_unique(got, want):
    for g, w in zip(got, want):
        assert g.device.type == "tpu" and g.shape == w.shape and g.dtype == w.dtype
        assert torch.equal(g.cpu().nan_to_num(7.5), w.nan_to_num(7.5))


@pytest.mark.parametrize("return_inverse", [False, True])
@pytest.mark.parametrize("return_counts", [False, True])
@pytest.mark.parametrize("case", ["float with NaN", "int64 2-d", "scalar", "empty"])
def test_unique_and_unique_consecutive_run_natively(case, return_inverse, return_counts):
    # torch.unique fell back to CPU (torchvision's batched_nms per class calls it); a sort, the
    # starts of new values counted (one host read, as nonzero's), inverse and counts from them.
    x = {"float with NaN": torch.tensor([3., float("nan"), 1., 3., float("nan"), 2., 1.]),
         "int64 2-d": torch.randint(0, 5, (3, 7), generator=torch.Generator().manual_seed(0)),
         "scalar": torch.tensor(5.), "empty": torch.empty(0, dtype=torch.int32)}[case]
    kw = dict(return_inverse=return_inverse, return_counts=return_counts)
    want = torch._unique2(x, True, return_inverse, return_counts)
    with torch_pjrt.strict():
        got = torch._unique2(x.to(DEVICE), True, return_inverse, return_counts)
        _same_unique(got, want)
        if x.dim() <= 1:
            def runs(t):  # a tensor, or a tuple of those asked for
                r = torch.unique_consecutive(t, **kw)
                return r if isinstance(r, tuple) else (r,)
            _same_unique(runs(x.to(DEVICE)), runs(x))
