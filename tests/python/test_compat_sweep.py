"""The OpInfo sweep's own rules (tools/compat.py): where each side's inputs live, so a case
compares what PyTorch would compare when it tests a CUDA device; the nonfinite and error-input
tiers and the ModuleInfo sweep (compat_modules), each on a case that must pass and one that must
be recorded as a failure."""
import json

import pytest
import torch

import compat
from tpu_helpers import DEVICE

pytest.importorskip("expecttest")  # PyTorch's OpInfo database needs it


def _op(name):
    return next(op for op in compat.load_op_db() if compat.op_name(op) == name)


def _case(name, dtype=torch.float32, variants=("function", "noncontiguous", "backward")):
    op = _op(name)
    samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:2]
    on_host = compat.host_tensors(op, dtype, len(samples))
    out = []
    for index, sample in enumerate(samples):
        ref = None
        for variant in variants:
            if not compat.variant_applies(op, variant, dtype):
                continue
            r = compat.run_case(op, variant, sample, dtype, ref, 0, on_host[index])
            if r is None:
                continue
            if variant == "function":
                ref = r[3]
            out.append((variant, r[0], r[1]))
    return out


def test_cpu_only_sample_tensors_stay_on_cpu():
    # tensor_split's indices tensor is made on CPU whatever the device under test, as on CUDA
    op = _op("tensor_split")
    on_host = compat.host_tensors(op, torch.float32, 2)
    assert on_host[0] == {1}, on_host
    sample = next(iter(op.sample_inputs("cpu", torch.float32)))
    x = compat.Inputs(sample, DEVICE, "function", None, on_host[0])
    assert x.input.device.type == DEVICE and x.args[0].device.type == "cpu"
    assert all(status != "fail" for _, status, _ in _case("tensor_split")), _case("tensor_split")


def test_device_argument_names_the_device_under_test():
    # to(device, dtype): the sample's "cpu" stands for the device the samples were made for
    cases = _case("to")
    assert cases and all(status != "fail" for _, status, _ in cases), cases


def test_known_causes_name_real_ops_and_dtypes():
    names = {compat.op_name(op) for op in compat.load_op_db()}
    for (name, dtype), (variants, cause) in compat.KNOWN_CAUSES.items():
        assert name in names, name
        assert dtype in compat.DTYPES and set(variants) <= set(compat.VARIANTS) and cause
    assert compat.known_cause("nn.functional.conv_transpose2d", "bfloat16", "function")
    assert compat.known_cause("nn.functional.conv_transpose2d", "bfloat16", "backward") is None


def test_device_generator_ops_compare_shapes_only():
    assert not compat.values_comparable(_op("randn")) and not compat.values_comparable(_op("randint"))
    assert compat.values_comparable(_op("add"))


# ----------------------------------------------------------------------------- the extra tiers

def _fake_op(name, fn, sample_fn, error_fn=None):
    """An OpInfo of our own, so a case that must fail keeps failing whatever the lowerings do."""
    from torch.testing._internal.opinfo.core import OpInfo
    from torch.testing._internal.common_dtype import floating_types
    return OpInfo(name, op=fn, dtypes=floating_types(), sample_inputs_func=sample_fn,
                  error_inputs_func=error_fn, supports_out=False)


def _one_sample(op_info, device, dtype, requires_grad, **kwargs):
    from torch.testing._internal.opinfo.core import SampleInput
    yield SampleInput(torch.linspace(-2, 2, 12, dtype=dtype, device=device).reshape(3, 4))


def _records(cases, op, job):
    return list(cases(op, compat.op_name(op), job, lambda cid: True))


def test_nonfinite_injection_is_fixed_and_rotates_across_tensors():
    from torch.testing._internal.opinfo.core import SampleInput
    sample = SampleInput(torch.zeros(2, 3), args=(torch.zeros(3), torch.tensor([1, 2])))
    a = compat.inject_nonfinite(sample, compat.NONFINITE["mixed"])
    b = compat.inject_nonfinite(sample, compat.NONFINITE["mixed"])
    torch.testing.assert_close(a.input, b.input, equal_nan=True)
    flat = a.input.flatten()
    assert flat[0].isnan() and flat[3] == float("inf") and flat[5] == float("-inf")
    assert flat[[1, 2, 4]].eq(0).all()
    second = a.args[0]  # the next tensor starts one value further: NaN meets +inf
    assert second[0] == float("inf") and second[1] == float("-inf") and second[2].isnan()
    assert a.args[1].tolist() == [1, 2] and sample.input.eq(0).all()  # ints and the original untouched
    assert compat.inject_nonfinite(SampleInput(torch.tensor([1, 2])), (float("nan"),)) is None


def test_nonfinite_tier_passes_and_fails():
    job = dict(dtypes=["float32"], samples=1)
    good = _records(compat.nonfinite_cases, _op("exp"), job)
    assert [r["variant"] for r in good] == list(compat.NONFINITE), good
    assert all(r["status"] in ("native", "fallback") for r in good), good
    # a device result that drops NaN (as a lowering with a max or select that ignores NaN would)
    lossy = _fake_op("fake.nan_dropping",
                     lambda x: torch.where(x.isnan(), 0.0, x) if x.is_tpu else x.clone(), _one_sample)
    bad = {r["variant"]: r for r in _records(compat.nonfinite_cases, lossy, job)}
    assert bad["nan"]["status"] == "fail" and "not close" in bad["nan"]["reason"], bad
    assert bad["mixed"]["status"] == "fail" and bad["posinf"]["status"] != "fail", bad
    assert not bad["nan"]["reason"].startswith(compat.CLEAN_FAILS), bad
    # a failure that is not NaN's: the clean sample fails as well, and the reason says so
    shifted = _fake_op("fake.shifted", lambda x: x + 1 if x.is_tpu else x.clone(), _one_sample)
    records = _records(compat.nonfinite_cases, shifted, job)
    assert records and all(r["status"] == "fail" and r["reason"].startswith(compat.CLEAN_FAILS)
                           for r in records), records


def _raise_on(device_type, exc):
    def fn(x, *args, **kwargs):
        if x.device.type == device_type:
            raise exc("bad argument")
        return x.clone()
    return fn


def _one_error(op_info, device, **kwargs):
    from torch.testing._internal.opinfo.core import ErrorInput, SampleInput
    yield ErrorInput(SampleInput(torch.ones(3, device=device)), error_type=ValueError, error_regex="bad")


def test_error_inputs_tier_compares_exception_types():
    job = dict(dtypes=["float32"], samples=1)
    # a real OpInfo error input that raises the same type on both sides (the dim is out of range)
    good = _records(compat.error_cases, _op("logcumsumexp"), job)
    assert good and all(r["status"] in ("native", "fallback") for r in good), good
    assert all(r["variant"] == "error" and r["dtype"] == "float32" for r in good), good

    def both(x):
        raise ValueError("bad argument")
    same = _fake_op("fake.raises", both, _one_sample, _one_error)
    assert [r["status"] for r in _records(compat.error_cases, same, job)] == ["native"]
    quiet = _fake_op("fake.quiet_on_tpu", _raise_on("cpu", ValueError), _one_sample, _one_error)
    [r] = _records(compat.error_cases, quiet, job)
    assert r["status"] == "fail" and r["reason"].startswith("returned without raising"), r

    def other_type(x):
        raise (TypeError if x.is_tpu else ValueError)("bad argument")
    other = _fake_op("fake.other_type", other_type, _one_sample, _one_error)
    [r] = _records(compat.error_cases, other, job)
    assert r["status"] == "fail" and r["reason"].startswith("raised TypeError"), r


def test_error_inputs_keep_aliasing_on_the_device():
    # index_select's error input writes into an expanded out=: it must overlap itself on tpu too
    sample = compat.error_inputs_of(_op("index_select"))[0].sample_input
    x, args, kwargs = compat.error_side(sample, DEVICE)
    assert kwargs["out"].is_tpu and kwargs["out"].stride() == sample.kwargs["out"].stride() == (0, 1)
    from torch.testing._internal.opinfo.core import SampleInput
    base = torch.arange(6.)
    x, args, kwargs = compat.error_side(SampleInput(base, kwargs=dict(out=base[2:])), DEVICE)
    assert x.untyped_storage().data_ptr() == kwargs["out"].untyped_storage().data_ptr()
    assert kwargs["out"].storage_offset() == 2 and x.is_tpu
    assert compat.error_side(SampleInput(2, args=(3,)), DEVICE) is None  # no tensor: not a device case


# ----------------------------------------------------------------------------- modules

def _module_info(name):
    import compat_modules
    return next(m for m in compat_modules.load_module_db() if m.name == name)


def test_module_cases_pass_on_a_linear_and_record_a_mismatch():
    import compat_modules
    from torch.testing._internal.common_modules import ModuleInfo, module_inputs_torch_nn_Linear
    job = dict(dtypes=["float32"], samples=2)
    good = list(compat_modules.module_cases(_module_info("nn.Linear"), "nn.Linear", job, lambda cid: True))
    assert [r["variant"] for r in good] == ["train.forward", "train.backward"] * 2, good
    assert all(r["status"] in ("native", "fallback") for r in good), good

    class Skewed(torch.nn.Linear):  # the device side's output is shifted by one
        def forward(self, input):
            y = super().forward(input)
            return y + 1 if y.is_tpu else y
    info = ModuleInfo(Skewed, module_inputs_func=module_inputs_torch_nn_Linear)
    bad = list(compat_modules.module_cases(info, "Skewed", dict(job, samples=1), lambda cid: True))
    assert [r["status"] for r in bad] == ["fail", "native"], bad  # the gradients do not see the shift
    assert "output" in bad[0]["reason"], bad
    assert "float64 check of that tensor: tpu 1 from float64" in bad[0]["reason"], bad  # CPU is the near one


def test_module_modes_follow_train_and_eval_differ():
    import compat_modules
    assert compat_modules.modes(_module_info("nn.BatchNorm1d")) == ("train", "eval")
    assert compat_modules.modes(_module_info("nn.Linear")) == ("train",)
    assert compat_modules.spread(32, 8) == [0, 4, 9, 13, 18, 22, 27, 31]
    assert compat_modules.spread(3, 8) == [0, 1, 2]


def test_module_sweep_runs_in_child_processes():
    # the op sweep's driver, with the "modules" tier: one child, records streamed back
    records = compat.sweep(["nn.ReLU"], ["float32"], 1, 60, 1, "modules")
    assert [(r["op"], r["variant"]) for r in records] == [("nn.ReLU", "train.forward"), ("nn.ReLU", "train.backward")]
    assert all(r["status"] in ("native", "fallback") for r in records), records


def test_module_worker_says_when_the_cpu_side_is_done():
    # the driver blames a crash after "cpu_done" on the device; module cases must send it too
    import _child
    job = dict(tier="modules", ops=["nn.ReLU"], dtypes=["float32"], samples=1, skip=[])
    kinds = [next(iter(msg)) for msg in _child.Child("compat.py", "worker", job=job).messages(300)]
    assert kinds == ["ready"] + ["start", "cpu_done", "record"] * 2 + ["done"], kinds


def test_reports_keep_the_clean_section_and_add_the_tiers(tmp_path):
    import compat_modules
    meta = dict(command="c", torch="t", platform="cpu", dtypes=["float32"], samples=1, native_ops=["abs"],
                date="d")
    clean = [dict(op="abs", variant="function", dtype="float32", sample=0, status="native", reason="", fallbacks=[])]
    fail = dict(op="exp", variant="nan", dtype="float32", sample=0, status="fail", reason="AssertionError: x",
                fallbacks=[])
    compat.write_json(str(tmp_path / "ops.json"), meta, clean)
    compat.write_json(str(tmp_path / "nonfinite.json"), dict(meta, tier="nonfinite"), [fail])
    compat.write_json(str(tmp_path / "modules.json"), dict(meta, tier="modules"),
                      [dict(fail, op="nn.Linear", variant="train.forward")])
    compat.write_markdown(str(tmp_path), str(tmp_path / "COMPAT.md"))
    text = (tmp_path / "COMPAT.md").read_text()
    assert text.startswith(compat.render(meta, clean))
    assert "## Non-finite inputs" in text and "- `exp` (1 case)" in text
    assert "  - float32 nan: AssertionError: x" in text
    assert "## Modules" in text and "| nn.Linear | fail 1/1: AssertionError: x |" in text
    assert text.index("## Non-finite inputs") < text.index("## Modules")
    assert compat_modules.render_modules(json.loads((tmp_path / "modules.json").read_text())) in text


def test_driver_keeps_one_record_per_case_and_blames_the_side_that_crashed(monkeypatch):
    # two fake children: the first records case 0 and dies on case 1 while still on its CPU side,
    # the second (which reruns the op's cases but the skipped one) records 0 again, then 2 and 3,
    # and dies on 4 on the device side; the third finishes
    def rec(i):
        return dict(op="op", variant="nan", dtype="float32", sample=i, status="native", reason="", fallbacks=[])
    runs = iter([([0], "op|float32|1|nan", True), ([0, 2, 3], "op|float32|4|nan", False), ([5], None, None)])

    def fake_child(tier, remaining, dtypes, samples, skip, timeout, on_record, on_op_done):
        done, current, on_cpu = next(runs)
        for i in done:
            on_record(rec(i))
        if current is None:
            remaining.remove("op")
            on_op_done("op")
            return None
        return current, "crash (signal 11)", on_cpu
    monkeypatch.setattr(compat, "_run_child", fake_child)
    records = []
    compat.drive(["op"], ["float32"], 8, 60, records.append, lambda name: None, "nonfinite")
    assert [(r["sample"], r["status"]) for r in records] == [
        (0, "native"), (1, "cpu-invalid"), (2, "native"), (3, "native"), (4, "fail"), (5, "native")]
    assert records[1]["reason"] == "the CPU call: crash (signal 11)" and records[4]["reason"] == "crash (signal 11)"


def test_shapes_only_ops_are_compared_by_value_where_the_sample_is_deterministic():
    # attention's OpInfo is shapes-only (dropout), and re-seeds inside the call; with dropout_p=0
    # its CPU result does not depend on the seed, so the nonfinite tier compares its values
    op = _op("nn.functional.scaled_dot_product_attention")
    samples = compat._samples(op, torch.float32, 3)
    assert [s.kwargs["dropout_p"] for s in samples] == [0.0, 0.0, 0.5]
    expected = [op(s.input, *s.args, **s.kwargs) for s in samples]
    assert [compat.seed_independent(op, "function", s, None, 0, e) for s, e in zip(samples, expected)] == \
        [True, True, False]
    empty = _op("empty_like")
    sample = compat._samples(empty, torch.float32, 1)[0]
    assert not compat.seed_independent(empty, "function", sample, None, 0, empty(sample.input))


def test_update_replaces_only_the_entries_rerun(tmp_path):
    meta = dict(command="first", date="d", seconds=1)
    old = [dict(op=name, sample=i, status="native") for name in ("a", "b", "c") for i in range(2)]
    compat.write_json(str(tmp_path / "nonfinite.json"), dict(meta, tier="nonfinite"), old)
    doc, records = compat.updated(str(tmp_path / "nonfinite.json"), dict(command="again", date="e", seconds=2),
                                  [dict(op="b", sample=0, status="fail")], {"b"}, {"a": 0, "b": 1, "c": 2})
    assert [(r["op"], r["status"]) for r in records] == [("a", "native")] * 2 + [("b", "fail")] + [("c", "native")] * 2
    assert doc["command"] == "first" and doc["updates"] == [dict(command="again", date="e", entries=1, seconds=2)]
    assert "Since then 1 entries rerun by 1 update (`--update`), the last on e" in compat.updates_text(doc)
    # Every update counted, the header dated by the last: one line however many there were.
    assert "3 entries rerun by 2 updates (`--update`), the last on f" in compat.updates_text(dict(
        updates=doc["updates"] + [dict(command="x --ops a,b --update", date="f", entries=2, seconds=1)]))


def test_unstable_sort_passes_another_tie_order_and_nothing_else():
    from torch.testing._internal.opinfo.core import SampleInput
    op = _op("sort")
    x = torch.tensor([[2, 1, 2, 1], [0, 0, 3, 0]])
    cpu = torch.sort(x, 1)
    other = torch.return_types.sort((cpu.values, torch.arange(4).expand(2, 4)))
    ties = torch.return_types.sort((cpu.values, torch.tensor([[3, 1, 2, 0], [3, 0, 1, 2]])))
    assert compat.same_up_to_ties(op, SampleInput(x, 1), ties, cpu)
    assert not compat.same_up_to_ties(op, SampleInput(x, 1), other, cpu)  # picks other values
    assert not compat.same_up_to_ties(op, SampleInput(x, 1, stable=True), ties, cpu)
    wrong = torch.return_types.sort((cpu.values + 1, ties.indices))
    assert not compat.same_up_to_ties(op, SampleInput(x, 1), wrong, cpu)
