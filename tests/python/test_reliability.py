"""Reliability under long runs, load and faults: device memory returns to its baseline after a
model is freed, a long training run grows neither device memory nor process RSS, the executable
caches stay within their bounds under ever-changing shapes, processes sharing one on-disk cache
never corrupt it, and an asynchronous device error is reported with the op that caused it.

(Garbage or truncated cache entries are covered in test_cache.py.)"""
import contextlib
import gc
import json
import os
import re
import subprocess
import sys
import time

import pytest
import torch

import torch_pjrt
from tpu_helpers import DEVICE, child_env, run_json, run_python

# ---------------------------------------------------------------- memory and long runs


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_trained_model_freed_returns_memory_to_baseline():
    torch.tpu.synchronize()
    gc.collect()
    base = torch.tpu.memory_allocated()
    torch.manual_seed(0)
    x, y = torch.randn(64, 8).to(DEVICE), torch.randn(64, 1).to(DEVICE)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 1)).to(DEVICE)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    # parameters, gradients, Adam's two moments and the data are all live now
    params = sum(p.numel() for p in model.parameters())
    assert torch.tpu.memory_allocated() - base >= 4 * (4 * params + x.numel() + y.numel())
    del model, opt, x, y, loss
    gc.collect()
    torch.tpu.synchronize()
    assert torch.tpu.memory_allocated() == base


def test_ten_thousand_steps_grow_neither_device_memory_nor_rss():
    torch.manual_seed(0)
    x, y = torch.randn(32, 8).to(DEVICE), torch.randn(32, 1).to(DEVICE)
    model = torch.nn.Linear(8, 1).to(DEVICE)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def step():
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    t0 = time.perf_counter()
    first = step().item()
    for _ in range(999):
        step()
    torch.tpu.synchronize()
    gc.collect()
    mem_1k, rss_1k, stats_1k = torch.tpu.memory_allocated(), _rss_bytes(), torch_pjrt.stats()
    for i in range(9000):
        loss = step()
        if i % 1000 == 999:
            loss.item()  # a synchronizing read now and then, as a training loop logs
    last = loss.item()
    del loss
    torch.tpu.synchronize()
    gc.collect()
    mem_10k, rss_10k, stats_10k = torch.tpu.memory_allocated(), _rss_bytes(), torch_pjrt.stats()
    dt = time.perf_counter() - t0
    print(f"10000 steps in {dt:.1f} s; device memory delta (step 1000 -> 10000) "
          f"{mem_10k - mem_1k} B, RSS delta {(rss_10k - rss_1k) / 1024:.0f} KiB")
    assert last < first
    # The same tensors are live at both points: device memory is equal to the byte.
    assert mem_10k == mem_1k
    # No program was compiled after warm-up and the executable cache did not grow.
    assert stats_10k["compiles"] == stats_1k["compiles"]
    assert stats_10k["cached_executables"] == stats_1k["cached_executables"]
    # Host memory: a leak of even 100 bytes per step would be 900 KB here; allow allocator noise.
    # (Measured on the CPU plugin: 0-200 KiB.)
    assert rss_10k - rss_1k < 4 * 2 ** 20, (rss_1k, rss_10k)


SHAPES_CHILD = r"""
import json, os, torch, torch_pjrt
most, ok = 0, True
for i in range(150):
    n = 1000 + i  # a new shape each time: a new program each time
    c = torch.arange(n, dtype=torch.float32)
    y = c.to("tpu") * 2
    if i % 30 == 0:
        ok = ok and torch.equal(y.cpu(), c * 2)
    most = max(most, torch_pjrt.stats()["cached_executables"])
d = os.environ["TORCH_PJRT_CACHE_DIR"]
files = [f for f in os.listdir(d) if f.endswith(".tpx")]
s = torch_pjrt.stats()
print(json.dumps({"ok": ok, "most_cached": most, "cached": s["cached_executables"],
                  "compiles": s["compiles"], "disk_files": len(files),
                  "disk_bytes": sum(os.path.getsize(os.path.join(d, f)) for f in files),
                  "tmp_files": len([f for f in os.listdir(d) if f.endswith(".tmp")])}))
"""


def test_changing_shapes_keep_both_caches_within_their_bounds(tmp_path):
    bound = 64 * 1024
    # Exact shapes: a program per shape is the storm this test needs (buckets would absorb it).
    out, _ = run_json(SHAPES_CHILD, TORCH_PJRT_CACHE_DIR=tmp_path / "cache",
                      TORCH_PJRT_CACHE_CAPACITY=16, TORCH_PJRT_CACHE_DISK_MAX_BYTES="64K",
                      TORCH_PJRT_SHAPE_BUCKETS="off")
    assert out["ok"] is True
    assert out["compiles"] >= 150
    # in memory: LRU at the bound, never above it
    assert out["most_cached"] == 16 and out["cached"] == 16
    # on disk: entries (about 4 KiB each on the CPU plugin) evicted to stay within 64 KiB
    assert 0 < out["disk_bytes"] <= bound, out
    assert 4 <= out["disk_files"] <= 16, out
    assert out["tmp_files"] == 0


# ---------------------------------------------------------------- processes sharing a disk cache

# Each writer waits at a file barrier so that all compile (and write) at the same moment: first
# the same programs in every process, then programs only this process uses.
WRITER = r"""
import json, os, sys, time, torch, torch_pjrt
d, me, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
open(os.path.join(d, f"ready-{me}"), "w").close()
deadline = time.time() + 60
while sum(os.path.exists(os.path.join(d, f"ready-{i}")) for i in range(n)) < n:
    assert time.time() < deadline, "barrier timed out"
    time.sleep(0.005)

def work(k):
    c = torch.arange(24, dtype=torch.float32).reshape(4, 6) + k
    t = c.to("tpu")
    got = [(t * 2 + 1).sum(1), torch.relu(t - 10) @ t.t(), t.exp().mean(0), t.view(6, 4)[::2].neg()]
    want = [(c * 2 + 1).sum(1), torch.relu(c - 10) @ c.t(), c.exp().mean(0), c.view(6, 4)[::2].neg()]
    return all(torch.allclose(a.cpu(), b) for a, b in zip(got, want))

def own(k, rows):  # a shape only this process uses
    c = torch.arange(rows * 3, dtype=torch.float32).reshape(rows, 3)
    t = c.to("tpu")
    return torch.allclose((t.tanh() * 3).sum(0).cpu(), (c.tanh() * 3).sum(0), rtol=1e-5, atol=1e-5)

t0 = time.time()
ok = work(0)
ok = own(me, 5 + me) and ok
t1 = time.time()
if len(sys.argv) > 4:  # the reader: also what every writer did alone
    ok = all([own(i, 5 + i) for i in range(int(sys.argv[4]))]) and ok
s = torch_pjrt.stats()
print(json.dumps({"ok": ok, "compiles": s["compiles"], "disk_cache_hits": s["disk_cache_hits"],
                  "work": [t0, t1]}))
"""


def _extension_mtime():
    return os.stat(torch_pjrt._C.__file__).st_mtime_ns


def test_concurrent_writers_share_one_disk_cache(tmp_path):
    built = _extension_mtime()
    cache = tmp_path / "cache"
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    n = 3
    # Exact shapes: which bucket programs a process compiles depends on the order of its calls,
    # and the reader's order is none of the writers'.
    env = child_env(TORCH_PJRT_CACHE_DIR=cache, TORCH_PJRT_SHAPE_BUCKETS="off")
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(barrier), str(i), str(n)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(n)]
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=180)
        assert p.returncode == 0, f"writer failed (rc {p.returncode}):\n{stdout}\n{stderr}"
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    assert all(o["ok"] for o in outs), outs
    assert all(o["compiles"] > 0 for o in outs), outs
    assert not [f for f in cache.iterdir() if f.name.endswith(".tmp")]
    start = min(o["work"][0] for o in outs)
    print("writers (compiles, disk hits, work interval in ms from the first start): " +
          ", ".join(f"({o['compiles']}, {o['disk_cache_hits']}, "
                    f"{1000 * (o['work'][0] - start):.0f}-{1000 * (o['work'][1] - start):.0f})"
                    for o in outs))

    # A fourth process runs what all three did: every program comes from disk, none compiles.
    p = subprocess.run([sys.executable, "-c", WRITER, str(barrier), "0", "1", str(n)],
                       env=env, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    reader = json.loads(p.stdout.strip().splitlines()[-1])
    assert reader["ok"] is True
    if _extension_mtime() != built:
        pytest.skip("the extension was rebuilt during the test, which rightly invalidates the "
                    "cache entries its processes wrote")
    print(f"reader: {reader['compiles']} compiles, {reader['disk_cache_hits']} disk hits")
    assert reader["compiles"] == 0, reader
    assert reader["disk_cache_hits"] >= max(o["compiles"] for o in outs), (reader, outs)


# ---------------------------------------------------------------- asynchronous errors

FAULT_CHILD = r"""
import json, traceback, torch, torch_pjrt
res = {}
def where(e):  # the line of this script the exception came from
    return [f.lineno for f in traceback.extract_tb(e.__traceback__) if f.filename == "<string>"][-1]
x = torch.ones(4, device="tpu")
try:
    y = x * 3  # FAULT LINE: executions of mul fail on the device (injected)
    z = y + 1  # more work queued behind it
    res["op_raised"] = False
except RuntimeError as e:
    res["op_raised"], res["op_msg"], res["op_line"] = True, str(e), where(e)
try:
    torch.tpu.synchronize()  # SYNC LINE
    res["sync_raised"] = False
except RuntimeError as e:
    res["sync_raised"], res["sync_msg"], res["sync_line"] = True, str(e), where(e)
try:  # a copy to the host is a synchronizing call too
    res["cpu_value"] = (x * 2).cpu().tolist()
except RuntimeError as e:
    res["cpu_msg"] = str(e)
# the process and the device keep working
res["after"] = (x + 1).sum().item()
torch.tpu.synchronize()
print(json.dumps(res))
"""


def _line_of(marker):
    return next(i + 1 for i, l in enumerate(FAULT_CHILD.splitlines()) if marker in l)


def test_async_device_error_surfaces_at_sync_naming_the_op():
    out, p = run_json(FAULT_CHILD, TORCH_PJRT_INJECT_FAULT="mul")  # every mul overload fails
    assert "TORCH_PJRT_INJECT_FAULT" in p.stderr  # armed injection is never silent
    assert out["op_raised"] is False  # the op itself only enqueued work
    assert out["sync_raised"] is True
    assert "asynchronous error in 'mul.Tensor'" in out["sync_msg"]
    assert "injected" in out["sync_msg"]
    assert out["sync_line"] == _line_of("SYNC LINE")
    assert "cpu_value" not in out and "'mul.Tensor'" in out["cpu_msg"]
    assert out["after"] == 8.0


def test_launch_blocking_raises_the_device_error_at_the_op():
    out, _ = run_json(FAULT_CHILD, TORCH_PJRT_INJECT_FAULT="mul.Tensor:1",
                      TORCH_PJRT_LAUNCH_BLOCKING="1")
    assert out["op_raised"] is True
    assert "mul.Tensor" in out["op_msg"] and "injected" in out["op_msg"]
    assert out["op_line"] == _line_of("FAULT LINE")  # the Python line of the op itself
    assert out["sync_raised"] is False  # reported once, at the op
    assert out["cpu_value"] == [2.0] * 4  # ":1" failed one execution only
    assert out["after"] == 8.0


# ---------------------------------------------------------------- out-of-range indices

# (op, call) pairs: each indexes a dim of size 3 with |i| ([0] is valid; [3] is not, nor is [-1]
# where CPU rejects negative indices).
def _index_ops():
    import torch.nn.functional as F
    x = torch.arange(12.0).reshape(3, 4)
    ones = torch.ones(1, 4)
    return {
        "index_select": (lambda x, i: x.index_select(0, i), False),
        "gather": (lambda x, i: x.gather(0, i.view(1, 1)), False),
        "scatter_": (lambda x, i: x.clone().scatter_(0, i.view(1, 1), 1.0), False),
        "scatter_add_": (lambda x, i: x.clone().scatter_add_(0, i.view(1, 1), ones[:, :1].to(x.device)), False),
        "index_add_": (lambda x, i: x.clone().index_add_(0, i, ones.to(x.device)), False),
        "index_copy_": (lambda x, i: x.clone().index_copy_(0, i, ones.to(x.device)), False),
        "index_fill_": (lambda x, i: x.clone().index_fill_(0, i, 1.0), True),
        "x[i]": (lambda x, i: x[i], True),
        "index_put_": (lambda x, i: x.clone().index_put_((i,), ones[0].to(x.device)), True),
        "take": (lambda x, i: x.take(i * 4), True),
        "put_": (lambda x, i: x.clone().put_(i * 4, ones[0, :1].to(x.device)), True),
        "embedding": (lambda x, i: F.embedding(i, x), False),
        "cross_entropy": (lambda x, i: F.cross_entropy(x[:1, :3], i), False),
    }, x


@pytest.mark.parametrize("name", list(_index_ops()[0]))
def test_out_of_range_index_raises_index_error_at_the_next_sync(name):
    """As CUDA reports a device-side assert: the op enqueues, the next synchronizing call raises
    (IndexError, as CPU does), naming the op; valid and negative-where-allowed indices do not."""
    ops, x = _index_ops()
    fn, negative_ok = ops[name]
    xt = x.to("tpu")
    for i, bad in (([2], False), ([-1], not negative_ok), ([3], True)):
        with pytest.raises(IndexError) if bad else contextlib.nullcontext():
            fn(xt, torch.tensor(i).to("tpu"))
            torch.tpu.synchronize()
        # CPU agrees on which indices are bad
        with pytest.raises((IndexError, RuntimeError)) if bad else contextlib.nullcontext():
            fn(x, torch.tensor(i))
    # the device keeps working, and the error was reported once
    assert (xt + 1).sum().item() == float((x + 1).sum())


def test_out_of_range_index_raises_at_the_op_when_launch_blocking():
    code = r"""
import json, torch, torch_pjrt
x = torch.arange(6.0, device="tpu").reshape(3, 2)
res = {}
try:
    x.index_select(0, torch.tensor([5], device="tpu"))
    res["op_raised"] = False
except IndexError as e:
    res["op_raised"], res["msg"] = True, str(e)
torch.tpu.synchronize()
res["after"] = x.sum().item()
print(json.dumps(res))
"""
    out, _ = run_json(code, TORCH_PJRT_LAUNCH_BLOCKING="1")
    assert out["op_raised"] is True and "index_select" in out["msg"], out
    assert "index out of range" in out["msg"]
    assert out["after"] == 15.0


def test_out_of_range_index_in_a_compiled_graph_raises_at_the_next_sync():
    emb = torch.nn.Embedding(10, 4).to("tpu")
    f = torch.compile(lambda i: emb(i).sum(), backend="tpu")
    good = f(torch.tensor([1, 9], device="tpu")).item()
    assert good == pytest.approx(float(emb.weight.detach().cpu()[[1, 9]].sum()), rel=1e-5)
    with pytest.raises(IndexError, match="index out of range"):
        f(torch.tensor([1, 10], device="tpu")).item()
    assert f(torch.tensor([1, 9], device="tpu")).item() == good  # same program, no error now


def test_assert_async_is_checked_on_the_device_and_raises_at_the_next_sync():
    """torch._assert_async, as TorchTitan's RoPE calls it every step: native (no fallback, no
    sync), and a false condition raises RuntimeError with its message at the next synchronizing
    call, as CUDA reports a device-side assert; CPU's kernel is the oracle for which values pass."""
    torch_pjrt.reset_stats()
    cases = [(torch.tensor(True), True), (torch.tensor(False), False), (torch.tensor(2.5), True),
             (torch.tensor(0.0), False), (torch.tensor(-0.0), False),
             (torch.tensor(float("nan")), True), (torch.tensor([7]), True),
             (torch.tensor(0j), False), (torch.tensor(1j), True)]
    for k, (c, ok) in enumerate(cases):
        for msg in (None, f"position_ids exceed max_valid_pos={k}"):
            args = (c,) if msg is None else (c, msg)
            with contextlib.nullcontext() if ok else pytest.raises(RuntimeError):
                torch._assert_async(*args)  # CPU
            torch._assert_async(*((c.to("tpu"),) + args[1:]))
            with contextlib.nullcontext() if ok else pytest.raises(
                    RuntimeError, match=re.escape(msg or "single nonzero value")):
                torch.tpu.synchronize()
    assert "_assert_async" not in str(torch_pjrt.stats()["fallbacks"])
    # a size CPU cannot take as a bool is refused at the call, as there
    for bad in (torch.ones(2), torch.ones(0)):
        with pytest.raises(RuntimeError, match="Boolean value of Tensor with"):
            torch._assert_async(bad)
        with pytest.raises(RuntimeError, match="Boolean value of Tensor with"):
            torch._assert_async(bad.to("tpu"))
    # the device keeps working and the failure was reported once
    assert (torch.arange(3, device="tpu") + 1).sum().item() == 6


def test_assert_async_in_a_compiled_graph():
    def f(x):
        torch._assert_async((x < 10).all(), "x must stay below 10")
        return x * 2
    g = torch.compile(f, backend="tpu")
    assert g(torch.arange(4.0, device="tpu")).cpu().tolist() == [0.0, 2.0, 4.0, 6.0]
    with pytest.raises(RuntimeError, match="x must stay below 10"):
        g(torch.arange(12.0, device="tpu")).cpu()
    assert g(torch.arange(4.0, device="tpu")).cpu().tolist() == [0.0, 2.0, 4.0, 6.0]


# ---------------------------------------------------------------- many shapes, values and models

# The script a user ran (a transformer layer over 64 sequence lengths, then a tiny Llama's
# generate): it died with SIGSEGV inside PJRT's execute. Two scalar arguments of one call that
# hash to the same slot of the scalar-buffer cache made the second evict the first's buffer
# before the program ran.
USER_SCRIPT = r"""
import torch
torch.manual_seed(0)  # unseeded, 1 random Llama in 30 generates its EOS within 8 tokens
layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True).eval()
torch.backends.mha.set_fastpath_enabled(False)
with torch.no_grad():
    for n in range(1, 65): layer(torch.ones(2, n, 32) * 0.1)          # on CPU
layer = layer.to("tpu")
with torch.no_grad():
    for n in range(1, 65): y = layer(torch.ones(2, n, 32, device="tpu") * 0.1)
float(y.sum().cpu())
from transformers import LlamaConfig, LlamaForCausalLM
cfg = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256)
lm = LlamaForCausalLM(cfg).eval().to("tpu")
ids = torch.arange(8, device="tpu").unsqueeze(0) % 128
out = lm.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, do_sample=False)
print(out.shape[1])
"""


def test_user_script_with_many_shapes_then_generate_runs_to_the_end():
    p = run_python(USER_SCRIPT, timeout=900, TORCH_PJRT_CACHE_DIR="0")
    assert p.returncode == 0, f"rc {p.returncode}:\n{p.stderr[-3000:]}"
    assert p.stdout.split()[-1] == "16"


def test_two_scalars_of_one_call_sharing_a_cache_slot_keep_their_values():
    # 3000 (lo, hi) pairs from a grid of 1/8: with 512 slots, dozens of pairs share one.
    x = torch.linspace(-300, 300, 97)
    xd = x.to(DEVICE)
    g = torch.Generator().manual_seed(0)
    lo = torch.randint(-2400, 2400, (3000,), generator=g) / 8
    hi = lo + torch.randint(0, 2400, (3000,), generator=g) / 8
    got = [torch.clamp(xd, a, b) for a, b in zip(lo.tolist(), hi.tolist())]
    bad = [(a, b) for a, b, r in zip(lo.tolist(), hi.tolist(), got)
           if not torch.equal(r.cpu(), torch.clamp(x, a, b))]
    assert not bad, f"{len(bad)} of 3000 pairs wrong, first {bad[:3]}"


# One process mixing shapes, scalar values and models with an executable cache small enough to
# evict all the time, every result checked against CPU.
STRESS_CHILD = r"""
import copy, json, random, sys, torch, torch_pjrt
torch.manual_seed(0)
random.seed(0)
torch.backends.mha.set_fastpath_enabled(False)
layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True).eval()
conv = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4),
                           torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1)).eval()
mods = [(m, copy.deepcopy(m).to("tpu")) for m in (layer, conv)]
bad = []
with torch.no_grad():
    for it in range(24):
        n = random.randint(1, 24)
        x = torch.randn(2, n, 16)
        got, want = mods[0][1](x.to("tpu")).cpu(), mods[0][0](x)
        if not torch.allclose(got, want, rtol=1e-4, atol=1e-4): bad.append(("layer", n))
        img = torch.randn(1, 3, n + 2, 5)
        got, want = mods[1][1](img.to("tpu")).cpu(), mods[1][0](img)
        if not torch.allclose(got, want, rtol=1e-4, atol=1e-4): bad.append(("conv", n))
        lo = random.randint(-80, 80) / 8; hi = lo + random.randint(0, 80) / 8
        a = random.randint(-50, 50) / 4
        t = torch.randn(n, 3)
        got = (torch.clamp(t.to("tpu"), lo, hi) * a + torch.arange(lo, lo + 3 * 0.5, 0.5, device="tpu")).cpu()
        want = torch.clamp(t, lo, hi) * a + torch.arange(lo, lo + 3 * 0.5, 0.5)
        if not torch.allclose(got, want, rtol=1e-5, atol=1e-5): bad.append(("scalars", n, lo, hi, a))
s = torch_pjrt.stats()
print(json.dumps({"bad": bad[:5], "n_bad": len(bad), "compiles": s["compiles"],
                  "cached": s["cached_executables"]}))
"""


def test_mixed_shapes_values_and_models_under_cache_eviction():
    out, _ = run_json(STRESS_CHILD, timeout=900, TORCH_PJRT_CACHE_DIR="0",
                      TORCH_PJRT_CACHE_CAPACITY=32)
    assert out["n_bad"] == 0, out
    assert out["cached"] <= 32 and out["compiles"] > 100, out
