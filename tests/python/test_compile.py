"""torch.compile(backend="tpu"): forward and backward graphs agree with eager and with CPU."""
import torch

from tpu_helpers import assert_same


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                               torch.nn.Linear(16, 4))


def test_compiled_mlp_forward_and_backward_match_cpu():
    import torch_pjrt.compile as tc
    before = tc.stats()["graphs"]
    cpu = _mlp()
    tpu = _mlp().to("tpu")
    x = torch.randn(5, 8)
    step = torch.compile(tpu, backend="tpu")
    out = step(x.to("tpu"))
    ref = cpu(x)
    assert_same(out, ref, atol=1e-5, rtol=1e-5)
    out.pow(2).sum().backward()
    ref.pow(2).sum().backward()
    for p_tpu, p_cpu in zip(tpu.parameters(), cpu.parameters()):
        assert_same(p_tpu.grad, p_cpu.grad, atol=1e-5, rtol=1e-4)
    assert tc.stats()["graphs"] >= before + 2  # a forward and a backward graph


def test_compiled_function_with_inplace_update_of_input():
    def f(a, b):
        a.add_(b)
        return (a * 2).sum()

    a_cpu, b = torch.randn(6), torch.randn(6)
    a_tpu = a_cpu.to("tpu")
    got = torch.compile(f, backend="tpu")(a_tpu, b.to("tpu"))
    want = f(a_cpu, b)
    assert_same(got, want, atol=1e-5, rtol=1e-5)
    assert_same(a_tpu, a_cpu)  # the input mutation is visible after the call
