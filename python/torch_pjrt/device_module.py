"""torch.tpu: the device module, shaped like torch.cuda. LEFT_OUT lists what torch.cuda has and
this module leaves out on purpose, with why (tests/python/test_device.py checks it against
dir(torch.cuda))."""
import collections
import contextlib

import torch

from . import _C

from . import amp  # noqa: E402  torch.tpu.amp, as torch.cuda.amp

OutOfMemoryError = torch.OutOfMemoryError

_CUDA_ONLY = "CUDA's own runtime, libraries or toolchain"
LEFT_OUT = {
    **dict.fromkeys(["CUDAGraph", "graph", "graphs", "graph_annotations", "graph_pool_handle",
                     "make_graphed_callables", "is_current_stream_capturing", "export_dot",
                     "export_graph_data"],
                    "CUDA graphs: torch.compile(backend='tpu') is this device's way to run a "
                    "captured program"),
    **dict.fromkeys(["cudart", "nccl", "nvtx", "jiterator", "tunable", "gds", "sparse",
                     "get_arch_list", "get_gencode_flags", "current_blas_handle",
                     "current_solver_handle", "cudaStatus", "check_error", "CudaError",
                     "DeferredCudaCallError", "AcceleratorError", "profiler", "classproperty"],
                    _CUDA_ONLY),
    **dict.fromkeys(["CUDAPluggableAllocator", "change_current_allocator", "MemPool",
                     "use_mem_pool", "caching_allocator_alloc", "caching_allocator_delete",
                     "caching_allocator_enable", "caching_allocator_disabled",
                     "get_allocator_backend", "host_memory_stats",
                     "host_memory_stats_as_nested_dict", "reset_accumulated_host_memory_stats",
                     "reset_peak_host_memory_stats"],
                    "allocator plug-ins, memory pools and the pinned-host caching allocator: "
                    "storages are device buffers with no caching allocator to swap or pool"),
    **dict.fromkeys(["utilization", "temperature", "power_draw", "clock_rate", "memory_usage",
                     "list_gpu_processes", "device_memory_used"],
                    "hardware sensors and process lists (NVML): PJRT reports none of them"),
    **dict.fromkeys(["GreenContext", "green_contexts", "ExternalStream",
                     "get_stream_from_external", "set_sync_debug_mode", "get_sync_debug_mode"],
                    "CUDA stream features: a tpu device has one in-order queue"),
    **dict.fromkeys(["memory", "random", "streams"],
                    "torch.cuda's submodules: their functions are on torch.tpu itself"),
    **dict.fromkeys([f"{t}{kind}" for t in ("BFloat16", "Bool", "Byte", "Char", "Double",
                                            "Float", "Half", "Int", "Long", "Short")
                     for kind in ("Storage", "Tensor")] + ["ComplexDoubleStorage",
                                                         "ComplexFloatStorage"],
                    "legacy typed tensors and storages: use torch.tensor(..., device='tpu')"),
}
_PRIVATEUSE1 = 20  # c10::DeviceType::PrivateUse1: the device type of tpu streams

_DEVICE = "tpu"
# Read by torch.utils.checkpoint (and others) to decide whether to save this device's RNG state.
_initialized = _C.initialized()


def is_available():
    return _C.initialized() and _C.device_count() > 0


def is_initialized():
    return _C.initialized()


def _lazy_init():
    if not _C.initialized():
        from . import init_error
        raise RuntimeError(f"the tpu device is unavailable: {init_error()}")


def _index(device):
    if device is None:
        return _C.current_device()
    if isinstance(device, int):
        return device
    d = torch.device(device)
    if d.type != _DEVICE:
        raise ValueError(f"expected a tpu device, got {d}")
    return _C.current_device() if d.index is None else d.index


def device_count():
    return _C.device_count() if _C.initialized() else 0


def current_device():
    return _C.current_device()


def set_device(device):
    _lazy_init()
    _C.set_device(_index(device))


class device:
    """Context manager that makes |idx| the current tpu device."""

    def __init__(self, idx):
        self.idx = _index(idx)
        self.prev = None

    def __enter__(self):
        self.prev = _C.current_device()
        _C.set_device(self.idx)

    def __exit__(self, *exc):
        _C.set_device(self.prev)
        return False


def synchronize(device=None):
    """Waits for all enqueued work; raises the first asynchronous device error, naming its op."""
    _lazy_init()
    _C.synchronize()


def get_device_name(device=None):
    _lazy_init()
    return _C.device_name(_index(device))


class _DeviceProperties:
    """What torch.cuda.get_device_properties gives that makes sense for a PJRT device: name,
    total_memory (the byte budget storages are checked against: the plugin's limit, else the
    host's memory), the plugin's platform and version, and the device index."""

    def __init__(self, index):
        info = _C.plugin_info()
        self.index = index
        self.name = get_device_name(index)
        self.type = _DEVICE
        self.total_memory = _C.memory_limit()
        self.platform = info["platform"]
        self.platform_version = info["platform_version"]
        # No CUDA compute capability: see get_device_capability.
        self.major, self.minor = get_device_capability(index)

    def __repr__(self):
        return (f"_TpuDeviceProperties(name='{self.name}', platform='{self.platform}', "
                f"total_memory={self.total_memory // (1 << 20)}MB)")


def get_device_properties(device=None):
    _lazy_init()
    return _DeviceProperties(_index(device))


def get_device_capability(device=None):
    """(0, 0): a PJRT device has no CUDA compute capability. Code that compares the answer with
    a CUDA capability (`>= (8, 0)` for bf16 or TF32 kernels) takes its portable path; ask
    is_bf16_supported() (True here) for bfloat16."""
    return (0, 0)


def can_device_access_peer(device, peer_device):
    return _index(device) != _index(peer_device) and max(_index(device), _index(peer_device)) < device_count()


def device_of(obj):
    """Context manager: the device of tensor |obj| (a tpu tensor) made current, else a no-op."""
    if isinstance(obj, torch.Tensor) and obj.device.type == _DEVICE:
        return device(obj.device.index)
    return contextlib.nullcontext()


def init():
    _lazy_init()


def ipc_collect():
    pass


# ---- randomness ----

def _gen(device=None):
    _lazy_init()
    return _C.default_generator(_index(device))


def __getattr__(name):
    # default_generators: one per device, as torch.cuda.default_generators (made on first use,
    # once the device count is known).
    if name == "default_generators":
        return tuple(_gen(i) for i in range(device_count()))
    raise AttributeError(f"module 'torch.tpu' has no attribute '{name}'")


has_half = True   # float16 is a device type (torch.cuda.has_half)
has_magma = False  # MAGMA is a CUDA linear-algebra library


def manual_seed(seed):
    _gen().manual_seed(int(seed))


def manual_seed_all(seed):
    for i in range(device_count()):
        _gen(i).manual_seed(int(seed))


def seed():
    _gen().seed()


def seed_all():
    for i in range(device_count()):
        _gen(i).seed()


def initial_seed():
    return _gen().initial_seed()


def get_rng_state(device=None):
    return _gen(device).get_state()


def set_rng_state(new_state, device=None):
    _gen(device).set_state(new_state)


def get_rng_state_all():
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(states):
    for i, s in enumerate(states):
        set_rng_state(s, i)


def _is_in_bad_fork():
    """True in a process forked after the device was initialized: it cannot use the device."""
    return _C.in_bad_fork()


# ---- memory: the same numbers as torch.accelerator's (the allocator is a DeviceAllocator) ----

def memory_allocated(device=None):
    """Bytes held by live tpu tensors' storages."""
    return _C.memory_allocated(_index(device)) if _C.initialized() else 0


def max_memory_allocated(device=None):
    return _C.max_memory_allocated(_index(device)) if _C.initialized() else 0


def reset_peak_memory_stats(device=None):
    _C.reset_peak_memory_stats(_index(device))


def reset_max_memory_allocated(device=None):
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device=None):
    torch.accelerator.reset_accumulated_memory_stats(torch.device(_DEVICE, _index(device)))


def memory_reserved(device=None):
    return memory_allocated(device)


def max_memory_reserved(device=None):
    return max_memory_allocated(device)


memory_cached, max_memory_cached, reset_max_memory_cached = (
    memory_reserved, max_memory_reserved, reset_peak_memory_stats)


def memory_stats(device=None):
    """torch.cuda.memory_stats's keys ("allocated_bytes.all.current", ...), from the allocator;
    there is no cache, so reserved equals allocated. Also "limit_bytes": the byte budget."""
    if not _C.initialized():
        return collections.OrderedDict()
    stats = torch.accelerator.memory_stats(torch.device(_DEVICE, _index(device)))
    stats["limit_bytes"] = _C.memory_limit()
    return stats


def memory_stats_as_nested_dict(device=None):
    nested = {}
    for key, value in memory_stats(device).items():
        node = nested
        *path, leaf = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def memory_summary(device=None, abbreviated=False):
    """A printable summary of the device's memory, like torch.cuda.memory_summary's."""
    s = memory_stats(device)
    mib = lambda b: f"{b / (1 << 20):10.2f} MiB"  # noqa: E731
    rows = [("Allocated memory", "allocated_bytes.all"), ("Active memory", "active_bytes.all"),
            ("Requested memory", "requested_bytes.all")]
    lines = [f"tpu:{_index(device)} memory summary ({get_device_name(device)}); limit {mib(s.get('limit_bytes', 0))}",
             f"{'':<20}{'current':>14}{'peak':>14}{'allocated':>14}{'freed':>14}"]
    for label, key in rows:
        lines.append(f"{label:<20}" + "".join(f"{mib(s.get(f'{key}.{k}', 0)):>14}"
                                               for k in ("current", "peak", "allocated", "freed")))
    lines.append(f"{'Allocations':<20}" + "".join(f"{s.get(f'allocation.all.{k}', 0):>14}"
                                                  for k in ("current", "peak", "allocated", "freed")))
    return "\n".join(lines)


def memory_snapshot(mempool_id=None):
    raise NotImplementedError(
        "torch.tpu.memory_snapshot: the tpu allocator keeps no block history to snapshot (each "
        "storage is its own device buffer); use torch.tpu.memory_stats() or memory_summary()")


def mem_get_info(device=None):
    """(free, total) bytes of the device's budget."""
    return torch.accelerator.get_memory_info(torch.device(_DEVICE, _index(device)))


def set_per_process_memory_fraction(fraction, device=None):
    """Caps storages at |fraction| of the device's memory: allocations past it raise
    torch.OutOfMemoryError."""
    if not 0 <= fraction <= 1:
        raise ValueError(f"invalid fraction {fraction}: it must be in [0, 1]")
    _lazy_init()
    _C.set_memory_limit(int(fraction * _C.device_memory_total()))


def get_per_process_memory_fraction(device=None):
    _lazy_init()
    return _C.memory_limit() / _C.device_memory_total()


def empty_cache():
    """Storages return their device memory as soon as they die (no caching allocator); this
    waits for pending work so memory held by in-flight programs is released too, and on the CPU
    plugin gives the host memory malloc keeps for reuse back to the system."""
    if _C.initialized():
        torch.accelerator.empty_cache()


# ---- streams and events: one in-order queue per device ----

def Stream(device=None, priority=0):
    """A new stream of the tpu device: a torch.Stream. Every stream of a device is its one
    in-order queue, so work on two streams runs in the order it was enqueued."""
    return torch.Stream(device=torch.device(_DEVICE, _index(device)), priority=priority)


def Event(enable_timing=False, blocking=False, interprocess=False):
    """An event on the tpu queue: a torch.Event, so elapsed_time works between any two."""
    return torch.Event(device=_DEVICE, enable_timing=enable_timing, blocking=blocking,
                       interprocess=interprocess)


def current_stream(device=None):
    return torch.accelerator.current_stream(torch.device(_DEVICE, _index(device)))


def default_stream(device=None):
    return torch.Stream(stream_id=0, device_index=_index(device), device_type=_PRIVATEUSE1)


def set_stream(stream):
    """Makes |stream| current on its device (None: no change), as torch.cuda.set_stream."""
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    """Makes |stream| current inside the block, and its device the current device (as
    torch.accelerator.set_stream does), then restores the stream that was current on that device
    and the device and stream that were current before (None: a no-op), as
    torch.cuda.StreamContext."""

    def __init__(self, stream):
        self.stream = stream
        self.src_prev = self.dst_prev = None

    def __enter__(self):
        if self.stream is not None:
            self.src_prev = torch.accelerator.current_stream()
            self.dst_prev = torch.accelerator.current_stream(self.stream.device)
            torch.accelerator.set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.src_prev is not None:
            torch.accelerator.set_stream(self.dst_prev)
            torch.accelerator.set_stream(self.src_prev)
        return False


def stream(stream):
    return StreamContext(stream)


# ---- autocast ----

def get_amp_supported_dtype():
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation=True):
    return True


def is_tf32_supported():
    """False: TF32 is an NVIDIA matmul mode."""
    return False
