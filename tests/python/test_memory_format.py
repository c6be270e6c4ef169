"""Memory formats under strict mode: outputs of channels-last (and channels-last-3d) inputs keep
CPU's strides, not just its values: elementwise ops as TensorIterator orders the inputs' dims,
convolution, batch/group norm, pooling, padding and resampling in the format their input (or a
convolution's weight) suggests; the same for a channels-last network's backward."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_pjrt
from tpu_helpers import DEVICE, assert_same, make

CL, CL3 = torch.channels_last, torch.channels_last_3d


def to_tpu(v):
    return v.to(DEVICE) if isinstance(v, torch.Tensor) else v


def same_layout(fn, *xs, **tol):
    """fn on tpu equals fn on CPU in values, dtype and strides (of every returned tensor)."""
    want = fn(*xs)
    with torch_pjrt.strict():
        got = fn(*[to_tpu(x) for x in xs])
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, want):
        assert g.stride() == w.stride(), (g.stride(), w.stride())
        assert_same(g, w, **tol)
    return got


def cl4(shape=(2, 4, 6, 6), seed=0):
    return make(shape, torch.float32, seed=seed).contiguous(memory_format=CL)


def cl5(shape=(2, 3, 4, 5, 6), seed=0):
    return make(shape, torch.float32, seed=seed).contiguous(memory_format=CL3)


def test_inputs_arrive_channels_last():
    x = cl4()
    assert x.to(DEVICE).stride() == x.stride()
    assert x.to(DEVICE).is_contiguous(memory_format=CL)


CONV_TOL = dict(rtol=1e-4, atol=1e-4)

FORWARD = {
    "conv2d": (lambda x, w: F.conv2d(x, w, padding=1), lambda: (cl4(), make((5, 4, 3, 3), torch.float32, seed=1))),
    "conv2d, weight channels-last": (lambda x, w: F.conv2d(x, w, stride=2),
                                     lambda: (cl4().contiguous(), make((5, 4, 3, 3), torch.float32, seed=1).contiguous(memory_format=CL))),
    "conv_transpose2d": (lambda x, w: F.conv_transpose2d(x, w), lambda: (cl4(), make((4, 3, 3, 3), torch.float32, seed=1))),
    "batch_norm train": (lambda x: F.batch_norm(x, None, None, training=True), lambda: (cl4(),)),
    "batch_norm eval": (lambda x, m, v: F.batch_norm(x, m, v, training=False),
                        lambda: (cl4(), torch.randn(4), torch.rand(4) + 0.5)),
    "group_norm": (lambda x: F.group_norm(x, 2), lambda: (cl4(),)),
    "relu": (F.relu, lambda: (cl4(),)),
    "gelu": (F.gelu, lambda: (cl4(),)),
    "silu": (F.silu, lambda: (cl4(),)),
    "hardtanh": (F.hardtanh, lambda: (cl4(),)),
    "sigmoid": (torch.sigmoid, lambda: (cl4(),)),
    "add": (torch.add, lambda: (cl4(), cl4(seed=1))),
    "add, contiguous second": (torch.add, lambda: (cl4(), cl4(seed=1).contiguous())),
    "add, contiguous first": (torch.add, lambda: (cl4().contiguous(), cl4(seed=1))),
    "mul by a number": (lambda x: x * 2, lambda: (cl4(),)),
    "add a per-channel bias": (lambda x, b: x + b, lambda: (cl4(), make((4, 1, 1), torch.float32, seed=1))),
    "where": (lambda x: torch.where(x > 0, x, 0.0), lambda: (cl4(),)),
    "clamp": (lambda x: x.clamp(-1, 1), lambda: (cl4(),)),
    "comparison": (lambda x: x > 0, lambda: (cl4(),)),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2, return_indices=True), lambda: (cl4(),)),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2), lambda: (cl4(),)),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, 3), lambda: (cl4(),)),
    "upsample nearest": (lambda x: F.interpolate(x, scale_factor=2), lambda: (cl4(),)),
    "upsample bilinear": (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), lambda: (cl4(),)),
    "pad constant": (lambda x: F.pad(x, (1, 1, 2, 0)), lambda: (cl4(),)),
    "pad reflect": (lambda x: F.pad(x, (1, 1, 1, 1), mode="reflect"), lambda: (cl4(),)),
    "pad replicate": (lambda x: F.pad(x, (1, 1, 1, 1), mode="replicate"), lambda: (cl4(),)),
    "mse_loss": (lambda a, b: F.mse_loss(a, b, reduction="none"), lambda: (cl4(), cl4(seed=1))),
    "mse_loss_backward (row-major on CPU)": (lambda g, a, b: torch.ops.aten.mse_loss_backward(g, a, b, 0),
                                             lambda: (cl4(seed=2), cl4(), cl4(seed=1))),
    "xlogy": (torch.xlogy, lambda: (cl4().abs(), cl4(seed=1))),
    "polygamma": (lambda x: torch.polygamma(1, x), lambda: (cl4().abs() + 0.5,)),
    "transposed exp": (lambda x: x[0, 0].t().exp(), lambda: (cl4(),)),
    "transposed 3-d add": (lambda a, b: a.permute(2, 0, 1) + b.permute(2, 0, 1),
                           lambda: (make((3, 4, 5), torch.float32), make((3, 4, 5), torch.float32, seed=1))),
    "conv3d": (lambda x, w: F.conv3d(x, w, padding=1), lambda: (cl5(), make((2, 3, 3, 3, 3), torch.float32, seed=1))),
    "batch_norm 3d": (lambda x: F.batch_norm(x, None, None, training=True), lambda: (cl5(),)),
    "relu 3d": (F.relu, lambda: (cl5(),)),
    "max_pool3d": (lambda x: F.max_pool3d(x, 2), lambda: (cl5(),)),
    "avg_pool3d (row-major on CPU)": (lambda x: F.avg_pool3d(x, 2), lambda: (cl5(),)),
    "adaptive_max_pool3d (row-major on CPU)": (lambda x: F.adaptive_max_pool3d(x, 2), lambda: (cl5(),)),
    "upsample trilinear": (lambda x: F.interpolate(x, scale_factor=2, mode="trilinear"), lambda: (cl5(),)),
    "pad reflect 3d": (lambda x: F.pad(x, (1, 1, 1, 1, 1, 1), mode="reflect"), lambda: (cl5(),)),
    "group_norm 3d": (lambda x: F.group_norm(x, 3), lambda: (cl5(),)),
}


@pytest.mark.parametrize("case", FORWARD, ids=list(FORWARD))
def test_forward_layout_is_cpus(case):
    fn, inputs = FORWARD[case]
    same_layout(fn, *inputs(), **CONV_TOL)


def test_contiguous_inputs_stay_contiguous():
    x, w = make((2, 4, 6, 6), torch.float32), make((5, 4, 3, 3), torch.float32, seed=1)
    for got in same_layout(lambda a, b: (F.conv2d(a, b), F.relu(a), a + 1, F.max_pool2d(a, 2)), x, w, **CONV_TOL):
        assert got.is_contiguous()


def test_random_ops_layout_is_cpus():
    x = cl4().abs() / 10
    for fn in [lambda t: torch.bernoulli(t, 0.5),
               lambda t: torch.ops.aten.normal_functional(t), lambda t: torch.ops.aten.uniform(t)]:
        want = fn(x)
        with torch_pjrt.strict():
            got = fn(x.to(DEVICE))
        assert got.stride() == want.stride()


def test_dropout_keeps_the_layout():
    x = cl4()
    want = F.dropout(x, 0.5)
    with torch_pjrt.strict():
        got = F.dropout(x.to(DEVICE), 0.5)
    assert got.stride() == want.stride()
    kept = got.cpu() != 0
    assert_same(got[kept.to(DEVICE)], x[kept] * 2)


def test_one_program_per_channels_last_op(fresh_stats):
    xd = cl4((4, 8, 10, 10)).to(DEVICE)
    torch.relu(xd)  # warm: compiled once
    torch_pjrt.reset_stats()
    with torch_pjrt.strict():
        y = torch.relu(xd)
    assert torch_pjrt.stats()["executes"] == 1
    assert y.is_contiguous(memory_format=CL)


def test_conv_backward_channels_last():
    x, w, g = cl4(), make((5, 4, 3, 3), torch.float32, seed=1), cl4((2, 5, 6, 6), seed=2)
    grads = []
    for dev in ("cpu", DEVICE):
        xr = x.clone().to(dev).requires_grad_(True)
        wr = w.clone().to(dev).requires_grad_(True)
        with torch_pjrt.strict(dev == DEVICE):
            y = F.conv2d(xr, wr, padding=1)
            y.backward(g.to(dev))
        grads.append((y, xr.grad, wr.grad))
    for got, want in zip(grads[1], grads[0]):
        assert got.stride() == want.stride()
        assert_same(got, want, **CONV_TOL)
    r = torch.ops.aten.convolution_backward
    same_layout(lambda g, x, w: r(g, x, w, [5], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True]),
                g, x, w, **CONV_TOL)


class Block(nn.Module):
    """A ResNet basic block: conv-bn-relu-conv-bn, plus the input, relu."""

    def __init__(self, c):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + x)


def test_channels_last_block_forward_and_backward():
    torch.manual_seed(0)
    ref = Block(4).to(memory_format=CL)
    dut = Block(4)
    dut.load_state_dict(ref.state_dict())
    dut = dut.to(DEVICE).to(memory_format=CL)
    x = cl4((2, 4, 8, 8))
    xc, xd = x.clone().requires_grad_(True), x.to(DEVICE).requires_grad_(True)
    yc = ref(xc)
    with torch_pjrt.strict():
        yd = dut(xd)
    assert yd.is_contiguous(memory_format=CL) and yd.stride() == yc.stride()
    assert_same(yd, yc, **CONV_TOL)
    g = cl4((2, 4, 8, 8), seed=3)
    yc.backward(g)
    with torch_pjrt.strict():
        yd.backward(g.to(DEVICE))
    assert xd.grad.stride() == xc.grad.stride()
    assert_same(xd.grad, xc.grad, **CONV_TOL)
    for (n, pc), pd in zip(ref.named_parameters(), dut.parameters()):
        assert pd.grad.stride() == pc.grad.stride(), n
        assert_same(pd.grad, pc.grad, **CONV_TOL)


BACKWARD = {
    "relu": F.relu,
    "gelu": F.gelu,
    "silu": F.silu,
    "hardtanh": F.hardtanh,
    "batch_norm": lambda x: F.batch_norm(x, None, None, training=True),
    "group_norm": lambda x: F.group_norm(x, 2),
    "max_pool2d": lambda x: F.max_pool2d(x, 2),
    "avg_pool2d": lambda x: F.avg_pool2d(x, 2),
    "adaptive_avg_pool2d": lambda x: F.adaptive_avg_pool2d(x, 3),
    "upsample bilinear": lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
    "pad reflect": lambda x: F.pad(x, (1, 1, 1, 1), mode="reflect"),
}


@pytest.mark.parametrize("case", BACKWARD, ids=list(BACKWARD))
def test_backward_layout_is_cpus(case):
    """The gradient autograd hands back for a channels-last input (not a leaf's .grad, which
    PyTorch restrides to the leaf's own layout)."""
    fn = BACKWARD[case]
    x = cl4()
    out = []
    for dev in ("cpu", DEVICE):
        xr = x.clone().to(dev).requires_grad_(True)
        with torch_pjrt.strict(dev == DEVICE):
            y = fn(xr)
            g = make(tuple(y.shape), torch.float32, seed=4).to(dev).contiguous(memory_format=CL)
            (gx,) = torch.autograd.grad(y, xr, g)
        out.append(gx)
    assert out[1].stride() == out[0].stride()
    assert_same(out[1], out[0], **CONV_TOL)


def test_channels_last_copies_move_the_bytes_as_they_are(fresh_stats):
    """Host <-> device copies of a channels-last tensor keep its layout and run no program."""
    x = cl4((3, 5, 4, 6))
    torch_pjrt.reset_stats()
    xd = x.to(DEVICE)
    back = xd.cpu()
    assert torch_pjrt.stats()["executes"] == 0
    assert xd.stride() == x.stride() and back.stride() == x.stride()
    assert torch.equal(back, x)
    assert torch.equal(F.relu(xd).cpu(), F.relu(x))
    # into an existing tensor of another layout the values still arrive
    dst = torch.empty(3, 5, 4, 6, device=DEVICE)
    dst.copy_(x)
    assert torch.equal(dst.cpu(), x) and dst.is_contiguous()
    host = torch.empty(3, 5, 4, 6)
    host.copy_(xd)
    assert torch.equal(host, x)
