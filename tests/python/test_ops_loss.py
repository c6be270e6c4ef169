"""Loss functions against CPU under strict mode: binary_cross_entropy (weighted or not, every
reduction), smooth_l1, huber, multi-margin and CTC, forward and backward."""
import re
import warnings

import pytest
import torch
import torch.nn.functional as F

import torch_pjrt
from tpu_helpers import DEVICE, DTYPES, F32, assert_same, check_strict, make


@DTYPES
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "weighted"])
def test_binary_cross_entropy(dtype, reduction, weighted):
    x = make((4, 5), F32, low=0.02, high=0.98).to(dtype)
    x[0, 0], x[0, 1] = 0.0, 1.0  # logs clamped at -100
    y = make((4, 5), F32, seed=1, low=0, high=1).to(dtype)
    w = make((5,), dtype, seed=2, low=0.1, high=2) if weighted else None
    check_strict(lambda a, t: F.binary_cross_entropy(a, t, weight=w.to(a.device) if weighted else None,
                                                     reduction=reduction), x, y, backward=True)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_smooth_l1_and_huber_losses_run_natively(reduction):
    # These fell back to CPU (forward and backward); their decompositions run as tpu kernels,
    # differentiated by autograd through native ops.
    x, y = make((4, 5), F32), make((4, 5), F32, seed=1)
    check_strict(lambda a, b: F.smooth_l1_loss(a, b, beta=0.5, reduction=reduction), x, y, backward=True)
    check_strict(lambda a, b: F.huber_loss(a, b, delta=0.7, reduction=reduction), x, y, backward=True)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multi_margin_loss_runs_natively_with_cpus_nan_semantics(p, reduction):
    # CPU's kernel counts only the terms above zero, so a NaN term or an infinite weight on a
    # term it skips leaves the loss finite; the tpu kernel selects the same terms.
    x, w = make((6, 5), F32), make((5,), F32, seed=2, low=0.1, high=2)
    x[1, 3] = float("nan")
    w[4] = float("inf")
    target = torch.tensor([1, 0, 4, 2, 3, 3])

    def loss(a, weight):
        return F.multi_margin_loss(a, target.to(a.device), p=p, margin=0.5, weight=weight,
                                   reduction=reduction)
    check_strict(loss, x, w)
    check_strict(lambda a: F.multi_margin_loss(a, torch.tensor(2, device=a.device), p=p,
                                               reduction=reduction), make((5,), F32, seed=3),
                 backward=True)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("form", ["padded", "concatenated"])
def test_ctc_loss_runs_natively(reduction, form):
    # _ctc_loss and its backward fell back to CPU (speech models fine-tuned with CTC, as
    # Wav2Vec2ForCTC is, train through them). Alpha and beta recursions over time on the device:
    # a repeated label, an empty target, shorter inputs, and an impossible alignment (an
    # infinite loss, zeroed under zero_infinity), with lengths as lists and as tensors.
    g = torch.Generator().manual_seed(7)
    t, n, c, s = 12, 5, 6, 5
    log_probs = torch.randn(t, n, c, generator=g).log_softmax(2)
    targets = torch.randint(1, c, (n, s), generator=g)
    targets[1, 1] = targets[1, 0]
    in_len, tgt_len = torch.tensor([12, 10, 12, 7, 3]), torch.tensor([5, 3, 0, 4, 5])
    if form == "concatenated":
        targets = torch.cat([targets[i, :tgt_len[i]] for i in range(n)])
    for zero_infinity in (False, True):
        for lengths in ((in_len, tgt_len), (in_len.tolist(), tgt_len.tolist())):
            got, want = [], []
            for dev, out in (("cpu", want), (DEVICE, got)):
                x = log_probs.to(dev).requires_grad_()
                lens = [v.to(dev) if isinstance(v, torch.Tensor) else v for v in lengths]
                with torch_pjrt.strict(dev == DEVICE):
                    loss = F.ctc_loss(x, targets.to(dev), *lens, reduction=reduction,
                                      zero_infinity=zero_infinity)
                    (grad,) = torch.autograd.grad(loss.sum() if zero_infinity or
                                                  reduction == "none" else loss, x)
                out += [loss, grad]
            for a, b in zip(got, want):
                assert_same(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("logits,target", [
    ((80, 10), (8,)),     # a batch of sequences' logits against per-sequence labels
    ((4, 10), (4, 2)),    # multi-target
    ((3, 10), ()),        # a 0-D target for a batch
    ((10,), (1,)),        # 1-D input, 1-D target: CPU's semantics (through the fallback)
], ids=["batch_mismatch", "multi_target", "scalar_target_for_batch", "unbatched_1d_target"])
def test_nll_loss_target_shapes_behave_as_on_cpu(logits, target):
    """A mistake a training script makes (found by one): CPU's error, not the compiler's."""
    x = torch.randn(*logits)
    t = torch.zeros(target, dtype=torch.long)
    try:
        expect = torch.nn.functional.cross_entropy(x, t)
    except Exception as e:
        with pytest.raises(type(e), match=re.escape(str(e).split("(")[0])):
            torch.nn.functional.cross_entropy(x.to(DEVICE), t.to(DEVICE))
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = torch.nn.functional.cross_entropy(x.to(DEVICE), t.to(DEVICE))
        torch.testing.assert_close(got.cpu(), expect)
