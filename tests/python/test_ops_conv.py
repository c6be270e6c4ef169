"""Convolution against CPU: integer convolutions (int64 exact, int32 falling back like CPU),
the backward of grouped, depthwise and transposed convolutions, and unfold/fold (im2col, col2im)
under strict mode."""
import copy
import itertools
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import torch_pjrt

from tpu_helpers import BF16, DEVICE, F32, assert_same, check_strict, child_env, make


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


UNFOLD = [((2, 3, 7, 6), dict(kernel_size=2)),
          ((3, 6, 5), dict(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1)))]


@pytest.mark.parametrize("dtype", [F32, BF16, torch.bool], ids=str)
@pytest.mark.parametrize("shape,kw", UNFOLD, ids=["plain", "dilated_padded"])
def test_unfold_and_fold(dtype, shape, kw):
    x = make(shape, dtype)
    check_strict(lambda t: F.unfold(t, **kw), x, backward=dtype == F32)
    if dtype == F32:  # CPU's 16-bit col2im adds overlaps in 16 bits: it falls back
        cols = F.unfold(x, **kw)
        check_strict(lambda c: F.fold(c, output_size=shape[-2:], **kw), cols, backward=True)


# Every spatial rank with groups (1, 2, depthwise 4) or transposed, stride, padding, dilation and
# output_padding: grad_input, grad_weight and grad_bias natively, in float64 to 1e-9 of CPU.
_BACKWARD_CASES = [c for c in itertools.product([1, 2, 3], [1, 2, 4], [False, True], [1, 2], [0, 1], [1, 2], [0, 1])
                   if not (c[2] and c[1] != 1) and not (c[6] and not (c[2] and c[3] > 1))]


@pytest.mark.parametrize("nd,groups,transposed,stride,pad,dil,out_pad", _BACKWARD_CASES)
def test_convolution_backward_grouped_and_transposed(nd, groups, transposed, stride, pad, dil, out_pad):
    c, o, k = 4, 8, 3 if nd < 3 else 2
    x = make((2, c, *[7, 6, 5][:nd]), torch.float64)
    w = make(((c, o // groups) if transposed else (o, c // groups)) + (k,) * nd, torch.float64, seed=1)
    bias = make((o,), torch.float64, seed=2)

    def grads(x, w, bias, gy=None):
        x, w, bias = (t.detach().requires_grad_() for t in (x, w, bias))
        y = torch.ops.aten.convolution(x, w, bias, [stride] * nd, [pad] * nd, [dil] * nd, transposed,
                                       [out_pad] * nd, groups)
        gy = make(tuple(y.shape), torch.float64, seed=3) if gy is None else gy
        return gy, torch.autograd.grad(y, (x, w, bias), gy.to(y.device))

    gy, expected = grads(x, w, bias)
    with torch_pjrt.strict():
        _, actual = grads(x.to(DEVICE), w.to(DEVICE), bias.to(DEVICE), gy)
    for a, e in zip(actual, expected):
        assert_same(a, e, atol=1e-9, rtol=1e-9)


def test_depthwise_conv_training_step_is_native():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=1, groups=8), torch.nn.ReLU(),
                              torch.nn.ConvTranspose2d(8, 4, 3, stride=2, output_padding=1))
    tpu_net = copy.deepcopy(net).to(DEVICE)
    x = torch.randn(2, 8, 6, 6)
    net(x).square().mean().backward()
    with torch_pjrt.strict():
        tpu_net(x.to(DEVICE)).square().mean().backward()
    for p, q in zip(tpu_net.parameters(), net.parameters()):
        assert_same(p.grad, q.grad, atol=1e-5, rtol=1e-4)


# Convolutions lowered as a matmul of the weight and the input's patches (1x1 kernels, strided or
# grouped ones, deep layers whose weight outweighs their patches) and those left to XLA's
# convolution, each spatial rank, a batch of 1 and of 3, in float32 and bfloat16; 2-d and 3-d ones
# also on a channels-last input (convolved in that order: the output is channels-last too).
_MATMUL_CASES = [
    (2, (1, 1), {}, 1), (2, (1, 1), {"stride": 2}, 1), (2, (1, 1), {"padding": 1}, 1),
    (2, (3, 3), {"stride": 2, "padding": 1}, 1), (2, (3, 3), {"padding": 1}, 1),
    (2, (3, 2), {"dilation": 2, "stride": (2, 1)}, 2), (2, (7, 7), {"stride": 2, "padding": 3}, 1),
    (1, (1,), {}, 1), (1, (3,), {"stride": 2, "padding": 1}, 4), (3, (1, 1, 1), {}, 1),
    (3, (2, 3, 3), {"stride": (1, 2, 2), "padding": 1}, 2),
]


@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("big_weight", [False, True], ids=["image", "deep"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["contiguous", "channels_last"])
@pytest.mark.parametrize("nd,kernel,kw,groups", _MATMUL_CASES)
def test_convolution_as_matmul_matches_cpu(nd, kernel, kw, groups, channels_last, big_weight, batch, dtype):
    if channels_last and nd == 1:
        pytest.skip("no channels-last format for 3-d tensors")
    c, o, size = (64, 96, 7 if nd < 3 else 5) if big_weight else (8, 12, 9 if nd < 3 else 5)
    x = make((batch, c) + (size,) * nd, dtype)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last if nd == 2 else torch.channels_last_3d)
    w = make((o, c // groups) + kernel, dtype, seed=1)
    bias = make((o,), dtype, seed=2)
    fn = [F.conv1d, F.conv2d, F.conv3d][nd - 1]
    expected = fn(x.float(), w.float(), bias.float(), groups=groups, **kw)
    with torch_pjrt.strict():
        actual = fn(x.to(DEVICE), w.to(DEVICE), bias.to(DEVICE), groups=groups, **kw)
    tol = dict(atol=1e-3, rtol=1e-3) if dtype == F32 else dict(atol=0.1, rtol=2e-2)  # sums of 3136
    if dtype == F32:  # the gradients (the weight's a matmul with the patches, a 1x1's input's too)
        gy = make(tuple(expected.shape), F32, seed=3)

        def grads(x, w, bias):
            x, w, bias = (t.detach().requires_grad_() for t in (x, w, bias))
            return torch.autograd.grad(fn(x, w, bias, groups=groups, **kw), (x, w, bias), gy.to(x.device))

        with torch_pjrt.strict():
            got = grads(x.to(DEVICE), w.to(DEVICE), bias.to(DEVICE))
        for a, e in zip(got, grads(x, w, bias)):
            assert_same(a, e, atol=2e-3, rtol=1e-3)
    assert actual.dtype == dtype and actual.shape == expected.shape
    if nd == 2:  # (CPU's 3-d kernels take a channels-last input's format by their own rules)
        assert actual.stride() == fn(x, w, bias, groups=groups, **kw).stride()
    assert_same(actual.float(), expected, **tol)


# Depthwise gradients (the weight's from the patches, the input's at stride 1 a depthwise
# convolution with the reversed weight), and a gradient output_mask leaves out (an input that
# needs none, as an image does): float64, to 1e-9 of CPU.
@pytest.mark.parametrize("nd,k,stride,pad,dil", [(1, 3, 1, 1, 1), (2, 3, 1, 1, 1), (2, 3, 2, 1, 1),
                                                 (2, 5, 1, 2, 2), (2, 7, 1, 3, 1), (2, 3, 1, 0, 1),
                                                 (3, 3, 1, 1, 1), (2, 3, 1, 3, 1), (2, 5, 2, 2, 1),
                                                 (1, 3, 2, 0, 1), (3, 3, 2, 1, 1), (2, 3, 3, 1, 2)])
@pytest.mark.parametrize("input_grad", [True, False], ids=["input_grad", "no_input_grad"])
def test_depthwise_and_masked_convolution_gradients(nd, k, stride, pad, dil, input_grad):
    c = 6
    x = make((2, c) + (9,) * nd, torch.float64)
    w = make((c, 1) + (k,) * nd, torch.float64, seed=1)
    gy = None

    def grads(x, w):
        nonlocal gy
        x, w = x.detach().requires_grad_(input_grad), w.detach().requires_grad_()
        y = torch.ops.aten.convolution(x, w, None, [stride] * nd, [pad] * nd, [dil] * nd, False,
                                       [0] * nd, c)
        gy = make(tuple(y.shape), torch.float64, seed=3) if gy is None else gy
        return torch.autograd.grad(y, (x, w) if input_grad else (w,), gy.to(y.device))

    expected = grads(x, w)
    with torch_pjrt.strict():
        actual = grads(x.to(DEVICE), w.to(DEVICE))
    for a, e in zip(actual, expected):
        assert_same(a, e, atol=1e-9, rtol=1e-9)


_DEPTHWISE_CHILD = """
import torch, torch_pjrt
x = torch.randn(2, 8, 12, 12)
w = torch.randn(8, 1, 7, 7)
y = torch.nn.functional.conv2d(x.to("tpu"), w.to("tpu"), padding=3, groups=8)
z = (y * 2).sum(dim=1)  # the 4-D result read back by later programs as a storage
assert torch.allclose(z.cpu(), (torch.nn.functional.conv2d(x, w, padding=3, groups=8) * 2).sum(1),
                      rtol=1e-4, atol=1e-4)
print(torch_pjrt.plugin_info()["platform"])
"""


def test_a_whole_result_leaves_the_program_in_its_own_dims(tmp_path):
    """On XLA's CPU plugin a program returns a storage written whole in the dims it computed it
    in: a 1-D result made XLA index every element of a fusion of windows back into its dims (a
    7x7 depthwise convolution of 40 channels at 56x56: 3.9 ms flat, 0.42 ms in its own dims).
    Later programs read the buffer as the 1-D storage it is."""
    p = subprocess.run([sys.executable, "-c", _DEPTHWISE_CHILD], capture_output=True, text=True,
                       timeout=300, env=child_env(TORCH_PJRT_DUMP_DIR=str(tmp_path),
                                                  TORCH_PJRT_CACHE_DIR="0"))
    assert p.returncode == 0, p.stderr[-3000:]
    conv = [f.read_text() for f in tmp_path.glob("*-convolution.mlir")]
    assert len(conv) == 1
    signature = conv[0].splitlines()[1]
    if p.stdout.strip() == "cpu":
        assert "-> (tensor<2x8x12x12xf32>" in signature, signature
    else:
        assert "-> (tensor<2304xf32>" in signature, signature


_DEPTHWISE_BACKWARD_CHILD = """
import torch, torch_pjrt
for nd, stride in ((1, 1), (2, 1), (2, 2), (3, 1)):
    x = torch.randn((2, 6) + (9,) * nd, device="tpu")
    w = torch.randn((6, 1) + (3,) * nd, device="tpu")
    y = torch.ops.aten.convolution(x, w, None, [stride] * nd, [1] * nd, [1] * nd, False,
                                   [0] * nd, 6)
    torch.ops.aten.convolution_backward(torch.ones_like(y), x, w, None, [stride] * nd, [1] * nd,
                                        [1] * nd, False, [0] * nd, 6, [True, True, True])
torch.tpu.synchronize()
"""


def test_depthwise_backward_is_windows_and_sums(tmp_path):
    """A depthwise convolution's gradients are sums of strided windows (conv.c): no convolution
    and no dot. The weight's, as a dot of grad and the patches batched over the channels, ran
    100-200x slower than CPU's on XLA's CPU backend (32 channels of 56x56 at batch 8: 100 ms
    against 0.5), which made every depthwise model's training step 1.6-2.4x CPU's."""
    p = subprocess.run([sys.executable, "-c", _DEPTHWISE_BACKWARD_CHILD], capture_output=True,
                       text=True, timeout=300,
                       env=child_env(TORCH_PJRT_DUMP_DIR=str(tmp_path), TORCH_PJRT_CACHE_DIR="0",
                                     TORCH_PJRT_SHAPE_BUCKETS="off"))
    assert p.returncode == 0, p.stderr[-3000:]
    programs = [f.read_text() for f in tmp_path.glob("*-convolution_backward.mlir")]
    assert len(programs) == 4
    for text in programs:
        assert "stablehlo.dot_general" not in text and "stablehlo.convolution" not in text


@pytest.mark.parametrize("channels_last", [False, True], ids=["contiguous", "channels_last"])
@pytest.mark.parametrize("nd,kernel,kw", [
    (2, (7, 7), {"padding": 3}), (2, (3, 3), {"stride": 2, "padding": 1}),
    (2, (5, 3), {"dilation": (1, 2), "padding": (2, 2)}), (3, (3, 3, 3), {"padding": 1}),
])
def test_depthwise_convolution_in_either_layout_matches_cpu(nd, kernel, kw, channels_last):
    """Depthwise convolutions run as a sum of windows (conv.c's emit_depthwise), over a
    channels-last input in its own order: values, the output's strides and the gradients."""
    torch.manual_seed(0)
    x = torch.randn((2, 6) + (9,) * nd)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last if nd == 2 else torch.channels_last_3d)
    w = torch.randn((6, 1) + kernel)
    conv = F.conv2d if nd == 2 else F.conv3d
    xt, wt = x.to(DEVICE).requires_grad_(), w.to(DEVICE).requires_grad_()
    x.requires_grad_(), w.requires_grad_()
    y, yt = conv(x, w, groups=6, **kw), conv(xt, wt, groups=6, **kw)
    assert_same(yt, y, atol=1e-5, rtol=1e-5)
    assert yt.stride() == y.stride()
    g = torch.randn_like(y)
    y.backward(g)
    yt.backward(g.to(DEVICE))
    assert_same(xt.grad, x.grad, atol=1e-4, rtol=1e-4)
    assert_same(wt.grad, w.grad, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("nd,k,stride,dil,cl", [(2, 7, 1, 1, False), (2, 7, 2, 1, True),
                                                (2, 6, 1, 2, False), (3, 3, 2, 1, True),
                                                (1, 29, 2, 1, False)])
def test_compiled_large_depthwise_kernel_matches_cpu(nd, k, stride, dil, cl, fresh_dynamo):
    """A compiled graph sums a depthwise kernel of more than 25 taps as a loop over its rows
    (conv.c): forward, the input's and the weight's gradients equal CPU's, with a permute to
    channels-last after it (ConvNeXt's, the consumer that made the loop worth it)."""
    torch.manual_seed(0)
    conv_cls = {1: torch.nn.Conv1d, 2: torch.nn.Conv2d, 3: torch.nn.Conv3d}[nd]
    conv = conv_cls(6, 6, k, stride=stride, dilation=dil, padding=k // 2, groups=6)
    x = torch.randn(2, 6, *([13] * nd))
    if cl:
        x = x.to(memory_format=torch.channels_last if nd == 2 else torch.channels_last_3d)
    perm = (0, *range(2, nd + 2), 1)

    def f(m, x):
        y = m(x)
        return (y.permute(perm) * torch.arange(6.0, device=y.device)).sum(), y

    x.requires_grad_()
    loss, y = f(conv, x)
    loss.backward()
    tconv = conv_cls(6, 6, k, stride=stride, dilation=dil, padding=k // 2, groups=6).to("tpu")
    tconv.load_state_dict(conv.state_dict())
    tx = x.detach().to("tpu").requires_grad_()
    tloss, ty = torch.compile(lambda x: f(tconv, x), backend="tpu")(tx)
    tloss.backward()
    torch.testing.assert_close(ty.cpu(), y.detach(), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(tx.grad.cpu(), x.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(tconv.weight.grad.cpu(), conv.weight.grad, rtol=1e-4, atol=1e-4)
