"""Errors are Python exceptions with a helpful message, and the process keeps working after."""
import ctypes.util
import os

import pytest
import torch

from tpu_helpers import DEVICE, assert_same, make, run_json


def _still_works():
    c = make((3, 4), torch.float32, seed=99)
    t = c.to(DEVICE)
    assert_same((t * 2 + t) @ t.t(), (c * 2 + c) @ c.t())
    torch.tpu.synchronize()


# ---------------------------------------------------------------- bad plugins (subprocess)

BAD_PLUGIN_CHILD = r"""
import json, warnings
with warnings.catch_warnings(record=True) as rec:
    warnings.simplefilter("always")
    import torch
    import torch_pjrt
out = {"available": torch.tpu.is_available(), "count": torch.tpu.device_count(),
       "init_error": torch_pjrt.init_error(),
       "import_warnings": [str(w.message) for w in rec],
       "cpu_ok": (torch.ones(3) + 1).sum().item() == 6.0}
for name, fn in [("ones", lambda: torch.ones(2, device="tpu")),
                 ("to", lambda: torch.arange(3.).to("tpu")),
                 ("plugin_info", lambda: torch_pjrt.plugin_info()),
                 ("synchronize", lambda: torch.tpu.synchronize())]:
    try:
        fn()
        out[name] = None
    except Exception as e:
        out[name] = [type(e).__name__, str(e)]
print(json.dumps(out))
"""


def _check_unavailable(out, needle):
    assert out["available"] is False
    assert out["count"] == 0
    assert out["cpu_ok"] is True  # import torch and CPU work are unaffected
    assert needle in out["init_error"]
    assert any(needle in w for w in out["import_warnings"]), out["import_warnings"]
    for name in ("ones", "to", "plugin_info", "synchronize"):
        assert out[name] is not None, f"{name} did not raise"
        kind, msg = out[name]
        assert kind == "RuntimeError", out[name]
        assert needle in msg, out[name]
        assert "unavailable" in msg, out[name]


def test_nonexistent_plugin_path():
    out, _ = run_json(BAD_PLUGIN_CHILD, TORCH_PJRT_PLUGIN="/nonexistent.so")
    _check_unavailable(out, "/nonexistent.so")
    assert "does not exist" in out["init_error"]


def _libm():
    for cand in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6",
                 "/lib64/libm.so.6", "/usr/lib64/libm.so.6"):
        if os.path.exists(cand):
            return cand
    name = ctypes.util.find_library("m")
    if name and os.path.isabs(name) and os.path.exists(name):
        return name
    pytest.skip("no absolute path to libm found on this system to use as a non-PJRT library")


def test_shared_library_without_get_pjrt_api():
    libm = _libm()
    out, _ = run_json(BAD_PLUGIN_CHILD, TORCH_PJRT_PLUGIN=libm)
    _check_unavailable(out, "GetPjrtApi")
    assert libm in out["init_error"]


def test_file_that_is_not_a_shared_library(tmp_path):
    bogus = tmp_path / "plugin.so"
    bogus.write_text("this is not an ELF file\n")
    out, _ = run_json(BAD_PLUGIN_CHILD, TORCH_PJRT_PLUGIN=bogus)
    _check_unavailable(out, str(bogus))


# ---------------------------------------------------------------- mixing devices, shapes

def test_mixing_tpu_and_cpu_tensors_in_add():
    t = torch.ones(3, device=DEVICE)
    c = torch.ones(3)
    with pytest.raises(RuntimeError, match="device") as ei:
        t + c
    assert "cpu" in str(ei.value) and "tpu" in str(ei.value)
    with pytest.raises(RuntimeError, match="device"):
        torch.add(t, c)
    with pytest.raises(RuntimeError, match="device"):
        t.add_(c)
    with pytest.raises(RuntimeError, match="device"):
        torch.mm(t.view(3, 1), c.view(1, 3))
    assert torch.equal(t.cpu(), torch.ones(3))
    _still_works()


def test_mismatched_shapes_in_add():
    a = torch.ones(3, 4, device=DEVICE)
    b = torch.ones(5, device=DEVICE)
    # CPU raises RuntimeError; the backend reports argument errors as ValueError
    with pytest.raises((RuntimeError, ValueError), match="must match the size") as ei:
        a + b
    assert "4" in str(ei.value) and "5" in str(ei.value)
    with pytest.raises((RuntimeError, ValueError), match="must match"):
        a.mul_(torch.ones(2, 4, device=DEVICE))
    assert torch.equal(a.cpu(), torch.ones(3, 4))
    _still_works()


def test_mismatched_shapes_in_mm():
    a = torch.ones(3, 4, device=DEVICE)
    with pytest.raises((RuntimeError, ValueError), match=r"3x4 and 3x4"):
        a @ a
    with pytest.raises((RuntimeError, ValueError), match="cannot be multiplied"):
        torch.mm(a, torch.ones(5, 2, device=DEVICE))
    with pytest.raises((RuntimeError, ValueError)):
        torch.addmm(torch.ones(7, 7, device=DEVICE), a, a.t())
    _still_works()


def test_inplace_result_cannot_be_cast():
    t = torch.arange(4).to(DEVICE)
    with pytest.raises((RuntimeError, ValueError), match="can't be cast") as ei:
        t.add_(0.5)
    assert "int64" in str(ei.value) or "Long" in str(ei.value)
    with pytest.raises((RuntimeError, ValueError), match="can't be cast"):
        t.add_(torch.ones(4, device=DEVICE))
    with pytest.raises((RuntimeError, ValueError), match="can't be cast"):
        t.mul_(torch.tensor(1.5))
    with pytest.raises((RuntimeError, ValueError), match="can't be cast"):
        torch.ones(3, dtype=torch.bool, device=DEVICE).add_(2)
    # the tensor is unchanged and usable
    assert t.cpu().tolist() == [0, 1, 2, 3]
    assert (t + 1).cpu().tolist() == [1, 2, 3, 4]


def test_index_out_of_range_device():
    n = torch.tpu.device_count()
    with pytest.raises(RuntimeError, match="out of range"):
        torch.zeros(2, device=f"tpu:{n}")
    with pytest.raises(RuntimeError, match="out of range"):
        torch.ones(2).to(f"tpu:{n + 3}")
    _still_works()


# ---------------------------------------------------------------- out of memory

def test_out_of_memory_is_oom_error_and_recoverable():
    before = torch.tpu.memory_allocated()
    with pytest.raises(torch.OutOfMemoryError) as ei:
        torch.empty(2 ** 40, device=DEVICE)
    assert isinstance(ei.value, RuntimeError)
    assert "out of memory" in str(ei.value)
    assert torch.tpu.memory_allocated() == before  # nothing leaked into the accounting
    # a large but reasonable allocation still works afterwards
    x = torch.empty(1 << 20, device=DEVICE)
    x.fill_(1.0)
    assert x.sum().item() == float(1 << 20)
    del x
    assert torch.tpu.memory_allocated() == before
    _still_works()


def test_out_of_memory_from_op_output_and_resize():
    t = torch.ones(4, device=DEVICE)
    with pytest.raises(torch.OutOfMemoryError, match="out of memory"):
        t.new_empty(2 ** 38, 4)
    with pytest.raises(torch.OutOfMemoryError, match="out of memory"):
        torch.ones(1, device=DEVICE).resize_(2 ** 40)
    assert_same(t + 1, torch.full((4,), 2.0))


def test_out_of_memory_over_memory_limit():
    limit = torch.tpu.memory_stats()["limit_bytes"]
    assert limit > 0
    n = limit // 4 + 1024  # float32 elements just over the whole budget
    with pytest.raises(torch.OutOfMemoryError, match="out of memory"):
        torch.empty(n, device=DEVICE)
    _still_works()


# ---------------------------------------------------------------- unsafe cache directory

UNSAFE_CACHE_CHILD = r"""
import json, warnings
with warnings.catch_warnings(record=True) as rec:
    warnings.simplefilter("always")
    import torch, torch_pjrt
x = torch.tensor([1.0, 2.0, 3.0], device="tpu")
v = (x * x).sum().item()
s = torch_pjrt.stats()
print(json.dumps({"v": v, "avail": torch.tpu.is_available(), "warnings": [str(w.message) for w in rec],
                  "cache_dir": torch_pjrt.plugin_info()["cache_dir"],
                  "compiles": s["compiles"], "disk_cache_hits": s["disk_cache_hits"]}))
"""


def _warned(out, proc, *needles):
    text = "\n".join(out["warnings"]) + "\n" + proc.stderr
    return all(n in text for n in needles), text


def test_world_writable_cache_dir_is_refused_with_warning(tmp_path):
    d = tmp_path / "shared-cache"
    d.mkdir()
    os.chmod(d, 0o777)
    for _ in range(2):
        out, p = run_json(UNSAFE_CACHE_CHILD, TORCH_PJRT_CACHE_DIR=d)
        assert out["avail"] is True and out["v"] == 14.0
        ok, text = _warned(out, p, str(d), "cache")
        assert ok, text
        assert "writable" in text
        assert out["cache_dir"] == ""  # disk cache disabled
        assert out["disk_cache_hits"] == 0 and out["compiles"] > 0
    assert list(d.iterdir()) == []  # nothing written into the unsafe dir


def test_cache_path_that_is_a_file_warns_and_works(tmp_path):
    f = tmp_path / "not-a-dir"
    f.write_text("x")
    out, p = run_json(UNSAFE_CACHE_CHILD, TORCH_PJRT_CACHE_DIR=f)
    assert out["avail"] is True and out["v"] == 14.0
    ok, text = _warned(out, p, str(f))
    assert ok, text
    assert out["cache_dir"] == ""


def test_unreadable_cache_dir_warns_and_works(tmp_path):
    if os.geteuid() == 0:
        # root bypasses permission bits, so an unreadable directory can't be made; use a dir
        # under a path component that is a regular file instead (cannot be created).
        parent = tmp_path / "file"
        parent.write_text("x")
        d = parent / "cache"
    else:
        d = tmp_path / "locked"
        d.mkdir()
        os.chmod(d, 0o000)
    try:
        out, p = run_json(UNSAFE_CACHE_CHILD, TORCH_PJRT_CACHE_DIR=d)
    finally:
        if d.exists():
            os.chmod(d, 0o700)
    assert out["avail"] is True and out["v"] == 14.0
    ok, text = _warned(out, p, str(d))
    assert ok, text
    assert out["cache_dir"] == ""


def test_cache_dir_owned_by_another_user_is_refused(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("changing a directory's owner to another uid needs root")
    d = tmp_path / "foreign"
    d.mkdir(mode=0o700)
    os.chown(d, 65534, 65534)
    out, p = run_json(UNSAFE_CACHE_CHILD, TORCH_PJRT_CACHE_DIR=d)
    assert out["avail"] is True and out["v"] == 14.0
    ok, text = _warned(out, p, str(d), "owned")
    assert ok, text
    assert out["cache_dir"] == ""
    assert list(d.iterdir()) == []


def test_errors_do_not_poison_later_work():
    # a burst of different failures, then normal work
    t = torch.ones(2, 2, device=DEVICE)
    for bad in (lambda: t @ torch.ones(3, 3, device=DEVICE),
                lambda: t + torch.ones(2),
                lambda: torch.arange(2).to(DEVICE).add_(0.5),
                lambda: torch.empty(2 ** 40, device=DEVICE)):
        with pytest.raises((RuntimeError, ValueError)):
            bad()
    _still_works()


def test_plugin_compile_error_is_a_python_exception_with_the_plugins_message():
    from torch_pjrt import _C
    with pytest.raises(RuntimeError, match="compile") as ei:
        _C._compile('module { func.func @main() -> () { "no.such_op"() : () -> () } }')
    assert "unregistered dialect" in str(ei.value)  # the plugin's diagnostic is kept
    # the process and the device keep working
    assert (torch.ones(3, device="tpu") * 2).sum().item() == 6.0
