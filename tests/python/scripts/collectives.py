"""One rank of the collectives test, or all of them. As a process: run as WORLD_SIZE processes
(RANK, MASTER_ADDR, MASTER_PORT set; the host transport). With --threads N: N ranks as threads of
one process on tpu:0..N-1 (torch_pjrt.distributed.run_threads; the device transport). Each
collective on tpu tensors through the default backend is checked against the same collective of
gloo on CPU tensors; prints one JSON line of results (a list of them, one per rank, for threads)."""
import copy
import json
import os
import sys

import torch
import torch.distributed as dist

import torch_pjrt


def main(rank, world, transport):
    """The checks on this rank, the default process group initialized; |transport| is the one
    the default group must use."""
    cpu_group = dist.new_group(backend="gloo")
    results = {"backend": dist.get_backend_config(),
               # what code that branches on the name reads (nccl under CUDA): pjrt, for a group
               # made with no backend too; a mixed group keeps its own name
               "get_backend named": dist.get_backend() == (os.environ.get("BACKEND") or "pjrt")}

    def data(*shape, seed=0):
        g = torch.Generator().manual_seed(seed * 100 + rank)
        return torch.randn(*shape, generator=g)

    def check(name, fn):
        """fn(device, group) -> tensor or list of tensors; tpu through the default group, CPU through
        gloo."""
        got, want = fn("tpu", None), fn("cpu", cpu_group)
        got = [got] if torch.is_tensor(got) else got
        want = [want] if torch.is_tensor(want) else want
        ok = all(g.device.type == "tpu" and torch.allclose(g.cpu(), w, atol=1e-6) for g, w in zip(got, want))
        results[name] = ok

    for op in ("SUM", "MIN", "MAX", "PRODUCT"):
        def ar(dev, grp, op=op):
            t = data(3, 4).to(dev)
            dist.all_reduce(t, op=getattr(dist.ReduceOp, op), group=grp)
            return t
        check(f"all_reduce_{op}", ar)

    for op in ("SUM", "MAX"):
        def ar_large(dev, grp, op=op):  # 8 MiB and a remainder: the scatter-gather form
            t = data((2 << 20) + 3, seed=15).to(dev)
            dist.all_reduce(t, op=getattr(dist.ReduceOp, op), group=grp)
            return t
        check(f"all_reduce_8MiB_{op}", ar_large)

    def ar_avg(dev, grp):
        t = data(5).to(dev)
        if dev == "cpu":  # gloo has no AVG: the reference is SUM / world
            dist.all_reduce(t, group=grp)
            return t / world
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        return t

    check("all_reduce_AVG", ar_avg)

    def ar_premul(dev, grp):
        t = data(5, seed=13).to(dev)
        if dev == "cpu":  # gloo has no PREMUL_SUM: the reference is SUM of the scaled tensors
            t.mul_(0.5)
            dist.all_reduce(t, group=grp)
            return t
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
        return t

    check("all_reduce_PREMUL_SUM", ar_premul)

    def ar_int(dev, grp):
        t = (data(7, seed=14) * 100).long().to(dev)
        dist.all_reduce(t, group=grp)
        return t

    check("all_reduce_int64", ar_int)

    def bc(dev, grp):
        t = data(6, seed=1).to(dev)
        dist.broadcast(t, src=1, group=grp)
        return t

    check("broadcast", bc)

    def rd(dev, grp):
        t = data(4, seed=2).to(dev)
        dist.reduce(t, dst=0, group=grp)
        # Only the destination's tensor is defined afterwards (gloo overwrites the others' inputs,
        # NCCL and this backend leave them).
        return t if rank == 0 else data(4, seed=2).to(dev)

    check("reduce", rd)

    def ag(dev, grp):
        outs = [torch.empty(3, device=dev) for _ in range(world)]
        dist.all_gather(outs, data(3, seed=3).to(dev), group=grp)
        return outs

    check("all_gather", ag)

    def agt(dev, grp):
        out = torch.empty(world * 3, device=dev)
        dist.all_gather_into_tensor(out, data(3, seed=4).to(dev), group=grp)
        return out

    check("all_gather_into_tensor", agt)

    def rs(dev, grp):
        out = torch.empty(2, device=dev)
        dist.reduce_scatter_tensor(out, data(world * 2, seed=5).to(dev), group=grp)
        return out

    check("reduce_scatter_tensor", rs)

    for op in ("AVG", "MAX"):
        def rs_op(dev, grp, op=op):
            out = torch.empty(3, device=dev)
            dist.reduce_scatter_tensor(out, data(world * 3, seed=22).to(dev), group=grp,
                                       op=getattr(dist.ReduceOp, "SUM" if op == "AVG" and dev == "cpu" else op))
            return out / world if op == "AVG" and dev == "cpu" else out  # gloo: AVG as SUM / world
        check(f"reduce_scatter_tensor_{op}", rs_op)

    def rsl(dev, grp):
        out = torch.empty(2, device=dev)
        ins = [data(2, seed=6 + k).to(dev) for k in range(world)]
        if dev == "cpu":  # gloo has no list reduce_scatter: the reference is all_reduce, own part
            for t in ins:
                dist.all_reduce(t, group=grp)
            return ins[rank]
        dist.reduce_scatter(out, ins)
        return out

    check("reduce_scatter", rsl)

    # The coalesced forms (FSDP's, and DDP's bucketing managers'): calls inside
    # _coalescing_manager reach the backend as one allreduce_coalesced / all_gather into tensors /
    # reduce_scatter into tensors call; gloo's reference is the same calls one by one.
    def coalesced(dev, grp):
        ts = [data(3, seed=16).to(dev), data(2, 2, seed=17).to(dev)]
        gouts = [torch.empty(world * 3, device=dev), torch.empty(world * 4, device=dev)]
        gins = [data(3, seed=18).to(dev), data(4, seed=19).to(dev)]
        routs = [torch.empty(2, device=dev), torch.empty(3, device=dev)]
        rins = [data(world * 2, seed=20).to(dev), data(world * 3, seed=21).to(dev)]
        if dev == "cpu":
            for t in ts:
                dist.all_reduce(t, group=grp)
            for o, i in zip(gouts, gins):
                dist.all_gather_into_tensor(o, i, group=grp)
            for o, i in zip(routs, rins):
                dist.reduce_scatter_tensor(o, i, group=grp)
            return ts + gouts + routs
        for kind in ("all_reduce", "all_gather", "reduce_scatter"):
            with dist._coalescing_manager(device=torch.device(dev), async_ops=True) as cm:
                if kind == "all_reduce":
                    for t in ts:
                        dist.all_reduce(t)
                else:
                    fn = dist.all_gather_into_tensor if kind == "all_gather" else dist.reduce_scatter_tensor
                    for o, i in zip(*((gouts, gins) if kind == "all_gather" else (routs, rins))):
                        fn(o, i)
            cm.wait()
        return ts + gouts + routs

    check("coalesced", coalesced)

    def a2a(dev, grp):
        splits = [1 + k for k in range(world)]  # uneven: k + 1 elements to rank k
        inp = data(sum(splits), seed=7).to(dev)
        out_splits = [rank + 1] * world
        out = torch.empty(sum(out_splits), device=dev)
        dist.all_to_all_single(out, inp, out_splits, splits, group=grp)
        return out

    check("all_to_all_single", a2a)

    def a2al(dev, grp):
        ins = [data(2, seed=8 + k).to(dev) for k in range(world)]
        outs = [torch.empty(2, device=dev) for _ in range(world)]
        dist.all_to_all(outs, ins, group=grp)
        return outs

    check("all_to_all", a2al)

    def sr(dev, grp):
        t = data(4, seed=9).to(dev)
        if rank == 0:
            dist.send(t, dst=1, group=grp)
        elif rank == 1:
            dist.recv(t, src=0, group=grp)
        return t

    check("send_recv", sr)

    # Pipeline parallelism's exchanges: every rank posts its sends and receives at once and waits
    # after (a rank's send does not wait for its peer's receive), in a ring through
    # batch_isend_irecv (1 MiB each), and as two irecvs posted before the isends, from one peer,
    # with one tag, waited last first (the first posted gets the first sent).
    def ring(dev, grp):
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        out = data(1 << 18, seed=23).to(dev)
        got = torch.empty(1 << 18, device=dev)
        ops = [dist.P2POp(dist.isend, out, nxt, group=grp), dist.P2POp(dist.irecv, got, prv, group=grp)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        return got

    check("batch_isend_irecv_ring", ring)

    def recv_first(dev, grp):
        peer = rank ^ 1
        if peer >= world:
            return torch.zeros(2)
        firsts = [torch.empty(3, device=dev) for _ in range(2)]
        recvs = [dist.irecv(f, peer, group=grp) for f in firsts]
        sends = [dist.isend(data(3, seed=24 + k).to(dev), peer, group=grp) for k in range(2)]
        for w in recvs[::-1] + sends:
            w.wait()
        return firsts

    check("irecv_before_isend", recv_first)

    def gth(dev, grp):
        t = data(3, seed=11).to(dev)
        outs = [torch.empty(3, device=dev) for _ in range(world)] if rank == 0 else None
        dist.gather(t, outs, dst=0, group=grp)
        return outs if rank == 0 else t

    check("gather", gth)

    def sct(dev, grp):
        out = torch.empty(3, device=dev)
        ins = [data(3, seed=12 + k).to(dev) for k in range(world)] if rank == 1 else None
        dist.scatter(out, ins, src=1, group=grp)
        return out

    check("scatter", sct)

    def asy(dev, grp):
        t = data(3, seed=10).to(dev)
        w = dist.all_reduce(t, group=grp, async_op=True)
        w.wait()
        return t

    check("async_all_reduce", asy)

    def in_place_views(dev, grp):
        # Collectives that write a view of a bigger tensor, while work reading the old values may
        # still be queued: the rest of the tensor and that work's results keep the old values
        # (the host transport hands gloo the device memory itself where it can).
        big = data(4, 6, seed=14).to(dev)
        before = big * 1  # queued before the collectives
        dist.all_reduce(big[1], group=grp)
        dist.broadcast(big[2:4], src=world - 1, group=grp)
        out = torch.empty(world * 3, device=dev)
        dist.all_gather_into_tensor(out, big[0, :3].contiguous(), group=grp)
        return [big, before, out]

    check("in_place_views", in_place_views)

    dist.barrier()
    results["transport"] = torch_pjrt.distributed.transport() == transport
    results["transport_counted"] = torch_pjrt.stats()["collectives"].get(transport, {}).get("allreduce", 0) > 0
    results["objects"] = None
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank})
    results["objects"] = [o["rank"] for o in objs] == list(range(world))

    # DDP: two ranks on halves of a batch match one process on the whole batch.
    net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    init = torch.Generator().manual_seed(0)  # not the global generator: ranks may be threads
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=init) * 0.3)
    ref = copy.deepcopy(net)
    ddp = torch.nn.parallel.DistributedDataParallel(net.to("tpu"))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(42)
    for _ in range(3):
        x, y = torch.randn(4 * world, 6, generator=g), torch.randn(4 * world, 1, generator=g)
        part = slice(4 * rank, 4 * rank + 4)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x[part].to("tpu")), y[part].to("tpu")).backward()
        opt.step()
        ref_opt.zero_grad()
        torch.nn.functional.mse_loss(ref(x), y).backward()
        ref_opt.step()
    results["ddp"] = all(torch.allclose(p.detach().cpu(), q.detach(), atol=1e-5)
                         for p, q in zip(ddp.module.parameters(), ref.parameters()))
    return results


if __name__ == "__main__":
    backend = os.environ.get("BACKEND") or None  # None: PyTorch picks, per device (tpu: pjrt)
    if sys.argv[1:2] == ["--threads"]:
        n = int(sys.argv[2])
        transport = os.environ.get("TORCH_PJRT_COLLECTIVE_TRANSPORT", "device")
        print(json.dumps(torch_pjrt.distributed.run_threads(main, n, args=(n, transport), backend=backend)))
    else:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world)
        results = main(rank, world, "host")
        dist.destroy_process_group()
        print(json.dumps(results))
