"""Paged attention as ordinary device programs: the attention a serving engine (vLLM) runs over a
paged KV cache, for a batch mixing prefills (whole or chunked) and decodes, with no per-request
Python loop and no custom kernel. Every step is a torch op with a native tpu lowering, so eager
runs it as programs and torch.compile(backend="tpu") as part of one; on a real TPU a Pallas
kernel (torch_pjrt.kernels) can replace `paged_attention` with the same arguments.

The cache layout (`kv_cache_shape`) is [2, num_blocks, block_size, num_kv_heads, head_size]:
keys, then values; a token's slot is block * block_size + offset in its block. The batch is
described as vLLM's attention metadata describes it: the new tokens of every sequence laid end to
end (`query_start_loc`, B + 1 offsets), each sequence's length including them (`seq_lens`), its
blocks (`block_table`, B x max_blocks, rows padded with any block id) and each new token's slot
(`slot_mapping`; -1 for a padding token, vLLM's PAD_SLOT_ID).
"""
import torch

__all__ = ["kv_cache_shape", "write_kv", "paged_attention"]


def kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size):
    """The shape of the paged KV cache `write_kv` and `paged_attention` take."""
    return (2, num_blocks, block_size, num_kv_heads, head_size)


def write_kv(key, value, kv_cache, slot_mapping):
    """Writes each token's key and value ([T, num_kv_heads, head_size]) into its slot of
    `kv_cache`, in place. A token whose slot is negative (padding) writes nothing: it rewrites
    slot 0 with what slot 0 holds, so slot 0 must belong to no sequence written in the same call
    (vLLM keeps block 0 as its null block, never given to a request)."""
    _, num_blocks, block_size, heads, dim = kv_cache.shape
    if key.shape != value.shape or key.shape[1:] != (heads, dim):
        raise ValueError(f"write_kv: key {tuple(key.shape)} and value {tuple(value.shape)} must "
                         f"both be [tokens, {heads}, {dim}] for a cache of {tuple(kv_cache.shape)}")
    if slot_mapping.shape != key.shape[:1]:
        raise ValueError(f"write_kv: slot_mapping {tuple(slot_mapping.shape)} must give one slot "
                         f"per token ({key.shape[0]})")
    flat = kv_cache.view(2, num_blocks * block_size, heads, dim)
    slots = slot_mapping.long()
    pad = (slots < 0)[:, None, None]
    slots = slots.clamp(min=0)
    for i, new in enumerate((key, value)):
        old = flat[i].index_select(0, slots)
        flat[i].index_copy_(0, slots, torch.where(pad, old, new.to(kv_cache.dtype)))
    return kv_cache


def paged_attention(query, kv_cache, block_table, seq_lens, query_start_loc, *, max_query_len,
                    scale=None, causal=True, sliding_window=None):
    """Attention of the new tokens `query` ([T, num_heads, head_size]) over their sequences'
    cached keys and values (written by `write_kv`, the new tokens' included); returns
    [T, num_heads, head_size] in the query's dtype.

    Sequence b owns tokens query_start_loc[b] to query_start_loc[b + 1] of the batch, which are its
    last positions: the first of them sits at seq_lens[b] minus their count. A token attends to
    its sequence's positions up to its own (`causal`) and, with `sliding_window` w, to the last w
    of those only (its own included). Tokens past query_start_loc[-1] (padding) get zeros.
    `max_query_len` (a Python int, at least the longest sequence's new tokens) fixes the padded
    layout's shape: a serving engine passes a bucket so that steps of different batches share
    programs. Grouped-query attention: num_heads is a multiple of num_kv_heads. Scores and
    softmax are computed in float32 (or float64 for float64 inputs)."""
    tokens, heads, dim = query.shape
    _, num_blocks, block_size, kv_heads, kv_dim = kv_cache.shape
    batch, max_blocks = block_table.shape
    if kv_dim != dim or heads % kv_heads:
        raise ValueError(f"paged_attention: query {tuple(query.shape)} does not match a cache of "
                         f"{kv_heads} kv heads of size {kv_dim} (heads must be a multiple)")
    if seq_lens.shape != (batch,) or query_start_loc.shape != (batch + 1,):
        raise ValueError(f"paged_attention: {batch} sequences need seq_lens of shape ({batch},) "
                         f"and query_start_loc of shape ({batch + 1},); got "
                         f"{tuple(seq_lens.shape)} and {tuple(query_start_loc.shape)}")
    group, q_max, ctx = heads // kv_heads, int(max_query_len), max_blocks * block_size
    scale = dim ** -0.5 if scale is None else scale
    math = torch.float64 if query.dtype == torch.float64 else torch.float32
    dev = query.device
    starts = query_start_loc.long()
    lens = seq_lens.long()
    q_lens = starts[1:] - starts[:-1]

    # Each token's sequence and place among its new tokens: its row of the padded layout
    # [batch, q_max]; padding tokens go to one spare row past the end.
    tok = torch.arange(tokens, device=dev)
    seq = torch.searchsorted(starts[1:].contiguous(), tok, right=True).clamp(max=batch - 1)
    real = tok < starts[-1]
    row = torch.where(real, seq * q_max + tok - starts[seq], batch * q_max)
    padded = query.new_zeros(batch * q_max + 1, heads, dim).index_copy_(0, row, query)
    q = padded[:-1].view(batch, q_max, kv_heads, group, dim).permute(0, 2, 3, 1, 4)
    q = q.reshape(batch, kv_heads, group * q_max, dim).to(math)

    # The sequences' keys and values in position order: [batch, ctx, kv_heads, dim].
    blocks = block_table.long().reshape(-1)
    k = kv_cache[0].index_select(0, blocks).view(batch, ctx, kv_heads, dim)
    v = kv_cache[1].index_select(0, blocks).view(batch, ctx, kv_heads, dim)
    scores = torch.matmul(q, k.permute(0, 2, 3, 1).to(math)) * scale  # [b, kvh, g*q, ctx]
    scores = scores.view(batch, kv_heads, group, q_max, ctx)

    # Which positions each padded query row sees.
    q_pos = (lens - q_lens)[:, None] + torch.arange(q_max, device=dev)[None, :]  # [b, q]
    k_pos = torch.arange(ctx, device=dev)
    seen = (k_pos[None, None, :] < lens[:, None, None]).expand(batch, q_max, ctx)
    if causal:
        seen = seen & (k_pos[None, None, :] <= q_pos[:, :, None])
    if sliding_window is not None:
        seen = seen & (k_pos[None, None, :] > q_pos[:, :, None] - int(sliding_window))
    # A row that sees nothing (a padding row) gets uniform weights rather than NaNs.
    scores = scores.masked_fill(~seen[:, None, None], torch.finfo(math).min)
    probs = torch.softmax(scores, dim=-1).view(batch, kv_heads, group * q_max, ctx)
    out = torch.matmul(probs, v.permute(0, 2, 1, 3).to(math))  # [b, kvh, g*q, dim]
    out = out.view(batch, kv_heads, group, q_max, dim).permute(0, 3, 1, 2, 4)
    out = out.reshape(batch * q_max, heads, dim).to(query.dtype)
    picked = out.index_select(0, torch.where(real, row, 0))
    return torch.where(real[:, None, None], picked, torch.zeros((), dtype=query.dtype, device=dev))
