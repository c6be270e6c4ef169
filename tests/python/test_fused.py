"""Fused eager (torch_pjrt.fused(), TORCH_PJRT_EAGER=fused): ops are checked at their call and
recorded; a region runs as one program when a value is needed. The oracle is strict eager on
the same device (and through it, CPU): results equal within what another XLA fusion allows
(exactly for integers and bool), regions that repeat compile once, and everything strict eager
does (views, in-place ops, RNG, errors at the user's line, fallbacks, host reads) still holds."""
import copy
import json
import os
import subprocess
import sys
import warnings

import pytest
import torch

import torch_pjrt
from tpu_helpers import DEVICE, child_env


def fused_stats():
    return {k: v for k, v in torch_pjrt.stats().items() if k.startswith("fused_")}


def mixed_program(x, idx, step):
    """Views read and written, in-place ops, integer and bool math, a scalar that changes."""
    y = x.t() @ x + step            # a transposed view into a matmul; a new scalar every call
    y[1:3, ::2] = y[1:3, ::2] * 0.5  # a strided slice written in place
    y.diagonal().add_(1.0)          # a diagonal view, in place
    z = y.expand(2, -1, -1).sum(0)  # a broadcast view read
    z.masked_fill_(z > 40, -1.0)
    k = (x.abs() * 10).to(torch.int32) % 7  # integers: exact
    k[idx] += 3                     # index_put with accumulation through a view
    flip = x.flip(0)[::2]           # a negative-step view
    return z, k, flip, (k > 2).sum()


def test_a_region_equals_strict_eager_and_repeats_with_new_scalars(fresh_stats):
    torch.manual_seed(0)
    x = torch.randn(8, 8, device=DEVICE)
    idx = torch.tensor([0, 2, 2, 5], device=DEVICE)
    strict = [[t.cpu() for t in mixed_program(x, idx, float(s))] for s in range(3)]
    torch_pjrt.reset_stats()
    with torch_pjrt.fused():
        fused = [mixed_program(x, idx, float(s)) for s in range(3)]
        fused = [[t.cpu() for t in out] for out in fused]
    for a, b in zip(fused, strict):
        torch.testing.assert_close(a[0], b[0], rtol=1e-5, atol=1e-5)
        for ta, tb in zip(a[1:], b[1:]):
            assert torch.equal(ta, tb)
    s = fused_stats()
    # The three calls ran as one region (nothing read a value before the first .cpu()); reading
    # a strided view (flip) back copies it in a region of its own.
    assert s["fused_max_ops"] == s["fused_ops"] - 3 and s["fused_max_ops"] >= 3 * 15
    assert s["fused_regions"] == 4 and torch_pjrt.stats()["executes"] == 4


def test_a_repeated_region_compiles_once_whatever_its_scalars(fresh_stats):
    x = torch.randn(16, device=DEVICE)
    with torch_pjrt.fused():
        for step in range(4):
            y = (x * (0.5 + step)).sin() + step
            assert y.cpu().shape == (16,)  # a host read ends each region
    s = fused_stats()
    assert s["fused_regions"] == 4 and s["fused_compiles"] <= 1 and s["fused_cache_hits"] >= 3
    torch.testing.assert_close(y.cpu(), (x.cpu() * 3.5).sin() + 3)


def test_intermediates_nobody_holds_are_not_written_back(tmp_path):
    code = ("import torch, torch_pjrt\n"
            "x = torch.randn(1000, device='tpu')\n"
            "with torch_pjrt.fused():\n"
            "    y = ((x * 2 + 1).sin() * 3).cos()\n"  # three intermediates, dropped at once
            "    keep = (x * 2).exp()\n"               # one held
            "    torch.tpu.synchronize()\n"
            "torch.testing.assert_close(y.cpu(), ((x.cpu() * 2 + 1).sin() * 3).cos())\n"
            "torch.testing.assert_close(keep.cpu(), (x.cpu() * 2).exp())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=child_env(TORCH_PJRT_DUMP_DIR=str(tmp_path), TORCH_PJRT_CACHE_DIR="0"))
    assert out.returncode == 0, out.stderr
    region = [p for p in os.listdir(tmp_path) if "fused_region" in p]
    assert len(region) == 1, os.listdir(tmp_path)
    text = (tmp_path / region[0]).read_text()
    main = next(line for line in text.splitlines() if "func.func public @main" in line)
    # Its results: y and keep, not the three intermediates.
    assert main.split("->")[1].count("tensor<") == 2, main


def test_an_error_raises_at_the_call_and_the_region_goes_on():
    a = torch.ones(3, 4, device=DEVICE)
    with torch_pjrt.fused():
        b = a * 2
        with pytest.raises(RuntimeError, match="shapes cannot be multiplied|size mismatch|mat1 and mat2"):
            a @ a  # decided at the call, as in strict eager
        c = b + 1
        assert torch.equal(c.cpu(), torch.full((3, 4), 3.0))


def test_host_reads_inside_a_loop_cut_regions_and_values_agree():
    torch.manual_seed(1)
    w = torch.randn(6, 6)
    def loop(w):
        x = torch.ones(6, device=w.device)
        taken = []
        for i in range(6):
            x = torch.tanh(w @ x)
            if x.sum().item() > 0:  # data-dependent control flow
                x = x * 2
                taken.append(i)
        return x, taken
    strict = loop(w.to(DEVICE))
    with torch_pjrt.fused():
        fused = loop(w.to(DEVICE))
    assert fused[1] == strict[1]
    torch.testing.assert_close(fused[0].cpu(), strict[0].cpu())


def test_a_fallback_op_ends_the_region_and_sees_its_values(fresh_stats):
    x = torch.rand(50, device=DEVICE)
    expect = torch.bincount((x.cpu() * 4).long()) * 3
    with torch_pjrt.fused(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # bincount's size depends on the values: it runs on CPU, on inputs made in the region,
        # and its result is used in the next one.
        got = torch.bincount((x * 4).long()) * 3
    assert torch.equal(got.cpu(), expect)
    assert torch_pjrt.stats()["fallbacks"].get("bincount", 0) == 1


def test_random_draws_the_same_stream_as_strict_eager():
    def draw():
        torch.manual_seed(7)
        x = torch.randn(4, 5, device=DEVICE)
        d = torch.nn.functional.dropout(x, 0.3, training=True)
        return [x, d, torch.rand_like(x), torch.randint(0, 9, (7,), device=DEVICE)]
    strict = [t.cpu() for t in draw()]
    with torch_pjrt.fused():
        fused = [t.cpu() for t in draw()]
    for a, b in zip(fused, strict):
        assert torch.equal(a, b)


def _train(model, data, steps, fused, make_opt):
    torch.manual_seed(3)
    model = copy.deepcopy(model).to(DEVICE)
    opt = make_opt(model.parameters())
    x, y = (t.to(DEVICE) for t in data)
    losses, per_step = [], []
    with torch_pjrt.fused(fused):
        for step in range(steps):
            if step == 2:
                torch_pjrt.reset_stats()
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
    stats = torch_pjrt.stats()
    return [l.item() for l in losses], [p.detach().cpu() for p in model.parameters()], stats


@pytest.mark.parametrize("make_opt", [
    lambda p: torch.optim.AdamW(p, lr=1e-2),                        # foreach
    lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, foreach=False),
], ids=["adamw_foreach", "sgd_momentum_forloop"])
def test_training_equals_strict_and_later_steps_compile_nothing(make_opt):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        # No bias before the norm: its gradient would be rounding noise, which Adam amplifies.
        torch.nn.Conv2d(3, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Dropout(0.2),
        torch.nn.Linear(8 * 4 * 4, 10))
    data = (torch.randn(6, 3, 8, 8), torch.randint(0, 10, (6,)))
    steps = 5
    ls, ps, _ = _train(model, data, steps, False, make_opt)
    lf, pf, stats = _train(model, data, steps, True, make_opt)
    torch.testing.assert_close(lf, ls, rtol=1e-4, atol=1e-5)
    for a, b in zip(pf, ps):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    # From the third step on: one region per step (the optimizer's step ends it), all cache hits.
    assert stats["compiles"] == 0
    assert stats["fused_regions"] == steps - 2 and stats["fused_cache_hits"] == steps - 2


def test_autocast_inside_fused_equals_strict():
    torch.manual_seed(2)
    lin = torch.nn.Linear(16, 16).to(DEVICE)
    x = torch.randn(4, 16, device=DEVICE)
    def run():
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            h = torch.relu(lin(x))
            return h, h.sum(-1)  # a matmul in bfloat16, a reduction in float32
    strict = [t.cpu() for t in run()]
    with torch_pjrt.fused():
        fused = [t.cpu() for t in run()]
    assert [t.dtype for t in fused] == [t.dtype for t in strict] == [torch.bfloat16, torch.float32]
    for a, b in zip(fused, strict):
        torch.testing.assert_close(a, b)


def test_the_environment_turns_it_on_for_a_process():
    code = ("import torch, torch_pjrt\n"
            "x = torch.arange(10., device='tpu')\n"
            "y = (x * 2 + 1).sum()\n"
            "print(int(y.item()), torch_pjrt.stats()['fused_regions'])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=child_env(TORCH_PJRT_EAGER="fused"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["100", "1"]
    bad = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True,
                         timeout=120, env=child_env(TORCH_PJRT_EAGER="lazy"))
    assert "TORCH_PJRT_EAGER='lazy'" in bad.stderr


def test_ddp_ranks_cut_identical_regions_though_one_is_slow_and_match_strict():
    from test_distributed import _run_ranks
    ranks = _run_ranks("fused_ddp.py", world=2, timeout=300)
    for r in ranks:
        assert r["param_diff"] < 1e-5 and r["loss_diff"] < 1e-5, r
        assert r["regions"] >= 6 and r["allreduces"] >= 6, r
    # Same regions, cut at the same calls, whatever each rank's timing.
    assert ranks[0]["digest"] == ranks[1]["digest"]
    assert (ranks[0]["regions"], ranks[0]["ops"]) == (ranks[1]["regions"], ranks[1]["ops"])


def test_ten_thousand_steps_do_not_grow_memory(fresh_stats):
    import resource
    x = torch.zeros(256, device=DEVICE)
    w = torch.full((256,), 0.5, device=DEVICE)
    def steps(n):
        nonlocal x
        for i in range(n):
            x = x * 0.9 + w.sin()  # new tensors every step, the old ones dropped
            if i % 500 == 499:
                x.sum().item()     # a host read now and then
    with torch_pjrt.fused():
        steps(1000)
        torch.tpu.synchronize()
        device_before = torch.tpu.memory_allocated()
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        steps(10000)
        torch.tpu.synchronize()
    assert torch.tpu.memory_allocated() <= device_before
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    assert grown_kib < 20 * 1024, f"peak RSS grew {grown_kib} KiB over 10,000 steps"
    s = torch_pjrt.stats()
    assert s["fused_ops"] >= 3 * 11000 and s["fused_compiles"] <= 8, s
    torch.testing.assert_close(x.cpu(), torch.full((256,), 10 * torch.tensor(0.5).sin().item()))


def test_opinfo_cases_under_fused_eager_pass_as_under_strict(tmp_path):
    """PyTorch's OpInfo samples (function, noncontiguous, inplace, out and backward variants)
    through the compat sweep against CPU, in strict and in fused eager: the same outcome for
    every case."""
    ops = "add,mul,index_put,masked_fill,transpose,cumsum,nn.functional.layer_norm,sort,addmm,where"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    outcomes = {}
    for mode in ("strict", "fused"):
        out = subprocess.run(
            [sys.executable, os.path.join(root, "tools", "compat.py"), "ops", "--ops", ops,
             "--dtypes", "float32,int64", "--tiers", "clean", "--out", str(tmp_path / mode),
             "--md", str(tmp_path / f"{mode}.md")],
            capture_output=True, text=True, timeout=600, env=child_env(TORCH_PJRT_EAGER=mode))
        assert out.returncode == 0, out.stderr[-3000:]
        cases = json.loads((tmp_path / mode / "ops.json").read_text())["cases"]
        outcomes[mode] = {(c["op"], c["variant"], c["dtype"], c["sample"]): c["status"] for c in cases}
    assert len(outcomes["fused"]) > 100
    assert outcomes["fused"] == outcomes["strict"]


def test_the_profiler_shows_one_device_span_per_region():
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    x = torch.randn(32, 8, device=DEVICE)
    def work():
        with torch_pjrt.fused():
            y = (x.sin() * 2 + x.cos()).sum(dim=0)
            return y.cpu()
    work()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as p:
        work()
    device = [e.name for e in p.events() if e.device_type == DeviceType.PrivateUse1]
    assert [n for n in device if not n.startswith("tpu copy")] == ["fused region of 5 ops"], device


def test_an_index_out_of_range_in_a_region_raises_at_the_read_naming_the_region():
    x = torch.randn(5, device=DEVICE)
    with torch_pjrt.fused():
        y = x[torch.tensor([7], device=DEVICE)] * 2
    with pytest.raises(IndexError, match="asynchronous error in 'fused region': index out of range"):
        y.cpu()
    assert x.cpu().shape == (5,)  # the process and the device go on
