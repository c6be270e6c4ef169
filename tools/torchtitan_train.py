"""TorchTitan's own entry point (python -m torchtitan.train), run as one torchrun rank, on tpu or,
for the reference, on CPU. argv: the device ("tpu" or "cpu"), then TorchTitan's arguments.

On tpu nothing of TorchTitan is changed: it picks tpu itself. At exit rank 0 prints one JSON line
with torch_pjrt's fallback counts and collective counts.

On CPU TorchTitan does not run as shipped (it takes "cuda" when no accelerator is found, and
calls device functions torch.cpu lacks); this harness makes it: the device type is "cpu",
torch.cpu gets the few memory/property functions TorchTitan's metrics call, FlexAttention runs its
reference implementation (Dynamo's eager backend instead of Inductor, and the CPU backward
PyTorch refuses only because its CPU kernels lack it), and FSDP2 reduces gradients by SUM and a
division, since gloo has no PREMUL_SUM (which FSDP2 picks for TorchTitan's loss scaling)."""
import atexit
import json
import os
import runpy
import sys

import torch

device = sys.argv.pop(1)
if device == "cpu":
    import types
    import torch._utils
    import torch.nn.attention.flex_attention as flex

    torch._utils._get_available_device_type = lambda: "cpu"
    torch.cpu.get_device_name = lambda *a: "cpu"
    torch.cpu.current_device = lambda: 0  # TorchTitan passes it to barrier(device_ids=...)
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    torch.cpu.get_device_properties = lambda *a: types.SimpleNamespace(name="cpu", total_memory=total)
    torch.cpu.memory_stats = lambda *a: {}
    torch.cpu.reset_peak_memory_stats = lambda *a: None
    torch.cpu.empty_cache = lambda *a: None
    plain = flex._validate_device
    flex._validate_device = lambda q, k, v: None if q.device.type == "cpu" else plain(q, k, v)
    import torch.distributed.fsdp._fully_shard._fsdp_collectives as fsdp_collectives
    divide_factors = fsdp_collectives._get_gradient_divide_factors

    def sum_then_divide(rs_group, ar_group, reduce_dtype, device_type="", factor=None, _force=False):
        return divide_factors(rs_group, ar_group, reduce_dtype, device_type, factor, True)
    fsdp_collectives._get_gradient_divide_factors = sum_then_divide
    from torchtitan.models.common.attention import FlexAttention
    FlexAttention._compiled_flex_attn = torch.compile(flex.flex_attention, backend="eager")
else:
    import torch_pjrt

    def report():
        if os.environ.get("RANK", "0") == "0":
            stats = torch_pjrt.stats()
            print(json.dumps({"fallbacks": stats["fallbacks"], "collectives": stats["collectives"]}),
                  flush=True)
    atexit.register(report)

sys.argv[0] = "torchtitan.train"
runpy.run_module("torchtitan.train", run_name="__main__")
