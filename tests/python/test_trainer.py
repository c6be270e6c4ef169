"""Hugging Face Trainer and Accelerate on tpu with nothing but the device present: no device
argument, no environment variable. Each run is a child process running
tests/python/scripts/hf_trainer_finetune.py; the CPU run of the same script is the oracle."""
import json
import pathlib
import subprocess
import sys

import pytest
import torch

from tpu_helpers import child_env

SCRIPT = pathlib.Path(__file__).parent / "scripts" / "hf_trainer_finetune.py"


def _run(device, tmp_path, **extra):
    p = subprocess.run([sys.executable, str(SCRIPT), device, json.dumps(extra), str(tmp_path / device)],
                       env=child_env(), capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_plain_accelerator_picks_tpu_and_cpu_true_still_means_cpu():
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    AcceleratorState._reset_state(True)
    assert Accelerator().device.type == "tpu"
    AcceleratorState._reset_state(True)
    assert Accelerator(cpu=True).device.type == "cpu"
    AcceleratorState._reset_state(True)


@pytest.mark.parametrize("extra,tol", [({}, 1e-5), ({"bf16": True}, 2e-2), ({"torch_compile": True}, 1e-4)],
                         ids=["fp32", "bf16", "torch_compile"])
def test_trainer_fine_tune_matches_cpu_step_by_step(tmp_path, extra, tol):
    tpu = _run("tpu", tmp_path, **extra)
    cpu = _run("cpu", tmp_path, **{k: v for k, v in extra.items() if k != "torch_compile"})
    assert tpu["device"] == "tpu:0" and tpu["model_device"] == "tpu:0", tpu
    assert cpu["device"] == "cpu", cpu
    assert len(tpu["losses"]) == len(cpu["losses"]) == 6
    # The Trainer's default optimizer is fused AdamW; it and everything else ran natively.
    assert tpu["optim"].endswith("ADAMW_TORCH_FUSED"), tpu["optim"]
    assert tpu["fallbacks"] == {}, f"ops fell back to CPU: {tpu['fallbacks']}"
    torch.testing.assert_close(torch.tensor(tpu["losses"]), torch.tensor(cpu["losses"]), rtol=tol, atol=tol)
