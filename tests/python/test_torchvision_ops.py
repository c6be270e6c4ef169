"""torchvision's detection operators on tpu (nms natively in the op table; roi_align, roi_pool
and their backwards as tpu kernels of torchvision's operators), through torchvision's public
functions and its detection models, in strict mode (no CPU fallback), against CPU."""
import pytest
import torch

import torch_pjrt
from tpu_helpers import DEVICE, assert_same

torchvision = pytest.importorskip("torchvision", reason="torchvision is pinned in requirements.txt")
from torchvision.ops import batched_nms, box_iou, nms, roi_align, roi_pool  # noqa: E402
from torchvision.ops.boxes import _batched_nms_vanilla  # noqa: E402


def _boxes(n, seed, span=100.0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * span
    wh = torch.rand(n, 2, generator=g) * 30 + 1
    return torch.cat([xy, xy + wh], 1).to(dtype), torch.rand(n, generator=g).to(dtype)


@pytest.mark.parametrize("threshold", [0.0, 0.3, 0.5, 0.7, 1.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_nms_keeps_exactly_what_cpu_keeps(threshold, dtype):
    boxes, scores = _boxes(400, 0, dtype=dtype)
    scores[10] = scores[20] = scores[30]  # ties: the stable order decides, as on CPU
    boxes[40] = boxes[41]                 # a duplicate box (IoU exactly 1)
    want = nms(boxes, scores, threshold)
    with torch_pjrt.strict():
        got = nms(boxes.to(DEVICE), scores.to(DEVICE), threshold)
    assert got.device.type == "tpu" and got.dtype == torch.int64
    assert torch.equal(got.cpu(), want)


def test_nms_of_no_boxes_and_of_one():
    with torch_pjrt.strict():
        assert nms(torch.empty(0, 4, device=DEVICE), torch.empty(0, device=DEVICE), 0.5).shape == (0,)
        one = nms(torch.tensor([[0., 0, 1, 1]], device=DEVICE), torch.tensor([0.3], device=DEVICE), 0.5)
    assert one.cpu().tolist() == [0]


def test_batched_nms_both_of_torchvisions_strategies():
    boxes, scores = _boxes(600, 1)
    idxs = torch.randint(0, 7, (600,), generator=torch.Generator().manual_seed(2))
    tb, ts, ti = boxes.to(DEVICE), scores.to(DEVICE), idxs.to(DEVICE)
    with torch_pjrt.strict():
        trick = batched_nms(tb, ts, ti, 0.5)  # the coordinate offset trick
        vanilla = _batched_nms_vanilla(tb, ts, ti, 0.5)  # one nms per class, torch.unique's
    assert torch.equal(trick.cpu(), batched_nms(boxes, scores, idxs, 0.5))
    assert torch.equal(vanilla.cpu(), _batched_nms_vanilla(boxes, scores, idxs, 0.5))


def _rois(k, seed, batch=2):
    g = torch.Generator().manual_seed(seed)
    boxes, _ = _boxes(k, seed, span=30.0)
    return torch.cat([torch.randint(0, batch, (k, 1), generator=g).float(), boxes], 1)


@pytest.mark.parametrize("sampling_ratio", [2, 0], ids=["fixed", "adaptive"])
@pytest.mark.parametrize("aligned", [False, True])
def test_roi_align_forward_and_backward_match_cpu(sampling_ratio, aligned):
    x = torch.randn(2, 8, 32, 40, generator=torch.Generator().manual_seed(3))
    rois = _rois(24, 4)
    rois[0, 1:] = torch.tensor([-5.0, -3.0, 90.0, 80.0])  # past the image: clamped sampling
    ref_x = x.clone().requires_grad_()
    ref = roi_align(ref_x, rois, (7, 7), 0.5, sampling_ratio, aligned)
    grad = torch.randn_like(ref)
    ref.backward(grad)
    tx = x.to(DEVICE).requires_grad_()
    with torch_pjrt.strict():
        out = roi_align(tx, rois.to(DEVICE), (7, 7), 0.5, sampling_ratio, aligned)
        out.backward(grad.to(DEVICE))
    assert_same(out, ref, atol=1e-5, rtol=1e-5)
    assert_same(tx.grad, ref_x.grad, atol=1e-5, rtol=1e-5)


def test_roi_pool_forward_and_backward_match_cpu():
    x = torch.randn(2, 8, 32, 40, generator=torch.Generator().manual_seed(5))
    rois = _rois(24, 6)
    ref_x = x.clone().requires_grad_()
    ref = roi_pool(ref_x, rois, (5, 5), 0.5)
    grad = torch.randn_like(ref)
    ref.backward(grad)
    tx = x.to(DEVICE).requires_grad_()
    with torch_pjrt.strict():
        out = roi_pool(tx, rois.to(DEVICE), (5, 5), 0.5)
        out.backward(grad.to(DEVICE))
    assert_same(out, ref)
    assert_same(tx.grad, ref_x.grad, atol=1e-6, rtol=1e-6)


def _small_detector(kind):
    """A detector built the way torchvision's documentation builds one on a custom backbone."""
    from torchvision.models.detection import FasterRCNN, MaskRCNN
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.ops import MultiScaleRoIAlign
    torch.manual_seed(0)
    backbone = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, 2, 1), torch.nn.ReLU(), torch.nn.Conv2d(16, 32, 3, 2, 1),
        torch.nn.ReLU(), torch.nn.Conv2d(32, 32, 3, 2, 1))
    backbone.out_channels = 32
    kw = dict(num_classes=4, min_size=128, max_size=160, box_detections_per_img=30,
              rpn_anchor_generator=AnchorGenerator(((16, 32, 64),), ((0.5, 1.0, 2.0),)),
              box_roi_pool=MultiScaleRoIAlign(["0"], 7, 2))
    if kind == "mask":
        return MaskRCNN(backbone, mask_roi_pool=MultiScaleRoIAlign(["0"], 14, 2), **kw).eval()
    return FasterRCNN(backbone, **kw).eval()


@pytest.mark.parametrize("kind", ["faster", "mask"])
def test_detector_forward_matches_cpu_with_no_fallback(kind):
    model = _small_detector(kind)
    image = torch.rand(3, 128, 160, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = model([image])[0]
        model.to(DEVICE)
        with torch_pjrt.strict():
            out = model([image.to(DEVICE)])[0]
    assert len(ref["scores"]) == 30 and len(set(ref["scores"].tolist())) == 30  # no ties
    assert set(out) == set(ref)
    assert torch.equal(out["labels"].cpu(), ref["labels"])
    assert_same(out["scores"], ref["scores"], atol=1e-5, rtol=1e-5)
    assert_same(out["boxes"], ref["boxes"], atol=1e-4, rtol=1e-5)
    if kind == "mask":
        assert_same(out["masks"], ref["masks"], atol=1e-5, rtol=1e-5)


def test_pretrained_architecture_faster_rcnn_mobilenet_runs_without_fallback():
    """The model a user met with 4 fallbacks per forward (nms twice, roi_align at each level)."""
    from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_320_fpn
    torch.manual_seed(0)
    model = fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None,
                                                  num_classes=91).eval()
    image = torch.rand(3, 240, 320, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = model([image])[0]
        model.to(DEVICE)
        with torch_pjrt.strict():
            out = model([image.to(DEVICE)])[0]
    assert out["boxes"].shape == ref["boxes"].shape
    # untrained heads score every detection alike, so only the scores' multiset is comparable
    assert_same(out["scores"].sort().values, ref["scores"].sort().values, atol=1e-5, rtol=1e-5)
    if len(ref["boxes"]):
        assert box_iou(out["boxes"].cpu(), ref["boxes"]).max(1).values.min() > 0.99
