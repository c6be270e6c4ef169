"""CUDA-only ops that PyTorch also decomposes: on tpu they run as their decomposition.

An op PyTorch implements for CUDA only (cudnn_batch_norm, _fused_dropout, addmm.dtype, ...) has
no CPU kernel, so the CPU fallback cannot run it; where torch._decomp holds a decomposition, that
decomposition is registered as the op's tpu kernel, and its parts run natively or fall back like
any op. A few such ops torch._decomp lacks are decomposed here: mm/bmm with an output dtype
(which torch._decomp's addmm.dtype and baddbmm.dtype call), and the *_overrideable convolutions
PyTorch's _convolution routes a non-CPU backend to, whose CPU entries are error stubs: they are
the convolution ops the op table lowers (or the fallback runs on CPU). The memory-efficient
attention kernel and its backward, which scaled_dot_product_attention picks on tpu as on CUDA
(csrc/torch/sdpa.cpp), are the math path's computation, and so is PyTorch's fused-attention
entry for out-of-tree devices (_scaled_dot_product_fused_attention_overrideable). cdist's and
pdist's direct kernels and their backwards, which have CPU kernels, are decomposed too: their
CPU formulas (a gradient of 0 at distance 0) in ops the device runs, and so is histogram. Every other op without a CPU kernel
raises NotImplementedError saying so (in the glue's fallback).

Three fused kernels that do have CPU kernels are decomposed here too, because the CPU fallback
would run a whole layer on the host: the eval fast paths of nn.TransformerEncoderLayer
(`_transformer_encoder_layer_fwd`) and nn.MultiheadAttention (`_native_multi_head_attention`),
and `_masked_softmax` under them. Their tpu kernels are the same computation in the ops the
device runs (linear, layer_norm, softmax, bmm). So are a few ops whose CPU kernels the fallback
would run (the smooth_l1, huber, multi-margin and CTC losses and their backwards, matrix_exp,
embedding_bag and segment_reduce with their backwards), registered below
autograd like every tpu kernel: PyTorch's derivative formulas and tensor subclasses (DTensor)
see the ops themselves. `decomposed_ops()` lists what was registered.
"""
import math

import torch
from torch._prims_common import get_computation_dtype

_lib = None
_registered = []


# mm/bmm accumulating into |out_dtype| (CUDA: 16-bit inputs, float32 results): products of the
# inputs upcast to out_dtype are exact for 16-bit floats in float32, so this is that accumulation.
def _mm_dtype(self, mat2, out_dtype):
    return torch.mm(self.to(out_dtype), mat2.to(out_dtype))


def _mm_dtype_out(self, mat2, out_dtype, *, out):
    return torch.mm(self.to(out_dtype), mat2.to(out_dtype), out=out)


def _bmm_dtype(self, mat2, out_dtype):
    return torch.bmm(self.to(out_dtype), mat2.to(out_dtype))


def _bmm_dtype_out(self, mat2, out_dtype, *, out):
    return torch.bmm(self.to(out_dtype), mat2.to(out_dtype), out=out)


def _convolution_overrideable(input, weight, bias, stride, padding, dilation, transposed,
                              output_padding, groups):
    return torch.ops.aten.convolution(input, weight, bias, stride, padding, dilation, transposed,
                                      output_padding, groups)


def _convolution_backward_overrideable(grad_output, input, weight, stride, padding, dilation,
                                       transposed, output_padding, groups, output_mask):
    bias_sizes = [weight.shape[1] * groups if transposed else weight.shape[0]]
    return torch.ops.aten.convolution_backward(grad_output, input, weight, bias_sizes, stride,
                                               padding, dilation, transposed, output_padding,
                                               groups, output_mask)


def _masked_softmax(self, mask, dim=None, mask_type=None):
    """Softmax with the True entries of a bool |mask| at -inf (a row masked entirely is NaN, as
    on CPU). mask_type 1: a (batch, key) padding mask of a (batch, heads, query, key) input."""
    torch._check(mask.dtype == torch.bool, lambda: "Mask should be a boolean tensor")
    dim = self.dim() - 1 if dim is None else dim
    if mask_type == 1 and self.dim() == 4 and mask.dim() == 2:
        mask = mask[:, None, None, :]
    return torch.softmax(self.masked_fill(mask, float("-inf")), dim)


def _scores(query, key, value, attn_bias, is_causal, scale):
    """q k^T * scale + bias as PyTorch's math path computes it: 16-bit inputs in float32, q and k
    each scaled by sqrt(scale), a causal mask aligned top-left. Returns the scores, q, k, v in
    that precision and the scale."""
    acc = get_computation_dtype(query.dtype)
    q, k, v = (t.to(acc) for t in (query, key, value))
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    root = math.sqrt(abs(scale))
    scores = torch.matmul(q * (-root if scale < 0 else root), k.transpose(-2, -1) * root)
    if is_causal:
        keep = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_bias is not None:
        scores = scores + attn_bias
    return scores, q, k, v, scale


def _heads_last(t):
    """(batch, heads, seq, dim) laid out as (batch, seq, heads, dim), as CUDA's kernels return
    it: DTensor plans views of the result on those strides."""
    return t.transpose(1, 2).contiguous().transpose(1, 2)


def _dropout_keep(seed, shape, p):
    """Which positions of an attention of |shape| dropout keeps (probability 1 - |p|), from the
    0-dim int64 |seed|: a counter-based hash of each position's index (lowbias32, a round per
    word of the seed), so the backward regenerates the forward's mask from the seed alone, as
    CUDA's kernels do from their Philox seed and offset."""
    word = 0xFFFFFFFF
    x = torch.arange(math.prod(shape), dtype=torch.int64, device=seed.device).view(shape)
    x = x * 0x9E3779B1
    for part in (seed & word, seed >> 32):
        x = (x + part) & word
        x = x ^ (x >> 16)
        x = (x * 0x7FEB352D) & word
        x = x ^ (x >> 15)
        x = (x * 0x846CA68B) & word
        x = x ^ (x >> 16)
    return x >= int(p * 2 ** 32)


def _dropped(attn, seed, p):
    """|attn| with dropout applied: the kept positions scaled by 1 / (1 - p)."""
    return attn * _dropout_keep(seed, attn.shape, p) * (1 / (1 - p) if p < 1 else 0.0)


def _efficient_attention(query, key, value, attn_bias, compute_log_sumexp, dropout_p=0.0,
                         is_causal=False, *, scale=None):
    """The memory-efficient SDPA kernel (the one DTensor shards by heads): the math path's
    attention, the log-sum-exp of each row's scores when asked (float32, the row dim padded to a
    multiple of 32 as CUDA's), and the dropout seed (_dropout_keep) and offset (0)."""
    scores, _, _, v, _ = _scores(query, key, value, attn_bias, is_causal, scale)
    attn = torch._safe_softmax(scores, -1)  # a row masked entirely: zeros, as the math path
    seed = torch.zeros((), dtype=torch.long, device=query.device)
    if dropout_p > 0:
        seed = torch.randint(0, 2 ** 62, (), device=query.device)
        attn = _dropped(attn, seed, dropout_p)
    out = _heads_last(torch.matmul(attn, v).to(query.dtype))
    b, h, n = query.shape[:3]
    if compute_log_sumexp:
        lse = torch.logsumexp(scores, -1).float()  # zeros after it: a cat, which buckets serve
        lse = torch.cat([lse, lse.new_zeros((b, h, -n % 32))], -1)
    else:
        lse = query.new_empty((b, h, 0), dtype=torch.float32)
    return out, lse, seed, torch.zeros_like(seed)


def _efficient_attention_backward(grad_out, query, key, value, attn_bias, out, logsumexp,
                                  philox_seed, philox_offset, dropout_p, grad_input_mask,
                                  is_causal=False, *, scale=None):
    """Its backward, as CUDA's: the probabilities recomputed from the scores and the given
    log-sum-exp (nothing of size L x S was kept; a row whose log-sum-exp is -inf, masked
    entirely, is zeros), the dropout mask regenerated from its seed, and the softmax's backward
    through the given output: dS = P * (dP - rowsum(dO * O)). Ring attention (context
    parallelism) passes a block of keys with the whole row's output and log-sum-exp."""
    scores, q, k, v, scale = _scores(query, key, value, attn_bias, is_causal, scale)
    lse = logsumexp[..., :query.shape[2], None].to(scores.dtype)
    attn = torch.where(lse == float("-inf"), 0.0, torch.exp(scores - lse))
    grad = grad_out.to(scores.dtype)
    kept = _dropped(attn, philox_seed, dropout_p) if dropout_p > 0 else attn
    grad_v = torch.matmul(kept.transpose(-2, -1), grad)
    grad_kept = torch.matmul(grad, v.transpose(-2, -1))
    if dropout_p > 0:
        grad_kept = _dropped(grad_kept, philox_seed, dropout_p)
    rows = (grad * out.to(scores.dtype)).sum(-1, keepdim=True)
    grad_scores = attn * (grad_kept - rows)
    grad_q = torch.matmul(grad_scores, k) * scale
    grad_k = torch.matmul(grad_scores.transpose(-2, -1), q) * scale
    grad_bias = None
    if attn_bias is not None and grad_input_mask[3]:
        grad_bias = grad_scores.sum_to_size(attn_bias.shape).to(attn_bias.dtype)
    return (_heads_last(grad_q.to(query.dtype)), _heads_last(grad_k.to(key.dtype)),
            _heads_last(grad_v.to(value.dtype)), grad_bias)


def _fused_attention_overrideable(query, key, value, attn_bias=None, dropout_p=0.0,
                                  is_causal=False, return_debug_mask=False, *, scale=None):
    """PyTorch's fused-attention entry for an out-of-tree device (what SDPA runs when a device's
    kernel choice answers 'overrideable'; called directly by code written for such devices):
    the kernel above, in flash attention's result form: the log-sum-exp unpadded, no cumulative
    sequence lengths (dense batches), the longest query and key lengths, no debug mask."""
    out, lse, seed, offset = _efficient_attention(query, key, value, attn_bias, True, dropout_p,
                                                  is_causal, scale=scale)
    none = query.new_empty((0,), dtype=torch.int32)
    return (out, lse[..., :query.shape[2]], none, none.clone(), query.shape[2], key.shape[2],
            seed, offset, query.new_empty((0,)))


def _fused_attention_overrideable_backward(grad_out, query, key, value, attn_bias,
                                           grad_input_mask, out, logsumexp, cum_seq_q, cum_seq_k,
                                           max_q, max_k, dropout_p, is_causal, philox_seed,
                                           philox_offset, *, scale=None):
    return _efficient_attention_backward(grad_out, query, key, value, attn_bias, out, logsumexp,
                                         philox_seed, philox_offset, dropout_p, grad_input_mask,
                                         is_causal, scale=scale)


def _pnorm(diff, p):
    """CPU's p-norm of difference vectors (last dim), as cdist and pdist compute it: p = 0 counts
    the differing coordinates, p = inf takes the largest difference, else (sum |d|^p)^(1/p)."""
    d = diff.abs()
    if p == 0:
        return (d != 0).sum(-1).to(diff.dtype)
    if p == math.inf:
        return d.amax(-1) if d.shape[-1] else d.sum(-1)
    if p == 1:
        return d.sum(-1)
    if p == 2:
        return d.mul(d).sum(-1).sqrt()
    return d.pow(p).sum(-1).pow(1 / p)


def _pnorm_grad(grad, diff, dist, p):
    """CPU's derivative of each distance with respect to its difference vector, times |grad|;
    0 where the distance is 0 (and, for p < 1, where a coordinate's difference is)."""
    g, dist = grad.unsqueeze(-1), dist.unsqueeze(-1)
    zero = torch.zeros((), dtype=diff.dtype, device=diff.device)
    if p == 0:
        return torch.zeros_like(diff)
    if p == 1:
        return g * diff.sign()
    if p == math.inf:
        return g * diff.sign() * (diff.abs() == dist)
    safe = torch.where(dist == 0, 1, dist)
    each = g * diff / safe if p == 2 else g * diff * diff.abs().pow(p - 2) / safe.pow(p - 1)
    return torch.where((dist == 0) | ((diff == 0) & (p < 1)), zero, each)


def _cdist_forward(x1, x2, p, compute_mode=None):
    """torch.cdist's direct path (taken unless it uses matrix products for p = 2)."""
    torch._check(x1.is_floating_point() and x2.is_floating_point(),
                 lambda: f"cdist only supports floating-point dtypes, X1 got: {x1.dtype}")
    return _pnorm(x1.unsqueeze(-2) - x2.unsqueeze(-3), p)


def _cdist_backward(grad, x1, x2, p, cdist):
    """Its gradient with respect to x1 (autograd gets x2's by swapping them)."""
    return _pnorm_grad(grad, x1.unsqueeze(-2) - x2.unsqueeze(-3), cdist, p).sum(-2)


def _pairs(n, device):
    """The row pairs i < j in row-major order (triu_indices has no tpu kernel: the set entries
    of an upper triangle, which nonzero lists in that order)."""
    return torch.ones(n, n, dtype=torch.bool, device=device).triu(1).nonzero(as_tuple=True)


def _pdist_forward(self, p=2.0):
    """The distances of the row pairs i < j, in that order."""
    i, j = _pairs(self.shape[0], self.device)
    return _pnorm(self[i] - self[j], p)


def _pdist_backward(grad, self, p, pdist):
    i, j = _pairs(self.shape[0], self.device)
    each = _pnorm_grad(grad, self[i] - self[j], pdist, p)
    return torch.zeros_like(self).index_add_(0, i, each).index_add_(0, j, -each)


def _histogram_counts(self, edges, weight, density):
    """CPU's histogram over |edges| (increasing, 1-D): an element falls in the last bin whose
    left edge is <= it (the rightmost bin includes its right edge); elements outside the edges
    and NaN count nothing; with |density|, counts over their total and the bins' widths."""
    x = self.reshape(-1)
    n = edges.numel() - 1
    pos = (torch.searchsorted(edges, x, right=True) - 1).clamp(max=n - 1)
    inside = (x >= edges[0]) & (x <= edges[-1])
    w = torch.ones_like(x) if weight is None else weight.reshape(-1).to(x.dtype)
    hist = torch.zeros(n, dtype=x.dtype, device=x.device).index_add_(
        0, torch.where(inside, pos, 0), torch.where(inside, w, 0))
    if density:
        hist = hist / hist.sum() / edges.diff()
    return hist, edges


def _histogram_bin_ct(self, bins=100, *, range=None, weight=None, density=False):
    """torch.histogram with a bin count: |bins| equal bins over |range|, else over the data's
    own range (read back, as CPU's kernel reads it), widened by 0.5 each way when it is a point."""
    torch._check(self.is_floating_point(), lambda: "torch.histogram: input tensor and bins "
                 "tensors should have the same dtype")
    torch._check(bins > 0, lambda: "torch.histogram(): bins must be > 0")
    if range is not None:
        lo, hi = float(range[0]), float(range[1])
    elif self.numel():
        lo, hi = (float(v) for v in torch.stack(torch.aminmax(self)).tolist())
    else:
        lo, hi = 0.0, 1.0
    torch._check(math.isfinite(lo) and math.isfinite(hi), lambda: f"torch.histogram: range "
                 f"[{lo}, {hi}] is not finite")
    torch._check(lo <= hi, lambda: f"torch.histogram: min should not exceed max, but got min "
                 f"{lo} max {hi}")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    edges = torch.linspace(lo, hi, bins + 1, dtype=self.dtype, device=self.device)
    return _histogram_counts(self, edges, weight, density)


def _histogram_bins_tensor(self, bins, *, weight=None, density=False):
    torch._check(bins.dim() == 1, lambda: "torch.histogram(): bins tensor should have one dimension")
    return _histogram_counts(self, bins.to(self.dtype), weight, density)


def out_form(fn, names):
    """The out= form of |fn|: its results (a result of None is left alone) written into the
    out= arguments |names|, in order."""
    def run(*args, **kwargs):
        outs = [kwargs.pop(n) for n in names]
        results = fn(*args, **kwargs)
        single = not isinstance(results, tuple)
        for o, r in zip(outs, (results,) if single else results):
            if r is not None:
                o.resize_(r.shape).copy_(r)
        return outs[0] if single else tuple(outs)
    return run


def _native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
                                 proj_weight, proj_bias, mask=None, need_weights=True,
                                 average_attn_weights=True, mask_type=None):
    """nn.MultiheadAttention's fused eval path (batch first): in-projection, q scaled by
    1/sqrt(head_dim), softmax of q k^T with the mask's nonzero entries masked, out-projection;
    the weights (averaged over heads if asked) when need_weights, else None."""
    b, t, d = query.shape
    dh = embed_dim // num_head
    if query is key and key is value:
        q, k, v = torch.nn.functional.linear(query, qkv_weight, qkv_bias).chunk(3, dim=-1)
    else:
        w, bias = qkv_weight.chunk(3), qkv_bias.chunk(3)
        q, k, v = (torch.nn.functional.linear(x, w[i], bias[i]) for i, x in enumerate((query, key, value)))

    def heads(x):
        return x.reshape(b, x.shape[1], num_head, dh).transpose(1, 2)

    scores = torch.matmul(heads(q) / math.sqrt(dh), heads(k).transpose(-2, -1))
    if mask is not None:
        mask = mask if mask.dtype == torch.bool else mask != 0
        if mask_type == 1:  # (batch, key) padding; 0 is (query, key), 2 (batch, heads, query, key)
            mask = mask.reshape(b, 1, 1, -1)
        scores = scores.masked_fill(mask, float("-inf"))
    attn = torch.softmax(scores, -1)
    out = torch.matmul(attn, heads(v)).transpose(1, 2).reshape(b, t, d)
    out = torch.nn.functional.linear(out, proj_weight, proj_bias)
    if not need_weights:
        return out, None
    return out, attn.mean(dim=1) if average_attn_weights else attn


def _transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                                   proj_bias, use_gelu, norm_first, eps, norm_weight_1,
                                   norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1,
                                   ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None, mask_type=None):
    """nn.TransformerEncoderLayer's fused eval path, in CPU's order of operations."""
    F = torch.nn.functional

    def norm(x, w, b):
        return F.layer_norm(x, (embed_dim,), w, b, eps)

    x = norm(src, norm_weight_1, norm_bias_1) if norm_first else src
    x = _native_multi_head_attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias,
                                     proj_weight, proj_bias, mask, False, True, mask_type)[0]
    x = x + src
    if not norm_first:
        x = norm(x, norm_weight_1, norm_bias_1)
    residual = x
    if norm_first:
        x = norm(x, norm_weight_2, norm_bias_2)
    x = F.linear(x, ffn_weight_1, ffn_bias_1)
    x = F.gelu(x) if use_gelu else F.relu(x)
    x = F.linear(x, ffn_weight_2, ffn_bias_2) + residual
    return x if norm_first else norm(x, norm_weight_2, norm_bias_2)


def _matrix_exp(self):
    """Scaling and squaring, as CPU's kernel: A / 2^s with s = ceil(log2(|A|_1 / theta_18))
    (theta_18 the bound for a degree-18 approximation in the dtype), a degree-18 Taylor
    polynomial (Horner), then squared s times; each matrix of a batch with its own s (the
    largest is read back: the number of squarings). Complex input goes to the CPU fallback."""
    from . import _C
    if not self.dtype.is_floating_point:
        return _C.fallback("aten::linalg_matrix_exp", "", self)
    if self.shape[-1] == 0:
        return self.clone()
    dt = get_computation_dtype(self.dtype)
    a = self.to(dt)
    theta = 1.090863719290036 if dt == torch.float64 else 3.010066362817634
    s = torch.ceil(torch.log2(a.abs().sum(-2).amax(-1) / theta)).clamp(min=0)
    s = torch.where(s.isfinite(), s, 0)  # non-finite input: no squaring, the result is too
    squarings = int(s.max().item()) if s.numel() else 0
    a = a / torch.exp2(s)[..., None, None]
    eye = torch.eye(a.shape[-1], dtype=dt, device=a.device).expand(a.shape)
    e = eye
    for k in range(18, 0, -1):
        e = eye + (a @ e) / k
    for i in range(squarings):
        e = torch.where((s > i)[..., None, None], e @ e, e)
    return e.to(self.dtype)


def _bags(indices, offsets, include_last_offset):
    """Each index's bag (searchsorted of its position in the bags' starts) and whether it is in
    one (with include_last_offset, positions past the last offset are not)."""
    n = indices.numel()
    starts = offsets[:-1] if include_last_offset else offsets
    pos = torch.arange(n, device=indices.device)
    ids = torch.searchsorted(starts, pos, right=True) - 1
    inside = pos < offsets[-1] if include_last_offset else torch.ones_like(pos, dtype=torch.bool)
    return ids.clamp(min=0), inside


def _embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                   per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    """CPU's kernel: each bag's rows (times per_sample_weights) summed, averaged or maxed over
    the indices that are not padding_idx; an empty bag gives 0. The other results are what
    CPU's backward reads: offset2bag (each index's bag), bag_size (the bag's count, 0 for sum)
    and max_indices (the row each max came from, first of ties; for mean, bag_size)."""
    from . import _C
    if indices.dim() != 1 or (per_sample_weights is not None and mode != 0) or \
            not weight.dtype.is_floating_point:
        return _C.fallback("aten::_embedding_bag", "", weight, indices, offsets,
                           scale_grad_by_freq, mode, sparse, per_sample_weights,
                           include_last_offset, padding_idx)
    b = offsets.numel() - (1 if include_last_offset else 0)
    ids, keep = _bags(indices, offsets, include_last_offset)
    keep = keep & (indices != padding_idx)
    dt = get_computation_dtype(weight.dtype)
    rows = weight.index_select(0, indices).to(dt)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.to(dt).unsqueeze(1)
    d = weight.shape[1]
    count = torch.zeros(b, dtype=torch.long, device=weight.device).index_add(0, ids, keep.long())
    zeros = torch.zeros(b, d, dtype=dt, device=weight.device)
    max_indices = torch.zeros(b, dtype=torch.long, device=weight.device)
    if mode == 2:
        fill = torch.tensor(float("-inf"), dtype=dt, device=weight.device)
        at = ids.unsqueeze(1).expand(-1, d)
        out = zeros.fill_(float("-inf")).scatter_reduce(0, at, torch.where(
            keep.unsqueeze(1), rows, fill), "amax")
        first = torch.where(keep.unsqueeze(1) & (rows == out.index_select(0, ids)),
                            torch.arange(indices.numel(), device=weight.device).unsqueeze(1),
                            indices.numel())
        first = torch.full((b, d), indices.numel(), dtype=torch.long,
                           device=weight.device).scatter_reduce(0, at, first, "amin")
        empty = (count == 0).unsqueeze(1)
        max_indices = torch.where(empty, 0, indices.index_select(
            0, first.clamp(max=max(indices.numel() - 1, 0)).reshape(-1)).reshape(b, d))
        out = torch.where(empty, 0, out)
    else:
        out = zeros.index_add(0, ids, torch.where(keep.unsqueeze(1), rows, 0))
        if mode == 1:
            out = torch.where(count.unsqueeze(1) > 0, out / count.clamp(min=1).unsqueeze(1), 0)
            max_indices = count
    bag_size = count if mode != 0 else torch.zeros_like(count)
    return out.to(weight.dtype), ids, bag_size, max_indices


def _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, maximum_indices,
                            num_weights, scale_grad_by_freq, mode, sparse, per_sample_weights,
                            padding_idx=-1):
    """The dense gradient: each index's row gets its bag's gradient (times its per-sample
    weight; over the bag's count for mean), or for max each bag's gradient at the rows its
    maxima came from; padding_idx gets none; scale_grad_by_freq divides by each row's count."""
    from . import _C
    if sparse or indices.dim() != 1:
        return _C.fallback("aten::_embedding_bag_backward", "", grad, indices, offsets,
                           offset2bag, bag_size, maximum_indices, num_weights,
                           scale_grad_by_freq, mode, sparse, per_sample_weights, padding_idx)
    dt = get_computation_dtype(grad.dtype)
    g = grad.to(dt)
    d = grad.shape[1]
    keep = indices != padding_idx
    if mode == 2:
        at = maximum_indices.reshape(-1)
        cols = torch.arange(d, device=grad.device).repeat(grad.shape[0])
        nonempty = (bag_size > 0).unsqueeze(1).expand(-1, d).reshape(-1)
        out = torch.zeros(num_weights * d, dtype=dt, device=grad.device).index_add(
            0, at * d + cols, torch.where(nonempty, g.reshape(-1), 0)).reshape(num_weights, d)
    else:
        ids = offset2bag if offset2bag.numel() == indices.numel() else \
            _bags(indices, offsets, False)[0]
        rows = g.index_select(0, ids)
        if mode == 1:
            rows = rows / bag_size.index_select(0, ids).clamp(min=1).to(dt).unsqueeze(1)
        if per_sample_weights is not None:
            rows = rows * per_sample_weights.to(dt).unsqueeze(1)
        if scale_grad_by_freq:
            freq = torch.zeros(num_weights, dtype=dt, device=grad.device).index_add(
                0, indices, keep.to(dt))
            rows = rows / freq.index_select(0, indices).clamp(min=1).unsqueeze(1)
        out = torch.zeros(num_weights, d, dtype=dt, device=grad.device).index_add(
            0, indices, torch.where(keep.unsqueeze(1), rows, 0))
    return out.to(grad.dtype)


def _embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode,
                                               padding_idx=-1):
    """Each index's gradient: its bag's gradient dotted with its row (0 for padding_idx)."""
    from . import _C
    if mode != 0 or offset2bag.numel() != indices.numel():
        return _C.fallback("aten::_embedding_bag_per_sample_weights_backward", "", grad, weight,
                           indices, offsets, offset2bag, mode, padding_idx)
    dt = get_computation_dtype(grad.dtype)
    dots = (grad.to(dt).index_select(0, offset2bag) *
            weight.to(dt).index_select(0, indices)).sum(1)
    return torch.where(indices != padding_idx, dots, 0).to(grad.dtype)


def _ctc_setup(log_probs, targets, input_lengths, target_lengths, blank):
    """The extended targets l' (blank, l1, blank, l2, ..., blank) per sample [N, S'], which of
    their positions exist, where a skip from s - 2 is allowed, and the lengths as tensors."""
    dev = log_probs.device
    il = torch.as_tensor(input_lengths, device=dev).long().reshape(-1)
    tl = torch.as_tensor(target_lengths, device=dev).long().reshape(-1)
    n = log_probs.shape[1]
    if targets.dim() == 1:  # concatenated: pad per sample
        width = int(tl.max().item()) if tl.numel() else 0
        start = torch.cumsum(tl, 0) - tl
        pos = start.unsqueeze(1) + torch.arange(width, device=dev)
        padded = targets.index_select(0, pos.clamp(max=max(targets.numel() - 1, 0)).reshape(-1)) \
            if targets.numel() else torch.zeros(n * width, dtype=torch.long, device=dev)
        targets = padded.reshape(n, width)
    width = targets.shape[1]
    ext = torch.full((n, 2 * width + 1), blank, dtype=torch.long, device=dev)
    if width:
        ext[:, 1::2] = targets.long()
    s = torch.arange(2 * width + 1, device=dev)
    exists = s.unsqueeze(0) < (2 * tl + 1).unsqueeze(1)
    skip = torch.zeros_like(exists)
    if width > 1:
        skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    return ext, exists, skip, il, tl


def _lse3(a, b, c):
    """log(e^a + e^b + e^c) shifted by the largest, as CPU's ctc kernels: a largest of -inf
    shifts by 0 (the sum is -inf), one of +inf is kept (NaN, as on CPU)."""
    m = torch.maximum(torch.maximum(a, b), c)
    m0 = torch.where(m == float("-inf"), 0, m)
    return torch.log(torch.exp(a - m0) + torch.exp(b - m0) + torch.exp(c - m0)) + m0


def _shift(x, k, fill):
    return torch.cat([torch.full_like(x[:, :k], fill), x[:, :-k]], 1) if x.shape[1] > k else \
        torch.full_like(x, fill)


def _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    """CPU's forward: log alpha over time (the three-way recursion on the extended targets, one
    step per time), the loss the log-sum of the last two states at each sample's length."""
    from . import _C
    if log_probs.dim() != 3 or log_probs.dtype not in (torch.float32, torch.float64):
        return _C.fallback("aten::_ctc_loss", "" if isinstance(input_lengths, (list, tuple))
                           else "Tensor", log_probs, targets, input_lengths, target_lengths,
                           blank, zero_infinity)
    ext, exists, skip, il, tl = _ctc_setup(log_probs, targets, input_lengths, target_lengths,
                                           blank)
    t_max, n = log_probs.shape[:2]
    lp = log_probs.transpose(0, 1).gather(2, ext.unsqueeze(1).expand(-1, t_max, -1))  # [N,T,S']
    ninf = float("-inf")
    alpha = torch.where(exists & (torch.arange(ext.shape[1], device=ext.device) < 2),
                        lp[:, 0], ninf)
    alphas = [alpha]
    for t in range(1, t_max):
        prev2 = torch.where(skip, _shift(alpha, 2, ninf), ninf)
        alpha = torch.where(exists, _lse3(alpha, _shift(alpha, 1, ninf), prev2) + lp[:, t], ninf)
        alphas.append(alpha)
    log_alpha = torch.stack(alphas, 1)  # [N, T, S']
    last = log_alpha.gather(1, (il - 1).clamp(min=0).view(n, 1, 1).expand(
        -1, 1, ext.shape[1])).squeeze(1)
    end = (2 * tl).unsqueeze(1)
    a = last.gather(1, end).squeeze(1)
    b = torch.where(tl > 0, last.gather(1, (end - 1).clamp(min=0)).squeeze(1), ninf)
    # an infinite loss stays so under zero_infinity (ctc_loss zeroes it; the backward reads it)
    return -_lse3(a, b, torch.full_like(a, ninf)), log_alpha


def _ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths,
                       neg_log_likelihood, log_alpha, blank, zero_infinity=False):
    """CPU's backward: log beta from each sample's last time, then per time and class
    exp(lp) - exp(log-sum over the states of that class of alpha + beta, + nll - lp), times the
    loss's gradient; 0 past a sample's length, and for an infinite loss under zero_infinity."""
    from . import _C
    if log_probs.dim() != 3 or log_probs.dtype not in (torch.float32, torch.float64):
        return _C.fallback("aten::_ctc_loss_backward", "" if isinstance(
            input_lengths, (list, tuple)) else "Tensor", grad, log_probs, targets, input_lengths,
            target_lengths, neg_log_likelihood, log_alpha, blank, zero_infinity)
    ext, exists, skip, il, tl = _ctc_setup(log_probs, targets, input_lengths, target_lengths,
                                           blank)
    t_max, n, c = log_probs.shape
    sp = ext.shape[1]
    lp = log_probs.transpose(0, 1).gather(2, ext.unsqueeze(1).expand(-1, t_max, -1))
    ninf = float("-inf")
    s = torch.arange(sp, device=ext.device)
    is_end = exists & ((s.unsqueeze(0) == 2 * tl.unsqueeze(1)) |
                       ((s.unsqueeze(0) == 2 * tl.unsqueeze(1) - 1) & (tl > 0).unsqueeze(1)))
    skip_next = torch.cat([skip[:, 2:], torch.zeros_like(skip[:, :2])], 1)  # s -> s + 2 allowed
    beta = torch.full((n, sp), ninf, dtype=log_probs.dtype, device=log_probs.device)
    betas = [None] * t_max
    for t in range(t_max - 1, -1, -1):
        nxt1 = torch.cat([beta[:, 1:], torch.full_like(beta[:, :1], ninf)], 1)
        nxt2 = torch.where(skip_next, torch.cat([beta[:, 2:], torch.full_like(
            beta[:, :2], ninf)], 1), ninf)
        rec = torch.where(exists, _lse3(beta, nxt1, nxt2) + lp[:, t], ninf)
        first = (t == il - 1).unsqueeze(1)
        beta = torch.where(first, torch.where(is_end, lp[:, t], ninf),
                           torch.where((t < il - 1).unsqueeze(1), rec, ninf))
        betas[t] = beta
    ab = log_alpha[:, :t_max, :sp] + torch.stack(betas, 1)  # [N, T, S']
    m = ab.amax(2, keepdim=True)
    m = torch.where(m.isinf(), 0, m)
    summed = torch.zeros(n, t_max, c, dtype=ab.dtype, device=ab.device).scatter_add(
        2, ext.unsqueeze(1).expand(-1, t_max, -1), torch.exp(ab - m))
    lcab = torch.log(summed) + m
    lpt = log_probs.transpose(0, 1)  # [N, T, C]
    nll = neg_log_likelihood.view(n, 1, 1)
    g = (torch.exp(lpt) - torch.exp(lcab + nll - lpt)) * grad.view(n, 1, 1)
    valid = torch.arange(t_max, device=ext.device).unsqueeze(0) < il.unsqueeze(1)
    g = torch.where(valid.unsqueeze(2), g, 0)
    if zero_infinity:
        g = torch.where(neg_log_likelihood.isinf().view(n, 1, 1), 0, g)
    return g.transpose(0, 1)


_SEGMENT_EMPTY = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "max": float("-inf"),
                  "min": float("inf")}


def _segments(data, lengths, offsets, axis):
    """data as [L, N, R] (L the dims before axis, R those after), each position's segment
    [L, N] (S past the last segment) and the segments' lengths [L, S]."""
    if lengths is None:
        lengths = offsets[..., 1:] - offsets[..., :-1]
    axis = axis % data.dim()
    n = data.shape[axis]
    lead = math.prod(data.shape[:axis])
    x = data.reshape(lead, n, -1)
    lens = lengths.reshape(lead, -1).long()
    pos = torch.arange(n, device=data.device).expand(lead, n).contiguous()
    ids = torch.searchsorted(torch.cumsum(lens, 1), pos, right=True)
    return x, ids, lens, axis


def _segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0,
                    unsafe=False, initial=None):
    """CPU's kernel: each segment reduced with the initial value (mean: (initial + sum) / length);
    an empty segment gives the initial value, or 0, 1, -inf, +inf (NaN for mean)."""
    from . import _C
    if indices is not None or reduce not in _SEGMENT_EMPTY or \
            not data.dtype.is_floating_point:
        return _C.fallback("aten::segment_reduce", "", data, reduce, lengths=lengths,
                           indices=indices, offsets=offsets, axis=axis, unsafe=unsafe,
                           initial=initial)
    x, ids, lens, axis = _segments(data, lengths, offsets, axis)
    segs = lens.shape[1]
    start = _SEGMENT_EMPTY[reduce] if initial is None else float(initial)
    base = torch.full((x.shape[0], segs + 1, x.shape[2]), start, dtype=x.dtype, device=x.device)
    at = ids.unsqueeze(2).expand(x.shape)
    if reduce in ("sum", "mean"):
        out = base.scatter_add(1, at, x)
    else:
        out = base.scatter_reduce(1, at, x, {"prod": "prod", "max": "amax", "min": "amin"}[reduce])
    out = out[:, :segs]
    if reduce == "mean":
        n = lens.unsqueeze(2).to(x.dtype)
        empty = float("nan") if initial is None else float(initial)
        out = torch.where(n > 0, out / n.clamp(min=1), empty)
    return out.reshape(data.shape[:axis] + (segs,) + data.shape[axis + 1:])


def _segment_reduce_backward(grad, output, data, reduce, *, lengths=None, offsets=None, axis=0,
                             initial=None):
    """CPU's gradient: sum passes each segment's gradient to its positions, mean over the
    length; max and min share it among the positions equal to the result; prod gives each
    position the product of the others (one zero in a segment: only it gets one)."""
    from . import _C
    if reduce not in _SEGMENT_EMPTY or not data.dtype.is_floating_point:
        return _C.fallback("aten::_segment_reduce_backward", "", grad, output, data, reduce,
                           lengths=lengths, offsets=offsets, axis=axis, initial=initial)
    x, ids, lens, axis = _segments(data, lengths, offsets, axis)
    segs = lens.shape[1]
    at = ids.unsqueeze(2).expand(x.shape)

    def per_position(t):  # [L, S, R] -> [L, N, R], 0 past the segments
        t = torch.cat([t.reshape(x.shape[0], segs, -1), torch.zeros_like(t.reshape(
            x.shape[0], segs, -1)[:, :1])], 1)
        return t.gather(1, at)

    g = per_position(grad)
    if reduce == "mean":
        g = g / per_position(lens.unsqueeze(2).to(x.dtype).clamp(min=1).expand(
            -1, -1, x.shape[2]))
    elif reduce in ("max", "min"):
        hit = (x == per_position(output)) | (x.isnan() & per_position(output).isnan())
        ties = torch.zeros(x.shape[0], segs + 1, x.shape[2], dtype=x.dtype,
                           device=x.device).scatter_add(1, at, hit.to(x.dtype))[:, :segs]
        g = torch.where(hit, g / per_position(ties.clamp(min=1)), 0)
    elif reduce == "prod":
        zero = x == 0
        start = 1.0 if initial is None else float(initial)
        base = torch.full((x.shape[0], segs + 1, x.shape[2]), start, dtype=x.dtype,
                          device=x.device)
        others = base.scatter_reduce(1, at, torch.where(zero, 1, x), "prod")[:, :segs]
        zeros = torch.zeros_like(base).scatter_add(1, at, zero.to(x.dtype))[:, :segs]
        g = torch.where(zero, torch.where(per_position(zeros) == 1, g * per_position(others), 0),
                        g * per_position(output) / x)
    return torch.where((ids < segs).unsqueeze(2), g, 0).reshape(data.shape)


def _own_decompositions():
    aten = torch.ops.aten
    return {aten.mm.dtype: _mm_dtype, aten.mm.dtype_out: _mm_dtype_out,
            aten.bmm.dtype: _bmm_dtype, aten.bmm.dtype_out: _bmm_dtype_out,
            aten.convolution_overrideable.default: _convolution_overrideable,
            aten.convolution_backward_overrideable.default: _convolution_backward_overrideable,
            aten._masked_softmax.default: _masked_softmax,
            aten._scaled_dot_product_efficient_attention.default: _efficient_attention,
            aten._scaled_dot_product_efficient_attention_backward.default:
                _efficient_attention_backward,
            aten._scaled_dot_product_fused_attention_overrideable.default:
                _fused_attention_overrideable,
            aten._scaled_dot_product_fused_attention_overrideable_backward.default:
                _fused_attention_overrideable_backward,
            aten._cdist_forward.default: _cdist_forward,
            aten._cdist_backward.default: _cdist_backward,
            aten._pdist_forward.default: _pdist_forward,
            aten._pdist_backward.default: _pdist_backward,
            aten.multi_margin_loss.default: _multi_margin_loss,
            aten.multi_margin_loss_backward.default: _multi_margin_loss_backward,
            aten.linalg_matrix_exp.default: _matrix_exp,
            aten.segment_reduce.default: _segment_reduce,
            aten._segment_reduce_backward.default: _segment_reduce_backward,
            aten._ctc_loss.default: _ctc_loss,
            aten._ctc_loss.Tensor: _ctc_loss,
            aten._ctc_loss_backward.default: _ctc_loss_backward,
            aten._ctc_loss_backward.Tensor: _ctc_loss_backward,
            aten._embedding_bag.default: _embedding_bag,
            aten._embedding_bag_forward_only.default: _embedding_bag,
            aten._embedding_bag_backward.default: _embedding_bag_backward,
            aten._embedding_bag_per_sample_weights_backward.default:
                _embedding_bag_per_sample_weights_backward,
            aten.histogram.bin_ct: _histogram_bin_ct,
            aten.histogram.bin_ct_out: out_form(_histogram_bin_ct, ("hist", "bin_edges")),
            aten.histogram.bins_tensor: _histogram_bins_tensor,
            aten.histogram.bins_tensor_out: out_form(_histogram_bins_tensor, ("hist", "bin_edges")),
            aten._native_multi_head_attention.default: _native_multi_head_attention,
            aten._transformer_encoder_layer_fwd.default: _transformer_encoder_layer_fwd}


# Ops with a CPU kernel whose torch._decomp decompositions (forward and backward) run in native
# ops and equal CPU on the OpInfo sweep's clean and NaN/inf samples: registered as tpu kernels,
# below autograd, so PyTorch's derivative formulas and tensor subclasses (DTensor) see the ops
# themselves. grid_sampler_2d's decomposition propagates NaN where CPU's kernel skips a corner,
# and bicubic interpolation's has no backward: they stay on CPU.
_CPU_KERNEL_DECOMPOSED = ("smooth_l1_loss", "smooth_l1_loss_backward", "huber_loss",
                          "huber_loss_backward")


def _multi_margin_loss(self, target, p=1, margin=1, weight=None, reduction=1):
    """CPU's kernel: per sample, over the classes d other than the target, the terms
    z = margin - x[target] + x[d] that are > 0 (a NaN term counts nothing), squared for p=2,
    scaled by weight[target], summed and divided by the number of classes. The terms are
    selected before squaring and again after weighting, so neither a NaN term nor an infinite
    weight reaches a sum or a gradient that CPU's kernel never computes."""
    x = self if self.dim() == 2 else self.reshape(1, -1)
    t = target.reshape(-1, 1)
    z = margin - x.gather(1, t) + x
    on, zero = z > 0, torch.zeros((), dtype=z.dtype, device=z.device)
    h = torch.where(on, z, zero)
    if p == 2:
        h = h * h
    if weight is not None:  # an infinite weight only meets the terms CPU computes
        h = torch.where(on, h * weight[t], zero)
    loss = h.scatter(1, t, 0).sum(1) / x.shape[1]
    if reduction == 0:
        return loss if self.dim() == 2 else loss.reshape(target.shape)
    return loss.mean() if reduction == 1 else loss.sum()


def _multi_margin_loss_backward(grad, self, target, p, margin, weight=None, reduction=1):
    """Its gradient, as CPU's kernel: each selected term's derivative (1, or 2z for p=2, times
    weight[target], over the number of classes) added at its class and taken from the target's."""
    x = self if self.dim() == 2 else self.reshape(1, -1)
    t = target.reshape(-1, 1)
    g = grad.reshape(-1, 1) if reduction == 0 else grad / (x.shape[0] if reduction == 1 else 1)
    z = margin - x.gather(1, t) + x
    on, zero = z > 0, torch.zeros((), dtype=z.dtype, device=z.device)
    d = torch.where(on, g * (1.0 if p == 1 else 2 * z) / x.shape[1], zero)
    if weight is not None:
        d = torch.where(on, d * weight[t], zero)
    d = d.scatter(1, t, 0)
    return d.scatter_add(1, t, -d.sum(1, keepdim=True)).reshape(self.shape)


def register():
    global _lib
    from torch._decomp import decomposition_table
    if _lib is not None:
        return
    _lib = torch.library.Library("aten", "IMPL")
    _own = _own_decompositions()
    for op, fn in {**decomposition_table, **_own}.items():
        if not isinstance(op, torch._ops.OpOverload) or op.namespace != "aten":
            continue
        name = op.name()
        own = fn is _own.get(op)
        if not own and (torch._C._dispatch_has_computed_kernel_for_dispatch_key(name, "CPU")
                        or torch._C._dispatch_has_kernel_for_dispatch_key(name, "PrivateUse1")):
            continue
        _lib.impl(op, fn, "PrivateUse1")
        _registered.append(name)
    for op, fn in decomposition_table.items():
        if isinstance(op, torch._ops.OpOverload) and op.name().split("::")[1].split(".")[0] \
                in _CPU_KERNEL_DECOMPOSED:
            _lib.impl(op, fn, "PrivateUse1")
            _registered.append(op.name())
    _registered.sort()


def decomposed_ops():
    """The ops registered here (aten::name.overload)."""
    return list(_registered)
