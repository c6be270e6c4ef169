"""The device itself: registration, Tensor/Module helpers, torch.tpu.*, torch.accelerator.*,
plugin_info()."""
import os

import pytest
import torch

import torch_pjrt
from tpu_helpers import DEVICE, assert_same, make, run_json


def test_readme_example():
    x = torch.arange(6., device="tpu").reshape(2, 3)
    assert x.device.type == "tpu"
    assert (x @ x.T).sum().item() == 83.0


def test_device_string_and_index():
    t = torch.ones(2, device="tpu")
    assert t.device == torch.device("tpu", 0)
    assert str(t.device) == "tpu:0"
    assert torch.ones(2, device="tpu:0").device == torch.device("tpu:0")
    assert torch.ones(2, device=torch.device("tpu", 0)).device.type == "tpu"
    assert torch._C._get_privateuse1_backend_name() == "tpu"


def test_is_tpu_and_tensor_tpu():
    c = torch.arange(5.)
    assert not c.is_tpu
    t = c.tpu()
    assert t.is_tpu and t.device.type == "tpu"
    assert_same(t, c)
    assert not t.cpu().is_tpu
    # Tensor.tpu() on a tpu tensor is a no-op returning the same tensor.
    assert t.tpu() is t


def test_module_to_tpu_and_forward():
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 3)
    ref = m(torch.ones(2, 4))
    m.to("tpu")
    assert all(p.device.type == "tpu" for p in m.parameters())
    out = m(torch.ones(2, 4, device="tpu"))
    assert_same(out, ref.detach())
    m2 = torch.nn.Linear(2, 2).tpu()
    assert m2.weight.is_tpu and m2.bias.is_tpu
    m2.cpu()
    assert m2.weight.device.type == "cpu"


def test_is_available_device_count_current_device():
    assert torch.tpu.is_available() is True
    n = torch.tpu.device_count()
    assert isinstance(n, int) and n >= 1
    assert torch.tpu.current_device() == 0
    assert torch.tpu.is_initialized()


def test_set_device_valid_and_out_of_range():
    torch.tpu.set_device(0)
    assert torch.tpu.current_device() == 0
    torch.tpu.set_device("tpu:0")
    assert torch.tpu.current_device() == 0
    bad = torch.tpu.device_count()
    with pytest.raises(RuntimeError, match="out of range"):
        torch.tpu.set_device(bad)
    assert torch.tpu.current_device() == 0
    with pytest.raises(RuntimeError, match="out of range"):
        torch.ones(2, device=f"tpu:{bad}")
    # still usable
    assert torch.ones(2, device="tpu").sum().item() == 2.0


def test_device_context_manager():
    with torch.tpu.device(0):
        assert torch.tpu.current_device() == 0
        t = torch.ones(2, device="tpu")
    assert t.device == torch.device("tpu", 0)
    assert torch.tpu.current_device() == 0


def test_random_ops_follow_torch_manual_seed(quiet_fallbacks):
    # native random ops and fallen-back ones both draw from the tpu generator torch.manual_seed seeds
    torch.manual_seed(123)
    a = torch.rand(5, device="tpu")
    b = torch.randn(2, 3, device="tpu")
    torch.manual_seed(123)
    a2 = torch.rand(5, device="tpu")
    b2 = torch.randn(2, 3, device="tpu")
    assert a.is_tpu and b.is_tpu
    assert torch.equal(a.cpu(), a2.cpu()) and torch.equal(b.cpu(), b2.cpu())
    assert ((a.cpu() >= 0) & (a.cpu() < 1)).all()
    torch.manual_seed(124)
    assert not torch.equal(torch.rand(5, device="tpu").cpu(), a.cpu())


def test_synchronize():
    x = make((64, 64), torch.float32).to("tpu")
    y = x @ x
    torch.tpu.synchronize()
    torch.tpu.synchronize(0)
    assert_same(y, make((64, 64), torch.float32) @ make((64, 64), torch.float32))


def test_get_device_name():
    name = torch.tpu.get_device_name()
    assert isinstance(name, str) and name
    assert torch.tpu.get_device_name(0) == name
    assert name == torch_pjrt.plugin_info()["devices"][0]


def test_memory_allocated_tracks_tensor_bytes():
    torch.tpu.synchronize()
    before = torch.tpu.memory_allocated()
    x = torch.empty(1000, 3, device="tpu")
    assert torch.tpu.memory_allocated() - before == 1000 * 3 * 4
    assert torch.tpu.memory_allocated(0) == torch.tpu.memory_allocated()
    y = torch.empty(17, dtype=torch.float64, device="tpu")
    assert torch.tpu.memory_allocated() - before == 1000 * 3 * 4 + 17 * 8
    assert torch.tpu.max_memory_allocated() >= torch.tpu.memory_allocated()
    del x, y
    assert torch.tpu.memory_allocated() == before


def test_views_do_not_allocate():
    x = torch.empty(100, device="tpu")
    before = torch.tpu.memory_allocated()
    v = x[10:20].view(2, 5).t()
    assert torch.tpu.memory_allocated() == before
    del v, x


def test_peak_memory_and_reset():
    torch.tpu.reset_peak_memory_stats()
    base = torch.tpu.memory_allocated()
    assert torch.tpu.max_memory_allocated() == base
    x = torch.empty(4096, device="tpu")
    del x
    peak = torch.tpu.max_memory_allocated()
    assert peak >= base + 4096 * 4
    assert torch.tpu.memory_allocated() == base
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == torch.tpu.memory_allocated() == base


def test_memory_stats_and_empty_cache():
    x = torch.empty(256, device="tpu")
    s = torch.tpu.memory_stats()
    assert s["allocated_bytes.all.current"] == torch.tpu.memory_allocated()
    assert s["allocated_bytes.all.peak"] == torch.tpu.max_memory_allocated()
    assert s["allocated_bytes.all.current"] >= 256 * 4
    assert s["limit_bytes"] > 0
    free, total = torch.tpu.mem_get_info()
    assert total == s["limit_bytes"] and 0 <= free <= total
    del x
    torch.tpu.empty_cache()
    assert torch.tpu.memory_allocated() == torch.tpu.memory_stats()["allocated_bytes.all.current"]


def test_event_record_synchronize_query():
    e = torch.tpu.Event()
    e.record()
    x = make((128, 128), torch.float32).to("tpu")
    y = (x @ x).sum()
    e2 = torch.tpu.Event()
    e2.record()
    e2.synchronize()
    assert e2.query() is True
    assert e.query() is True
    assert torch.isfinite(y.cpu())


def test_tpu_event_elapsed_time():
    start = torch.tpu.Event(enable_timing=True)
    end = torch.tpu.Event(enable_timing=True)
    start.record()
    x = make((128, 128), torch.float32).to("tpu")
    (x @ x).sum()
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float) and ms >= 0


def test_generic_event_elapsed_time():
    start = torch.Event("tpu", enable_timing=True)
    end = torch.Event("tpu", enable_timing=True)
    start.record()
    x = make((128, 128), torch.float32).to("tpu")
    (x @ x).sum()
    end.record()
    end.synchronize()
    assert end.query()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float) and ms >= 0


def test_stream_objects():
    s = torch.tpu.Stream()
    assert s.device.type == "tpu"
    cur = torch.tpu.current_stream()
    assert cur.device == torch.device("tpu", 0)
    assert torch.tpu.default_stream().device.type == "tpu"
    with torch.tpu.stream(s):
        y = torch.ones(3, device="tpu") * 2
    s.synchronize()
    assert y.sum().item() == 6.0


def test_manual_seed_and_rng_state_round_trip():
    torch.tpu.manual_seed(1234)
    assert torch.tpu.initial_seed() == 1234
    state = torch.tpu.get_rng_state()
    assert isinstance(state, torch.Tensor) and state.dtype == torch.uint8
    assert state.device.type == "cpu"
    torch.tpu.manual_seed(99)
    assert torch.tpu.initial_seed() == 99
    assert not torch.equal(torch.tpu.get_rng_state(), state)
    torch.tpu.set_rng_state(state)
    assert torch.tpu.initial_seed() == 1234
    assert torch.equal(torch.tpu.get_rng_state(), state)
    torch.tpu.manual_seed_all(7)
    assert torch.tpu.initial_seed() == 7
    states = torch.tpu.get_rng_state_all()
    assert len(states) == torch.tpu.device_count()
    torch.tpu.set_rng_state_all(states)
    assert torch.tpu.initial_seed() == 7


def test_set_rng_state_rejects_garbage():
    with pytest.raises(RuntimeError):
        torch.tpu.set_rng_state(torch.zeros(3, dtype=torch.uint8))
    torch.tpu.manual_seed(5)
    assert torch.tpu.initial_seed() == 5


def test_torch_accelerator():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("tpu")
    assert torch.accelerator.device_count() == torch.tpu.device_count()
    x = torch.ones(8, device="tpu") + 1
    torch.accelerator.synchronize()
    assert x.sum().item() == 16.0


def test_plugin_info_fields():
    info = torch_pjrt.plugin_info()
    for key in ("platform", "plugin_path", "pjrt_api_version", "devices"):
        assert key in info, key
    assert isinstance(info["platform"], str) and info["platform"]
    assert os.path.isfile(info["plugin_path"])
    major, minor = info["pjrt_api_version"]
    assert isinstance(major, int) and isinstance(minor, int) and major >= 0 and minor >= 0
    assert isinstance(info["devices"], list)
    assert len(info["devices"]) == torch.tpu.device_count()
    assert torch_pjrt.init_error() is None


def test_native_ops_listing():
    ops = torch_pjrt.native_ops()
    expected = {
        "abs", "abs_", "abs.out", "add.Tensor", "add_.Tensor", "add.out", "add.Scalar",
        "addmm", "addmm_", "addmm.out", "copy", "div.Tensor", "div_.Tensor", "div.out", "exp",
        "exp_", "fill.Scalar", "fill_.Scalar", "maximum", "maximum.out", "minimum",
        "minimum.out", "mm", "mm.out", "mul.Tensor", "mul_.Tensor", "mul.Scalar", "mul.out",
        "neg", "neg_", "relu", "relu_", "sigmoid", "sigmoid_", "sqrt", "sqrt_", "sub.Tensor",
        "sub_.Tensor", "sub.out", "sum", "sum.dim_IntList", "sum.IntList_out", "tanh", "tanh_",
        "threshold_backward"}
    assert expected <= set(ops), sorted(expected - set(ops))
    assert len(ops) == len(set(ops))
    assert all(not o.startswith("aten::") for o in ops)


def test_fresh_device_tensors_of_every_dtype():
    for dt in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
               torch.float16, torch.bfloat16, torch.float32, torch.float64):
        t = torch.ones(3, dtype=dt, device=DEVICE)
        assert t.dtype == dt and t.is_tpu
        assert torch.equal(t.cpu(), torch.ones(3, dtype=dt))


def test_concurrent_use_from_threads():
    import threading

    errors = []

    def work(k):
        try:
            c = torch.arange(64, dtype=torch.float32).reshape(8, 8) + k
            t = c.to("tpu")
            for i in range(30):
                got = ((t * (i + 1) + t) @ t.t()).sum(0).cpu()
                want = ((c * (i + 1) + c) @ c.t()).sum(0)
                if not torch.allclose(got, want, rtol=1e-5):
                    errors.append((k, i, "value"))
                    return
                t2 = t.clone()
                t2[::2].mul_(0)
                if not (torch.equal(t2[1::2].cpu(), c[1::2])
                        and torch.equal(t2[::2].cpu(), torch.zeros(4, 8))):
                    errors.append((k, i, "view"))
                    return
        except Exception as e:  # reported below
            errors.append((k, repr(e)))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not any(th.is_alive() for th in threads), "a worker thread hung"
    assert errors == []


_THREADS = """
import ctypes, json, torch, torch_pjrt
torch.ones(1, device="tpu").cpu()
getenv = ctypes.CDLL(None).getenv  # the C environment: os.environ is a copy made at start
getenv.restype = ctypes.c_char_p
print(json.dumps({"nproc": getenv(b"PJRT_NPROC").decode()}))
"""


def test_compute_pool_leaves_a_core_for_the_dispatching_thread():
    cores = len(os.sched_getaffinity(0))
    got, _ = run_json(_THREADS, PJRT_NPROC=None, NPROC=None)
    assert got["nproc"] == str(max(1, cores - 1))
    # The user's choice stands.
    got, _ = run_json(_THREADS, PJRT_NPROC=3, NPROC=None)
    assert got["nproc"] == "3"


# ---------------------------------------------------------------- what CUDA scripts call

def test_torch_accelerator_memory_api_agrees_with_torch_tpu():
    x = torch.empty(1024, device="tpu")
    dev = torch.device("tpu", 0)
    assert torch.accelerator.memory_allocated(dev) == torch.tpu.memory_allocated() >= 4096
    assert torch.accelerator.max_memory_allocated(dev) == torch.tpu.max_memory_allocated()
    stats = torch.accelerator.memory_stats(dev)
    assert stats["allocated_bytes.all.current"] == torch.tpu.memory_stats()["allocated_bytes.all.current"]
    assert stats["allocation.all.allocated"] >= 1
    free, total = torch.accelerator.get_memory_info(dev)
    assert (free, total) == torch.tpu.mem_get_info() and 0 < free <= total
    torch.accelerator.reset_peak_memory_stats(dev)
    assert torch.accelerator.max_memory_allocated(dev) == torch.accelerator.memory_allocated(dev)
    torch.accelerator.empty_cache()
    del x
    torch.tpu.reset_max_memory_allocated()
    assert torch.tpu.max_memory_allocated() == torch.tpu.memory_allocated()
    assert "Allocated memory" in torch.tpu.memory_summary()
    assert torch.tpu.memory_stats_as_nested_dict()["allocated_bytes"]["all"]["current"] >= 0
    with pytest.raises(NotImplementedError, match="memory_stats"):
        torch.tpu.memory_snapshot()


def test_device_properties_and_capability():
    p = torch.tpu.get_device_properties(0)
    assert p.name == torch.tpu.get_device_name(0) and p.total_memory > 0
    assert p.platform == torch_pjrt.plugin_info()["platform"]
    assert torch.tpu.get_device_capability() == (0, 0)
    assert issubclass(torch.tpu.OutOfMemoryError, RuntimeError)
    assert not torch.tpu.is_tf32_supported() and torch.tpu.is_bf16_supported()


def test_per_process_memory_fraction_caps_allocation():
    total = torch.tpu.get_device_properties(0).total_memory
    try:
        torch.tpu.set_per_process_memory_fraction(0.5)
        assert abs(torch.tpu.get_per_process_memory_fraction() - 0.5) < 1e-6
        with pytest.raises(torch.tpu.OutOfMemoryError):
            torch.empty(int(total * 0.6) // 4, device="tpu")
    finally:
        torch.tpu.set_per_process_memory_fraction(1.0)
    assert torch.ones(2, device="tpu").sum().item() == 2


def test_torch_cuda_names_are_here_or_left_out_on_purpose():
    import types
    from torch_pjrt.device_module import LEFT_OUT
    public = []
    for n in dir(torch.cuda):
        v = getattr(torch.cuda, n)
        mod = v.__name__ if isinstance(v, types.ModuleType) else getattr(v, "__module__", None)
        if not n.startswith("_") and mod and mod.startswith("torch"):
            public.append(n)
    missing = sorted(n for n in public if not hasattr(torch.tpu, n) and n not in LEFT_OUT)
    assert missing == [], f"torch.cuda names neither in torch.tpu nor in LEFT_OUT: {missing}"
    stale = sorted(n for n in LEFT_OUT if hasattr(torch.tpu, n))
    assert stale == [], f"LEFT_OUT names torch.tpu has: {stale}"


def test_default_generators_and_capability_flags_as_torch_cuda():
    gens = torch.tpu.default_generators
    assert len(gens) == torch.tpu.device_count() and gens[0].device == torch.device("tpu", 0)
    torch.tpu.manual_seed(5)
    assert gens[0].initial_seed() == 5
    assert torch.tpu.has_half is True and torch.tpu.has_magma is False


def test_streams_are_objects_that_become_current():
    s = torch.Stream("tpu")  # no index: the current device
    assert s.device_index == 0 and s.device_type == torch.tpu.default_stream().device_type
    assert s != torch.tpu.default_stream()
    prev = torch.accelerator.current_stream()
    torch.accelerator.set_stream(s)
    try:
        assert torch.tpu.current_stream() == s == torch.accelerator.current_stream()
        with torch.tpu.StreamContext(torch.tpu.default_stream()):
            assert torch.tpu.current_stream() == torch.tpu.default_stream()
        assert torch.tpu.current_stream() == s
        torch.tpu.set_stream(torch.tpu.default_stream())
        assert torch.tpu.current_stream() == torch.tpu.default_stream()
    finally:
        torch.accelerator.set_stream(prev)
    x = torch.ones(4, device="tpu")
    x.record_stream(s)  # one in-order queue: nothing to record, and no error
    with torch.tpu.stream(s):
        y = x * 3
    s.synchronize()
    assert y.sum().item() == 12


def test_tpu_amp_names():
    with torch.tpu.amp.autocast():
        y = torch.mm(torch.ones(2, 2, device="tpu"), torch.ones(2, 2, device="tpu"))
    assert y.dtype == torch.bfloat16
    scaler = torch.tpu.amp.GradScaler()
    assert isinstance(scaler, torch.amp.GradScaler) and scaler._device == "tpu"


FORK_CHILD = r"""
import json, multiprocessing as mp, torch
x = torch.ones(3, device="tpu")  # the device is in use before the fork

def child(q):
    out = {"cpu_work": torch.ones(4).sum().item(), "bad_fork": torch.tpu._is_in_bad_fork()}
    try:
        torch.ones(2, device="tpu").sum().item()
        out["device"] = "no error"
    except RuntimeError as e:
        out["device"] = str(e)
    q.put(out)

ctx = mp.get_context("fork")
q = ctx.Queue()
p = ctx.Process(target=child, args=(q,))
p.start()
got = q.get(timeout=60)
p.join(60)
got["exitcode"] = p.exitcode
got["parent"] = (x * 2).sum().item()
loader = torch.utils.data.DataLoader(list(range(8)), batch_size=4, num_workers=2,
                                     multiprocessing_context="fork")
got["loader"] = [b.tolist() for b in loader]
print(json.dumps(got))
"""


def test_fork_after_device_use_raises_in_the_child_and_spares_the_parent():
    out, _ = run_json(FORK_CHILD, timeout=180)
    assert "forked subprocess" in out["device"] and "'spawn' start method" in out["device"], out
    assert out["cpu_work"] == 4.0 and out["bad_fork"] is True and out["exitcode"] == 0
    assert out["parent"] == 6.0
    assert out["loader"] == [[0, 1, 2, 3], [4, 5, 6, 7]]  # workers that stay on CPU work


EXIT_SCRIPT = r"""
import torch
m = torch.nn.Linear(8, 4).to("tpu")
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for _ in range(3):
    loss = m(torch.randn(16, 8, device="tpu")).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(float(loss))
"""


def test_processes_that_ran_backward_exit_cleanly(tmp_path):
    # Exit after backward used to abort (code 134, "terminate called without an active
    # exception") when the autograd device thread released its last task during finalization.
    import subprocess, sys
    from tpu_helpers import child_env
    codes = []
    for cache in ("0", str(tmp_path / "cache")):
        procs = [subprocess.Popen([sys.executable, "-c", EXIT_SCRIPT], env=child_env(TORCH_PJRT_CACHE_DIR=cache),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for _ in range(4)]  # in parallel: a loaded machine
        for p in procs:
            _, err = p.communicate(timeout=300)
            codes.append((p.returncode, err[-300:] if p.returncode else ""))
    assert all(c == 0 for c, _ in codes), codes
