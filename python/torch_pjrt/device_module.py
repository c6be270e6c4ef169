"""torch.tpu: the device module, shaped like torch.cuda."""
import contextlib

import torch

from . import _C

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


def get_device_properties(device=None):
    _lazy_init()
    return {"name": get_device_name(device), "total_memory": _C.memory_limit()}


# ---- randomness ----

def _gen(device=None):
    _lazy_init()
    return _C.default_generator(_index(device))


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
    return False


# ---- memory ----

def memory_allocated(device=None):
    """Bytes held by live tpu tensors' storages."""
    return _C.memory_allocated(_index(device)) if _C.initialized() else 0


def max_memory_allocated(device=None):
    return _C.max_memory_allocated(_index(device)) if _C.initialized() else 0


def reset_peak_memory_stats(device=None):
    _C.reset_peak_memory_stats(_index(device))


def memory_reserved(device=None):
    return memory_allocated(device)


def max_memory_reserved(device=None):
    return max_memory_allocated(device)


def memory_stats(device=None):
    cur, peak = memory_allocated(device), max_memory_allocated(device)
    return {
        "allocated_bytes.all.current": cur,
        "allocated_bytes.all.peak": peak,
        "reserved_bytes.all.current": cur,
        "reserved_bytes.all.peak": peak,
        "limit_bytes": _C.memory_limit() if _C.initialized() else 0,
    }


def mem_get_info(device=None):
    limit = _C.memory_limit()
    return (limit - memory_allocated(device), limit)


def empty_cache():
    """Storages return their device memory as soon as they die (no caching allocator); this
    waits for pending work so memory held by in-flight programs is released too."""
    if _C.initialized():
        _C.synchronize()


# ---- streams and events: one in-order queue per device ----

def Stream(device=None, priority=0):
    """A stream of the tpu device (one in-order queue per device): a torch.Stream."""
    return torch.Stream(device=torch.device(_DEVICE, _index(device)), priority=priority)


def Event(enable_timing=False, blocking=False, interprocess=False):
    """An event on the tpu queue: a torch.Event, so elapsed_time works between any two."""
    return torch.Event(device=_DEVICE, enable_timing=enable_timing, blocking=blocking,
                       interprocess=interprocess)


def current_stream(device=None):
    return torch.Stream(device=torch.device(_DEVICE, _index(device)))


def default_stream(device=None):
    return current_stream(device)


@contextlib.contextmanager
def stream(s):
    yield s


# ---- autocast ----

def get_amp_supported_dtype():
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation=True):
    return True
