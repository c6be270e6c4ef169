"""Ops without a native lowering run on CPU, visibly: counted, warned once, reported, and
refused under strict mode."""
import warnings

import pytest
import torch

import torch_pjrt
from tpu_helpers import DEVICE, assert_same, fallbacks, make, run_python


def _fallback_warnings(records, needle):
    return [w for w in records
            if "no native lowering" in str(w.message) and needle in str(w.message)]


def test_cumsum_falls_back_with_cpu_result(fresh_stats):
    c = make((4, 5), torch.float32, seed=1)
    t = c.to(DEVICE)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        got = torch.cumsum(t, dim=1)
        got2 = t.cumsum(0)
    # the result is a tpu tensor holding the CPU answer
    assert_same(got, torch.cumsum(c, dim=1))
    assert_same(got2, c.cumsum(0))
    fb = fallbacks()
    names = [k for k in fb if k.split(".")[0] == "cumsum"]
    assert names, fb
    assert sum(fb[k] for k in names) == 2
    # keys are schema names without the "aten::" namespace
    assert all(not k.startswith("aten::") for k in fb), fb
    # warned once for the two calls
    assert len(_fallback_warnings(rec, "cumsum")) == 1, [str(w.message) for w in rec]


def test_sort_falls_back(fresh_stats, quiet_fallbacks):
    c = torch.tensor([3.0, -1.0, 2.5, 0.0, 7.0])
    values, indices = torch.sort(c.to(DEVICE))
    ref_v, ref_i = torch.sort(c)
    assert_same(values, ref_v)
    assert_same(indices, ref_i)
    assert any(k.split(".")[0] == "sort" for k in fallbacks()), fallbacks()


def test_counts_accumulate_and_reset(fresh_stats, quiet_fallbacks):
    t = torch.ones(6, device=DEVICE)
    for _ in range(3):
        t.cumsum(0)
    fb = fallbacks()
    key = next(k for k in fb if k.split(".")[0] == "cumsum")
    assert fb[key] == 3
    torch_pjrt.reset_stats()
    assert fallbacks() == {}
    t.cumsum(0)
    assert fallbacks() == {key: 1}


def test_warning_is_issued_again_after_reset(fresh_stats):
    t = torch.ones(4, device=DEVICE)
    for _ in range(2):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            t.cumsum(0)
            t.cumsum(0)
        assert len(_fallback_warnings(rec, "cumsum")) == 1
        torch_pjrt.reset_stats()


def test_fallback_report_names_the_op(fresh_stats, quiet_fallbacks):
    assert "no op fell back" in torch_pjrt.fallback_report()
    t = torch.ones(4, device=DEVICE)
    t.cumsum(0)
    t.cumsum(0)
    torch.sort(t)
    report = torch_pjrt.fallback_report()
    assert isinstance(report, str)
    lines = report.splitlines()
    cumsum_line = next(l for l in lines if "cumsum" in l)
    assert cumsum_line.split()[-1] == "2"
    assert any("sort" in l for l in lines)
    # most frequent first
    body = [l for l in lines[2:] if l.strip()]
    counts = [int(l.split()[-1]) for l in body]
    assert counts == sorted(counts, reverse=True)


def test_strict_raises_naming_the_op_then_recovers(fresh_stats, quiet_fallbacks):
    c = make((5,), torch.float32, seed=2)
    t = c.to(DEVICE)
    with torch_pjrt.strict():
        with pytest.raises(RuntimeError, match="cumsum") as ei:
            torch.cumsum(t, 0)
        assert "strict" in str(ei.value)
        with pytest.raises(RuntimeError, match="sort"):
            torch.sort(t)
        # native ops keep working inside the block
        assert_same(t * 2 + 1, c * 2 + 1)
    # nothing fell back (strict refused before running)
    assert not any(k.split(".")[0] in ("cumsum", "sort") for k in fallbacks())
    # after the block the op works again
    assert_same(torch.cumsum(t, 0), torch.cumsum(c, 0))
    assert any(k.split(".")[0] == "cumsum" for k in fallbacks())


def test_strict_block_restores_state_after_exception(quiet_fallbacks):
    t = torch.ones(3, device=DEVICE)
    with pytest.raises(KeyError):
        with torch_pjrt.strict():
            raise KeyError("boom")
    assert t.cumsum(0).cpu().tolist() == [1.0, 2.0, 3.0]
    # nested: strict(False) inside strict() allows fallbacks, then strictness returns
    with torch_pjrt.strict():
        with torch_pjrt.strict(False):
            assert t.cumsum(0).cpu().tolist() == [1.0, 2.0, 3.0]
        with pytest.raises(RuntimeError, match="cumsum"):
            t.cumsum(0)


def test_strict_error_leaves_tensors_intact(quiet_fallbacks):
    c = make((4,), torch.float32, seed=3)
    t = c.to(DEVICE)
    with torch_pjrt.strict():
        with pytest.raises(RuntimeError):
            t.cumsum(0)
    assert_same(t, c)


def test_strict_env_var_in_subprocess():
    code = (
        "import torch, torch_pjrt\n"
        "x = torch.ones(4, device='tpu') * 2\n"
        "assert x.sum().item() == 8.0\n"
        "try:\n"
        "    torch.cumsum(x, 0)\n"
        "except RuntimeError as e:\n"
        "    print('STRICT-RAISED', e)\n"
        "else:\n"
        "    print('NO-ERROR')\n"
        "with torch_pjrt.strict(False):\n"
        "    print('RELAXED', torch.cumsum(x, 0).cpu().tolist())\n"
    )
    p = run_python(code, TORCH_PJRT_STRICT="1")
    assert p.returncode == 0, p.stderr
    assert "STRICT-RAISED" in p.stdout and "cumsum" in p.stdout, p.stdout
    assert "RELAXED [2.0, 4.0, 6.0, 8.0]" in p.stdout
    # and without the variable the same script falls back silently-but-counted
    p2 = run_python(code, TORCH_PJRT_STRICT=None)
    assert p2.returncode == 0, p2.stderr
    assert "NO-ERROR" in p2.stdout


def test_fallback_of_printing_a_tpu_tensor_works(quiet_fallbacks):
    # repr uses many non-native ops (abs/max/ne/...): it must still print correct numbers
    t = torch.tensor([1.5, -2.0, 3.25], device=DEVICE)
    s = repr(t)
    assert "1.5000" in s and "-2.0000" in s and "3.2500" in s and "tpu" in s
