"""The executable caches: in memory (same signature -> no recompile, scalar values are inputs)
and on disk (TORCH_PJRT_CACHE_DIR: reused across processes, private, robust to corruption,
"0" disables)."""
import os
import stat

import torch

import torch_pjrt
from tpu_helpers import DEVICE, assert_same, make, run_json, run_python


def _delta(before, after):
    return {k: after[k] - before[k] for k in ("compiles", "memory_cache_hits",
                                              "disk_cache_hits", "executes")}


def _stats():
    torch.tpu.synchronize()
    return torch_pjrt.stats()


def test_stats_keys_and_types():
    s = torch_pjrt.stats()
    for k in ("compiles", "compiles_new_shape", "memory_cache_hits", "disk_cache_hits", "executes",
              "cached_executables"):
        assert isinstance(s[k], int) and s[k] >= 0, k
    assert isinstance(s["compile_seconds"], float) and s["compile_seconds"] >= 0
    assert isinstance(s["fallbacks"], dict)


def test_reset_stats_zeroes_counters():
    x = torch.ones(3, device=DEVICE)
    (x + x).sum().item()
    torch_pjrt.reset_stats()
    s = torch_pjrt.stats()
    assert s["compiles"] == s["memory_cache_hits"] == s["disk_cache_hits"] == s["executes"] == 0
    assert s["compile_seconds"] == 0
    assert s["fallbacks"] == {}
    # the cache itself is not emptied by reset_stats
    assert s["cached_executables"] > 0


def test_same_op_twice_hits_memory_cache(fresh_stats):
    # a shape nothing else in the suite uses, so the first call is a miss in memory
    c = make((7, 13), torch.float32, seed=1)
    t = c.to(DEVICE)
    s0 = _stats()
    r1 = torch.tanh(t)
    s1 = _stats()
    first = _delta(s0, s1)
    assert first["executes"] == 1
    assert first["compiles"] + first["disk_cache_hits"] + first["memory_cache_hits"] == 1
    r2 = torch.tanh(t)
    s2 = _stats()
    second = _delta(s1, s2)
    assert second["compiles"] == 0
    assert second["disk_cache_hits"] == 0
    assert second["memory_cache_hits"] >= 1
    assert second["executes"] == 1
    assert_same(r1, torch.tanh(c))
    assert_same(r2, torch.tanh(c))
    assert s2["cached_executables"] >= 1


def test_different_data_same_signature_no_recompile(fresh_stats):
    a = make((5, 11), torch.float32, seed=2).to(DEVICE)
    b = make((5, 11), torch.float32, seed=3).to(DEVICE)
    a + b
    s1 = _stats()
    r = b + a  # other storages, same shapes/dtypes/strides
    d = _delta(s1, _stats())
    assert d["compiles"] == 0 and d["disk_cache_hits"] == 0 and d["memory_cache_hits"] == 1
    assert_same(r, a.cpu() + b.cpu())


def test_scalar_value_does_not_recompile(fresh_stats):
    c = make((9, 3), torch.float32, seed=4)
    t = c.to(DEVICE)
    r1 = t * 0.5
    s1 = _stats()
    r2 = t * 0.25
    r3 = t * -7.0
    r4 = t.add(3.5)
    r5 = t.add(-1.25)
    d = _delta(s1, _stats())
    # t*0.25 and t*-7 reuse t*0.5's program; t.add(-1.25) reuses t.add(3.5)'s
    assert d["compiles"] + d["disk_cache_hits"] <= 1, d
    assert d["memory_cache_hits"] >= 3, d
    assert_same(r1, c * 0.5)
    assert_same(r2, c * 0.25)
    assert_same(r3, c * -7.0)
    assert_same(r4, c + 3.5)
    assert_same(r5, c - 1.25)


def test_cache_distinguishes_dtypes_and_shapes(fresh_stats):
    a = make((6, 5), torch.float32, seed=5)
    b = a.double()
    ta, tb = a.to(DEVICE), b.to(DEVICE)
    ra = ta.exp()
    s1 = _stats()
    rb = tb.exp()
    d = _delta(s1, _stats())
    assert d["memory_cache_hits"] == 0
    assert d["compiles"] + d["disk_cache_hits"] == 1
    assert ra.dtype == torch.float32 and rb.dtype == torch.float64
    assert_same(ra, a.exp())
    assert_same(rb, b.exp())


# ---------------------------------------------------------------- the on-disk cache

CHILD = r"""
import json, torch, torch_pjrt
x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device="tpu")
y = (x * 2 + x).sum(1)
z = torch.relu(x - 3) @ x.t()
out = {"y": y.cpu().tolist(), "z": z.cpu().tolist()}
out.update({k: v for k, v in torch_pjrt.stats().items() if k != "fallbacks"})
out["cache_dir"] = torch_pjrt.plugin_info()["cache_dir"]
print(json.dumps(out))
"""

EXPECTED_Y = [18.0, 45.0]


def _expected_z():
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    return (torch.relu(x - 3) @ x.t()).tolist()


def test_disk_cache_reused_by_second_process(tmp_path):
    cache = tmp_path / "a" / "b" / "tpu-cache"
    first, _ = run_json(CHILD, TORCH_PJRT_CACHE_DIR=cache)
    assert first["y"] == EXPECTED_Y and first["z"] == _expected_z()
    assert first["compiles"] > 0
    assert first["compile_seconds"] > 0
    assert first["disk_cache_hits"] == 0
    # the directory (and its missing parents) are created private to the user, 0700
    for d in (cache, tmp_path / "a", tmp_path / "a" / "b"):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, (d, oct(os.stat(d).st_mode))
    assert os.path.realpath(first["cache_dir"]) == os.path.realpath(cache)
    entries = [p for p in cache.iterdir() if p.is_file()]
    assert len(entries) >= first["compiles"]
    assert not any(p.name.endswith(".tmp") for p in entries)
    for f in entries:  # entries hold executable code: not readable/writable by others
        assert stat.S_IMODE(os.stat(f).st_mode) & 0o077 == 0, oct(os.stat(f).st_mode)

    second, _ = run_json(CHILD, TORCH_PJRT_CACHE_DIR=cache)
    assert second["y"] == EXPECTED_Y and second["z"] == _expected_z()
    assert second["compiles"] == 0
    assert second["disk_cache_hits"] > 0
    assert second["disk_cache_hits"] == first["compiles"]
    assert second["compile_seconds"] == 0


def test_other_xla_flags_do_not_reuse_disk_entries(tmp_path):
    # XLA_FLAGS change what the plugin compiles, so they are part of the cache's identity
    cache = tmp_path / "cache"
    first, _ = run_json(CHILD, TORCH_PJRT_CACHE_DIR=cache, XLA_FLAGS=None)
    other, _ = run_json(CHILD, TORCH_PJRT_CACHE_DIR=cache,
                        XLA_FLAGS="--xla_cpu_enable_fast_math=false")
    assert other["y"] == EXPECTED_Y and other["z"] == _expected_z()
    assert other["disk_cache_hits"] == 0 and other["compiles"] == first["compiles"]
    again, _ = run_json(CHILD, TORCH_PJRT_CACHE_DIR=cache, XLA_FLAGS=None)
    assert again["compiles"] == 0 and again["disk_cache_hits"] == first["compiles"]


def test_corrupt_disk_entries_just_recompile(tmp_path):
    cache = tmp_path / "cache"
    first, _ = run_json(CHILD, TORCH_PJRT_CACHE_DIR=cache)
    files = [p for p in cache.iterdir() if p.is_file()]
    assert files
    for i, f in enumerate(files):
        # garbage of several shapes: short, valid magic with a bad header, long random bytes,
        # and a real entry cut in half
        data = f.read_bytes()
        f.write_bytes([b"garbage", b"TPXC0001" + b"\xff" * 40, os.urandom(5000),
                       data[: len(data) // 2]][i % 4])
    third, p = run_json(CHILD, TORCH_PJRT_CACHE_DIR=cache)
    assert third["y"] == EXPECTED_Y and third["z"] == _expected_z()
    assert third["compiles"] == first["compiles"]
    assert third["disk_cache_hits"] == 0
    # and the rewritten entries are good again
    fourth, _ = run_json(CHILD, TORCH_PJRT_CACHE_DIR=cache)
    assert fourth["compiles"] == 0 and fourth["disk_cache_hits"] == first["compiles"]


def test_cache_dir_zero_disables_disk_cache(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a relative "0" directory would land here
    first, _ = run_json(CHILD, TORCH_PJRT_CACHE_DIR="0", XDG_CACHE_HOME=tmp_path / "xdg",
                        HOME=tmp_path / "home")
    second, _ = run_json(CHILD, TORCH_PJRT_CACHE_DIR="0", XDG_CACHE_HOME=tmp_path / "xdg",
                         HOME=tmp_path / "home")
    # an empty value disables it too
    empty, _ = run_json(CHILD, TORCH_PJRT_CACHE_DIR="", XDG_CACHE_HOME=tmp_path / "xdg",
                        HOME=tmp_path / "home")
    for r in (first, second, empty):
        assert r["y"] == EXPECTED_Y
        assert r["cache_dir"] == ""
        assert r["disk_cache_hits"] == 0
        assert r["compiles"] > 0
    assert second["compiles"] == first["compiles"]
    assert list(tmp_path.iterdir()) == [], list(tmp_path.iterdir())


def test_default_cache_dir_follows_xdg_cache_home(tmp_path):
    first, _ = run_json(CHILD, TORCH_PJRT_CACHE_DIR=None, XDG_CACHE_HOME=tmp_path)
    assert os.path.realpath(first["cache_dir"]) == os.path.realpath(tmp_path / "torch_pjrt")
    assert any((tmp_path / "torch_pjrt").iterdir())


KNOBS_CHILD = r"""
import json, torch, torch_pjrt
c = torch.arange(12, dtype=torch.float32).reshape(3, 4)
x = c.to("tpu")
res = [(x * 2).cpu(), x.exp().cpu(), (x @ x.t()).cpu(), x.sum(0).cpu(), (x - 1).cpu()]
ref = [c * 2, c.exp(), c @ c.t(), c.sum(0), c - 1]
ok = all(torch.allclose(a, b) for a, b in zip(res, ref))
s1 = torch_pjrt.stats()
(x * 2).cpu()  # evicted by the LRU bound: compiled again
s2 = torch_pjrt.stats()
print(json.dumps({"ok": ok, "cached": s1["cached_executables"], "compiles1": s1["compiles"],
                  "recompiled": s2["compiles"] - s1["compiles"]}))
"""


def test_cache_capacity_and_launch_blocking_env():
    out, _ = run_json(KNOBS_CHILD, TORCH_PJRT_CACHE_DIR="0", TORCH_PJRT_CACHE_CAPACITY="2",
                      TORCH_PJRT_LAUNCH_BLOCKING="1")
    assert out["ok"] is True
    assert out["compiles1"] >= 5
    assert out["cached"] <= 2
    assert out["recompiled"] == 1


_SHAPE_SWEEP = """
import json, sys, torch, torch_pjrt
torch_pjrt.reset_stats()
sys.stderr.write("START\\n")
for n in (3, 4, 5):
    (torch.arange(n, dtype=torch.float32, device="tpu") * 3).sum().item()
s = torch_pjrt.stats()
print(json.dumps([s["compiles"], s["compiles_new_shape"]]))
sys.stderr.write("END\\n")
"""


def test_compiles_caused_by_new_shapes_are_counted_and_logged():
    # Three lengths of the same ops: the first length compiles each op's first program, the
    # other two compile the same programs again for new sizes; the log names op, inputs, reason.
    # Exact shapes only (test_buckets covers what buckets compile).
    p = run_python(_SHAPE_SWEEP, TORCH_PJRT_CACHE_DIR="0", TORCH_PJRT_LOG_COMPILES="1",
                   TORCH_PJRT_SHAPE_BUCKETS="off")
    assert p.returncode == 0, p.stderr
    compiles, new_shape = __import__("json").loads(p.stdout.strip().splitlines()[-1])
    assert compiles >= 6 and new_shape == compiles - compiles // 3, (compiles, new_shape)
    swept = p.stderr.split("START\n")[1].split("END\n")[0]  # not what import and exit compile
    log = [l for l in swept.splitlines() if l.startswith("torch_pjrt: compile ")]
    assert len(log) == compiles
    assert any(l.startswith("torch_pjrt: compile mul.Tensor (float32[4]): new shapes, ") for l in log), log
    assert any(l.startswith("torch_pjrt: compile mul.Tensor (float32[3]): first, ") for l in log), log
    quiet = run_python(_SHAPE_SWEEP, TORCH_PJRT_CACHE_DIR="0", TORCH_PJRT_SHAPE_BUCKETS="off")
    assert "torch_pjrt: compile" not in quiet.stderr
