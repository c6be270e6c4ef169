"""View patterns for tests/python/test_view_programs.py: each is run on tpu with
TORCH_PJRT_DUMP_DIR set (a fresh process, disk cache and shape buckets off, so every program is
compiled and dumped) and on CPU. Prints JSON: per pattern, the programs it compiled (their
texts' file names) and whether tpu's result equals CPU's bit for bit.

    TORCH_PJRT_DUMP_DIR=d python view_programs.py
"""
import json
import os

import torch


def base(*shape, dtype=torch.float32):
    n = 1
    for s in shape:
        n *= s
    # Small integers: sums and products are exact, so results compare bit for bit.
    return (torch.arange(n).reshape(shape) % 17 - 8).to(dtype)


# name -> (how the pattern makes its view of x, x's shape)
VIEWS = {
    "expand": (lambda x: x[:, :1].expand(-1, 7, -1), (5, 7, 6)),
    "expand_new_dim": (lambda x: x.unsqueeze(0).expand(3, -1, -1, -1), (5, 7, 6)),
    "strided_slice": (lambda x: x[:, ::2, 1::3], (5, 7, 6)),
    "diagonal": (lambda x: x.diagonal(0, 1, 2), (5, 7, 7)),
    "diagonal_offset": (lambda x: x.diagonal(2, -2, -1), (5, 7, 7)),
    "unfold": (lambda x: x.unfold(2, 3, 4), (5, 7, 11)),
    "unfold_overlapping": (lambda x: x.unfold(2, 3, 1), (5, 7, 9)),
    "unfold_2d_patches": (lambda x: x.unfold(1, 3, 2).unfold(2, 3, 2), (4, 9, 11)),
    "permute": (lambda x: x.permute(2, 0, 1), (5, 7, 6)),
    "transpose_last": (lambda x: x.transpose(-1, -2), (5, 7, 6)),
    "select": (lambda x: x.select(1, 3), (5, 7, 6)),
    "select_last": (lambda x: x[..., 2], (5, 7, 6)),
    "flip_of_slice": (lambda x: x[:, 1:6].flip(1), (5, 7, 6)),
    "as_strided_overlapping": (lambda x: x.as_strided((5, 4), (2, 3), 1), (5, 7, 6)),
    "composition": (lambda x: x.permute(2, 0, 1)[1::2, :, 2:].diagonal(0, 1, 2).t(), (5, 7, 6)),
    "composition_expand": (lambda x: x[:, ::3].transpose(0, 1)[:, None].expand(-1, 4, -1, -1),
                           (5, 7, 6)),
}
# How each view is read: materialized, consumed by an elementwise op, a reduction, a matmul.
READS = {
    "contiguous": lambda v: v.contiguous(),
    "elementwise": lambda v: v * 2 + 1,
    "reduction": lambda v: v.sum(-1),
    "matmul": lambda v: v @ torch.ones(v.shape[-1], 3, dtype=v.dtype, device=v.device),
}
# Writes through a view: in place and by copy_.
WRITES = {
    "fill_strided": (lambda x: x[:, ::2, 1::3].fill_(3), (5, 7, 6)),
    "add_transposed": (lambda x: x.transpose(0, 2).add_(1), (5, 7, 6)),
    "mul_diagonal": (lambda x: x.diagonal(0, 1, 2).mul_(-2), (5, 7, 7)),
    "copy_into_select": (lambda x: x.select(1, 3).copy_(torch.ones(5, 6, device=x.device)), (5, 7, 6)),
    "setitem_strided": (lambda x: x[:, 1::2].copy_(x[:, :3].flip(1)), (5, 7, 6)),
}
# Irregular: overlapping past what slices can unroll; a gather is expected (the check's control).
IRREGULAR = {"as_strided_wide_overlap": (lambda x: x.reshape(-1).as_strided((70, 70), (1, 1)),
                                         (5, 7, 6))}


def run(dev, dump):
    out = {}

    def one(name, fn):
        before = set(os.listdir(dump)) if dump else set()
        r = fn()
        if dev == "tpu":
            torch.tpu.synchronize()
        out[name] = (r.cpu(), sorted(set(os.listdir(dump)) - before) if dump else [])

    for vname, (view, shape) in VIEWS.items():
        for rname, read in READS.items():
            if rname == "matmul" and vname == "select_last":
                continue
            one(f"{vname}/{rname}", lambda: read(view(base(*shape).to(dev))))
    for wname, (write, shape) in WRITES.items():
        def w(write=write, shape=shape):
            x = base(*shape).to(dev)
            write(x)
            return x
        one(f"write/{wname}", w)
    for iname, (view, shape) in IRREGULAR.items():
        one(f"irregular/{iname}", lambda: view(base(*shape).to(dev)).contiguous())
    return out


def main():
    dump = os.environ["TORCH_PJRT_DUMP_DIR"]
    tpu = run("tpu", dump)
    cpu = run("cpu", None)
    report = {}
    for name, (r, files) in tpu.items():
        c = cpu[name][0]
        report[name] = {"files": files, "equal": r.dtype == c.dtype and r.shape == c.shape and
                        torch.equal(r, c)}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
