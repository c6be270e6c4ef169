"""Many devices in one process: every device the plugin exposes is tpu:i (TORCH_PJRT_CPU_DEVICES=N
gives the CPU plugin N). Tensors, programs, generators, memory stats and streams are per device;
copies between devices go device to device; an op mixing devices raises. The tests need 4
devices: in a process with fewer, test_in_a_child_with_four_devices runs this file again in a
child process that has them."""
import copy
import os
import subprocess
import sys

import pytest
import torch

import torch_pjrt
from tpu_helpers import assert_same, child_env, make

N = 4
four = pytest.mark.skipif(torch.tpu.device_count() < N, reason="needs TORCH_PJRT_CPU_DEVICES=4")


@pytest.mark.skipif(torch.tpu.device_count() >= N, reason="this process has the devices itself")
def test_in_a_child_with_four_devices():
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", __file__],
                       cwd=os.path.dirname(__file__), env=child_env(TORCH_PJRT_CPU_DEVICES=N),
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-3000:]
    assert " passed" in p.stdout and "skipped" in p.stdout  # the child's own tests ran


@four
def test_every_device_is_a_tpu_index():
    assert torch.tpu.device_count() == N == torch.accelerator.device_count()
    assert len(torch_pjrt.plugin_info()["devices"]) == N
    for i in range(N):
        assert torch.empty(2, device=f"tpu:{i}").device == torch.device("tpu", i)
    with pytest.raises(RuntimeError, match="out of range"):
        torch.empty(1, device=f"tpu:{N}")


@four
def test_ops_run_on_their_own_device():
    x = make((5, 7), torch.float32)
    for i in range(N):
        t = x.to(f"tpu:{i}")
        y = (t.sin() * 2).sum(1)
        assert y.device == torch.device("tpu", i)
        assert_same(y, (x.sin() * 2).sum(1))


@four
@pytest.mark.parametrize("how", ["contiguous", "transposed", "converted", "copy_"])
def test_copies_between_devices(how):
    x = make((4, 6), torch.float32)
    src = x.to("tpu:1")
    if how == "contiguous":
        got, want = src.to("tpu:2"), x
    elif how == "transposed":
        got, want = src.t().to("tpu:3"), x.t()
    elif how == "converted":
        got, want = src.to("tpu:0", torch.float64), x.double()
    else:
        got = torch.zeros(6, 4, device="tpu:2")
        got[1:3].copy_(src.t()[2:4])
        want = torch.zeros(6, 4)
        want[1:3].copy_(x.t()[2:4])
    assert got.device.index != 1
    assert_same(got, want)
    assert "copy_" not in torch_pjrt.stats()["fallbacks"]


@four
def test_an_op_mixing_devices_raises_as_on_cuda():
    a, b = torch.ones(3, device="tpu:0"), torch.ones(3, device="tpu:1")
    with pytest.raises(RuntimeError, match="same device"):
        a + b
    with pytest.raises(RuntimeError, match="same device"):
        torch.cat([a, b])


@four
def test_device_guard_set_device_and_streams_restore():
    assert torch.tpu.current_device() == 0
    with torch.tpu.device(2):
        assert torch.ones(1, device="tpu").device.index == 2
    torch.tpu.set_device(3)
    try:
        assert torch.accelerator.current_device_index() == 3
        assert torch.empty(1, device="tpu").device.index == 3
    finally:
        torch.tpu.set_device(0)
    s = torch.tpu.Stream(device=1)
    with torch.tpu.stream(s):
        assert torch.tpu.current_stream(1) == s
        z = torch.ones(2, device="tpu:1") + 1
    assert torch.tpu.current_device() == 0  # the stream's device is current only inside
    torch.tpu.synchronize(1)
    assert_same(z, torch.full((2,), 2.0))


@four
def test_memory_stats_are_per_device():
    torch.tpu.synchronize()
    before = [torch.tpu.memory_allocated(i) for i in range(N)]
    t = torch.empty(1 << 18, device="tpu:2").fill_(1)
    after = [torch.tpu.memory_allocated(i) for i in range(N)]
    assert after[2] - before[2] >= t.numel() * 4
    assert [after[i] for i in (0, 1, 3)] == [before[i] for i in (0, 1, 3)]
    assert torch.accelerator.memory_allocated(2) == after[2]


@four
def test_generators_are_per_device():
    torch.tpu.manual_seed_all(7)
    a = [torch.randn(4, device=f"tpu:{i}").cpu() for i in range(N)]
    torch.tpu.manual_seed_all(7)
    torch.randn(4, device="tpu:0")  # advances device 0's generator only
    assert_same(torch.randn(4, device="tpu:1"), a[1])
    with torch.tpu.device(3):
        torch.tpu.manual_seed(11)
        c = torch.randn(4, device="tpu").cpu()
        torch.tpu.manual_seed(11)
        assert_same(torch.randn(4, device="tpu:3"), c)


@four
def test_training_step_on_another_device_matches_cpu():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    dev_net = copy.deepcopy(net).to("tpu:2")
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    for model, dev in ((net, "cpu"), (dev_net, "tpu:2")):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x.to(dev)), y.to(dev)).backward()
            opt.step()
    for p, q in zip(dev_net.parameters(), net.parameters()):
        assert p.device == torch.device("tpu", 2)
        assert_same(p, q, atol=1e-6, rtol=1e-5)


@four
def test_a_compiled_function_runs_on_the_device_of_its_inputs():
    f = torch.compile(lambda a, b: (a @ b).relu().sum(0), backend="tpu")
    x, w = make((3, 5), torch.float32), make((5, 2), torch.float32, seed=1)
    for i in (1, 3):
        out = f(x.to(f"tpu:{i}"), w.to(f"tpu:{i}"))
        assert out.device == torch.device("tpu", i)
        assert_same(out, (x @ w).relu().sum(0), atol=1e-6, rtol=1e-5)
