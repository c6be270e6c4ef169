"""torch.compile(model) with no backend on tpu tensors: compiled by this package's backend.

torch.compile's default backend is Inductor, which takes the device name "tpu" for its own
Pallas/JAX target and fails without JAX ("No module named 'jax'"). A CUDA script moved to
"tpu" says torch.compile(model), with any mode, fullgraph or dynamic: its graphs on tpu tensors
go to backend "tpu" (torch_pjrt.compile) instead. It says so once, and once more for each other
set of Inductor modes and options, naming what it ignores (reduce-overhead's CUDA graphs,
max-autotune's kernel search). Graphs on other devices are Inductor's as before. Dynamo's own options (fullgraph, dynamic) keep their
meaning: they act before any backend is called.
"""
import warnings

import torch

_said = set()  # the ignored-option sets already reported


def _on_tpu(gm, example_inputs):
    def tpu(v):
        return isinstance(v, torch.Tensor) and v.device.type == "tpu"
    if any(tpu(v) for v in example_inputs):
        return True
    return any(tpu(n.meta.get("example_value", n.meta.get("val")))
               for n in getattr(getattr(gm, "graph", None), "nodes", ()))


def _say_once(config):
    ignored = ", ".join(f"{k}={v!r}" for k, v in sorted(config.items()))
    if ignored in _said:
        return
    _said.add(ignored)
    warnings.warn("torch.compile: graphs on tpu tensors are compiled by torch_pjrt's backend "
                  "'tpu' (the default backend, Inductor, has no tpu code generator here)"
                  + (f"; Inductor modes and options ignored: {ignored}" if ignored else ""),
                  stacklevel=3)


def install():
    """Wraps torch.compile's default-backend callable (idempotent)."""
    wrapper = torch._TorchCompileInductorWrapper
    inductor_call = wrapper.__call__
    if getattr(inductor_call, "_tpu_aware", False):
        return

    def __call__(self, model_, inputs_, **kwargs):
        if _on_tpu(model_, inputs_):
            _say_once({**self.config, **(kwargs.get("config_patches") or {})})
            from torch_pjrt import compile as tpu_compile
            return tpu_compile.backend(model_, inputs_)
        return inductor_call(self, model_, inputs_, **kwargs)

    __call__._tpu_aware = True
    __call__.__doc__ = inductor_call.__doc__
    wrapper.__call__ = __call__
