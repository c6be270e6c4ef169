"""PyTorch Lightning's Trainer on tpu through its own entry points: accelerator="auto" and "tpu",
both namespaces (lightning.pytorch and pytorch_lightning), bf16-mixed, and 2 devices with DDP
over the pjrt process group; each run against the same run with accelerator="cpu"."""
import json
import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("lightning", reason="lightning is a pinned test dependency (requirements.txt)")
pytest.importorskip("pytorch_lightning", reason="a pinned test dependency (requirements.txt)")

SCRIPT = os.path.join(os.path.dirname(__file__), "scripts", "lightning_fit.py")


def _fit(tmp_path, ns, accelerator, devices, precision, cpu_devices=1):
    out = str(tmp_path / f"{ns}-{accelerator}-{devices}-{precision}.json")
    env = {**os.environ, "TORCH_PJRT_CPU_DEVICES": str(cpu_devices), "PYTHONHASHSEED": "0"}
    env.pop("TORCH_PJRT_STRICT", None)
    r = subprocess.run([sys.executable, SCRIPT, ns, accelerator, str(devices), precision, out],
                       capture_output=True, text=True, timeout=400, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    return json.load(open(out)), r.stdout + r.stderr


def _assert_close(tpu, cpu, tol):
    assert len(tpu["losses"]) == len(cpu["losses"]) > 0
    for a, b in zip(tpu["losses"], cpu["losses"]):
        assert abs(a - b) <= tol * max(1.0, abs(b)), (tpu["losses"], cpu["losses"])
    for k, w in cpu["weights"].items():
        for a, b in zip(tpu["weights"][k], w):
            assert abs(a - b) <= tol * max(1.0, abs(b)), k


@pytest.mark.parametrize("ns,accelerator,precision,tol", [
    ("lightning.pytorch", "auto", "32-true", 1e-4),
    ("pytorch_lightning", "tpu", "32-true", 1e-4),
    ("lightning.pytorch", "tpu", "bf16-mixed", 3e-2),
])
def test_trainer_fits_on_tpu_like_cpu(tmp_path, ns, accelerator, precision, tol):
    tpu, log = _fit(tmp_path, ns, accelerator, 1, precision)
    assert (tpu["accelerator"], tpu["strategy"], tpu["device"]) == (
        "TPUAccelerator", "SingleDeviceStrategy", "tpu:0"), tpu
    assert "TPU available: True, using: 1 TPU cores" in log
    assert tpu["checkpoint_on_cpu"]
    cpu, _ = _fit(tmp_path, ns, "cpu", 1, precision)
    _assert_close(tpu, cpu, tol)


def test_trainer_ddp_on_two_tpu_devices_like_two_cpu_processes(tmp_path):
    tpu, log = _fit(tmp_path, "lightning.pytorch", "tpu", 2, "32-true", cpu_devices=2)
    assert (tpu["accelerator"], tpu["strategy"], tpu["world_size"]) == (
        "TPUAccelerator", "DDPStrategy", 2), tpu
    assert tpu["checkpoint_on_cpu"]
    cpu, _ = _fit(tmp_path, "lightning.pytorch", "cpu", 2, "32-true")
    assert cpu["strategy"] == "DDPStrategy"
    _assert_close(tpu, cpu, 1e-4)


_WITH_TORCH_XLA = """
import lightning_fabric.accelerators.xla as xla
xla._XLA_AVAILABLE = True  # as where torch_xla is installed (here with no TPU attached)
xla.XLAAccelerator.is_available = staticmethod(lambda: False)
import pytorch_lightning as L
from pytorch_lightning.accelerators import AcceleratorRegistry, XLAAccelerator
assert AcceleratorRegistry["tpu"]["accelerator"] is XLAAccelerator  # Lightning's own "tpu" stays
for name in ("pjrt", "auto"):
    t = L.Trainer(accelerator=name, devices=1, logger=False, enable_checkpointing=False,
                  enable_progress_bar=False)
    print(name, type(t.accelerator).__name__, type(t.strategy).__name__, t.strategy.root_device)
"""


def test_a_machine_with_torch_xla_keeps_lightnings_tpu_and_gets_this_device_as_pjrt(tmp_path):
    r = subprocess.run([sys.executable, "-c", _WITH_TORCH_XLA], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "pjrt TPUAccelerator SingleDeviceStrategy tpu:0" in r.stdout
    assert "auto TPUAccelerator SingleDeviceStrategy tpu:0" in r.stdout


_PROFILED_FIT = """
import sys, torch, lightning.pytorch as L
from lightning.pytorch.profilers import PyTorchProfiler
from torch.profiler import ProfilerActivity
from torch.utils.data import DataLoader, TensorDataset
class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(8, 4)
    def training_step(self, batch, i):
        return self.net(batch[0]).pow(2).mean()
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)
profiler = PyTorchProfiler(dirpath=sys.argv[1], filename="prof",
                           activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])
trainer = L.Trainer(accelerator="tpu", devices=1, max_steps=8, profiler=profiler, logger=False,
                    enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
trainer.fit(Model(), DataLoader(TensorDataset(torch.randn(64, 8)), batch_size=8))
"""


def test_lightnings_pytorch_profiler_reports_tpu_device_time(tmp_path):
    # Lightning's own profiler (torch.profiler with its default schedule, summary and traces),
    # given the device activity, as a CUDA user gives it ProfilerActivity.CUDA.
    r = subprocess.run([sys.executable, "-c", _PROFILED_FIT, str(tmp_path)], capture_output=True,
                       text=True, timeout=400, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    summary = (tmp_path / "fit-prof.txt").read_text()
    total = re.search(r"Self TPU time total: ([\d.]+)", summary)
    assert total and float(total.group(1)) > 0, summary[-3000:]
    traces = list(tmp_path.glob("*.pt.trace.json"))
    assert traces
    events = json.loads(traces[0].read_text())["traceEvents"]
    assert any(e.get("cat") == "kernel" and e.get("name") == "addmm" for e in events)
