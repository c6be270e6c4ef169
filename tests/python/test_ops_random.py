"""Random ops on the device, under strict mode. torch.multinomial: its draws follow the
distribution (a chi-square test of the frequencies at a fixed seed), repeat under
torch.tpu.manual_seed and a tpu Generator, and its shapes, dtypes and errors are CPU's. normal_
and random_: their moments and ranges. The numbers themselves differ from CPU's (another
generator), as for every random op."""
import pytest
import torch

import torch_pjrt
from tpu_helpers import DEVICE, I64


# chi-square quantiles at 0.999: a wrong sampler scores far above them, a right one below them at
# any seed but one in a thousand (the seeds here are fixed, so the tests are deterministic)
CHI2_999 = {1: 10.83, 2: 13.82, 3: 16.27, 4: 18.47, 5: 20.52}


def chi2(counts, probs):
    n = counts.sum().item()
    expected = probs / probs.sum() * n
    keep = expected > 0
    assert (counts[~keep] == 0).all(), f"a category of probability 0 was drawn: {counts}"
    return (((counts[keep] - expected[keep]) ** 2) / expected[keep]).sum().item(), int(keep.sum()) - 1


def sample(*args, **kw):
    with torch_pjrt.strict():
        return torch.multinomial(*args, **kw)


def test_with_replacement_follows_the_distribution():
    torch.tpu.manual_seed(0)
    w = torch.tensor([1.0, 2.0, 3.0, 4.0, 0.0, 5.0])  # unnormalized, with an impossible category
    draws = sample(w.to(DEVICE), 30000, replacement=True).cpu()
    stat, df = chi2(torch.bincount(draws, minlength=6).double(), w.double())
    assert stat < CHI2_999[df], stat


def test_one_draw_per_row_follows_the_distribution():
    # What sampling in generate() does: one draw from each row of a softmax.
    torch.tpu.manual_seed(1)
    logits = torch.tensor([0.5, -1.0, 2.0, 0.0, 1.0])
    probs = torch.softmax(logits.to(DEVICE).expand(20000, 5) / 0.7, dim=-1)
    draws = sample(probs, 1).cpu()
    assert draws.shape == (20000, 1)
    stat, df = chi2(torch.bincount(draws[:, 0], minlength=5).double(), torch.softmax(logits.double() / 0.7, 0))
    assert stat < CHI2_999[df], stat


def test_without_replacement_follows_successive_draws():
    # The second of two draws without replacement: P(j) = sum_{i != j} p_i p_j / (1 - p_i).
    torch.tpu.manual_seed(2)
    p = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    draws = sample(p.float().to(DEVICE).expand(20000, 4), 2).cpu()
    assert (draws[:, 0] != draws[:, 1]).all()
    stat, df = chi2(torch.bincount(draws[:, 0], minlength=4).double(), p)
    assert stat < CHI2_999[df], stat
    second = torch.stack([sum(p[i] * p[j] / (1 - p[i]) for i in range(4) if i != j) for j in range(4)])
    stat, df = chi2(torch.bincount(draws[:, 1], minlength=4).double(), second)
    assert stat < CHI2_999[df], stat


def test_without_replacement_takes_every_category_once():
    torch.tpu.manual_seed(3)
    draws = sample(torch.rand(50, 7).to(DEVICE) + 0.01, 7).cpu()
    assert torch.equal(draws.sort(dim=1).values, torch.arange(7).expand(50, 7))
    # Fewer possible categories than samples: the possible ones come first, as on CPU.
    draws = sample(torch.tensor([0.0, 1.0, 0.0, 2.0]).to(DEVICE), 3).cpu()
    assert set(draws[:2].tolist()) == {1, 3}


def test_seeded_draws_repeat():
    p = torch.rand(4, 10).to(DEVICE)
    runs = []
    for _ in range(2):
        torch.tpu.manual_seed(11)
        runs.append([sample(p, 3).cpu(), sample(p, 5, replacement=True).cpu(), sample(p, 1).cpu()])
    for a, b in zip(*runs):
        assert torch.equal(a, b)
    torch.tpu.manual_seed(12)
    assert not torch.equal(sample(p, 5, replacement=True).cpu(), runs[0][1])
    g = torch.Generator(DEVICE).manual_seed(5)
    a = sample(p, 5, replacement=True, generator=g).cpu()
    b = sample(p, 5, replacement=True, generator=g).cpu()
    g.manual_seed(5)
    assert torch.equal(sample(p, 5, replacement=True, generator=g).cpu(), a)
    assert not torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("shape,n,replacement", [((6,), 3, False), ((6,), 9, True), ((4, 6), 1, False),
                                                 ((4, 6), 1, True), ((4, 6), 6, False), ((3, 5), 8, True),
                                                 ((0, 5), 2, False)], ids=str)
def test_shapes_and_dtypes_are_cpus(dtype, shape, n, replacement):
    p = (torch.rand(shape) + 0.1).to(dtype)
    want = torch.multinomial(p, n, replacement)
    got = sample(p.to(DEVICE), n, replacement)
    assert got.device.type == DEVICE
    assert got.dtype == want.dtype and got.shape == want.shape and got.stride() == want.stride()
    assert ((got.cpu() >= 0) & (got.cpu() < shape[-1])).all()


def test_out():
    p = torch.rand(3, 5).to(DEVICE)
    out = torch.empty(0, dtype=torch.int64, device=DEVICE)
    with torch_pjrt.strict():
        r = torch.multinomial(p, 4, True, out=out)
    assert r is out and out.shape == (3, 4)
    with pytest.raises(RuntimeError):
        torch.multinomial(p, 4, True, out=torch.empty(0, dtype=torch.int32, device=DEVICE))


BAD = {
    "3-d": (torch.rand(2, 2, 3), 1, False),
    "0-d": (torch.tensor(1.0), 1, False),
    "integer": (torch.ones(3, dtype=torch.long), 1, False),
    "no samples": (torch.rand(2, 3), 0, False),
    "too many without replacement": (torch.rand(2, 3), 4, False),
    "no categories": (torch.ones(2, 0), 1, False),
    "negative": (torch.tensor([0.5, -0.1, 0.6]), 2, False),
    "nan": (torch.tensor([0.5, float("nan"), 0.6]), 2, False),
    "inf, one sample": (torch.tensor([0.5, float("inf"), 0.6]), 1, True),
    "zero row": (torch.tensor([[0.0, 0.0, 0.0], [1, 1, 1]]), 2, False),
    "negative, replacement": (torch.tensor([0.5, -0.1, 0.6]), 2, True),
    "inf, replacement": (torch.tensor([0.5, float("inf"), 0.6]), 2, True),
    "nan, replacement": (torch.tensor([0.5, float("nan"), 0.6]), 2, True),
    "inf after negative": (torch.tensor([-1.0, float("inf")]), 2, True),
    "zero row before a negative": (torch.tensor([[0.0, 0.0], [-1.0, 0.0]]), 2, True),
    "no categories, replacement": (torch.ones(2, 0), 2, True),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_errors_are_cpus(case):
    p, n, replacement = BAD[case]
    with pytest.raises(RuntimeError) as cpu:
        torch.multinomial(p, n, replacement)
    with torch_pjrt.strict(), pytest.raises(RuntimeError) as tpu:
        torch.multinomial(p.to(DEVICE), n, replacement)
    assert str(cpu.value) in str(tpu.value)
    assert torch.ones(2, device=DEVICE).sum().item() == 2  # the device still works


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
