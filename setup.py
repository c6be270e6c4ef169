"""Builds torch_pjrt._C: the C11 core (csrc/base, runtime, hlo, ops, exec) compiled as C, and the
thin C++ PrivateUse1 glue (csrc/torch) compiled against the installed torch. The PJRT header comes
from the installed plugin package (xla-cpu-pjrt)."""
import glob
import os
import shutil

from setuptools import setup

ROOT = os.path.dirname(os.path.abspath(__file__))
C_DIRS = ["base", "runtime", "hlo", "ops", "exec"]
C_FLAGS = ["-std=c11", "-D_GNU_SOURCE", "-O2", "-fPIC", "-Wall", "-Wextra",
           "-Wno-unused-parameter", "-fvisibility=hidden"]


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

    c_sources = sorted(s for d in C_DIRS for s in glob.glob(os.path.join("csrc", d, "*.c")))
    includes = [os.path.join(ROOT, "csrc"), pjrt_include()]

    class Build(BuildExtension):
        """Compiles the C core as C11 (never as C++) and links it into the extension."""

        def build_extensions(self):
            objects = self.compiler.compile(
                c_sources, output_dir=self.build_temp, include_dirs=includes,
                extra_postargs=C_FLAGS, depends=glob.glob("csrc/*/*.h"))
            for ext in self.extensions:
                ext.extra_objects = objects
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
        sources=sorted(glob.glob("csrc/torch/*.cpp")),
        include_dirs=includes,
        extra_compile_args={"cxx": ["-O2", "-std=c++20"]},
        libraries=["dl", "pthread"],
    )
    return [ext], {"build_ext": Build}


ext_modules, cmdclass = extensions()
setup(ext_modules=ext_modules, cmdclass=cmdclass)
