"""torch.profiler on tpu, used as CUDA users use it: device time per op from the programs that ran,
a device track in the exported trace, spans for compiles, fallbacks, copies and collectives, tpu
memory events, record_function, schedules and the TensorBoard handler."""
import json

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import (ProfilerActivity, profile, record_function, schedule,
                            tensorboard_trace_handler)

from tpu_helpers import run_json, run_python

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def _trace(p, tmp_path):
    """The exported Chrome trace's events."""
    path = tmp_path / "trace.json"
    p.export_chrome_trace(str(path))
    return json.loads(path.read_text())["traceEvents"]


def _names(p):
    return [e.name for e in p.events()]


def test_a_small_model_has_device_time_on_its_matmuls():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to("tpu")
    x = torch.randn(16, 32, device="tpu")
    m(x).sum().backward()  # compiled and warm
    with profile(activities=ACTIVITIES) as p:
        m(x).sum().backward()
        torch.tpu.synchronize()
    ops = {e.key: e for e in p.key_averages()}
    assert ops["aten::addmm"].self_device_time_total > 0
    assert ops["aten::mm"].self_device_time_total > 0
    # Every program is a device event linked to the op that ran it.
    programs = [e for e in p.events() if e.device_type == DeviceType.PrivateUse1]
    assert {e.name for e in programs} >= {"addmm", "mm"}
    assert all(e.time_range.elapsed_us() >= 0 for e in programs)
    # Every row (which ops lead by device time is the machine's to decide: with 5 rows, addmm
    # fell out of the table behind the backward's small ops on a loaded machine).
    table = p.key_averages().table(sort_by="self_device_time_total", row_limit=-1)
    assert "aten::addmm" in table and "Self TPU" in table


def test_a_first_call_compiles_and_the_second_does_not(tmp_path):
    x = torch.randn(5, 43, 11, device="tpu")  # a shape no other test uses
    with profile(activities=ACTIVITIES) as first:
        torch.logaddexp(x, x * 3)
        torch.tpu.synchronize()
    with profile(activities=ACTIVITIES) as second:
        torch.logaddexp(x, x * 3)
        torch.tpu.synchronize()
    # A miss compiles; a program another process compiled loads from the disk cache.
    spans = [e for e in _trace(first, tmp_path) if e.get("name") in ("tpu::compile", "tpu::load")]
    assert spans, _names(first)
    for s in spans:
        if s["name"] == "tpu::compile":
            assert s["args"]["cache"] == "miss"
            assert s["args"]["compile"].startswith(("first", "new shapes")), s["args"]
        else:
            assert s["args"]["cache"] == "disk hit"
    assert not {"tpu::compile", "tpu::load"} & set(_names(second))
    assert "tpu::execute" in _names(second)


def test_a_fallback_has_a_span_named_by_its_op(quiet_fallbacks):
    t = torch.tensor([[1, 2], [1, 2], [3, 4]], device="tpu")
    with profile(activities=ACTIVITIES) as p:
        torch.unique_consecutive(t, dim=0)
    assert "tpu::fallback unique_consecutive" in _names(p)


def test_copies_carry_their_bytes(tmp_path):
    x = torch.randn(1000, 3)
    with profile(activities=ACTIVITIES) as p:
        y = x.to("tpu")
        y.cpu()
    copies = [e for e in _trace(p, tmp_path) if e.get("cat") == "gpu_memcpy"]
    by_name = {e["name"]: e["args"]["bytes"] for e in copies}
    assert by_name.get("tpu copy host to device") == x.nbytes, copies
    assert by_name.get("tpu copy device to host") == x.nbytes, copies


def test_the_exported_trace_has_a_device_track_with_arrows_from_the_launching_ops(tmp_path):
    x = torch.randn(64, 64, device="tpu")
    (x @ x).sum()
    with profile(activities=ACTIVITIES) as p:
        (x @ x).sum()
        torch.tpu.synchronize()
    events = _trace(p, tmp_path)
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    tpu_pid = next(pid for pid, n in names.items() if n == "tpu:0")
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert kernels and all(e["pid"] == tpu_pid for e in kernels)
    assert {"mm", "sum"} <= {e["name"] for e in kernels}
    # One arrow per program: it starts on the launch ("tpu::execute") and ends on the kernel.
    starts = {e["id"] for e in events if e.get("cat") == "ac2g" and e["ph"] == "s"}
    ends = {e["id"] for e in events if e.get("cat") == "ac2g" and e["ph"] == "f"}
    assert len(starts) >= len(kernels) and starts == ends


def test_memory_events_add_up_to_memory_allocated():
    torch.tpu.synchronize()
    before = torch.tpu.memory_allocated()
    with profile(activities=ACTIVITIES, profile_memory=True) as p:
        a = torch.empty(1000, device="tpu")
        b = torch.ones(256, 4, device="tpu")
        del a
        torch.tpu.synchronize()
    delta = torch.tpu.memory_allocated() - before
    recorded = [e for e in p.profiler.kineto_results.events()
                if e.name() == "[memory]" and e.device_type() == DeviceType.PrivateUse1]
    assert len(recorded) >= 3  # two allocations, one free
    assert sum(e.nbytes() for e in recorded) == delta == b.nbytes


def test_a_compiled_graph_runs_as_one_program_named_by_its_graph(fresh_dynamo):
    f = torch.compile(lambda x: (x.sin() * 2 + x.cos()).sum(dim=0), backend="tpu")
    x = torch.randn(32, 8, device="tpu")
    f(x)
    with profile(activities=ACTIVITIES) as p:
        f(x)
        torch.tpu.synchronize()
    programs = [e for e in p.events() if e.device_type == DeviceType.PrivateUse1]
    assert len(programs) == 1 and programs[0].name.startswith("tpu graph 0/0 forward"), \
        [e.name for e in programs]
    ops = {e.key: e for e in p.key_averages()}
    assert ops[programs[0].name].device_time_total > 0  # the graph's run, as an op of its own


def test_record_function_schedule_and_the_tensorboard_handler_work(tmp_path):
    x = torch.randn(16, 16, device="tpu")
    with profile(activities=ACTIVITIES, schedule=schedule(wait=1, warmup=1, active=2),
                 on_trace_ready=tensorboard_trace_handler(str(tmp_path))) as p:
        for _ in range(4):
            with record_function("my_step"):
                (x @ x).relu().sum()
            p.step()
    files = list(tmp_path.glob("*.pt.trace.json"))
    assert len(files) == 1
    events = json.loads(files[0].read_text())["traceEvents"]
    steps = [e for e in events if e.get("name") == "my_step" and e.get("cat") == "user_annotation"]
    assert len(steps) == 2  # the active steps only
    assert sum(e.get("cat") == "kernel" for e in events) >= 2 * 3


_COLLECTIVES = """
import json, os, tempfile, torch, torch_pjrt, torch.distributed as dist
from torch.profiler import profile, ProfilerActivity
def main(rank, n):
    t = torch.ones(256, device="tpu")
    dist.all_reduce(t)
    dist.barrier()  # a collective of no tensor
    return t[0].item()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as p:
    sums = torch_pjrt.distributed.run_threads(main, 2, args=(2,))
path = os.path.join(tempfile.mkdtemp(), "trace.json")
p.export_chrome_trace(path)
spans = [e for e in json.load(open(path))["traceEvents"]
         if e.get("name", "").startswith("tpu collective")]
print(json.dumps({"sums": sums, "spans": [[e["name"], e["pid"], e["args"]] for e in spans]}))
"""


@pytest.mark.parametrize("transport", ["device", "host"])
def test_collectives_have_spans_with_transport_and_bytes(transport):
    res, _ = run_json(_COLLECTIVES, TORCH_PJRT_CPU_DEVICES="2",
                      TORCH_PJRT_COLLECTIVE_TRANSPORT=transport)
    assert res["sums"] == [2.0, 2.0]
    spans = [s for s in res["spans"] if s[0] == "tpu collective allreduce"]
    assert sorted(s[1] for s in spans) == [0, 1], res["spans"]  # one per rank, on its device
    for _, _, args in spans:
        assert args["bytes"] == 256 * 4
        assert args["collective"].startswith(f"{transport} transport"), args


def test_profiling_prints_no_kineto_errors():
    p = run_python("import torch\n"
                   "from torch.profiler import profile, ProfilerActivity\n"
                   "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):\n"
                   "    (torch.ones(4, device='tpu') + 1).cpu()\n")
    assert p.returncode == 0, p.stderr
    assert "ERROR:" not in p.stderr and "gpuGetDeviceCount" not in p.stderr, p.stderr


def test_the_profiler_without_kineto_times_ops_between_device_markers():
    x = torch.randn(128, 128, device="tpu")
    (x @ x).sum()
    with torch.autograd.profiler.profile(use_device="tpu", use_kineto=False) as p:
        (x @ x).sum()
        torch.tpu.synchronize()
    ops = {e.key: e for e in p.key_averages()}
    assert ops["aten::mm"].self_device_time_total > 0
