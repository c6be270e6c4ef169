"""One rank of the pipeline-parallel test, or all of them: torch.distributed.pipelining's own
schedules (GPipe, 1F1B) over the pjrt backend, each stage on a tpu device, checked against
the whole model trained on CPU. As a process: run as WORLD_SIZE processes (RANK, MASTER_ADDR,
MASTER_PORT set; the host transport). With --threads N: N ranks as threads of one process (the
device transport). Prints one JSON line of results (a list of them, one per rank, for threads)."""
import copy
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

import torch_pjrt

MICRO = 4


def _model(world):
    g = torch.Generator().manual_seed(0)
    layers = []
    for _ in range(2 * world):
        lin = torch.nn.Linear(16, 16)
        with torch.no_grad():
            lin.weight.copy_(torch.randn(16, 16, generator=g) * 0.3)
            lin.bias.copy_(torch.randn(16, generator=g) * 0.1)
        layers += [lin, torch.nn.Tanh()]
    return torch.nn.Sequential(*layers)


def main(rank, world):
    results = {}
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
    for name, schedule in (("gpipe", ScheduleGPipe), ("1f1b", Schedule1F1B)):
        full = _model(world)
        part = copy.deepcopy(full[4 * rank:4 * rank + 4]).to("tpu")
        stage = PipelineStage(part, rank, world, torch.device("tpu", torch.tpu.current_device()))
        sched = schedule(stage, n_microbatches=MICRO, loss_fn=torch.nn.functional.mse_loss)
        losses = []
        if rank == 0:
            sched.step(x.to("tpu"))
        elif rank == world - 1:
            sched.step(target=y.to("tpu"), losses=losses)
        else:
            sched.step()
        # The reference: the whole model on CPU, microbatch by microbatch, gradients averaged
        # (the schedules scale them by 1/microbatches).
        ref_losses = []
        for xm, ym in zip(x.chunk(MICRO), y.chunk(MICRO)):
            loss = torch.nn.functional.mse_loss(full(xm), ym)
            loss.backward()
            ref_losses.append(loss.detach())
        ref = full[4 * rank:4 * rank + 4]
        ok = all(torch.allclose(p.grad.cpu(), q.grad / MICRO, atol=1e-5)
                 for p, q in zip(part.parameters(), ref.parameters()))
        if rank == world - 1:
            ok = ok and len(losses) == MICRO and all(
                torch.allclose(a.cpu(), b, atol=1e-5) for a, b in zip(losses, ref_losses))
        results[name] = ok
    results["transport"] = torch_pjrt.distributed.transport()
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
