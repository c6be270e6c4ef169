"""Normalization layers against CPU: group_norm forward and backward natively, and the batch and
instance norm modules' backward in train and eval mode."""
import pytest
import torch

import torch_pjrt
from tpu_helpers import DEVICE, assert_same, make


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_group_norm_forward_backward_native(dtype):
    torch.manual_seed(0)
    ref = torch.nn.GroupNorm(3, 6).to(dtype)
    with torch.no_grad():
        ref.weight.normal_()
        ref.bias.normal_()
    dev = torch.nn.GroupNorm(3, 6).to(dtype)
    dev.load_state_dict(ref.state_dict())
    dev = dev.to("tpu")
    x = torch.randn(2, 6, 4, 5, dtype=dtype)
    xc, xt = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    with torch_pjrt.strict():
        yt = dev(xt)
        (yt * yt).sum().backward()
    y = ref(xc)
    (y * y).sum().backward()
    tol = dict(atol=1e-5, rtol=1e-4) if dtype == torch.float32 else dict(atol=2e-2, rtol=2e-2)
    assert_same(yt, y, **tol)
    assert_same(xt.grad, xc.grad, **tol)
    assert_same(dev.weight.grad, ref.weight.grad, atol=1e-4 if dtype == torch.float32 else 5e-2, rtol=1e-3)
    assert_same(dev.bias.grad, ref.bias.grad, atol=1e-4 if dtype == torch.float32 else 5e-2, rtol=1e-3)


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
@pytest.mark.parametrize("cls", [torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.InstanceNorm2d])
def test_norm_module_backward_matches_cpu(cls, train):
    # An eval-mode forward saves no statistics (empty vectors): the backward must accept them.
    import copy
    torch.manual_seed(0)
    m = (cls(3, track_running_stats=True, affine=True) if cls is torch.nn.InstanceNorm2d else cls(3)).train(train)
    shape = (4, 3) if cls is torch.nn.BatchNorm1d else (2, 3, 4, 4)
    x = make(shape, torch.float32, seed=1).requires_grad_()
    md = copy.deepcopy(m).to(DEVICE)
    xd = x.detach().to(DEVICE).requires_grad_()
    w = make(shape, torch.float32, seed=2)
    (m(x) * w).sum().backward()
    (md(xd) * w.to(DEVICE)).sum().backward()
    assert_same(xd.grad, x.grad, atol=1e-5, rtol=1e-5)
    assert_same(md.weight.grad, m.weight.grad, atol=1e-5, rtol=1e-5)
