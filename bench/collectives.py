"""Collectives on tpu tensors against gloo on CPU tensors, measured in one run.

Bus bandwidth (nccl-tests' definition: all_reduce moves 2(n-1)/n of the buffer per rank,
all_gather (n-1)/n of the output) of all_reduce and all_gather from 4 KiB to 64 MiB, median of
--reps timed calls after warm-up, for each transport torch_pjrt has and gloo on CPU tensors, on
2 processes on 127.0.0.1; then DDP training steps/s of a small MLP at 1 and 2 processes. The
shared machine is noisy: compare the ratios, not the times.

    python bench/collectives.py [--reps 5] [--max-mib 64]

The device transport (collectives as device programs across the devices of one client) is not
built yet; its rows say so.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(world, argv, timeout=1200):
    port = _free_port()
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", *argv], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True,
                              env={**os.environ, "RANK": str(r), "WORLD_SIZE": str(world),
                                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                                   "TORCH_PJRT_QUIET_FALLBACK": "1"})
             for r in range(world)]
    outs = [p.communicate(timeout=timeout)[0] for p in procs]
    for p in procs:
        if p.returncode:
            raise SystemExit(f"a rank exited {p.returncode}")
    return json.loads(outs[0].strip().splitlines()[-1])


def _worker(args):
    import torch
    import torch.distributed as dist
    import torch_pjrt  # noqa: F401

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group(init_method="env://", rank=rank, world_size=world)
    cpu = dist.new_group(backend="gloo")
    result = {}
    if args.mode == "bandwidth":
        sizes = [4 << 10]
        while sizes[-1] < args.max_mib << 20:
            sizes.append(sizes[-1] * 4)
        for dev, group in (("tpu", None), ("cpu", cpu)):
            for coll in ("all_reduce", "all_gather"):
                for nbytes in sizes:
                    x = torch.ones(nbytes // 4, device=dev)
                    out = torch.empty(world * x.numel(), device=dev)
                    run = (lambda: dist.all_reduce(x, group=group)) if coll == "all_reduce" else \
                          (lambda: dist.all_gather_into_tensor(out, x, group=group))
                    run()
                    times = []
                    for _ in range(args.reps):
                        dist.barrier(group=cpu)
                        t0 = time.perf_counter()
                        run()
                        if dev == "tpu":
                            torch.tpu.synchronize()
                        times.append(time.perf_counter() - t0)
                    t = statistics.median(times)
                    moved = nbytes * 2 * (world - 1) / world if coll == "all_reduce" else \
                        nbytes * world * (world - 1) / world
                    result[f"{dev}|{coll}|{nbytes}"] = moved / t / 1e9
    else:  # ddp steps/s
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256))
        model = net.to("tpu")
        if world > 1:
            model = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        x, y = torch.randn(32, 256, device="tpu"), torch.randn(32, 256, device="tpu")

        def step():
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        for _ in range(3):
            step()
        torch.tpu.synchronize()
        rates = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            for _ in range(10):
                step()
            torch.tpu.synchronize()
            rates.append(10 / (time.perf_counter() - t0))
        result["steps_per_s"] = statistics.median(rates)
    dist.destroy_process_group()
    print(json.dumps(result))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-mib", type=int, default=64)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="bandwidth", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return _worker(args)
    common = ["--reps", str(args.reps), "--max-mib", str(args.max_mib)]
    bw = _launch(2, common + ["--mode", "bandwidth"])
    sizes = sorted({int(k.split("|")[2]) for k in bw})
    print("bus bandwidth, GB/s (median of %d), 2 processes on 127.0.0.1" % args.reps)
    print(f"{'collective':<11} {'size':>9}  {'device':>7} {'host':>7} {'gloo':>7}  {'host/gloo':>9}")
    for coll in ("all_reduce", "all_gather"):
        for n in sizes:
            host, gloo = bw[f"tpu|{coll}|{n}"], bw[f"cpu|{coll}|{n}"]
            size = f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
            print(f"{coll:<11} {size:>9}  {'n/a':>7} {host:7.3f} {gloo:7.3f}  {host / gloo:9.2f}")
    print("device transport: not built yet (collectives as device programs); n/a above")
    one = _launch(1, common + ["--mode", "ddp"])["steps_per_s"]
    two = _launch(2, common + ["--mode", "ddp"])["steps_per_s"]
    print(f"DDP MLP steps/s on tpu (host transport): 1 process {one:.1f}, 2 processes {two:.1f} "
          f"(2/1: {two / one:.2f})")


if __name__ == "__main__":
    main()
