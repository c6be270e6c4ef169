"""torch.tpu.amp: torch.cuda.amp's names for the tpu device (autocast, GradScaler, custom_fwd,
custom_bwd), thin aliases of torch.amp's with device_type "tpu"."""
import functools

import torch


class autocast(torch.amp.autocast):
    """torch.autocast("tpu", ...): matmuls and convolutions in |dtype| (bfloat16 unless given),
    reductions, norms and losses in float32, as CUDA's op lists say."""

    def __init__(self, enabled=True, dtype=torch.bfloat16, cache_enabled=True):
        super().__init__("tpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """torch.amp.GradScaler("tpu", ...)."""

    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        super().__init__("tpu", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)


custom_fwd = functools.partial(torch.amp.custom_fwd, device_type="tpu")
custom_bwd = functools.partial(torch.amp.custom_bwd, device_type="tpu")
