"""Neural-net ops against CPU where their dtype handling is easy to get wrong: integer
convolutions, dropout backward of integer gradients, half-type normalization and convolution."""
import pytest
import torch
import torch.nn.functional as F

from tpu_helpers import DEVICE, assert_same, make


@pytest.mark.parametrize("fn,wshape", [(F.conv1d, (4, 3, 2)), (F.conv2d, (4, 3, 2, 3)),
                                       (F.conv_transpose1d, (3, 4, 3)), (F.conv_transpose2d, (3, 4, 2, 2))],
                         ids=["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d"])
def test_int64_convolution_is_exact(fn, wshape):
    nd = len(wshape) - 2
    x = make((2, 3) + (7,) * nd, torch.int64, low=-100, high=100)
    w = make(wshape, torch.int64, seed=1, low=-100, high=100)
    b = make((wshape[1] if "transpose" in fn.__name__ else wshape[0],), torch.int64, seed=2)
    for kw in ({}, {"stride": 2, "padding": 1}, {"dilation": 2}):
        expected = fn(x, w, b, **kw)
        assert_same(fn(x.to(DEVICE), w.to(DEVICE), b.to(DEVICE), **kw), expected)


def test_int32_convolution_falls_back_like_cpu():
    x, w = make((1, 2, 5), torch.int32), make((3, 2, 2), torch.int32, seed=1)
    assert_same(F.conv1d(x.to(DEVICE), w.to(DEVICE)), F.conv1d(x, w))


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.bfloat16], ids=["int64", "bool", "bf16"])
def test_native_dropout_backward_promotes_like_cpu(dtype):
    g = make((4, 5), dtype)
    mask = make((4, 5), torch.bool, seed=1)
    expected = torch.ops.aten.native_dropout_backward(g, mask, 1.3)
    assert_same(torch.ops.aten.native_dropout_backward(g.to(DEVICE), mask.to(DEVICE), 1.3), expected)


def test_gradient_flows_through_composite_ops():
    # where.ScalarOther is a composite: a tpu kernel for it made logdet's gradient silently None
    c = torch.tensor([[1.5, 0.2], [0.3, 2.0]])
    x = c.to(DEVICE).requires_grad_()
    torch.logdet(x).backward()
    xc = c.clone().requires_grad_()
    torch.logdet(xc).backward()
    assert x.grad is not None
    assert_same(x.grad, xc.grad)
    y = c.to(DEVICE).requires_grad_()
    torch.where(y > 1, y, 0.0).sum().backward()
    assert_same(y.grad, (c > 1).float())


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
