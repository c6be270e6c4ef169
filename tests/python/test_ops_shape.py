"""Ops that move elements without arithmetic, against CPU under strict mode: reflection and
replication pads (forward and backward) and channel_shuffle."""
import pytest
import torch
import torch.nn.functional as F

from tpu_helpers import BF16, DEVICE, F32, I64, assert_same, check_native, check_strict, make


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


@pytest.mark.parametrize("dtype", [F32, BF16, I64, torch.bool], ids=str)
def test_channel_shuffle(dtype):
    check_strict(lambda t: F.channel_shuffle(t, 3), make((2, 6, 4, 3), dtype))
