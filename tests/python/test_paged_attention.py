"""torch_pjrt.paged_attention against attention computed directly, per sequence, on CPU in
float64: a batch mixing a whole prefill, a chunked prefill that continues a cached prefix and
decodes, over blocks scattered through the cache, with padding tokens, GQA, sliding windows,
bfloat16, and the same call compiled."""
import pytest
import torch

import torch_pjrt
from torch_pjrt.paged_attention import kv_cache_shape, paged_attention, write_kv

BLOCK = 4


def reference(q, k, v, q_lens, seq_lens, scale, causal=True, window=None):
    """Per sequence: its new tokens' queries over its whole context (k, v: lists per sequence of
    [len, kv_heads, dim]), float64."""
    outs = []
    at = 0
    for b, (n, total) in enumerate(zip(q_lens, seq_lens)):
        qb = q[at:at + n].double()  # [n, h, d]
        kb, vb = k[b].double(), v[b].double()
        group = qb.shape[1] // kb.shape[1]
        kb, vb = kb.repeat_interleave(group, 1), vb.repeat_interleave(group, 1)
        s = torch.einsum("qhd,khd->hqk", qb, kb) * scale
        qpos = torch.arange(total - n, total)[:, None]
        kpos = torch.arange(total)[None, :]
        seen = torch.ones(n, total, dtype=torch.bool)
        if causal:
            seen &= kpos <= qpos
        if window is not None:
            seen &= kpos > qpos - window
        s = s.masked_fill(~seen, float("-inf"))
        outs.append(torch.einsum("hqk,khd->qhd", s.softmax(-1), vb))
        at += n
    return torch.cat(outs)


def make_batch(q_lens, seq_lens, heads, kv_heads, dim, dtype, pad_tokens=2, seed=0):
    """A cache whose sequences' earlier positions are already written, the new tokens' q/k/v,
    their slots (padding tokens: -1), and the metadata; blocks are shuffled, block 0 unused."""
    g = torch.Generator().manual_seed(seed)
    batch = len(q_lens)
    max_blocks = max(-(-s // BLOCK) for s in seq_lens)
    num_blocks = 1 + sum(-(-s // BLOCK) for s in seq_lens) + 3
    perm = (torch.randperm(num_blocks - 1, generator=g) + 1).tolist()
    table = torch.zeros(batch, max_blocks, dtype=torch.int32)
    cache = torch.randn(kv_cache_shape(num_blocks, BLOCK, kv_heads, dim), generator=g).to(dtype)
    keys, values, slots = [], [], []
    for b, total in enumerate(seq_lens):
        n = -(-total // BLOCK)
        table[b, :n] = torch.tensor([perm.pop() for _ in range(n)], dtype=torch.int32)
        k = torch.randn(total, kv_heads, dim, generator=g).to(dtype)
        v = torch.randn(total, kv_heads, dim, generator=g).to(dtype)
        keys.append(k)
        values.append(v)
        for p in range(total):
            slot = int(table[b, p // BLOCK]) * BLOCK + p % BLOCK
            if p < total - q_lens[b]:  # the cached prefix
                cache[0].view(-1, kv_heads, dim)[slot] = k[p]
                cache[1].view(-1, kv_heads, dim)[slot] = v[p]
            else:
                slots.append(slot)
    new_k = torch.cat([k[-n:] for k, n in zip(keys, q_lens)])
    new_v = torch.cat([v[-n:] for v, n in zip(values, q_lens)])
    tokens = sum(q_lens) + pad_tokens
    q = torch.randn(tokens, heads, dim, generator=g).to(dtype)
    new_k = torch.cat([new_k, torch.randn(pad_tokens, kv_heads, dim, generator=g).to(dtype)])
    new_v = torch.cat([new_v, torch.randn(pad_tokens, kv_heads, dim, generator=g).to(dtype)])
    slot_mapping = torch.tensor(slots + [-1] * pad_tokens, dtype=torch.int64)
    starts = torch.tensor([0] + list(torch.tensor(q_lens).cumsum(0)), dtype=torch.int32)
    meta = dict(block_table=table, seq_lens=torch.tensor(seq_lens, dtype=torch.int32),
                query_start_loc=starts)
    return cache, q, new_k, new_v, slot_mapping, meta, keys, values


CASES = {
    # a whole prefill, a chunk continuing a cached prefix, two decodes
    "mixed": ([7, 3, 1, 1], [7, 12, 9, 1]),
    "decode": ([1, 1, 1], [5, 16, 2]),
    "prefill": ([6, 9], [6, 9]),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("window", [None, 3])
def test_paged_attention_matches_reference(case, window, fresh_stats):
    q_lens, seq_lens = CASES[case]
    heads, kv_heads, dim = 4, 2, 8
    cache, q, k, v, slots, meta, keys, values = make_batch(q_lens, seq_lens, heads, kv_heads, dim,
                                                           torch.float32)
    scale = 0.3
    want = reference(q, keys, values, q_lens, seq_lens, scale, window=window)
    dev = {n: t.to("tpu") for n, t in meta.items()}
    tcache = cache.to("tpu")
    write_kv(k.to("tpu"), v.to("tpu"), tcache, slots.to("tpu"))
    got = paged_attention(q.to("tpu"), tcache, **dev, max_query_len=max(q_lens) + 1, scale=scale,
                          sliding_window=window).cpu()
    n = sum(q_lens)
    torch.testing.assert_close(got[:n].double(), want, rtol=1e-5, atol=1e-5)
    assert torch.equal(got[n:], torch.zeros_like(got[n:]))  # padding tokens
    # The cache holds every sequence's keys where its block table says, and block 0 is untouched.
    flat = tcache.cpu().view(2, -1, kv_heads, dim)
    for b, total in enumerate(seq_lens):
        for p in range(total):
            slot = int(meta["block_table"][b, p // BLOCK]) * BLOCK + p % BLOCK
            assert torch.equal(flat[0, slot], keys[b][p]) and torch.equal(flat[1, slot], values[b][p])
    assert torch.equal(tcache.cpu()[:, 0], cache[:, 0])
    assert not torch_pjrt.stats()["fallbacks"]


def test_paged_attention_bfloat16_and_compiled(fresh_stats, fresh_dynamo):
    q_lens, seq_lens = CASES["mixed"]
    cache, q, k, v, slots, meta, keys, values = make_batch(q_lens, seq_lens, 6, 2, 16,
                                                           torch.bfloat16, seed=1)
    want = reference(q, keys, values, q_lens, seq_lens, 0.25)
    dev = {n: t.to("tpu") for n, t in meta.items()}
    tcache = cache.to("tpu")
    write_kv(k.to("tpu"), v.to("tpu"), tcache, slots.to("tpu"))
    tq = q.to("tpu")
    eager = paged_attention(tq, tcache, **dev, max_query_len=8, scale=0.25)
    assert eager.dtype == torch.bfloat16
    n = sum(q_lens)
    torch.testing.assert_close(eager[:n].cpu().double(), want, rtol=2e-2, atol=2e-2)

    def step(q, cache, table, lens, starts):
        return paged_attention(q, cache, table, lens, starts, max_query_len=8, scale=0.25)

    compiled = torch.compile(step, backend="tpu")(tq, tcache, dev["block_table"], dev["seq_lens"],
                                                  dev["query_start_loc"])
    torch.testing.assert_close(compiled.cpu().float(), eager.cpu().float(), rtol=2e-2, atol=2e-2)
    assert not torch_pjrt.stats()["fallbacks"]


def test_paged_attention_rejects_mismatched_shapes():
    cache = torch.zeros(kv_cache_shape(4, BLOCK, 2, 8), device="tpu")
    table = torch.zeros(2, 2, dtype=torch.int32, device="tpu")
    lens = torch.ones(2, dtype=torch.int32, device="tpu")
    starts = torch.tensor([0, 1, 2], dtype=torch.int32, device="tpu")
    with pytest.raises(ValueError, match="kv heads"):
        paged_attention(torch.zeros(2, 3, 8, device="tpu"), cache, table, lens, starts,
                        max_query_len=1)
    with pytest.raises(ValueError, match="seq_lens"):
        paged_attention(torch.zeros(2, 4, 8, device="tpu"), cache, table, lens[:1], starts,
                        max_query_len=1)
    with pytest.raises(ValueError, match="one slot per token"):
        write_kv(torch.zeros(2, 2, 8, device="tpu"), torch.zeros(2, 2, 8, device="tpu"), cache,
                 torch.zeros(3, dtype=torch.int64, device="tpu"))


def test_decode_loop_settles_and_compiles_nothing():
    """A decode step is programs of the batch's shapes only: steps with new values (every
    sequence one token longer, new slots, the same padded shapes) run cached programs once the
    shape buckets' sites have settled (the second step compiles the exact program of a call its
    site first ran bucketed: write_kv's keys and values are alike but for their offsets), and
    read nothing on the host. Each step's result equals the reference."""
    q_lens, seq_lens = [1, 1, 1], [5, 9, 1]  # room in their blocks for 3 more tokens each
    heads, kv_heads, dim = 4, 2, 8
    cache, q, k, v, slots, meta, keys, values = make_batch(q_lens, seq_lens, heads, kv_heads, dim,
                                                           torch.float32, seed=2)
    tcache = cache.to("tpu")
    table = meta["block_table"].to("tpu")
    starts = meta["query_start_loc"].to("tpu")

    def step(q, k, v, slots, lens):
        write_kv(k, v, tcache, slots)
        return paged_attention(q, tcache, table, lens, starts, max_query_len=1, scale=0.5)

    step(q.to("tpu"), k.to("tpu"), v.to("tpu"), slots.to("tpu"), meta["seq_lens"].to("tpu"))
    g = torch.Generator().manual_seed(3)
    lens = list(seq_lens)
    for n in range(3):
        lens = [s + 1 for s in lens]
        next_slots, new_k, new_v = [], [], []
        for b, total in enumerate(lens):
            block = int(meta["block_table"][b, (total - 1) // BLOCK])
            next_slots.append(block * BLOCK + (total - 1) % BLOCK)
            new_k.append(torch.randn(1, kv_heads, dim, generator=g))
            new_v.append(torch.randn(1, kv_heads, dim, generator=g))
            keys[b] = torch.cat([keys[b], new_k[-1]])
            values[b] = torch.cat([values[b], new_v[-1]])
        q2 = torch.randn(len(q_lens) + 2, heads, dim, generator=g)
        kk = torch.cat(new_k + [torch.zeros(2, kv_heads, dim)])
        vv = torch.cat(new_v + [torch.zeros(2, kv_heads, dim)])
        torch_pjrt.reset_stats()
        got = step(q2.to("tpu"), kk.to("tpu"), vv.to("tpu"),
                   torch.tensor(next_slots + [-1, -1]).to("tpu"),
                   torch.tensor(lens, dtype=torch.int32).to("tpu"))
        stats = torch_pjrt.stats()
        compiles = stats["compiles"] + stats["disk_cache_hits"]
        want = reference(q2, keys, values, q_lens, lens, 0.5)
        torch.testing.assert_close(got.cpu()[:3].double(), want, rtol=1e-5, atol=1e-5)
        if n > 0:
            assert compiles == 0, f"decode step {n + 2} compiled {compiles} programs"
