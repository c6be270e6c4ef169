"""The OpInfo sweep's own rules (torch_pjrt.compat): where each side's inputs live, so a case
compares what PyTorch would compare when it tests a CUDA device."""
import pytest
import torch

from torch_pjrt import compat
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
