"""torch_pjrt: TPU (or any PJRT device) as a native PyTorch device named "tpu".

Importing this package (PyTorch does it for you through the `torch.backends` entry point) loads
the PJRT plugin, registers the "tpu" device with PyTorch (PrivateUse1 renamed), installs the
`torch.tpu` module and the `Tensor.tpu()` / `is_tpu` methods. A plugin that cannot be loaded does
not break `import torch`: `torch.tpu.is_available()` is then False and first use raises an error
that says why.
"""
import atexit
import contextlib
import os
import warnings

# Kineto (torch.profiler's engine) in PyPI's CUDA build logs "gpuGetDeviceCount failed" at ERROR
# on every profile of a machine without an NVIDIA GPU; level 5 keeps its own lines only (tpu
# trace problems reach the profiler as the session's errors). An explicit setting wins.
os.environ.setdefault("KINETO_LOG_LEVEL", "5")


def _autoload():
    """Entry point PyTorch calls at `import torch` (group `torch.backends`); importing did it all.

    Defined before `import torch`: when this package is imported first (`import torch_pjrt`
    before any `import torch`), torch's autoload imports it again while it is still partially
    initialized, and finds this function already there."""


import torch  # noqa: E402
import torch.optim.optimizer as _optimizer  # noqa: E402

from . import _plugins

__all__ = ["stats", "reset_stats", "fallback_report", "plugin_info", "strict", "native_ops",
           "init_error", "host_read_ops", "decomposed_ops"]

_init_error = None


def _env_flag(name):
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _cache_dir():
    v = os.environ.get("TORCH_PJRT_CACHE_DIR")
    if v is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return os.path.join(base, "torch_pjrt")
    return "" if v.strip() in ("", "0") else v


def _set_eager_mode_from_env(_C):
    mode = os.environ.get("TORCH_PJRT_EAGER", "strict").strip().lower() or "strict"
    if mode not in ("strict", "fused"):
        raise ValueError(f"TORCH_PJRT_EAGER={mode!r}: expected 'strict' or 'fused'")
    max_ops = os.environ.get("TORCH_PJRT_FUSED_MAX_OPS")
    if max_ops:
        _C.set_fused_max_ops(int(max_ops))
    if mode == "fused" and _init_error is None:
        _C.set_fused(True)


def _init():
    global _init_error
    from . import _C  # the native core; an ImportError here is a broken build, so let it raise
    try:
        plugin = _plugins.resolve()
        capacity = int(os.environ.get("TORCH_PJRT_CACHE_CAPACITY", "4096"))
        _C.init(plugin, _cache_dir(), capacity, _env_flag("TORCH_PJRT_LAUNCH_BLOCKING"))
    except Exception as e:  # keep `import torch` alive; report at first use
        _init_error = f"{type(e).__name__}: {e}"
        _C.set_init_error(_init_error)
        warnings.warn(f"torch_pjrt: the tpu device is unavailable: {_init_error}")
    _C.set_strict(_env_flag("TORCH_PJRT_STRICT"))
    _set_eager_mode_from_env(_C)
    if _env_flag("TORCH_PJRT_QUIET_FALLBACK"):
        _C.set_fallback_warnings(False)


def _register():
    if torch._C._get_privateuse1_backend_name() != "tpu":
        torch.utils.rename_privateuse1_backend("tpu")
    from . import device_module
    if not hasattr(torch, "tpu"):
        torch._register_device_module("tpu", device_module)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True)
    from . import _decompositions, _default_compile, _integrations, _sampling
    _decompositions.register()
    _sampling.register()
    if torch.distributed.is_available():
        from . import distributed
        distributed.register()
    _default_compile.install()
    _integrations.install()


def _drain_autograd_device_threads():
    """At exit, before the interpreter finalizes: one empty backward through each tpu device's
    autograd thread. A backward's task holds a Python object (torch.autograd stashes a
    contextvars copy in it) that the device thread releases only after the caller has its
    result; released after finalization began, that object's destructor ended the process with
    "terminate called without an active exception". The empty task, queued behind the last real
    one, holds none, and is called on the engine directly so that none is stashed."""
    if not _C_initialized() or torch.tpu._is_in_bad_fork():
        return
    try:
        for d in range(torch.tpu.device_count()):
            x = torch.zeros((), device=f"tpu:{d}", requires_grad=True)
            torch.autograd.Variable._execution_engine.run_backward(
                (x * 1,), (torch.ones((), device=f"tpu:{d}"),), False, False, (), True, True)
    except Exception:  # an exit path: never raise from here
        pass


def _end_region_after_optimizer_step(optimizer, args, kwargs):
    """In fused eager, a training step is one region: it ends with the optimizer's step (the
    same call on every rank)."""
    from . import _C
    if _C.fused():
        _C.end_region()


def _C_initialized():
    from . import _C
    return _C.initialized()


_init()
_register()
_optimizer.register_optimizer_step_post_hook(_end_region_after_optimizer_step)
atexit.register(_drain_autograd_device_threads)


def init_error():
    """Why the device could not be initialized, or None."""
    return _init_error


def stats():
    """Counters: compiles (compiles_new_shape of them for a program compiled before with other
    input sizes), memory_cache_hits, disk_cache_hits, executes, compile_seconds,
    cached_executables, fused eager's (fused_regions run, fused_ops recorded in them,
    fused_compiles, fused_cache_hits, fused_max_ops: the largest region), fallbacks (op name -> count) and collectives (transport -> collective ->
    count, torch_pjrt.distributed)."""
    from . import _C
    return {**_C.stats(), "collectives": _distributed().collective_counts() if _distributed() else {}}


def reset_stats():
    from . import _C
    _C.reset_stats()
    if _distributed():
        _distributed().reset_collective_counts()


def _distributed():
    """torch_pjrt.distributed, or None where torch has no torch.distributed."""
    if not torch.distributed.is_available():
        return None
    from . import distributed
    return distributed


def native_ops():
    """ATen op names with a native lowering (functional, in-place and out= forms)."""
    from . import _C
    return list(_C.native_ops())


def host_read_ops():
    """ATen ops whose PyTorch kernel would read tpu memory on the host (and crash): they run
    through the CPU fallback instead (found by the host-read sweep, tools/compat_host.py)."""
    from . import _C
    return list(_C.cpu_routed_ops())


def decomposed_ops():
    """ATen ops whose tpu kernels are written in Python, in ops the device runs: those with no
    CPU kernel to fall back to (CUDA-only ones, the *_overrideable convolutions) and a few whose
    CPU kernel the fallback would otherwise run (losses, distances, resampling)."""
    from . import _decompositions, _sampling
    return sorted(_decompositions.decomposed_ops() + _sampling.registered_ops())


def plugin_info():
    """Platform name, plugin path, PJRT API version and devices of the loaded plugin."""
    from . import _C
    if _init_error:
        raise RuntimeError(f"the tpu device is unavailable: {_init_error}")
    return dict(_C.plugin_info())


def fallback_report():
    """A printable table of the ops that ran on CPU, with counts."""
    fb = stats()["fallbacks"]
    if not fb:
        return "tpu fallback report: no op fell back to CPU"
    width = max(len(k) for k in fb)
    lines = [f"tpu fallback report: {len(fb)} op(s) ran on CPU, {sum(fb.values())} call(s)",
             f"  {'op'.ljust(width)}  calls"]
    for name, n in sorted(fb.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"  {name.ljust(width)}  {n}")
    return "\n".join(lines)


@contextlib.contextmanager
def _switched(get, set_, value):
    """A process-wide switch set to |value| within the block, restored after."""
    old = get()
    set_(value)
    try:
        yield
    finally:
        set_(old)


@contextlib.contextmanager
def fused(enabled=True):
    """Fused eager within the block: each op is checked at its call (shapes, dtypes, errors at
    your line) but recorded, and the recorded region runs as one program when a value is needed
    (a host read such as .item() or .cpu(), a CPU fallback, a collective, a compiled graph,
    torch.tpu.synchronize(), an optimizer's step, the end of the block) or after
    TORCH_PJRT_FUSED_MAX_OPS ops (2048; past an eighth of that, at an op chosen by a hash of what
    it does, so a loop's iterations repeat the same regions).
    Results equal strict eager's within what a different XLA fusion allows. Regions that repeat
    compile once: see stats()'s fused_* counters. TORCH_PJRT_EAGER=fused turns it on for the whole
    process. The mode is process-wide (autograd's device threads record into the same region)."""
    from . import _C
    with _switched(_C.fused, _C.set_fused, enabled):
        yield


@contextlib.contextmanager
def strict(enabled=True):
    """Within the block, an op that would fall back to CPU raises a RuntimeError naming it."""
    from . import _C
    with _switched(_C.strict, _C.set_strict, enabled):
        yield
