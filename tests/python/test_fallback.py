"""Ops without a native lowering (here unique_consecutive over a dim and bincount, whose output
shapes depend on the data) run on CPU, visibly: counted, warned once, reported, and refused under
strict mode."""
import json
import os
import subprocess
import sys
import warnings

import pytest
import torch

import torch_pjrt
from tpu_helpers import DEVICE, assert_same, child_env, fallbacks, make, run_python


def unique_consecutive(t):
    return torch.unique_consecutive(t, dim=0)  # over whole slices: no lowering (without a dim: native)


def bincount(t):
    return torch.bincount((t > 0).long())


def named(key, op):
    return key.split(".")[0] == op


def _fallback_warnings(records, needle):
    return [w for w in records
            if "no native lowering" in str(w.message) and needle in str(w.message)]


def test_unlowered_op_falls_back_with_cpu_result(fresh_stats):
    c = make((4, 5), torch.float32, seed=1)
    t = c.to(DEVICE)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        got = unique_consecutive(t)
        got2 = unique_consecutive(t * 2)
    # the result is a tpu tensor holding the CPU answer
    assert_same(got, unique_consecutive(c))
    assert_same(got2, unique_consecutive(c * 2))
    fb = fallbacks()
    names = [k for k in fb if named(k, "unique_consecutive")]
    assert names, fb
    assert sum(fb[k] for k in names) == 2
    # keys are schema names without the "aten::" namespace
    assert all(not k.startswith("aten::") for k in fb), fb
    # warned once for the two calls
    assert len(_fallback_warnings(rec, "unique_consecutive")) == 1, [str(w.message) for w in rec]


def test_sort_falls_back(fresh_stats, quiet_fallbacks):
    # A two-output op through the fallback: an unstable bfloat16 sort (CPU's order of equal keys,
    # which a gradient would follow, is not reproduced natively, so it runs on CPU).
    c = torch.tensor([3, -1, 2, 0, 7, 2, 5, 5, 1, 0, 9, -4, 2, 8, 8, 6, 3, 1, 0, 2], dtype=torch.bfloat16)
    values, indices = torch.sort(c.to(DEVICE))
    ref_v, ref_i = torch.sort(c)
    assert_same(values, ref_v)
    assert_same(indices, ref_i)
    assert any(k.split(".")[0] == "sort" for k in fallbacks()), fallbacks()


def test_counts_accumulate_and_reset(fresh_stats, quiet_fallbacks):
    t = torch.ones(6, device=DEVICE)
    for _ in range(3):
        unique_consecutive(t)
    fb = fallbacks()
    key = next(k for k in fb if named(k, "unique_consecutive"))
    assert fb[key] == 3
    torch_pjrt.reset_stats()
    assert fallbacks() == {}
    unique_consecutive(t)
    assert fallbacks() == {key: 1}


def test_warning_is_issued_again_after_reset(fresh_stats):
    t = torch.ones(4, device=DEVICE)
    for _ in range(2):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            unique_consecutive(t)
            unique_consecutive(t)
        assert len(_fallback_warnings(rec, "unique_consecutive")) == 1
        torch_pjrt.reset_stats()


def test_fallback_report_names_the_op(fresh_stats, quiet_fallbacks):
    assert "no op fell back" in torch_pjrt.fallback_report()
    t = torch.ones(4, device=DEVICE)
    unique_consecutive(t)
    unique_consecutive(t)
    bincount(t)
    report = torch_pjrt.fallback_report()
    assert isinstance(report, str)
    lines = report.splitlines()
    fb_line = next(l for l in lines if l.split() and named(l.split()[0], "unique_consecutive"))
    assert fb_line.split()[-1] == "2"
    assert any(l.split() and named(l.split()[0], "bincount") for l in lines)
    # most frequent first
    body = [l for l in lines[2:] if l.strip()]
    counts = [int(l.split()[-1]) for l in body]
    assert counts == sorted(counts, reverse=True)


def test_strict_raises_naming_the_op_then_recovers(fresh_stats, quiet_fallbacks):
    c = make((5,), torch.float32, seed=2)
    t = c.to(DEVICE)
    with torch_pjrt.strict():
        with pytest.raises(RuntimeError, match="'unique_consecutive") as ei:
            unique_consecutive(t)
        assert "strict" in str(ei.value)
        with pytest.raises(RuntimeError, match="'bincount"):
            bincount(t)
        # native ops keep working inside the block
        assert_same(t * 2 + 1, c * 2 + 1)
    # nothing fell back (strict refused before running)
    assert not any(k.split(".")[0] in ("unique_consecutive", "bincount") for k in fallbacks())
    # after the block the op works again
    assert_same(unique_consecutive(t), unique_consecutive(c))
    assert any(named(k, "unique_consecutive") for k in fallbacks())


def test_strict_block_restores_state_after_exception(quiet_fallbacks):
    t = torch.ones(3, device=DEVICE)
    with pytest.raises(KeyError):
        with torch_pjrt.strict():
            raise KeyError("boom")
    assert unique_consecutive(t).cpu().tolist() == unique_consecutive(torch.ones(3)).tolist()
    # nested: strict(False) inside strict() allows fallbacks, then strictness returns
    with torch_pjrt.strict():
        with torch_pjrt.strict(False):
            assert unique_consecutive(t).cpu().tolist() == unique_consecutive(torch.ones(3)).tolist()
        with pytest.raises(RuntimeError, match="unique_consecutive"):
            unique_consecutive(t)


def test_strict_error_leaves_tensors_intact(quiet_fallbacks):
    c = make((4,), torch.float32, seed=3)
    t = c.to(DEVICE)
    with torch_pjrt.strict():
        with pytest.raises(RuntimeError):
            unique_consecutive(t)
    assert_same(t, c)


def test_strict_env_var_in_subprocess():
    code = (
        "import torch, torch_pjrt\n"
        "x = torch.ones(4, device='tpu') * 2\n"
        "assert x.sum().item() == 8.0\n"
        "try:\n"
        "    torch.unique_consecutive(x, dim=0)\n"
        "except RuntimeError as e:\n"
        "    print('STRICT-RAISED', e)\n"
        "else:\n"
        "    print('NO-ERROR')\n"
        "with torch_pjrt.strict(False):\n"
        "    print('RELAXED', torch.unique_consecutive(x, dim=0).cpu().tolist())\n"
    )
    p = run_python(code, TORCH_PJRT_STRICT="1")
    assert p.returncode == 0, p.stderr
    assert "STRICT-RAISED" in p.stdout and "unique_consecutive" in p.stdout, p.stdout
    assert "RELAXED [2.0]" in p.stdout
    # and without the variable the same script falls back silently-but-counted
    p2 = run_python(code, TORCH_PJRT_STRICT=None)
    assert p2.returncode == 0, p2.stderr
    assert "NO-ERROR" in p2.stdout


def test_fallback_of_printing_a_tpu_tensor_works(quiet_fallbacks):
    # repr (masked_select, abs, max, ne, ...): it must print correct numbers
    t = torch.tensor([1.5, -2.0, 3.25], device=DEVICE)
    s = repr(t)
    assert "1.5000" in s and "-2.0000" in s and "3.2500" in s and "tpu" in s


def test_mode_out_runs_natively(fresh_stats):
    # mode.values is a composite that refuses non-CPU/CUDA devices itself: the table's row
    # serves it (it used to reach the CPU through the fallback)
    c = make((3, 6), torch.int64, low=0, high=3)
    v = torch.empty(3, dtype=torch.int64, device=DEVICE)
    i = torch.empty(3, dtype=torch.int64, device=DEVICE)
    torch.mode(c.to(DEVICE), 1, out=(v, i))
    ref = torch.mode(c, 1)
    assert_same(v, ref.values)
    assert_same(i, ref.indices)
    assert fallbacks() == {}, fallbacks()


def test_complex32_conversion_on_device_is_a_counted_fallback(fresh_stats, quiet_fallbacks):
    # complex64/128 are device types; complex32 is kept as bytes and converts through the host
    c = make((3, 4), torch.float32)
    z = c.to(DEVICE).to(torch.chalf)
    assert torch.equal(z.cpu().to(torch.cfloat), c.to(torch.chalf).to(torch.cfloat))
    assert "copy_" in fallbacks(), fallbacks()
    with torch_pjrt.strict():
        with pytest.raises(RuntimeError, match="copy_"):
            c.to(DEVICE).to(torch.chalf)


def test_sparse_tpu_tensors_run_on_cpu_visibly(fresh_stats, quiet_fallbacks):
    # A sparse COO tpu tensor holds tpu indices and values; its ops run on CPU, counted (a
    # third-party conformance suite found torch.sparse.mm raising where CPU computes).
    dense = make((4, 5), torch.float32)
    dense[dense.abs() < 0.8] = 0
    sp, rhs = dense.to_sparse(), make((5, 3), torch.float32, seed=1)
    tsp = sp.to(DEVICE)
    assert tsp.layout == torch.sparse_coo and tsp.device.type == "tpu"
    assert tsp._values().device.type == "tpu" and tsp._nnz() == sp._nnz()
    assert_same(torch.sparse.mm(tsp, rhs.to(DEVICE)), torch.sparse.mm(sp, rhs))
    assert_same((tsp + tsp).to_dense(), (sp + sp).to_dense())
    made = torch.sparse_coo_tensor(sp._indices().to(DEVICE), sp._values().to(DEVICE), sp.shape)
    assert torch.equal(made.cpu().to_dense(), dense)
    assert torch.equal(dense.to(DEVICE).to_sparse().cpu().to_dense(), dense)
    assert any(k.endswith("(sparse)") for k in fallbacks()), fallbacks()
    with torch_pjrt.strict(), pytest.raises(RuntimeError, match="strict"):
        torch.sparse.mm(tsp, rhs.to(DEVICE))


# ---------------------------------------------------------------- kernels the fallback must steer

def test_composites_that_read_host_memory_run_on_cpu(quiet_fallbacks):
    # These composite kernels read tensor memory on the host: on a tpu tensor (a never-mapped
    # address) they killed the process. They run through the CPU fallback instead.
    routed = torch_pjrt.host_read_ops()
    assert {"_saturate_weight_to_fp16", "_grid_sampler_2d_cpu_fallback", "range.out_"} <= set(routed)
    w = torch.tensor([[1e6, -1e6], [0.5, 3.0]])
    assert_same(torch.ops.aten._saturate_weight_to_fp16(w.to(DEVICE)),
                torch.ops.aten._saturate_weight_to_fp16(w))
    x, grid = make((1, 2, 4, 4), torch.float32, seed=2), make((1, 3, 3, 2), torch.float32, seed=3) / 5
    assert_same(torch.ops.aten._grid_sampler_2d_cpu_fallback(x.to(DEVICE), grid.to(DEVICE), 0, 0, False),
                torch.ops.aten._grid_sampler_2d_cpu_fallback(x, grid, 0, 0, False))
    out = torch.empty(0, device=DEVICE)
    torch.ops.aten.range.out_(0.5, 3.5, out=out)
    assert_same(out, torch.tensor([0.5, 1.5, 2.5, 3.5]))


def test_host_read_sweep_finds_no_crash_among_known_composites(tmp_path):
    # The sweep (tools/compat_host.py) over the routed ops and composites near them:
    # every call in a child process, a crash recorded and named.
    ops = ["aten::" + n for n in torch_pjrt.host_read_ops()] + [
        "aten::_batch_norm_impl_index", "aten::native_batch_norm_backward", "aten::cudnn_batch_norm",
        "aten::fbgemm_linear_fp16_weight", "aten::_fused_dropout"]
    tool = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "compat_host.py")
    p = subprocess.run([sys.executable, tool, "--ops", ",".join(ops),
                        "--out", str(tmp_path), "--md", str(tmp_path / "compat.md")],
                       env=child_env(), capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    recs = {r["op"]: r for r in json.load(open(tmp_path / "host_reads.json"))["ops"]}
    assert set(recs) == set(ops)
    # (a PyTorch CPU kernel that crashes on the same arguments on CPU is recorded, not ours)
    assert not [r for r in recs.values() if r["status"] == "crash"]
    assert recs["aten::_saturate_weight_to_fp16"]["tpu_ok"] > 0


def test_op_with_no_cpu_kernel_raises_saying_so():
    # A CUDA-only kernel: the fallback has nothing to run and says so.
    x = torch.randn(1, 2, 5, 5, device=DEVICE)
    w = torch.randn(2, 1, 3, 3, device=DEVICE)
    with pytest.raises(NotImplementedError, match="no CPU kernel for it to fall back to.*CUDA"):
        torch.ops.aten._conv_depthwise2d(x, w, [3, 3], None, [1, 1], [0, 0], [1, 1])
    assert torch.ones(2, device=DEVICE).sum().item() == 2  # the device still works


def test_cuda_only_ops_with_a_decomposition_run_as_it(fresh_stats):
    # cudnn_batch_norm (what CUDA's BatchNorm calls), addmm with an output dtype: no CPU kernel,
    # so they run as PyTorch's decomposition of them, natively.
    assert "aten::cudnn_batch_norm" in torch_pjrt.decomposed_ops()
    x, w, b = make((2, 3, 4, 4), torch.float32, seed=4), torch.rand(3) + 0.5, torch.randn(3)
    rm, rv = torch.zeros(3), torch.ones(3)
    got = torch.ops.aten.cudnn_batch_norm(x.to(DEVICE), w.to(DEVICE), b.to(DEVICE), rm.to(DEVICE),
                                          rv.to(DEVICE), False, 0.1, 1e-5)
    assert_same(got[0], torch.nn.functional.batch_norm(x, rm, rv, w, b, False, 0.1, 1e-5), atol=1e-5, rtol=1e-5)
    a, m1, m2 = (make(s, torch.bfloat16, seed=k) for k, s in enumerate([(3, 5), (3, 4), (4, 5)]))
    got = torch.ops.aten.addmm.dtype(a.to(DEVICE), m1.to(DEVICE), m2.to(DEVICE), torch.float32)
    assert_same(got, a.float() + m1.float() @ m2.float(), atol=1e-5, rtol=1e-5)
    assert fallbacks() == {}


def test_fallen_back_random_ops_use_the_tpu_generator(quiet_fallbacks):
    # randperm has no lowering: on CPU it draws from a generator made from the tpu one, so a tpu
    # Generator argument works and torch.tpu.manual_seed governs it.
    g = torch.Generator(DEVICE).manual_seed(7)
    a = torch.randperm(32, device=DEVICE, generator=g)
    b = torch.randperm(32, device=DEVICE, generator=g)
    g.manual_seed(7)
    assert torch.equal(torch.randperm(32, device=DEVICE, generator=g).cpu(), a.cpu())
    assert not torch.equal(a.cpu(), b.cpu())
    assert torch.equal(a.cpu().sort().values, torch.arange(32))
    torch.tpu.manual_seed(3)
    c = torch.randperm(32, device=DEVICE)
    torch.tpu.manual_seed(3)
    assert torch.equal(torch.randperm(32, device=DEVICE).cpu(), c.cpu())


def test_cat_of_many_tensors_is_native(fresh_stats):
    # One call holds 16 arguments; a longer list is concatenated in chunks on the device
    # (clip_grad_norm_ stacks one norm per parameter).
    parts = [make((2, 1 + k % 3), torch.float32, seed=k) for k in range(70)]
    assert_same(torch.cat([p.to(DEVICE) for p in parts], 1), torch.cat(parts, 1))
    params = [torch.nn.Parameter(p.clone().to(DEVICE)) for p in parts]
    for p in params:
        p.grad = torch.ones_like(p)
    norm = torch.nn.utils.clip_grad_norm_(params, 1.0)
    assert abs(norm.item() - sum(p.numel() for p in parts) ** 0.5) < 1e-3
    assert fallbacks() == {}
