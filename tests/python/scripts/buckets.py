"""Shape-bucket cases for tests/python/test_buckets.py: each case is a function of a size n, run
over sizes that cross bucket boundaries (the same sequence of calls each time, as a model's
forward repeats), on the device named by argv[1] ("tpu" or "cpu"). Saves {case: [result per size]}
(CPU tensors) to argv[2] with torch.save, and prints torch_pjrt's stats as JSON on tpu.

    python buckets.py tpu out.pt [sizes, comma-separated]
"""
import json
import sys

import torch
import torch.nn.functional as F

SIZES = [1, 2, 3, 5, 8, 15, 16, 17, 31, 32, 33, 0, 2, 17]


def inputs(n, device, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, n, 8, generator=g)
    if n > 2:  # non-finite values at live positions: padding must not hide or add them
        x[0, 1, 3] = float("inf")
        x[1, n - 1, 0] = float("nan")
        x[1, 0, 5] = float("-inf")
    return x.to(device), torch.randn(2, n, 8, generator=g).to(device)


def case_elementwise(n, dev):
    x, y = inputs(n, dev, 1)
    b = torch.arange(8.0, device=dev) / 4
    return [(x * 2 + b).relu(), torch.where(x > 0, x, y), x.exp(), torch.sigmoid(y) - y, x / 3,
            (x > y) & (y > 0), x.to(torch.float64), -(y * 4).to(torch.int32).clamp(-5, 5)]


def case_inplace(n, dev):
    x, y = inputs(n, dev, 2)
    z = y.clone()
    z.add_(1.5)
    z.mul_(y)
    z.copy_(z * 2)
    return [z]


def case_strided(n, dev):
    x, y = inputs(n, dev, 3)
    t = y.transpose(1, 2)  # a non-contiguous input
    return [t * 3, (t + 1).contiguous(), y[:, ::2] * 2, y.permute(2, 0, 1).exp()]


def case_matmul(n, dev):
    x, y = inputs(n, dev, 4)
    g = torch.Generator().manual_seed(40)
    w = torch.randn(8, 6, generator=g).to(dev)
    bias = torch.randn(6, generator=g).to(dev)
    rows = y.reshape(-1, 8)
    return [rows @ w, torch.addmm(bias, rows, w), F.linear(y, w.t(), bias), y.transpose(1, 2) @ y]


def case_attention(n, dev):
    x, y = inputs(n, dev, 5)
    q, k = y, y * 0.5
    s = q @ k.transpose(1, 2) / 3  # [2, n, n]: padded in two dims
    p = torch.softmax(s, -1)
    return [s, p, torch.log_softmax(s, -1), p @ y, F.scaled_dot_product_attention(q, k, y)]


def case_norm(n, dev):
    x, y = inputs(n, dev, 6)
    w = torch.linspace(0.5, 1.5, 8, device=dev)
    return [F.layer_norm(y, (8,), w, w / 2), torch.softmax(y, -1)]


def case_reduce(n, dev):
    x, y = inputs(n, dev, 7)
    xi = (y * 10).to(torch.int64)
    out = [y.sum(1), y.sum(-1), y.cumsum(1), (y > 0).all(1), (y > 0).any(1), y.mean(1), xi.sum(1),
           (y.abs() + 0.5).prod(1), x.sum(1), torch.logsumexp(y, 1), torch.logsumexp(y > 0, 1)]
    if n:  # no maximum of nothing
        out += [y.amax(1), y.amin(1), xi.amax(1), xi.amin(1), x.amax(1), y.argmax(1), y.argmin(1),
                y.max(1).values]
    return out


def case_views_of_bucketed(n, dev):
    x, y = inputs(n, dev, 8)
    z = y * 2  # a bucketed result, read below through views an exact program takes
    out = [z[:, :1] + 1, z[:, -1:] * 3, z.reshape(-1)[:5] - 1, z.sum()]
    s = (y + 1).untyped_storage()
    return out + [torch.tensor(s.nbytes())]


def case_cat(n, dev):
    x, y = inputs(n, dev, 10)
    ids = torch.arange(n, device=dev).reshape(1, n)
    grown = torch.cat([ids, ids[:, -1:] + 1], 1) if n else ids  # generate's ids, one token on
    return [torch.cat([x, y], 1), torch.cat([y, x[:, :1], x], 1), torch.cat([x, y], 2),
            torch.cat([torch.empty(0, device=dev), y], 1), torch.cat([x.flatten(), y[0, :, 0]]),
            grown, torch.cat([y.to(torch.int64), (x > 0).to(torch.int64)], 1)]


def case_moved_views(n, dev):
    # Views whose sizes stay but whose offset or storage changes with n: an exact program per n.
    x, y = inputs(n + 1, dev, 11)
    base = torch.arange(64.0 + n, device=dev)
    return [base[n:n + 3] * 2, base[-1:] + 1, y[:, -1] - 1, y[1, n] * 3, (x[:, -1:] > 0).all(-1)]


def case_index(n, dev):
    x, y = inputs(n, dev, 12)
    g = torch.Generator().manual_seed(120)
    table = torch.randn(16, 8, generator=g).to(dev)
    idx = torch.arange(n, device=dev).remainder(16).flip(0)
    ids = (torch.arange(n, device=dev) * 7).remainder(11).reshape(1, n)
    s = y @ y.transpose(1, 2)  # [2, n, n]
    mask = torch.ones(n, n, dtype=torch.bool, device=dev)
    return [table.index_select(0, idx), F.embedding(idx, table), y.masked_fill(y > 0.5, -2.0),
            ids.masked_fill(ids == 3, 0), torch.tril(s), torch.triu(s, 1), torch.tril(mask),
            torch.tril(s, -2), torch.isin(ids, torch.tensor([3, 5, 7], device=dev)),
            torch.isin(ids, torch.tensor([1, 2], device=dev), invert=True)]


def case_partial_writes(n, dev):
    # Writes into part of a storage (a static cache, a padded copy of an input): the live
    # positions land in the storage, the rest of it keeps its values, padding writes nothing.
    x, y = inputs(n, dev, 13)
    cache = torch.full((2, 80, 8), 7.0, device=dev)
    cache[:, :n] = y  # copy into a slice whose length changes
    cache[:, n + 1:2 * n + 1:2].add_(x.nan_to_num(0.0)[:, :(n + 1) // 2 if n else 0])
    cols = torch.zeros(8, 40, device=dev)
    cols[:, :n].copy_(y[0].t())  # a transposed source into a strided view
    step = torch.zeros(2, 40, 8, device=dev)
    step[:, n] = y[:, -1] if n else 1.0  # a select at a moving offset
    kv = torch.full((1, 2, 40, 4), -1.0, device=dev)
    pos = torch.arange(n, device=dev).flip(0) + 3
    kv.index_copy_(2, pos, y[:, :, :4].unsqueeze(0))
    return [cache, cols, step, kv]


def case_arange(n, dev):
    # A creation op whose size is a value: its output is padded where that size changes.
    return [torch.arange(n, device=dev), torch.arange(3, n + 3, device=dev) * 2,
            torch.arange(0.0, n * 0.5, 0.5, device=dev), torch.arange(n, 0, -1, device=dev),
            torch.arange(n, dtype=torch.float32, device=dev).view(1, n, 1) + torch.ones(2, n, 3, device=dev)]


def case_backward(n, dev):
    x, y = inputs(n, dev, 9)
    g = torch.Generator().manual_seed(90)
    w1 = torch.randn(8, 16, generator=g).to(dev).requires_grad_()
    w2 = torch.randn(16, 4, generator=g).to(dev).requires_grad_()
    h = torch.relu(y @ w1)
    loss = torch.softmax(h @ w2, -1).sum(1).pow(2).sum() + F.layer_norm(h, (16,)).sum()
    loss.backward()
    return [loss.detach(), w1.grad, w2.grad]


def case_per_sample(n, dev):
    # Ops that compute each sample from the same sample, over a batch of n: padded in the batch.
    x, y = inputs(n, dev, 14)
    g = torch.Generator().manual_seed(140)
    img = torch.randn(n, 3, 6, 6, generator=g).to(dev)
    w = torch.randn(4, 3, 3, 3, generator=g).to(dev)
    logits = y[:, :, :5].reshape(-1, 5)  # [2n, 5]
    target = (torch.arange(2 * n, device=dev) * 3).remainder(5)
    target[::3] = -100  # ignored samples count nowhere, padded ones neither
    out = [y.var(1), y.mean((0, 1))]  # var's count: exact programs
    if n:  # no mean or maximum of nothing (and no pooling of an empty batch: CPU's)
        out += [F.conv2d(img, w, padding=1), F.max_pool2d(img, 2), F.avg_pool2d(img, 3, 1),
                F.adaptive_avg_pool2d(img, 2), F.cross_entropy(logits, target),
                F.cross_entropy(logits, target, reduction="sum"),
                y.argmax()]  # an index over several padded dims: exact programs
    return out


CASES = {k[5:]: v for k, v in globals().items() if k.startswith("case_")}
# Results that may differ from exact shapes in the last bits: float sums over a padded dim (padding
# adds zeros, but the order of the additions follows the bucket's size: sums, means, losses),
# convolutions and pooling (XLA's CPU kernels tile by the batch), and exp (softmax), which the CPU
# plugin computes vectorized or element by element depending on the buffer's size, an ulp apart on
# some CPUs; all others are bitwise.
INEXACT = {"matmul": {0, 1, 2, 3}, "attention": {0, 1, 2, 3, 4}, "reduce": {0, 5, 7, 8, 9}, "norm": {1},
           "per_sample": {0, 1, 2, 3, 4, 5, 6, 7},  # var, mean, conv, pools, losses
           "views_of_bucketed": {3}, "backward": {0, 1, 2}, "index": {4, 5, 7}}


def main():
    dev, path = sys.argv[1], sys.argv[2]
    sizes = [int(s) for s in sys.argv[3].split(",")] if len(sys.argv) > 3 else SIZES
    if dev == "tpu":
        import torch_pjrt
        torch_pjrt.reset_stats()
    results = {name: [] for name in CASES}
    for n in sizes:
        for name, fn in CASES.items():
            results[name].append([t.detach().cpu() for t in fn(n, dev)])
    torch.save({"sizes": sizes, "results": results}, path)
    if dev == "tpu":
        s = torch_pjrt.stats()
        print(json.dumps({k: s[k] for k in ("compiles", "compiles_bucketed", "bucketed_calls",
                                            "compiles_new_shape")} | {"fallbacks": s["fallbacks"]}))


if __name__ == "__main__":
    main()
