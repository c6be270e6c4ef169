"""Every script in examples/ runs as the README tells a user to run it (`python examples/x.py`,
from the repository's root, in a fresh interpreter) and exits cleanly. The folder of a script run
so is first on the import path: a script named like a standard-library module (profile.py was
one) broke every example's `import torch`, `make demo` included."""
import pathlib
import subprocess
import sys

import pytest

from tpu_helpers import child_env

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.py"))


def test_no_example_shadows_a_standard_library_module():
    assert EXAMPLES
    assert not [n for n in EXAMPLES if n[:-3] in sys.stdlib_module_names]


@pytest.mark.parametrize("script", EXAMPLES)
def test_example_runs(script, tmp_path):
    args = ["--out", str(tmp_path)] if script == "profile_step.py" else []  # its traces
    p = subprocess.run([sys.executable, f"examples/{script}", *args], cwd=ROOT, capture_output=True,
                       text=True, timeout=600, env=child_env(TORCH_PJRT_CACHE_DIR=tmp_path))
    assert p.returncode == 0, f"{script} failed:\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}"
