"""Resampling on tpu (python/torch_pjrt/_sampling.py): bicubic and antialiased interpolation and
grid sampling ran on CPU through the fallback; they are CPU's computations in device ops, checked
on PyTorch's own OpInfo samples and the way models and torchvision call them."""
import itertools

import pytest
import torch
import torch.nn.functional as F

import torch_pjrt
from tpu_helpers import DEVICE, assert_same

compat = pytest.importorskip("compat")
pytest.importorskip("expecttest")  # PyTorch's OpInfo database needs it


@pytest.mark.parametrize("name", ["nn.functional.interpolate.bicubic", "_upsample_bilinear2d_aa",
                                  "nn.functional.grid_sample", "grid_sampler_2d",
                                  "grid_sampler_3d"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_opinfo_samples_run_natively(name, dtype):
    # PyTorch's OpInfo samples, forward and backward, compared with CPU as the sweep compares
    # them: no case falls back, and none fails but for a traced cause (bfloat16 gradients CPU
    # accumulates in bfloat16).
    op = next(o for o in compat.load_op_db() if compat.op_name(o) == name)
    if dtype not in op.supported_dtypes("cpu"):
        pytest.skip(f"CPU has no {dtype} kernel")
    samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:4]
    on_host = compat.host_tensors(op, dtype, len(samples))
    ran = 0
    for index, sample in enumerate(samples):
        ref = None
        for variant in ("function", "noncontiguous", "backward"):
            if not compat.variant_applies(op, variant, dtype):
                continue
            r = compat.run_case(op, variant, sample, dtype, ref, 0, on_host[index])
            if r is None:
                continue
            ref = r[3] if variant == "function" else ref
            status, reason, fallbacks = r[0], r[1], r[2]
            assert not fallbacks, (variant, index, fallbacks)
            assert status == "native" or reason.startswith("known:"), (variant, index, reason)
            ran += 1
    assert ran


def _fwd_bwd(fn, *xs):
    """fn and the gradients of its inputs, on CPU and (strict) on tpu."""
    out = []
    for dev in ("cpu", DEVICE):
        args = [x.detach().to(dev).requires_grad_() for x in xs]
        with torch_pjrt.strict(dev == DEVICE):
            y = fn(*args)
            g = torch.linspace(-1, 1, y.numel()).reshape(y.shape).to(y.dtype).to(dev)
            grads = torch.autograd.grad(y, args, g)
        out.append((y, grads))
    return out


@pytest.mark.parametrize("mode,antialias", [("bicubic", False), ("bicubic", True),
                                            ("bilinear", True)])
def test_interpolation_sizes_scales_and_corners(mode, antialias):
    x = torch.randn(2, 3, 7, 9, generator=torch.Generator().manual_seed(0))
    for align, size in itertools.product([False, True], [(5, 4), (14, 20), (3, 9), (1, 1)]):
        fn = lambda t: F.interpolate(t, size=size, mode=mode, align_corners=align,
                                     antialias=antialias)
        (yc, gc), (yt, gt) = _fwd_bwd(fn, x)
        assert_same(yt, yc, atol=1e-5, rtol=1e-5)
        assert_same(gt[0], gc[0], atol=1e-4, rtol=1e-4)
    fn = lambda t: F.interpolate(t, scale_factor=(0.6, 1.7), mode=mode, antialias=antialias)
    (yc, gc), (yt, gt) = _fwd_bwd(fn, x.contiguous(memory_format=torch.channels_last))
    assert_same(yt, yc, atol=1e-5, rtol=1e-5)
    assert yt.is_contiguous(memory_format=torch.channels_last) == \
        yc.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("nd", [2, 3])
def test_grid_sample_modes_and_padding(nd):
    g = torch.Generator().manual_seed(1)
    inp = torch.randn(2, 3, *[5, 6, 7][:nd], generator=g)
    grid = torch.rand(2, 4, 3, *([2] if nd == 3 else []), nd, generator=g) * 2.4 - 1.2
    for mode, pad, align in itertools.product(["bilinear", "nearest"],
                                              ["zeros", "border", "reflection"], [False, True]):
        fn = lambda i, gr: F.grid_sample(i, gr, mode=mode, padding_mode=pad, align_corners=align)
        (yc, gc), (yt, gt) = _fwd_bwd(fn, inp, grid)
        assert_same(yt, yc, atol=1e-5, rtol=1e-5)
        for a, b in zip(gt, gc):
            assert_same(a, b, atol=1e-4, rtol=1e-4)


def test_grid_sample_skips_corners_outside_as_cpu_does():
    # A corner outside the input reads nothing: an inf there must not become NaN (0 * inf).
    inp = torch.randn(1, 1, 4, 4)
    inp[0, 0, 0, 0] = float("inf")
    grid = torch.tensor([[[[0.9, 0.9], [-0.2, 0.3], [1.5, 1.5]]]])
    want = F.grid_sample(inp, grid, align_corners=True)
    with torch_pjrt.strict():
        got = F.grid_sample(inp.to(DEVICE), grid.to(DEVICE), align_corners=True)
    assert_same(got, want)


def test_grid_sample_bicubic_runs_through_the_counted_fallback(fresh_stats, quiet_fallbacks):
    inp, grid = torch.randn(1, 2, 5, 5), torch.rand(1, 3, 3, 2) * 2 - 1
    got = F.grid_sample(inp.to(DEVICE), grid.to(DEVICE), mode="bicubic", align_corners=False)
    assert_same(got, F.grid_sample(inp, grid, mode="bicubic", align_corners=False))
    assert torch_pjrt.stats()["fallbacks"] == {"grid_sampler_2d": 1}
    with torch_pjrt.strict(), pytest.raises(RuntimeError, match="grid_sampler_2d"):
        F.grid_sample(inp.to(DEVICE), grid.to(DEVICE), mode="bicubic", align_corners=False)


def test_torchvision_resize_and_a_position_embedding_resize():
    # What users call: torchvision's antialiased resize of a float image batch, and a ViT's
    # position-embedding resize (bicubic, as ViTDet and YOLOS do), with no fallback.
    v2 = pytest.importorskip("torchvision.transforms.v2.functional")
    img = torch.rand(2, 3, 48, 64, generator=torch.Generator().manual_seed(2))
    pos = torch.randn(1, 192, 14, 14, generator=torch.Generator().manual_seed(3))
    with torch_pjrt.strict():
        small = v2.resize(img.to(DEVICE), [24, 30], antialias=True)
        bicubic = v2.resize(img.to(DEVICE), [60, 80], v2.InterpolationMode.BICUBIC,
                            antialias=True)
        grown = F.interpolate(pos.to(DEVICE), size=(20, 20), mode="bicubic", align_corners=False)
    assert_same(small, v2.resize(img, [24, 30], antialias=True), atol=1e-5, rtol=1e-5)
    assert_same(bicubic, v2.resize(img, [60, 80], v2.InterpolationMode.BICUBIC, antialias=True),
                atol=1e-5, rtol=1e-5)
    assert_same(grown, F.interpolate(pos, size=(20, 20), mode="bicubic", align_corners=False),
                atol=1e-5, rtol=1e-5)
