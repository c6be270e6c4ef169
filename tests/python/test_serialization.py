"""tpu tensors leaving the process: pickle, copy.deepcopy, torch.save's two formats, storages,
map_location both ways, torch.multiprocessing queues and Ray tasks and actors. Each is what a
library does with a tensor (Ray and multiprocessing pickle their arguments; checkpoints use
torch.save), compared with the same tensors on CPU."""
import copy
import io
import os
import pickle
import subprocess
import sys
import textwrap

import pytest
import torch

from tpu_helpers import DEVICE

_ENV = {**os.environ, "PYTHONPATH": os.path.dirname(__file__)}


_BASE = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
# name -> the tensor made from a base on the given device (views are views of that base)
_CASES = {
    "f32": lambda b: b,
    "transposed": lambda b: b.t(),
    "strided view": lambda b: b[1:, ::2],
    "bf16": lambda b: b.to(torch.bfloat16),
    "int64": lambda b: (b * 10).long(),
    "bool": lambda b: b > 0,
    "complex64": lambda b: torch.complex(b, -b),
    "scalar": lambda b: b[1, 2],
    "empty": lambda b: b[:0],
}


@pytest.mark.parametrize("name", list(_CASES))
def test_pickle_round_trip_keeps_device_dtype_and_strides(name):
    cpu, t = _CASES[name](_BASE), _CASES[name](_BASE.to(DEVICE))
    back = pickle.loads(pickle.dumps(t))
    assert back.device == t.device and back.dtype == cpu.dtype
    assert back.size() == cpu.size() and back.stride() == t.stride()
    assert torch.equal(back.cpu(), cpu)


def test_pickled_parameter_keeps_requires_grad_and_class():
    p = torch.nn.Parameter(torch.randn(3, 2).to(DEVICE))
    back = pickle.loads(pickle.dumps(p))
    assert type(back) is torch.nn.Parameter and back.requires_grad and back.device == p.device
    assert torch.equal(back.cpu(), p.detach().cpu())


def test_deepcopy_of_a_module_state_through_pickle():
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).to(DEVICE)
    state = pickle.loads(pickle.dumps(m.state_dict()))
    assert all(v.device.type == "tpu" for v in state.values())
    fresh = copy.deepcopy(m)
    fresh.load_state_dict(state)
    x = torch.randn(2, 4)
    assert torch.allclose(fresh(x.to(DEVICE)).cpu(), m.cpu()(x))


@pytest.mark.parametrize("zipfile", [True, False], ids=["zipfile", "legacy"])
def test_save_load_views_share_storage_in_both_formats(zipfile):
    base = torch.arange(12.).to(DEVICE)
    buf = io.BytesIO()
    torch.save([base[2:8].view(2, 3), base[::2]], buf, _use_new_zipfile_serialization=zipfile)
    buf.seek(0)
    a, b = torch.load(buf)
    assert a.device.type == b.device.type == "tpu"
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    a.add_(100)  # one storage: the other view sees the write, as on CPU and CUDA
    assert b.cpu().tolist() == [0., 102., 104., 106., 8., 10.]


@pytest.mark.parametrize("zipfile", [True, False], ids=["zipfile", "legacy"])
def test_map_location_both_ways(zipfile):
    cpu = torch.randn(3, 4)
    buf = io.BytesIO()
    torch.save({"w": cpu.to(DEVICE)}, buf, _use_new_zipfile_serialization=zipfile)
    buf.seek(0)
    on_cpu = torch.load(buf, map_location="cpu")["w"]
    assert on_cpu.device.type == "cpu" and torch.equal(on_cpu, cpu)
    buf = io.BytesIO()
    torch.save({"w": cpu}, buf, _use_new_zipfile_serialization=zipfile)
    buf.seek(0)
    on_tpu = torch.load(buf, map_location="tpu")["w"]
    assert on_tpu.device.type == "tpu" and torch.equal(on_tpu.cpu(), cpu)


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
def test_storages_serialize_and_pickle():
    t = torch.arange(6, dtype=torch.int32)
    loaded = {}
    for dev in ("cpu", DEVICE):
        buf = io.BytesIO()
        torch.save(t.to(dev).untyped_storage(), buf)
        buf.seek(0)
        loaded[dev] = torch.load(buf)
    s, ref = loaded[DEVICE], loaded["cpu"]
    assert type(s) is type(ref) and s.device.type == "tpu" and s.nbytes() == ref.nbytes() == 24
    assert s.cpu().tolist() == ref.tolist()
    typed = pickle.loads(pickle.dumps(t.to(DEVICE).storage()))  # TypedStorage pickles by torch.save
    assert typed.device.type == "tpu" and typed.dtype == torch.int32 and typed.tolist() == list(range(6))


_QUEUE_SCRIPT = textwrap.dedent("""
    import torch, torch.multiprocessing as mp

    def child(inbox, outbox):
        t = inbox.get()
        outbox.put((str(t.device), t * 2))

    if __name__ == "__main__":
        ctx = mp.get_context("spawn")
        inbox, outbox = ctx.Queue(), ctx.Queue()
        p = ctx.Process(target=child, args=(inbox, outbox))
        p.start()
        base = torch.arange(12.).to("tpu")
        inbox.put(base[1::3])                      # a strided view of a bigger storage
        dev, doubled = outbox.get(timeout=120)     # comes back as a tpu tensor too
        p.join(60)
        assert dev == "tpu:0" and doubled.device.type == "tpu", (dev, doubled.device)
        assert doubled.cpu().tolist() == [2., 8., 14., 20.], doubled
        print("OK")
""")


def test_multiprocessing_queue_sends_tpu_tensors_by_value(tmp_path):
    """CUDA shares the memory by IPC; a PJRT buffer cannot be mapped into another process, so
    the tensor travels by value (as shared CPU memory) and lands on the receiver's tpu."""
    script = tmp_path / "send_over_queue.py"
    script.write_text(_QUEUE_SCRIPT)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240,
                       env=_ENV)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr[-3000:]


_RAY_SCRIPT = textwrap.dedent("""
    import ray, torch
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)

    @ray.remote
    def scale(t, k):
        return str(t.device), t * k

    @ray.remote
    class Accumulator:
        def __init__(self):
            self.total = torch.zeros(3, device="tpu")
        def add(self, t):
            self.total += t
            return self.total

    x = torch.arange(3.).to("tpu")
    dev, y = ray.get(scale.remote(x, 2.0))
    assert dev == "tpu:0" and y.device.type == "tpu" and y.cpu().tolist() == [0., 2., 4.], (dev, y)
    acc = Accumulator.remote()
    acc.add.remote(x)
    total = ray.get(acc.add.remote(x * 10))
    assert total.device.type == "tpu" and total.cpu().tolist() == [0., 11., 22.], total
    ray.shutdown()
    print("OK")
""")


def test_ray_task_and_actor_pass_tpu_tensors_both_ways(tmp_path):
    pytest.importorskip("ray", reason="ray is a pinned test dependency (requirements.txt)")
    script = tmp_path / "ray_job.py"
    script.write_text(_RAY_SCRIPT)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                       env=_ENV, cwd=tmp_path)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr[-3000:]
