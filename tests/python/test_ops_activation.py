"""Activations and their backwards against PyTorch on CPU: threshold_backward and relu's
gradient, the scalar-taking activations (hardtanh, softplus, leaky_relu, ...), glu, prelu and the
elu family, with no CPU fallback where the op is native."""
import pytest
import torch
import torch.nn.functional as F

from tpu_helpers import (
    BF16, DEVICE, DTYPES, F32, I64, assert_same, check, check_native, check_strict, dname, make,
    to_dev)


@pytest.mark.parametrize("dtype", [F32, BF16, I64], ids=dname)
@pytest.mark.parametrize("threshold", [0, 0.5, -1], ids=str)
def test_threshold_backward(dtype, threshold):
    g = make((4, 5), dtype, seed=63)
    x = make((4, 5), dtype, seed=64)
    x[0, 0] = threshold  # the boundary: x == threshold gives 0
    check(lambda a, b: torch.ops.aten.threshold_backward(a, b, threshold), g, x)
    check(lambda a, b: torch.ops.aten.threshold_backward(a, b[:1], threshold), g, x)


def test_threshold_backward_grad_input():
    g = make((3, 4), F32, seed=65)
    x = make((3, 4), F32, seed=66)
    tg, tx = to_dev(g, x)
    out = torch.empty(3, 4, device=DEVICE)
    ret = torch.ops.aten.threshold_backward.grad_input(tg, tx, 0.0, grad_input=out)
    assert ret is out
    assert_same(out, torch.ops.aten.threshold_backward(g, x, 0.0))


def test_relu_backward_through_autograd():
    x = make((3, 4), F32, seed=67)
    w = make((4, 2), F32, seed=68)
    grads = []
    for dev in ("cpu", DEVICE):
        xd = x.detach().to(dev).requires_grad_()
        wd = w.detach().to(dev).requires_grad_()
        (torch.relu(xd) @ wd).sum().backward()
        grads.append((xd.grad, wd.grad))
    assert_same(grads[1][0], grads[0][0])
    assert_same(grads[1][1], grads[0][1])


SCALAR_ACTIVATIONS = {
    "softplus": lambda x: torch.nn.functional.softplus(x, beta=2, threshold=5),
    "softshrink": lambda x: torch.nn.functional.softshrink(x, 0.7),
    "hardshrink": lambda x: torch.nn.functional.hardshrink(x, 0.7),
    "threshold": lambda x: torch.nn.functional.threshold(x, 0.5, -2.0),
    "logit": lambda x: torch.logit(x, eps=0.1),
}


@pytest.mark.parametrize("op", list(SCALAR_ACTIVATIONS))
def test_scalar_activation_forward_and_backward(op):
    fn = SCALAR_ACTIVATIONS[op]
    x = make((3, 5), F32, seed=10, low=-3, high=3) if op != "logit" else make((3, 5), F32, seed=10, low=0.01, high=0.99)
    check_native(fn, x)
    grads = []
    for dev in ("cpu", DEVICE):
        xd = x.detach().to(dev).requires_grad_()
        fn(xd).sum().backward()
        grads.append(xd.grad)
    assert_same(grads[1], grads[0])


def test_softshrink_negative_lambda_raises():
    with pytest.raises(RuntimeError, match="lambda must be greater or equal to 0"):
        torch.nn.functional.softshrink(torch.ones(2, device=DEVICE), -1.0)


@DTYPES
def test_glu(dtype):
    check_strict(lambda t: F.glu(t, 1), make((4, 6, 5), dtype), backward=True)
    check_strict(lambda t: F.glu(t), make((3, 8), dtype), backward=True)


@DTYPES
def test_prelu(dtype):
    check_strict(lambda t, w: F.prelu(t, w), make((4, 6, 5), dtype), make((6,), dtype, seed=1), backward=True)
    check_strict(lambda t, w: F.prelu(t, w), make((4, 6), dtype), make((1,), dtype, seed=1), backward=True)


@DTYPES
@pytest.mark.parametrize("fn", [lambda t: F.elu(t, 0.5), F.selu, lambda t: F.celu(t, 2.0)],
                         ids=["elu", "selu", "celu"])
def test_elu_backward(dtype, fn):
    check_strict(fn, make((4, 6, 5), dtype), backward=True)


def test_elu_backward_from_result():
    # the in-place form's backward works from the result
    check_strict(lambda t: F.elu(t * 1, 0.7, inplace=True), make((4, 5), F32), backward=True)
