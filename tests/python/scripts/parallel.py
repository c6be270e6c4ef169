"""One rank of the parallelism test, or all of them: as WORLD_SIZE processes (RANK, MASTER_ADDR,
MASTER_PORT set; the host transport) or, with --threads N, N ranks as threads of one process on
tpu:0..N-1 (the device transport). DTensor on a tpu device mesh, FSDP2's fully_shard, tensor parallelism, a compiled DDP
model and functional collectives (eager and compiled), each against the same computation in one
process on CPU. Prints one JSON line (a list, one per rank,
for threads)."""
import copy
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import torch_pjrt  # registers tpu and its c10d backend


def main(rank, world):
    mesh = init_device_mesh("tpu", (world,))
    results = {}

    def close(a, b, tol=1e-5):
        return torch.allclose(a.detach().cpu(), b.detach(), atol=tol, rtol=tol)

    def mlp():
        net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
        init = torch.Generator().manual_seed(0)  # not the global generator: ranks may be threads
        with torch.no_grad():
            for p in net.parameters():
                p.copy_(torch.randn(p.shape, generator=init) * 0.3)
        return net

    def batches(n=2):
        g = torch.Generator().manual_seed(1)
        return [(torch.randn(4 * world, 6, generator=g), torch.randn(4 * world, 4, generator=g)) for _ in range(n)]

    def reference():
        ref = mlp()
        opt = torch.optim.SGD(ref.parameters(), lr=0.1)
        for x, y in batches():
            opt.zero_grad()
            torch.nn.functional.mse_loss(ref(x), y).backward()
            opt.step()
        return ref

    REF = reference()
    MINE = slice(4 * rank, 4 * rank + 4)

    # DTensor: shard, redistribute, gather back.
    full = torch.arange(24.).reshape(4, 6)
    d = distribute_tensor(full.to("tpu"), mesh, [Shard(0)])
    results["dtensor_shard"] = d.to_local().device.type == "tpu" and tuple(d.to_local().shape) == (4 // world, 6)
    results["dtensor_redistribute"] = torch.equal(d.redistribute(mesh, [Replicate()]).to_local().cpu(), full)
    results["dtensor_full_tensor"] = torch.equal(d.full_tensor().cpu(), full)
    results["dtensor_sum"] = torch.equal((d * 2).sum().full_tensor().cpu(), (full * 2).sum())

    # FSDP2: each layer and the root sharded; every rank trains on its part of the batch.
    model = mlp().to("tpu")
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in batches():
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x[MINE].to("tpu")), y[MINE].to("tpu")).backward()
        opt.step()
    results["fsdp2"] = all(close(p.full_tensor(), q) for p, q in zip(model.parameters(), REF.parameters()))

    # Tensor parallel: the first Linear split by columns, the second by rows; every rank sees the
    # whole batch, as in one process.
    tp = parallelize_module(mlp().to("tpu"), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    opt = torch.optim.SGD(tp.parameters(), lr=0.1)
    for x, y in batches():
        opt.zero_grad()
        torch.nn.functional.mse_loss(tp(x.to("tpu")), y.to("tpu")).backward()
        opt.step()
    results["tensor_parallel"] = all(close(p.full_tensor(), q) for p, q in zip(tp.parameters(), REF.parameters()))

    # A compiled DDP model.
    ddp = torch.nn.parallel.DistributedDataParallel(mlp().to("tpu"))
    compiled = torch.compile(ddp, backend="tpu")
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    for x, y in batches():
        opt.zero_grad()
        torch.nn.functional.mse_loss(compiled(x[MINE].to("tpu")), y[MINE].to("tpu")).backward()
        opt.step()
    results["compiled_ddp"] = all(close(p, q) for p, q in zip(ddp.module.parameters(), REF.parameters()))

    # Functional collectives, eager and inside compiled functions. On the device transport the
    # compiled ones are lowered into the graph's program, run once over every rank's device;
    # on the host transport the graph splits around them.
    from torch_pjrt import compile as tpc
    W = dist.group.WORLD
    t = torch.full((3,), float(rank + 1), device="tpu")
    results["funcol_eager"] = torch.equal(funcol.all_reduce(t, "sum", W).cpu(),
                                          torch.full((3,), world * (world + 1) / 2))

    def f(x):
        y = funcol.all_reduce(x * 2, "sum", W)
        return funcol.all_gather_single(y + 1, 0, W).sum()

    results["funcol_compiled"] = torch.equal(torch.compile(f, backend="tpu")(t).cpu(), f(t).cpu())

    def every(x):
        return (funcol.all_reduce(x, "sum", W), funcol.all_reduce(x, "avg", W),
                funcol.all_reduce(x, "max", W), funcol.all_reduce(x.int(), "min", W),
                funcol.all_gather_single(x, 0, W), funcol.reduce_scatter_single(x, "sum", 0, W),
                funcol.all_to_all_single(x, None, None, W), funcol.broadcast(x, world - 1, W))

    x = (torch.arange(4. * world * 3).reshape(4 * world, 3) * (rank + 1) - 5).to("tpu")
    got = torch.compile(every, backend="tpu")(x)
    split = any(k.startswith("_c10d_functional") for k in tpc.stats()["splits"])
    results["funcol_every_collective_compiled"] = all(
        torch.equal(a.cpu(), b.cpu()) for a, b in zip(got, every(x)))
    on_device = torch_pjrt.distributed.transport() == "device"
    results["funcol_lowered_on_device_split_on_host"] = split != on_device

    # A tensor-parallel MLP compiled, forward and backward: its collectives (DTensor's) lowered.
    tp = parallelize_module(mlp().to("tpu"), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    ref = mlp()
    xb, yb = batches(1)[0]
    torch.nn.functional.mse_loss(ref(xb), yb).backward()
    ctp = torch.compile(tp, backend="tpu")
    loss = torch.nn.functional.mse_loss(ctp(xb.to("tpu")), yb.to("tpu"))
    loss.backward()
    results["compiled_tensor_parallel"] = close(loss, torch.nn.functional.mse_loss(ref(xb), yb)) and all(
        close(p.grad.full_tensor(), q.grad) for p, q in zip(tp.parameters(), ref.parameters()))

    # PyTorch's own tensor-parallel test Transformer (its parallelize: vocabulary-parallel
    # embedding, attention split by heads, optionally sequence parallel), forward and backward,
    # eager and compiled (dropout off, to compare). Its causal attention runs the kernel DTensor
    # shards by heads. Compiled with static shapes: this process has compiled other modules, so
    # Dynamo would make the length symbolic, and then SDPA takes its math path
    # (csrc/torch/sdpa.cpp says why), which DTensor cannot run with a causal mask.
    from torch.testing._internal.distributed._tensor.common_dtensor import ModelArgs, Transformer
    args = ModelArgs(dropout_p=0.0)
    init = torch.Generator().manual_seed(2)
    ref = Transformer(args)
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(torch.randn(p.shape, generator=init) * 0.2)
    tokens = torch.randint(0, args.vocab_size, (2, 8), generator=init)
    ref(tokens).sum().backward()
    full = lambda t: t.full_tensor() if hasattr(t, "full_tensor") else t
    for name, seq, compiled in (("", False, False), ("_sequence_parallel", True, False),
                                ("_compiled", False, True)):
        tp = Transformer.parallelize(copy.deepcopy(ref).to("tpu"), mesh, use_seq_parallel=seq)
        loss = (torch.compile(tp, backend="tpu", dynamic=False) if compiled else tp)(tokens.to("tpu")).sum()
        loss.backward()
        results["transformer_tensor_parallel" + name] = close(full(loss), ref(tokens).sum(), 1e-4) and all(
            close(full(p.grad), q.grad, 1e-4) for p, q in zip(tp.parameters(), ref.parameters()))
    # Training with attention dropout (ModelArgs' default 0.1): the kernel's own dropout,
    # sharded by heads like the rest; its masks are random, so only finite results are checked.
    drop = copy.deepcopy(ref)
    drop.zero_grad(set_to_none=True)
    for m in drop.modules():
        if hasattr(m, "dropout_p"):
            m.dropout_p = 0.1
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.1
    drop = Transformer.parallelize(drop.to("tpu"), mesh, use_seq_parallel=False)
    loss = drop(tokens.to("tpu")).sum()
    loss.backward()
    results["transformer_tensor_parallel_dropout"] = bool(full(loss).isfinite()) and all(
        bool(full(p.grad).isfinite().all()) for p in drop.parameters())
    # 2-D parallelism on 4 ranks: the Transformer tensor parallel (sequence parallel) over one
    # mesh dim and FSDP2 over the other, each data-parallel rank on half of the batch.
    if world == 4:
        mesh2 = init_device_mesh("tpu", (2, 2), mesh_dim_names=("dp", "tp"))
        batch = torch.randint(0, args.vocab_size, (4, 8), generator=init)
        ref.zero_grad()
        ref(batch).sum().backward()
        m = Transformer.parallelize(copy.deepcopy(ref).to("tpu"), mesh2["tp"], use_seq_parallel=True)
        for layer in m.layers:
            fully_shard(layer, mesh=mesh2["dp"])
        fully_shard(m, mesh=mesh2["dp"])
        half = slice(2 * mesh2["dp"].get_local_rank(), 2 * mesh2["dp"].get_local_rank() + 2)
        m(batch[half].to("tpu")).sum().backward()
        # FSDP averages over the 2 data-parallel ranks; the reference summed the whole batch.
        results["fsdp2_and_tensor_parallel_2d"] = all(
            close(full(p.grad) * 2, q.grad, 1e-4) for p, q in zip(m.parameters(), ref.parameters()))
    # Context parallelism: PyTorch's ring attention over the sequence, which merges the kernel's
    # per-block outputs by their log-sum-exp and hands its backward the whole row's (blocks of
    # 32 positions: the kernel's log-sum-exp is padded to 32, as CUDA's).
    from torch.distributed.tensor.experimental import context_parallel
    from torch.distributed.tensor.experimental._attention import context_parallel_unshard
    q, k, v = (torch.randn(1, 2, 64 * world, 8, generator=init) for _ in range(3))
    w = torch.linspace(0.5, 1.5, 8, requires_grad=True)
    expected = torch.nn.functional.scaled_dot_product_attention(q * w, k, v, is_causal=True)
    expected.sum().backward()
    qt, kt, vt = (t.to("tpu") for t in (q, k, v))
    wt = w.detach().to("tpu").requires_grad_()
    # No sdpa_kernel(...) here: its flags are process-wide, and rank threads entering and
    # leaving it race (a rank computing `expected` on CPU found every backend disabled).
    # tpu picks the efficient kernel by itself.
    with context_parallel(mesh, buffers=[qt, kt, vt], buffer_seq_dims=[2, 2, 2]):
        got = torch.nn.functional.scaled_dot_product_attention(qt * wt, kt, vt, is_causal=True)
        got.sum().backward()
    dist.all_reduce(wt.grad)
    results["context_parallel"] = close(context_parallel_unshard(mesh, [got.detach()], [2])[0],
                                        expected) and close(wt.grad, w.grad, 1e-4)
    # Each rank traces its own embedding rows into its graph: on the device transport the ranks'
    # programs differ, so they run split around their collectives, not op by op.
    results["transformer_compiled_runs_as_programs"] = \
        "partition that failed to build" not in tpc.stats()["splits"]
    return results


if __name__ == "__main__":
    if sys.argv[1:2] == ["--threads"]:
        n = int(sys.argv[2])
        print(json.dumps(torch_pjrt.distributed.run_threads(main, n, args=(n,))))
    else:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        dist.init_process_group(init_method="env://", rank=rank, world_size=world)
        results = main(rank, world)
        dist.destroy_process_group()
        print(json.dumps(results))
