"""One rank of the safety test: argv[1] says how the ranks disagree. "shape" and "op": the ranks
call collectives that differ in shape / kind ("shape_large", "op_large": on 512 KiB, which the host
transport checks while the data moves); "last_shape": the last rank's shape alone differs (the
others' gloo call waits for a rank that never joins it); "kill": rank 1 exits between two
collectives. Prints one JSON line: whether this rank raised, the message, and how long it took."""
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist

import torch_pjrt  # noqa: F401

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group(init_method="env://", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=30))
mode, started, result = sys.argv[1], time.time(), {"raised": False}
try:
    base = 1 << 17 if mode.endswith("_large") else 3
    grow = rank if mode.startswith("shape") else int(rank == world - 1) if mode == "last_shape" else 0
    t = torch.ones(base + grow, device="tpu")
    if mode.startswith("op") and rank == 1:
        dist.broadcast(t, 0)
    else:
        dist.all_reduce(t)
    if mode == "kill":
        if rank == 1:
            os._exit(3)
        dist.all_reduce(t)
except RuntimeError as e:
    result = {"raised": True, "message": str(e)[:500]}
result["seconds"] = time.time() - started
print(json.dumps(result), flush=True)
os._exit(0)  # the group is broken: skip its orderly teardown
