"""Libraries that pick their device from a fixed list: Hugging Face Accelerate, PyTorch's own
FlexAttention and torch.multiprocessing, PyTorch Lightning (_lightning.py); and torchvision,
whose detection operators get tpu kernels when it loads them (_torchvision.py).

Accelerate's PartialState.default_device checks MPS, MLU, SDAA, MUSA, NPU, HPU, CUDA, XPU and
Neuron by name and otherwise answers "cpu", so Accelerator() and the Trainer (which trains on
TrainingArguments().device, tpu:0 here, while Accelerate places batches on its own device) put
the batches on CPU and the first step fails. When accelerate.state is imported, its
default_device learns the last step of that list: "tpu" where Accelerate would answer "cpu" and
the device is available. An explicit cpu=True (TrainingArguments(use_cpu=True)) or
ACCELERATE_TORCH_DEVICE is still obeyed: only the fallback answer changes. The files Accelerate
installed are not touched; the property is wrapped in memory when the module loads.

torch.nn.attention.flex_attention refuses any device outside {cuda, cpu, xpu, hpu, mps} before it
runs (its _validate_device: "TODO: Remove once non cuda/cpu devices support is added"), yet what
it runs on tpu is ordinary: eagerly, the higher-order op's reference implementation in ATen ops;
compiled (TorchTitan wraps it in torch.compile), a graph this backend compiles like any other.
The check learns to let tpu tensors through; every other device gets PyTorch's answer.

torch.multiprocessing's pickler (its queues, Pool, spawn arguments) shares a CPU storage through
shared memory and a CUDA one through an IPC handle; any other device's storage reached its CPU
path and failed in the queue's feeder thread ("_share_fd_: only available on CPU"), so the
receiver waited forever. A PJRT buffer cannot be mapped into another process (XLA's CPU plugin
has one client per process; TPU and GPU plugins hand out no IPC handles), so a tpu storage
travels by value: its bytes go as a CPU storage (itself shared through shared memory) and the
receiver copies them onto its own tpu device of the same index. In-place changes on one side
are not seen by the other, as with pickle.
"""
import importlib.abc
import importlib.util
import sys

import torch

from . import _lightning, _torchvision


def _teach_accelerate(state):
    cls = state.PartialState
    plain = cls.default_device.fget
    if getattr(plain, "_tpu_aware", False):
        return

    def default_device(self):
        device = plain(self)
        if device.type == "cpu" and torch.tpu.is_available():
            return torch.device("tpu", torch.tpu.current_device())
        return device

    default_device._tpu_aware = True
    default_device.__doc__ = plain.__doc__
    cls.default_device = property(default_device)


def _rebuild_storage_on(host, device):
    return torch.UntypedStorage(host.nbytes(), device=device).copy_(host)


def _teach_multiprocessing(reductions):
    plain = reductions.reduce_storage
    if getattr(plain, "_tpu_aware", False):
        return

    def reduce_storage(storage):
        if storage.device.type == "tpu":
            return (_rebuild_storage_on, (storage.cpu(), str(storage.device)))
        return plain(storage)

    reduce_storage._tpu_aware = True
    reductions.reduce_storage = reduce_storage
    for t in torch._storage_classes:
        if t.__name__ == "UntypedStorage":
            reductions.reduction.register(t, reduce_storage)


def _teach_flex_attention(flex):
    plain = flex._validate_device
    if getattr(plain, "_tpu_aware", False):
        return

    def _validate_device(query, key, value):
        if query.device.type != "tpu":
            plain(query, key, value)

    _validate_device._tpu_aware = True
    flex._validate_device = _validate_device


class _OnImport(importlib.abc.MetaPathFinder):
    """Calls a hook on a module right after it is executed."""

    def __init__(self, hooks):
        self.hooks = hooks

    def find_spec(self, name, path, target=None):
        if name not in self.hooks:
            return None
        sys.meta_path.remove(self)  # let the other finders find the real module
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        run, hook = spec.loader.exec_module, self.hooks[name]

        def exec_module(module):
            run(module)
            hook(module)

        spec.loader.exec_module = exec_module
        return spec


def install():
    hooks = {"accelerate.state": _teach_accelerate,
             "torch.multiprocessing.reductions": _teach_multiprocessing,
             "torch.nn.attention.flex_attention": _teach_flex_attention,
             "torchvision.extension": _torchvision.register,
             **_lightning.hooks()}
    for name, hook in list(hooks.items()):
        if name in sys.modules:  # already imported: teach it now
            hook(sys.modules[name])
            del hooks[name]
    if hooks:
        sys.meta_path.insert(0, _OnImport(hooks))
