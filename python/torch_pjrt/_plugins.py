"""Finds the PJRT plugin: TORCH_PJRT_PLUGIN (a path, or one of the names cpu / tpu / cuda), else
libtpu if installed, else XLA's CPU plugin."""
import importlib.util
import os

_KNOWN = {
    # name -> (python package, file inside it) candidates, in order of preference
    "cpu": [("xla_plugins.xla_cpu_pjrt", "xla_cpu_pjrt.so")],
    "tpu": [("libtpu", "libtpu.so")],
    "cuda": [("xla_plugins.xla_cuda13_pjrt", "xla_cuda13_pjrt.so"),
             ("xla_plugins.xla_cuda12_pjrt", "xla_cuda12_pjrt.so"),
             ("jax_plugins.xla_cuda13", "xla_cuda_plugin.so"),
             ("jax_plugins.xla_cuda12", "xla_cuda_plugin.so")],
}


def _package_dir(name):
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def find(name):
    """Path of the known plugin |name|, or None if no package providing it is installed."""
    for pkg, fname in _KNOWN[name]:
        d = _package_dir(pkg)
        if d and os.path.exists(os.path.join(d, fname)):
            return os.path.join(d, fname)
    return None


def resolve():
    v = os.environ.get("TORCH_PJRT_PLUGIN", "").strip()
    if v:
        if v in _KNOWN:
            path = find(v)
            if path is None:
                pkgs = ", ".join(p for p, _ in _KNOWN[v])
                raise RuntimeError(f"TORCH_PJRT_PLUGIN={v}: no installed package provides the "
                                   f"{v} PJRT plugin (looked for {pkgs})")
            return path
        return v
    return find("tpu") or find("cpu") or _no_plugin()


def _no_plugin():
    raise RuntimeError("no PJRT plugin found: install xla-cpu-pjrt (CPU), libtpu (TPU) or set "
                       "TORCH_PJRT_PLUGIN to a plugin path")
