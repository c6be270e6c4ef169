"""Many devices in one process, as ranks: run_threads() runs a function in one thread per rank,
each with its own default process group (PyTorch's thread-local world), so collectives take the
device transport."""
import datetime
import threading

import torch
import torch.distributed as dist

from ._device import _break_meetings, _forget_meetings


def run_threads(fn, world_size=None, args=(), backend=None, timeout=datetime.timedelta(minutes=5)):
    """Runs fn(rank, *args) as |world_size| ranks (default: every tpu device) in threads of this
    process, rank r on tpu:r with the default process group initialized (init_process_group with
    |backend|, None: PyTorch's choice per device), and returns their results in rank order: many
    devices in one process, with collectives on the device transport. Each thread sees its own
    torch.distributed world (PyTorch's thread-local world, as its own multi-threaded tests use).
    An exception in a rank stops the others' collectives and is raised here. Ranks should not share
    a leaf tensor that is a view: PyTorch's autograd can deadlock on one used by two threads."""
    from torch.testing._internal.distributed.multi_threaded_pg import (
        _install_threaded_pg, _uninstall_threaded_pg)
    n = world_size or torch.tpu.device_count()
    if n > torch.tpu.device_count():
        raise ValueError(f"run_threads: {n} ranks need {n} tpu devices, there are "
                         f"{torch.tpu.device_count()} (TORCH_PJRT_CPU_DEVICES sets the CPU plugin's)")
    store = dist.HashStore()
    results, errors = [None] * n, []  # errors in the order they happened: the first is the cause

    def rank_main(rank):
        torch.tpu.set_device(rank)
        try:
            dist.init_process_group(backend, rank=rank, world_size=n, store=store, timeout=timeout)
            try:
                # Backward on this thread, not autograd's thread for the device, which has no
                # world of its own (dist.get_rank() in a backward failed: context parallelism).
                # PyTorch's threaded process groups turn this off too, for the installing thread.
                with torch.autograd.set_multithreading_enabled(False):
                    results[rank] = fn(rank, *args)
            finally:
                dist.destroy_process_group()
        except BaseException as e:  # noqa: B036 - handed to the caller
            errors.append(e)
            _break_meetings(RuntimeError(f"rank {rank} raised {type(e).__name__}: {e}"))

    # Dynamo loads the "tpu" compile backend from its entry point on first use, and two threads
    # doing that at once both register it ("duplicate name: tpu"): load it here, once.
    from torch._dynamo.backends.registry import lookup_backend
    lookup_backend("tpu")
    torch._C._distributed_c10d._set_thread_isolation_mode(True)
    _install_threaded_pg()
    try:
        threads = [threading.Thread(target=rank_main, args=(r,), name=f"pjrt-rank-{r}") for r in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        _uninstall_threaded_pg()
        torch._C._distributed_c10d._set_thread_isolation_mode(False)
        _forget_meetings()
    if errors:
        raise errors[0]
    return results
