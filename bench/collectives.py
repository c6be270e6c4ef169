"""Collectives on tpu tensors against gloo on CPU tensors, measured in one run.

Bus bandwidth (nccl-tests' definition: all_reduce moves 2(n-1)/n of the buffer per rank,
all_gather (n-1)/n of the output) of all_reduce and all_gather from 4 KiB to 64 MiB, timed as
nccl-tests do (calls back to back, 32 MiB or 200 calls, then a device sync; the median of --reps
such runs after a warm-up run; in the 2-process launch tpu and CPU tensors take turns, and
host/gloo is the median of the runs' paired ratios), for each transport torch_pjrt has and gloo
on CPU tensors: the device transport on 4 CPU-plugin devices in one process (ranks as threads),
the host transport on 2 processes on 127.0.0.1, and gloo on CPU tensors both ways (2 processes;
the same 4 threads), and the device transport's program alone (one thread driving the 4
devices, no ranks meeting: what the transport costs without Python's threads); then DDP
training steps/s of a small MLP at 1 and 2 processes and 4 ranks in one process, and on CPU
tensors with gloo at 1 and 2 processes; then a compiled step with functional collectives (4
layers of a row-parallel MLP, each ending in an all_reduce) on 4 ranks in one process, its
collectives lowered into the graph's program against the same graph split around them (each
collective run eagerly). The shared machine is noisy: compare the ratios, not the times.

    python bench/collectives.py [--reps 15] [--max-mib 64]
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
    """One rank of a process launch (RANK, WORLD_SIZE... set): prints its measurements."""
    import torch.distributed as dist
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group(init_method="env://", rank=rank, world_size=world)
    result = _measure(rank, world, args)
    dist.destroy_process_group()
    print(json.dumps(result))


def _sizes(args):
    sizes = [4 << 10]
    while sizes[-1] < args.max_mib << 20:
        sizes.append(sizes[-1] * 4)
    return sizes


def _time(runs, nbytes, reps):
    """Seconds per call of each (run, sync) of |runs| in each of |reps| runs: back-to-back calls,
    then its sync, the runs of |runs| taking turns so that the shared machine's load weighs on
    each alike."""
    # A run moves 32 MiB, up to 200 calls: runs of 8 MiB (40 calls of 4 KiB, ~20 ms) were short
    # against the machine's jitter (the paired ratio of one 4 KiB cell moved 0.75-1.14 between
    # runs of the same code).
    calls = max(2, min(200, (32 << 20) // nbytes))
    for run, sync in runs:  # warm-up: one run of each
        for _ in range(calls):
            run()
        sync()
    times = [[] for _ in runs]
    for rep in range(reps):
        turn = list(zip(runs, times))
        for (run, sync), ts in (turn if rep % 2 == 0 else turn[::-1]):  # neither always first
            t0 = time.perf_counter()
            for _ in range(calls):
                run()
            sync()
            ts.append((time.perf_counter() - t0) / calls)
    return times


def _bus(coll, nbytes, world, seconds):
    moved = nbytes * 2 * (world - 1) / world if coll == "all_reduce" else nbytes * (world - 1)
    return moved / seconds / 1e9


def _threads(args):
    """All ranks as threads of this process, a tpu device each: prints rank 0's measurements,
    and those of the device programs run from this one thread."""
    import torch
    import torch_pjrt
    from torch_pjrt import _C
    world = torch.tpu.device_count()
    result = torch_pjrt.distributed.run_threads(_measure, world, args=(world, args, False))[0]
    if args.mode == "bandwidth":
        for coll in ("all_reduce", "all_gather"):
            for nbytes in _sizes(args):
                xs = [torch.ones(nbytes // 4, device=f"tpu:{d}") for d in range(world)]
                outs = xs if coll == "all_reduce" else \
                    [torch.empty(world * nbytes // 4, device=f"tpu:{d}") for d in range(world)]
                t = statistics.median(_time([(lambda: _C.collective(coll, "SUM", 0, xs, outs),
                                                torch.tpu.synchronize)], nbytes, args.reps)[0])
                result[f"program|{coll}|{nbytes}"] = _bus(coll, nbytes, world, t)
                del xs, outs
    print(json.dumps(result))


def _measure(rank, world, args, interleave=True):
    """|rank|'s measurements; tpu and CPU tensors take turns when |interleave| (ranks as
    processes, where host/gloo is the ratio), else each size runs on one, then the other (ranks
    as threads: gloo's threads in between flushed the device runs' caches; measured: the 4 MiB
    device all_reduce took twice as long)."""
    import torch
    import torch.distributed as dist
    import torch_pjrt  # noqa: F401

    cpu = dist.new_group(backend="gloo")
    result = {"transport": torch_pjrt.distributed.transport()}
    if args.mode == "bandwidth":
        for coll in ("all_reduce", "all_gather"):
            for nbytes in _sizes(args):
                runs = []
                for dev, group in (("tpu", None), ("cpu", cpu)):
                    x = torch.ones(nbytes // 4, device=dev)
                    out = torch.empty(world * x.numel(), device=dev)
                    run = (lambda x=x, g=group: dist.all_reduce(x, group=g)) if coll == "all_reduce" \
                        else (lambda x=x, out=out, g=group: dist.all_gather_into_tensor(out, x, group=g))
                    runs.append((run, torch.tpu.synchronize if dev == "tpu" else (lambda: None)))
                dist.barrier(group=cpu)
                times = _time(runs, nbytes, args.reps) if interleave else \
                    [_time([r], nbytes, args.reps)[0] for r in runs]
                for dev, ts in zip(("tpu", "cpu"), times):
                    result[f"{dev}|{coll}|{nbytes}"] = _bus(coll, nbytes, world, statistics.median(ts))
                if interleave:  # tpu/CPU: the median of the runs' paired ratios
                    result[f"ratio|{coll}|{nbytes}"] = statistics.median(
                        c / t for t, c in zip(*times))
                del runs
    elif args.mode.startswith("funcol"):  # a compiled step, lowered or split
        import torch.distributed._functional_collectives as funcol
        if args.mode == "funcol-split":
            from torch_pjrt import compile as tpc

            def split(node):
                raise tpc._NotNative("split for the comparison")
            tpc._device_group = split
        gen = torch.Generator().manual_seed(0)
        w1, w2 = (torch.randn(256, 256, generator=gen).to("tpu") for _ in range(2))
        x = torch.randn(32, 256, generator=gen).to("tpu")

        def step(x):
            for _ in range(4):
                x = funcol.all_reduce(torch.relu(x @ w1) @ w2, "sum", dist.group.WORLD) / 1000
            return x
        f = torch.compile(step, backend="tpu")
        for _ in range(3):
            f(x)
        torch.tpu.synchronize()
        times = []
        for _ in range(args.reps * 4):
            dist.barrier(group=cpu)
            t0 = time.perf_counter()
            f(x).cpu()
            times.append(time.perf_counter() - t0)
        result["step_ms"] = statistics.median(times) * 1e3
    else:  # ddp steps/s, on tpu ("ddp") or, the peer, on CPU with gloo ("ddp-cpu")
        dev = "cpu" if args.mode == "ddp-cpu" else "tpu"
        gen = torch.Generator().manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256))
        with torch.no_grad():
            for p in net.parameters():
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
        model = net.to(dev)
        if world > 1:
            model = torch.nn.parallel.DistributedDataParallel(model, process_group=cpu if dev == "cpu" else None)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        x = torch.randn(32, 256, generator=gen).to(dev)
        y = torch.randn(32, 256, generator=gen).to(dev)

        def step():
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        for _ in range(3):
            step()
        torch.tpu.synchronize()
        rates = []
        for _ in range(args.reps):
            dist.barrier(group=cpu)
            t0 = time.perf_counter()
            for _ in range(10):
                step()
            torch.tpu.synchronize()
            rates.append(10 / (time.perf_counter() - t0))
        result["steps_per_s"] = statistics.median(rates)
    return result


def _launch_threads(n, argv, timeout=1800):
    out = subprocess.run([sys.executable, __file__, "--threads", *argv], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, timeout=timeout,
                         env={**os.environ, "TORCH_PJRT_CPU_DEVICES": str(n),
                              "TORCH_PJRT_QUIET_FALLBACK": "1"})
    if out.returncode:
        raise SystemExit(f"the {n}-thread run exited {out.returncode}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--max-mib", type=int, default=64)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--threads", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="bandwidth", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return _worker(args)
    if args.threads:
        return _threads(args)
    common = ["--reps", str(args.reps), "--max-mib", str(args.max_mib)]
    dev = _launch_threads(4, common + ["--mode", "bandwidth"])
    bw = _launch(2, common + ["--mode", "bandwidth"])
    assert dev["transport"] == "device" and bw["transport"] == "host", (dev["transport"], bw["transport"])
    sizes = sorted({int(k.split("|")[2]) for k in bw if k.startswith("tpu|")})
    print(f"bus bandwidth, GB/s (median of {args.reps}): device = torch_pjrt's device transport, "
          "4 devices in one process; host = its host transport, 2 processes; gloo = gloo on CPU "
          "tensors, 2 processes; gloo4 = gloo on CPU tensors, the same 4 threads; program = the "
          "device transport's program alone, one thread driving the 4 devices; host/gloo = the median of "
          "the paired runs' ratios")
    print(f"{'collective':<11} {'size':>7}  {'device':>8} {'host':>8} {'gloo':>8} {'gloo4':>8} "
          f"{'program':>8}  {'device/gloo':>11} {'device/gloo4':>12} {'host/gloo':>9}")
    for coll in ("all_reduce", "all_gather"):
        for n in sizes:
            d, h, g, g4, p = (dev[f"tpu|{coll}|{n}"], bw[f"tpu|{coll}|{n}"], bw[f"cpu|{coll}|{n}"],
                              dev[f"cpu|{coll}|{n}"], dev[f"program|{coll}|{n}"])
            size = f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
            print(f"{coll:<11} {size:>7}  {d:8.3f} {h:8.3f} {g:8.3f} {g4:8.3f} {p:8.3f}  "
                  f"{d / g:11.2f} {d / g4:12.2f} {bw[f'ratio|{coll}|{n}']:9.2f}")
    one = _launch(1, common + ["--mode", "ddp"])
    two = _launch(2, common + ["--mode", "ddp"])
    four = _launch_threads(4, common + ["--mode", "ddp"])
    one_cpu = _launch(1, common + ["--mode", "ddp-cpu"])
    two_cpu = _launch(2, common + ["--mode", "ddp-cpu"])
    print(f"DDP MLP steps/s on tpu: 1 process {one['steps_per_s']:.1f}; 2 processes "
          f"({two['transport']} transport) {two['steps_per_s']:.1f}; 4 ranks in one process "
          f"({four['transport']} transport) {four['steps_per_s']:.1f}. On CPU tensors (gloo): "
          f"1 process {one_cpu['steps_per_s']:.1f}; 2 processes {two_cpu['steps_per_s']:.1f}")
    lowered = _launch_threads(4, common + ["--mode", "funcol"])["step_ms"]
    split = _launch_threads(4, common + ["--mode", "funcol-split"])["step_ms"]
    print(f"compiled step with 4 functional all_reduces, 4 ranks in one process, ms (median): "
          f"lowered into the program {lowered:.2f}; split around them {split:.2f}; "
          f"split/lowered {split / lowered:.2f}")


if __name__ == "__main__":
    main()
