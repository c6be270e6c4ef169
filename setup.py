"""Builds torch_pjrt._C: the C11 core (csrc/base, runtime, hlo, ops, exec), built by the Makefile
into a static library, and the thin C++ PrivateUse1 glue (csrc/torch) compiled against the
installed torch and linked with it. The PJRT header comes from the installed plugin package
(xla-cpu-pjrt)."""
import glob
import os
import shutil
import subprocess

from setuptools import setup

ROOT = os.path.dirname(os.path.abspath(__file__))
CORE_LIB = os.path.join(ROOT, "build", "core", "libtpcore.a")


def pjrt_include():
    import xla_plugins.xla_cpu_pjrt as plugin
    inc = os.path.join(os.path.dirname(plugin.__file__), "include")
    if not os.path.exists(os.path.join(inc, "pjrt_c_api.h")):
        raise RuntimeError("pjrt_c_api.h not found in the xla-cpu-pjrt package at " + inc)
    return inc


def extensions():
    if os.environ.get("TORCH_PJRT_SKIP_EXT"):  # metadata-only install; make builds in place
        return [], {}
    from torch.utils.cpp_extension import BuildExtension, CppExtension

    import torch
    # Kineto's headers (the profiler plugin, csrc/torch/profiler.cpp) ship inside torch's wheel.
    kineto = os.path.join(os.path.dirname(torch.__file__), "include", "kineto")
    includes = [os.path.join(ROOT, "csrc"), pjrt_include(), kineto]

    class Build(BuildExtension):
        """Builds the C core with the Makefile (its sources and flags live there: `make core`,
        a static library the C tests link too), then the C++ glue, linked against it."""

        def build_extensions(self):
            subprocess.check_call(["make", "-s", "-C", ROOT, "core", f"PJRT_INC={pjrt_include()}"])
            super().build_extensions()

        def copy_file(self, src, dst, *args, **kwargs):
            """Replaces the in-place library atomically: a process that has the old one loaded
            (a test, a second terminal) keeps its mapping, where copying over the file would
            truncate it under that process and crash it."""
            if not dst.endswith(".so"):
                return super().copy_file(src, dst, *args, **kwargs)
            tmp = f"{dst}.{os.getpid()}.tmp"
            shutil.copyfile(src, tmp)
            shutil.copymode(src, tmp)
            os.replace(tmp, dst)
            return dst, 1

    ext = CppExtension(
        "torch_pjrt._C",
        sources=sorted(glob.glob("csrc/torch/**/*.cpp", recursive=True)),
        include_dirs=includes,
        extra_compile_args={"cxx": ["-O2", "-std=c++20"]},
        extra_objects=[CORE_LIB],
        depends=[CORE_LIB],  # relink when the core changes
        libraries=["dl", "pthread"],
    )
    return [ext], {"build_ext": Build}


ext_modules, cmdclass = extensions()
setup(ext_modules=ext_modules, cmdclass=cmdclass)
