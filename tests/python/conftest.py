"""Fixtures for the torch_pjrt ("tpu" device) test suite; helpers live in tpu_helpers.py."""
import os
import sys
import warnings

# The developer tools (tools/: the sweeps, the model harness, the fuzzer) are not installed; their
# tests import them as the tools import each other, as sibling modules.
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "tools"))

# The suite sets its own fallback policy: strict mode and silenced fallback warnings from the
# caller's environment would turn the fallback tests upside down. (Read at `import torch`.)
os.environ.pop("TORCH_PJRT_STRICT", None)
os.environ.pop("TORCH_PJRT_QUIET_FALLBACK", None)
os.environ.pop("TORCH_PJRT_EAGER", None)  # tests that count programs expect strict eager

import pytest  # noqa: E402
import torch  # noqa: E402  autoloads torch_pjrt through the torch.backends entry point

import torch_pjrt  # noqa: E402


@pytest.fixture
def fresh_stats():
    """Zeroed torch_pjrt counters (compiles, cache hits, fallbacks) for the test."""
    torch_pjrt.reset_stats()
    yield
    torch_pjrt.reset_stats()


@pytest.fixture
def quiet_fallbacks():
    """Silences the one-time 'runs on CPU' warnings of ops that legitimately fall back."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"tpu: '.*' has no native lowering")
        yield


@pytest.fixture
def fresh_dynamo():
    """Dynamo's caches and the compile backend's stats cleared around a test."""
    import torch_pjrt.compile as tc
    torch._dynamo.reset()
    tc.reset_stats()
    yield
    torch._dynamo.reset()


@pytest.fixture(scope="session")
def tpu_available():
    if not torch.tpu.is_available():
        pytest.fail(f"the tpu device is unavailable: {torch_pjrt.init_error()}")
    return True


@pytest.fixture(autouse=True)
def _device_ready(tpu_available):
    """Every test needs a working device; a broken plugin setup is a failure, not a skip."""
    yield




@pytest.fixture(scope="session", autouse=True)
def _not_strict():
    """Tests opt into strict mode explicitly with torch_pjrt.strict()."""
    with torch_pjrt.strict(False):
        yield
