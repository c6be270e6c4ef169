"""Resampling ops on tpu: bicubic and antialiased interpolation, and grid sampling, forward and
backward, as tpu kernels of PyTorch's own ops (registered below autograd, so PyTorch's
derivative formulas and tensor subclasses see the ops themselves). Each is the computation of
PyTorch's CPU kernel in ops the device runs natively; results equal CPU's up to the order of
float additions.

- Interpolation (`upsample_bicubic2d`, `_upsample_bilinear2d_aa`, `_upsample_bicubic2d_aa` and
  their backwards) is separable: along each spatial axis, each output index reads a few input
  indices ("taps") with weights. The taps depend only on the sizes, scale and mode, so they are
  computed once on the host, in CPU's formulas and precision, and kept on the device (a cache by
  key); the forward is a gather along the axis and a weighted sum, the backward an index_add of
  the weighted gradient. Antialiasing gives each output a variable number of taps: the unused
  ones are masked, so (like CPU) they never meet a value.
- Grid sampling (`grid_sampler_2d`/`_3d`, bilinear and nearest, zeros, border and reflection
  padding): the grid unnormalized and folded into range as CPU's GridSampler.h does, then each
  corner gathered from the input flattened over its spatial dims (a corner outside the input
  reads nothing, as on CPU); the backward adds the weighted gradient at the corners
  (scatter_add) and takes the grid's gradient from the weights' derivatives and CPU's gradient
  multipliers for the padding modes.

Left on CPU through the usual fallback (counted, warned, refused in strict mode): uint8
antialiased interpolation (CPU's fixed-point kernel) and grid sampling's bicubic mode.
"""
import functools
import math

import torch
from torch._prims_common import get_computation_dtype

from . import _C
from ._decompositions import out_form

_lib = None
_registered = []


# ---- interpolation ----

def _area_scale(in_size, out_size, align_corners, scale):
    """CPU's area_pixel_compute_scale."""
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else in_size / out_size


def _cubic_taps(in_size, out_size, align_corners, scale, dtype):
    """upsample_bicubic2d: 4 taps at floor(src) - 1 .. + 2, clamped, Keys' cubic (a = -0.75),
    computed in the op's math type as CPU computes them."""
    from torch._decomp.decompositions import (_compute_source_index,
                                              _upsample_get_cubic_coefficients)
    s = _area_scale(in_size, out_size, align_corners, scale)
    src = _compute_source_index(s, torch.arange(out_size, dtype=dtype), align_corners)
    base = src.floor()
    t = (src - base).clamp(0.0, 1.0)
    idx = (base.long().unsqueeze(1) + torch.arange(-1, 3)).clamp(0, in_size - 1)
    return idx, torch.stack(_upsample_get_cubic_coefficients(t), 1), None


def _aa_filter(x, cubic, ft):
    x = abs(x)
    if not cubic:
        return ft(1.0) - x if x < 1.0 else ft(0.0)
    a = ft(-0.5)
    if x < 1.0:
        return ((a + 2) * x - (a + 3)) * x * x + 1
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a if x < 2.0 else ft(0.0)


def _aa_taps(in_size, out_size, align_corners, scale, dtype, cubic):
    """CPU's _compute_indices_min_size_weights_aa: the filter (triangle, or Keys' cubic with
    a = -0.5) widened by the downscale factor, taps xmin .. xmin + xsize, weights normalized;
    each step in the type and with the promotions of CPU's C++ (float, or double for double)."""
    import numpy as np
    ft = np.float64 if dtype == torch.float64 else np.float32
    if align_corners:
        s = ft(ft(in_size - 1) / ft(out_size - 1)) if out_size > 1 else ft(0.0)
    else:
        s = ft(1.0 / scale) if scale is not None and scale > 0 else ft(ft(in_size) / ft(out_size))
    interp = 4 if cubic else 2
    support = ft(interp * 0.5 * float(s)) if s >= 1.0 else ft(interp * 0.5)
    width = int(math.ceil(support)) * 2 + 1
    inv = ft(1.0 / float(s)) if s >= 1.0 else ft(1.0)
    idx = torch.zeros(out_size, width, dtype=torch.long)
    w = torch.zeros(out_size, width, dtype=torch.float64)
    valid = torch.zeros(out_size, width, dtype=torch.bool)
    for i in range(out_size):
        center = ft(float(s) * (i + 0.5))
        xmin = max(int(float(center - support) + 0.5), 0)
        xsize = min(max(min(int(float(center + support) + 0.5), in_size) - xmin, 0), width)
        ws = [_aa_filter(ft((float(ft(j + xmin) - center) + 0.5) * float(inv)), cubic, ft)
              for j in range(xsize)]
        total = ft(0.0)
        for v in ws:
            total = ft(total + v)
        if total != 0.0:
            ws = [ft(v / total) for v in ws]
        idx[i] = xmin
        idx[i, :xsize] = torch.arange(xmin, xmin + xsize)
        w[i, :xsize] = torch.tensor([float(v) for v in ws], dtype=torch.float64)
        valid[i, :xsize] = True
    return idx, w.to(dtype), valid


@functools.lru_cache(maxsize=256)
def _taps(mode, in_size, out_size, align_corners, scale, dtype, device):
    """One axis's taps on |device| for input of |dtype|: (indices [out, K], weights [out, K] in
    the math type, valid mask or None). CPU computes the weights in the math type and stores
    them in the input's dtype (bfloat16 weights, float sums): so are these."""
    math_type = get_computation_dtype(dtype)
    if mode == "bicubic":
        idx, w, valid = _cubic_taps(in_size, out_size, align_corners, scale, math_type)
    else:
        idx, w, valid = _aa_taps(in_size, out_size, align_corners, scale, math_type,
                                 mode == "bicubic_aa")
    w = w.to(dtype).to(math_type)
    return tuple(None if t is None else t.to(device) for t in (idx, w, valid))


def _expand_taps(t, dim, ndim):
    shape = [1] * (ndim + 1)
    shape[dim], shape[dim + 1] = t.shape
    return t.reshape(shape)


def _along(x, dim, taps):
    """Each output index along |dim| as the weighted sum of its taps."""
    idx, w, valid = taps
    out, k = idx.shape
    shape = list(x.shape)
    shape[dim:dim + 1] = [out, k]
    g = x.index_select(dim, idx.reshape(-1)).reshape(shape) * _expand_taps(w, dim, x.dim())
    if valid is not None:
        g = torch.where(_expand_taps(valid, dim, x.dim()), g, 0)
    return g.sum(dim + 1)


def _along_backward(g, dim, in_size, taps):
    """The transpose of _along: each tap's weighted gradient added at its input index."""
    idx, w, valid = taps
    out, k = idx.shape
    c = g.unsqueeze(dim + 1) * _expand_taps(w, dim, g.dim())
    if valid is not None:
        c = torch.where(_expand_taps(valid, dim, g.dim()), c, 0)
    shape = list(g.shape)
    shape[dim:dim + 1] = [out * k]
    zshape = list(g.shape)
    zshape[dim] = in_size
    return torch.zeros(zshape, dtype=g.dtype, device=g.device).index_add(
        dim, idx.reshape(-1), c.reshape(shape))


def _interp_taps(mode, in_hw, out_hw, align_corners, scales, dtype, device):
    return [_taps(mode, int(i), int(o), bool(align_corners), s, dtype, device)
            for i, o, s in zip(in_hw, out_hw, scales)]


def _interpolation(mode):
    op_name = {"bicubic": "upsample_bicubic2d", "bilinear_aa": "_upsample_bilinear2d_aa",
               "bicubic_aa": "_upsample_bicubic2d_aa"}[mode]

    def forward(self, output_size, align_corners, scales_h=None, scales_w=None):
        if self.dtype == torch.uint8 or self.dim() != 4 or not self.dtype.is_floating_point:
            return _C.fallback(f"aten::{op_name}", "", self, output_size, align_corners,
                               scales_h, scales_w)
        dt = get_computation_dtype(self.dtype)
        th, tw = _interp_taps(mode, self.shape[2:], output_size, align_corners,
                              (scales_h, scales_w), self.dtype, self.device)
        y = self.to(dt)
        for dim, taps in ((3, tw), (2, th)):
            # CPU's separable antialiased kernel leaves an axis whose size does not change
            if mode == "bicubic" or y.shape[dim] != output_size[dim - 2]:
                y = _along(y, dim, taps)
        y = y.to(self.dtype)
        return y.contiguous(memory_format=torch.channels_last) \
            if self.is_contiguous(memory_format=torch.channels_last) and \
            not self.is_contiguous() else y

    def backward(grad_output, output_size, input_size, align_corners, scales_h=None,
                 scales_w=None):
        if not grad_output.dtype.is_floating_point:
            return _C.fallback(f"aten::{op_name}_backward", "", grad_output, output_size,
                               input_size, align_corners, scales_h, scales_w)
        dt = get_computation_dtype(grad_output.dtype)
        # CPU's backward keeps the weights in the math type
        th, tw = _interp_taps(mode, input_size[2:], output_size, align_corners,
                              (scales_h, scales_w), dt, grad_output.device)
        g = _along_backward(grad_output.to(dt), 2, int(input_size[2]), th)
        return _along_backward(g, 3, int(input_size[3]), tw).to(grad_output.dtype)

    return {op_name: forward, f"{op_name}_backward": backward}


# ---- grid sampling (GridSampler.h) ----

def _unnormalize(coord, size, align_corners):
    if align_corners:
        return (coord + 1) / 2 * (size - 1), (size - 1) / 2
    return ((coord + 1) * size - 1) / 2, size / 2


def _clip(x, size, vectorized):
    """clip_coordinates_set_grad: the coordinate in [0, size - 1], and its gradient factor. A NaN
    coordinate lands where CPU's kernel puts it: at 0 in the vectorized 2-d kernel (an AVX max
    returns its second operand), at size - 1 in the scalar 3-d one (std::min/max)."""
    inside = (x > 0) & (x < size - 1)
    x = torch.where(x.isnan(), 0 if vectorized else size - 1, x)
    return x.clamp(0, size - 1), inside.to(x.dtype)


def _reflect(x, twice_low, twice_high):
    """reflect_coordinates_set_grad."""
    if twice_low == twice_high:
        return torch.zeros_like(x), torch.zeros_like(x)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    x = x - low
    sign = torch.where(x < 0, -1.0, 1.0).to(x.dtype)
    x = x.abs()
    extra = torch.fmod(x, span)
    even = torch.remainder(torch.floor(x / span), 2) == 0
    return torch.where(even, extra + low, span - extra + low), torch.where(even, sign, -sign)


def _source(coord, size, padding_mode, align_corners, vectorized):
    """The sampling coordinate along one axis and d(coordinate)/d(grid)."""
    x, mult = _unnormalize(coord, size, align_corners)
    if padding_mode == 0:
        return x, torch.full_like(x, mult)
    if padding_mode == 2:
        x, g = (_reflect(x, 0, 2 * (size - 1)) if align_corners
                else _reflect(x, -1, 2 * size - 1))
        x, c = _clip(x, size, vectorized)
        return x, g * c * mult
    x, c = _clip(x, size, vectorized)
    return x, c * mult


def _grid_setup(input, grid, padding_mode, align_corners, dt):
    """Per spatial axis (input order: depth, height, width): the coordinate, its gradient factor
    and the axis size; the grid's last dim holds them in reverse (x is width)."""
    sizes = input.shape[2:]
    nd = len(sizes)
    g = grid.to(dt).reshape(grid.shape[0], -1, nd)  # [N, Q, nd]
    axes = []
    for a, size in enumerate(sizes):
        x, mult = _source(g[..., nd - 1 - a], int(size), padding_mode, align_corners, nd == 2)
        axes.append((x, mult, int(size)))
    return axes


def _corners(axes, mode):
    """Each corner: per axis (index, weight, d weight / d coordinate), as CPU's kernel takes
    them (bilinear: floor and floor + 1; nearest: round half to even)."""
    per_axis = []
    for x, _, _ in axes:
        if mode == 1:
            per_axis.append([(torch.round(x), None, None)])
        else:
            lo = torch.floor(x)
            frac = x - lo
            per_axis.append([(lo, 1 - frac, -1.0), (lo + 1, frac, 1.0)])
    out = [[]]
    for choices in per_axis:
        out = [c + [ch] for c in out for ch in choices]
    return out


def _corner_index(corner, axes):
    """The flat index of a corner in the input's spatial dims, clamped, and whether it is in."""
    lin, inside, stride = 0, None, 1
    for (i, _, _), (_, _, size) in reversed(list(zip(corner, axes))):
        ok = (i >= 0) & (i <= size - 1)
        inside = ok if inside is None else inside & ok
        lin = lin + i.clamp(0, size - 1).long() * stride
        stride *= size
    return lin, inside


def _corner_weight(corner):
    """The product of the axes' weights, x's first as CPU's kernel multiplies them."""
    w = None
    for _, wa, _ in reversed(corner):
        if wa is not None:
            w = wa if w is None else w * wa
    return w


def _supported(input, mode):
    return input.dtype.is_floating_point and mode in (0, 1)


def _grid_sampler(nd):
    name = f"grid_sampler_{nd}d"

    def forward(input, grid, interpolation_mode, padding_mode, align_corners):
        if not _supported(input, interpolation_mode):
            return _C.fallback(f"aten::{name}", "", input, grid, interpolation_mode,
                               padding_mode, align_corners)
        # In the input's dtype, as CPU's kernel computes (bfloat16 bit for bit).
        axes = _grid_setup(input, grid, padding_mode, align_corners, input.dtype)
        n, c = input.shape[:2]
        flat = input.reshape(n, c, -1)
        out = None
        for corner in _corners(axes, interpolation_mode):
            lin, inside = _corner_index(corner, axes)
            v = flat.gather(2, lin.unsqueeze(1).expand(n, c, lin.shape[1]))
            w = _corner_weight(corner)
            # The 2-d kernel (vectorized) multiplies each weight with the corner's value or 0;
            # the 3-d one adds only the corners inside. They differ for a non-finite weight.
            if nd == 2:
                v = torch.where(inside.unsqueeze(1), v, 0)
            if w is not None:
                v = v * w.unsqueeze(1)
            if nd == 3:
                v = torch.where(inside.unsqueeze(1), v, 0)
            out = v if out is None else out + v
        return out.reshape(n, c, *grid.shape[1:-1]).to(input.dtype)

    def backward(grad_output, input, grid, interpolation_mode, padding_mode, align_corners,
                 output_mask):
        if not _supported(input, interpolation_mode):
            return _C.fallback(f"aten::{name}_backward", "", grad_output, input, grid,
                               interpolation_mode, padding_mode, align_corners, output_mask)
        # In float for 16-bit dtypes, rounded once: CPU accumulates each pixel's gradient in
        # bfloat16 in its own order, which cannot be reproduced; this is nearer the exact sum.
        dt = get_computation_dtype(input.dtype)
        axes = _grid_setup(input, grid, padding_mode, align_corners, dt)
        n, c = input.shape[:2]
        flat = input.to(dt).reshape(n, c, -1)
        g = grad_output.to(dt).reshape(n, c, -1)
        grad_input = torch.zeros_like(flat) if output_mask[0] else None
        dcoord = [torch.zeros_like(x) for x, _, _ in axes]
        for corner in _corners(axes, interpolation_mode):
            lin, inside = _corner_index(corner, axes)
            index = lin.unsqueeze(1).expand(n, c, lin.shape[1])
            w = _corner_weight(corner)
            if grad_input is not None:
                gw = g if w is None else g * w.unsqueeze(1)
                grad_input = grad_input.scatter_add(2, index,
                                                    torch.where(inside.unsqueeze(1), gw, 0))
            if output_mask[1] and interpolation_mode == 0:
                # d out / d coordinate of axis a: the corner's value times its other axes'
                # weights and the sign of its own; summed with the gradient over channels.
                vg = torch.where(inside.unsqueeze(1), flat.gather(2, index) * g, 0).sum(1)
                for a in range(len(axes)):
                    others = None
                    for b, (_, wb, _) in enumerate(corner):
                        if b != a:
                            others = wb if others is None else others * wb
                    term = vg * corner[a][2]
                    dcoord[a] = dcoord[a] + (term if others is None else term * others)
        grad_grid = None
        if output_mask[1]:
            nd_ = len(axes)
            grad_grid = torch.stack([dcoord[nd_ - 1 - k] * axes[nd_ - 1 - k][1]
                                     for k in range(nd_)], -1)
            grad_grid = grad_grid.reshape(grid.shape).to(grid.dtype)
        if grad_input is not None:
            grad_input = grad_input.reshape(input.shape).to(input.dtype)
        return grad_input, grad_grid

    return {name: forward, f"{name}_backward": backward}


# ---- registration ----

def _kernels():
    k = {}
    for mode in ("bicubic", "bilinear_aa", "bicubic_aa"):
        k.update(_interpolation(mode))
    k.update(_grid_sampler(2))
    k.update(_grid_sampler(3))
    return k


def register():
    global _lib
    if _lib is not None:
        return
    _lib = torch.library.Library("aten", "IMPL")
    for name, fn in _kernels().items():
        packet = getattr(torch.ops.aten, name)
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if overload == "vec":  # composite: it calls the default overload
                continue
            outs = [a.name for a in op._schema.arguments if a.is_out]
            _lib.impl(op, out_form(fn, outs) if outs else fn, "PrivateUse1")
            _registered.append(op.name())
    _registered.sort()


def registered_ops():
    return list(_registered)
