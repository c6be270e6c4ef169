"""Fused eager under DDP, for tests/python/test_fused.py: one rank of a 2-rank DDP training run
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set), first in strict eager, then in fused eager with
rank 1 slowed between its ops. Prints JSON: the fused run's parameters' largest difference from
the strict run's, and the fused counters (the region digest says which regions were cut where)."""
import copy
import json
import os
import time

import torch
import torch.distributed as dist

import torch_pjrt


def train(net, rank, world, fused, slow):
    ddp = torch.nn.parallel.DistributedDataParallel(copy.deepcopy(net).to("tpu"))
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(42)
    losses = []
    with torch_pjrt.fused(fused):
        for step in range(6):
            x, y = torch.randn(4 * world, 6, generator=g), torch.randn(4 * world, 1, generator=g)
            part = slice(4 * rank, 4 * rank + 4)
            opt.zero_grad()
            h = ddp(x[part].to("tpu"))
            if slow:
                time.sleep(0.2)  # the other rank races ahead to the collective
            loss = torch.nn.functional.mse_loss(h, y[part].to("tpu"))
            loss.backward()
            if slow:
                time.sleep(0.1)
            opt.step()
            losses.append(loss.detach())
    return [p.detach().cpu() for p in ddp.module.parameters()], [l.item() for l in losses]


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group(None, init_method="env://", rank=rank, world_size=world)
    net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                              torch.nn.Linear(16, 1))
    strict, strict_losses = train(net, rank, world, False, False)
    torch_pjrt.reset_stats()
    fused, fused_losses = train(net, rank, world, True, rank == 1)
    stats = torch_pjrt.stats()
    dist.destroy_process_group()
    print(json.dumps({
        "param_diff": max((a - b).abs().max().item() for a, b in zip(fused, strict)),
        "loss_diff": max(abs(a - b) for a, b in zip(fused_losses, strict_losses)),
        "regions": stats["fused_regions"], "ops": stats["fused_ops"],
        "digest": str(stats["fused_digest"]),
        "allreduces": sum(sum(c.values()) for c in stats["collectives"].values()),
    }))


if __name__ == "__main__":
    main()
