"""Loss functions against CPU under strict mode: binary_cross_entropy (weighted or not, every
reduction), smooth_l1 and huber, forward and backward."""
import pytest
import torch.nn.functional as F

from tpu_helpers import DTYPES, F32, check_strict, make


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
