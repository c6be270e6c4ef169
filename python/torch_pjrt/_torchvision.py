"""torchvision's detection ops on tpu: roi_align (and its backward) and roi_pool (and its
backward), as tpu kernels of torchvision's own operators, registered when torchvision loads
them (nms is a row of the C op table, csrc/ops/nms.c). Each is the computation of
torchvision's CPU kernel in ops the device runs natively, so a
detector (Faster R-CNN, Mask R-CNN) runs with no CPU fallback; results equal CPU's up to the
order of float additions.

- roi_align / roi_pool: each output bin gathers its sample points (roi_align: bilinear at a grid
  of points, CPU's clamping; roi_pool: every pixel of the bin) from the input laid out
  channels-last, so one gather serves every channel. An adaptive grid (sampling_ratio <= 0) or a
  bin size depends on each roi: the largest over the rois is read back (one scalar) and the
  points past a roi's own count carry weight 0. Backward: the same points and weights, the
  gradient added at them (index_add).
Left on CPU, with the fallback's usual accounting: ps_roi_align, ps_roi_pool and deform_conv2d
(rarely used by the models torchvision ships; the same gather form would serve them).
"""
import torch
from torch._prims_common import get_computation_dtype

_lib = None


# ---- roi_align ----

def _roi_boxes(rois, spatial_scale, offset):
    return [rois[:, i] * spatial_scale - offset for i in range(1, 5)]  # start w, h, end w, h


def _bilinear(y, x, height, width):
    """CPU's bilinear_interpolate, elementwise over the sample points y, x: for each of the four
    corners its pixel's (row, column) and weight; points outside [-1, size] weigh 0."""
    outside = (y < -1.0) | (y > height) | (x < -1.0) | (x > width)
    y, x = y.clamp(min=0), x.clamp(min=0)
    y_low, x_low = y.floor().long(), x.floor().long()
    y_edge, x_edge = y_low >= height - 1, x_low >= width - 1
    y_low = torch.where(y_edge, height - 1, y_low)
    x_low = torch.where(x_edge, width - 1, x_low)
    y = torch.where(y_edge, y_low.to(y.dtype), y)
    x = torch.where(x_edge, x_low.to(x.dtype), x)
    y_high = torch.where(y_edge, y_low, y_low + 1)
    x_high = torch.where(x_edge, x_low, x_low + 1)
    ly, lx = y - y_low, x - x_low
    hy, hx = 1.0 - ly, 1.0 - lx
    zero = torch.zeros((), dtype=y.dtype, device=y.device)
    corners = [(y_low, x_low, hy * hx), (y_low, x_high, hy * lx),
               (y_high, x_low, ly * hx), (y_high, x_high, ly * lx)]
    return [(r, c, torch.where(outside, zero, w)) for r, c, w in corners]


def _roi_align_points(rois, spatial_scale, pooled_h, pooled_w, sampling_ratio, aligned, height,
                      width, dtype):
    """The sample points of every (roi, bin): (rows, cols, weights) of shape [K, PH, PW, G]
    (G = the grid's points of each bin, weights divided by each roi's count), per corner."""
    rois = rois.to(dtype)
    dev = rois.device
    start_w, start_h, end_w, end_h = _roi_boxes(rois, spatial_scale, 0.5 if aligned else 0.0)
    roi_w, roi_h = end_w - start_w, end_h - start_h
    if not aligned:
        roi_w, roi_h = roi_w.clamp(min=1.0), roi_h.clamp(min=1.0)
    bin_h, bin_w = roi_h / pooled_h, roi_w / pooled_w
    if sampling_ratio > 0:
        grid_h = grid_w = torch.full_like(roi_h, float(sampling_ratio))
        gh = gw = sampling_ratio
    else:
        grid_h, grid_w = torch.ceil(roi_h / pooled_h), torch.ceil(roi_w / pooled_w)
        sizes = torch.stack([grid_h.max(), grid_w.max()]).tolist() if rois.shape[0] else [1, 1]
        gh, gw = max(int(sizes[0]), 1), max(int(sizes[1]), 1)
    count = (grid_h * grid_w).clamp(min=1)
    ph = torch.arange(pooled_h, device=dev, dtype=dtype)
    pw = torch.arange(pooled_w, device=dev, dtype=dtype)
    iy = torch.arange(gh, device=dev, dtype=dtype)
    ix = torch.arange(gw, device=dev, dtype=dtype)

    def K(t):
        return t[:, None, None]

    # [K, PH, IY] and [K, PW, IX], as CPU: start + p * bin + (i + .5) * bin / grid
    y = K(start_h) + ph[None, :, None] * K(bin_h) + (iy[None, None] + 0.5) * K(bin_h) / K(grid_h)
    x = K(start_w) + pw[None, :, None] * K(bin_w) + (ix[None, None] + 0.5) * K(bin_w) / K(grid_w)
    used = (iy[None, None] < K(grid_h))[:, :, None, :, None] & \
        (ix[None, None] < K(grid_w))[:, None, :, None, :]  # [K, 1|PH, 1|PW, IY, IX]
    y = y[:, :, None, :, None].expand(-1, -1, pooled_w, -1, gw)  # [K, PH, PW, IY, IX]
    x = x[:, None, :, None, :].expand(-1, pooled_h, -1, gh, -1)
    scale = used.to(dtype) / count[:, None, None, None, None]
    k = rois.shape[0]
    g = (k, pooled_h, pooled_w, gh * gw)
    return [(r.reshape(g), c.reshape(g), (w * scale).reshape(g))
            for r, c, w in _bilinear(y, x, height, width)]


def roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    n, c, height, width = input.shape
    dtype = get_computation_dtype(input.dtype)
    pixels = input.to(dtype).permute(0, 2, 3, 1).reshape(n * height * width, c)
    batch = rois[:, 0].long()[:, None, None, None]
    out = None
    for r, col, w in _roi_align_points(rois, spatial_scale, pooled_height, pooled_width,
                                       sampling_ratio, aligned, height, width, dtype):
        v = (pixels[(batch * height + r) * width + col] * w[..., None]).sum(3)  # [K, PH, PW, C]
        out = v if out is None else out + v
    return out.permute(0, 3, 1, 2).to(input.dtype).contiguous()


def roi_align_backward(grad, rois, spatial_scale, pooled_height, pooled_width, batch_size,
                       channels, height, width, sampling_ratio, aligned):
    dtype = get_computation_dtype(grad.dtype)
    g = grad.to(dtype).permute(0, 2, 3, 1)  # [K, PH, PW, C]
    batch = rois[:, 0].long()[:, None, None, None]
    acc = torch.zeros(batch_size * height * width, channels, dtype=dtype, device=grad.device)
    for r, col, w in _roi_align_points(rois, spatial_scale, pooled_height, pooled_width,
                                       sampling_ratio, aligned, height, width, dtype):
        where = ((batch * height + r) * width + col).reshape(-1)
        acc.index_add_(0, where, (g[:, :, :, None, :] * w[..., None]).reshape(-1, channels))
    return acc.reshape(batch_size, height, width, channels).permute(0, 3, 1, 2).to(grad.dtype) \
        .contiguous()


# ---- roi_pool ----

def _roi_pool_bins(rois, spatial_scale, pooled_h, pooled_w, height, width):
    """Every pixel of every (roi, bin), as CPU's roi_pool: the roi rounded to pixels, bins of a
    float size floored and ceiled, clipped to the image. Returns (pixel index rows, cols, which
    are in the bin) of shape [K, PH, PW, B] and whether each bin is empty [K, PH, PW]."""
    dev = rois.device
    start_w, start_h, end_w, end_h = [torch.round(v) for v in _roi_boxes(rois.float(), spatial_scale, 0.0)]
    roi_w = (end_w - start_w + 1).clamp(min=1)
    roi_h = (end_h - start_h + 1).clamp(min=1)
    bin_h, bin_w = roi_h / pooled_h, roi_w / pooled_w
    ph = torch.arange(pooled_h, device=dev, dtype=torch.float32)[None]
    pw = torch.arange(pooled_w, device=dev, dtype=torch.float32)[None]
    hs = (torch.floor(ph * bin_h[:, None]) + start_h[:, None]).clamp(0, height).long()  # [K, PH]
    he = (torch.ceil((ph + 1) * bin_h[:, None]) + start_h[:, None]).clamp(0, height).long()
    ws = (torch.floor(pw * bin_w[:, None]) + start_w[:, None]).clamp(0, width).long()  # [K, PW]
    we = (torch.ceil((pw + 1) * bin_w[:, None]) + start_w[:, None]).clamp(0, width).long()
    spans = torch.stack([(he - hs).max(), (we - ws).max()]).tolist() if rois.shape[0] else [1, 1]
    bh, bw = max(int(spans[0]), 1), max(int(spans[1]), 1)
    iy = torch.arange(bh, device=dev)
    ix = torch.arange(bw, device=dev)
    rows = hs[:, :, None] + iy  # [K, PH, BH]
    cols = ws[:, :, None] + ix  # [K, PW, BW]
    inside = (rows < he[:, :, None])[:, :, None, :, None] & (cols < we[:, :, None])[:, None, :, None, :]
    k = rois.shape[0]
    rows = rows.clamp(max=height - 1)[:, :, None, :, None].expand(-1, -1, pooled_w, -1, bw)
    cols = cols.clamp(max=width - 1)[:, None, :, None, :].expand(-1, pooled_h, -1, bh, -1)
    empty = (he <= hs)[:, :, None] | (we <= ws)[:, None, :]
    b = (k, pooled_h, pooled_w, bh * bw)
    return rows.reshape(b), cols.reshape(b), inside.reshape(b), empty


def roi_pool(input, rois, spatial_scale, pooled_height, pooled_width):
    n, c, height, width = input.shape
    pixels = input.permute(0, 2, 3, 1).reshape(n * height * width, c)
    rows, cols, inside, empty = _roi_pool_bins(rois, spatial_scale, pooled_height, pooled_width,
                                               height, width)
    batch = rois[:, 0].long()[:, None, None, None]
    v = pixels[(batch * height + rows) * width + cols]  # [K, PH, PW, B, C]
    low = torch.finfo(v.dtype).min if v.is_floating_point() else torch.iinfo(v.dtype).min
    v = v.masked_fill(~inside[..., None], low)
    best, at = v.max(3)  # the first of equal maxima, as CPU's strict > scan
    spot = rows.gather(3, at) * width + cols.gather(3, at)  # [K, PH, PW, C], in the H x W plane
    best = best.masked_fill(empty[..., None], 0)
    spot = spot.masked_fill(empty[..., None], -1)
    return best.permute(0, 3, 1, 2).contiguous(), spot.permute(0, 3, 1, 2).contiguous()


def roi_pool_backward(grad, rois, argmax, spatial_scale, pooled_height, pooled_width, batch_size,
                      channels, height, width):
    batch = rois[:, 0].long()[:, None, None, None]
    chan = torch.arange(channels, device=grad.device)[None, :, None, None]
    ok = argmax >= 0
    where = ((batch * channels + chan) * (height * width) + argmax.clamp(min=0)).reshape(-1)
    acc = torch.zeros(batch_size * channels * height * width, dtype=grad.dtype, device=grad.device)
    acc.index_add_(0, where, torch.where(ok, grad, 0).reshape(-1))
    return acc.reshape(batch_size, channels, height, width)


_KERNELS = {"roi_align": roi_align, "_roi_align_backward": roi_align_backward,
            "roi_pool": roi_pool, "_roi_pool_backward": roi_pool_backward}


def register(_module=None):
    """Registers the tpu kernels once torchvision has defined its operators (torchvision.extension
    loaded its library); an op torchvision does not define is skipped."""
    global _lib
    if _lib is not None:
        return
    _lib = torch.library.Library("torchvision", "IMPL")
    for name, fn in _KERNELS.items():
        if torch._C._dispatch_has_kernel_for_dispatch_key(f"torchvision::{name}", "CPU"):
            _lib.impl(name, fn, "PrivateUse1")

