"""The C op table is the one list of native ops: every name in it is a real ATen schema, and every
one of them reaches a tpu kernel (a misspelt row would otherwise silently fall back); and the
core ops' functional, in-place and out= forms run without falling back."""
import pytest
import torch

import torch_pjrt
from tpu_helpers import F32, F64, assert_same, fallbacks, make, to_dev


def test_every_native_op_is_a_registered_aten_op():
    import torchvision  # noqa: F401  defines the torchvision:: operators the table lowers
    names = torch_pjrt.native_ops()
    assert len(names) == len(set(names))

    def qualified(n):  # "add.Tensor" -> "aten::add.Tensor"; other libraries' rows are qualified
        return n if "::" in n else "aten::" + n

    def has(n, key):
        return torch._C._dispatch_has_kernel_for_dispatch_key(qualified(n), key)

    # Composite ops without an autograd kernel get no tpu kernel (it would hide the composite
    # from autograd): they decompose.
    def composite(n):
        return has(n, "CompositeImplicitAutograd") and not has(n, "Autograd")

    missing = [n for n in names if not has(n, "PrivateUse1") and not composite(n)]
    assert not missing, f"table rows without a tpu kernel: {missing}"
    hiding = [n for n in names if has(n, "PrivateUse1") and composite(n)]
    assert not hiding, f"tpu kernels that hide a composite from autograd: {hiding}"
    for n in names:
        lib, _, name = qualified(n).partition("::")
        base, _, overload = name.partition(".")
        packet = getattr(getattr(torch.ops, lib), base)
        assert (overload or "default") in packet.overloads(), n


def test_native_ops_run_without_fallback():
    x = torch.randn(4, 4).to("tpu")
    torch_pjrt.reset_stats()
    with torch_pjrt.strict():
        y = (x.abs().sqrt() + x.sin() * 2 - x.clamp(-1, 1)).where(x > 0, x.exp())
        y.sum().item()
    assert torch_pjrt.stats()["fallbacks"] == {}


NATIVE_CALLS = {
    "abs": lambda a, b, m: (torch.abs(a), a.clone().abs_(), torch.abs(a, out=a.new_empty(3, 4))),
    "add": lambda a, b, m: (a + b, a + 1, torch.add(a, b, alpha=2), a.clone().add_(b),
                            torch.add(a, b, out=a.new_empty(3, 4)), a.clone().add_(0.5)),
    "sub": lambda a, b, m: (a - b, a - 1, a.clone().sub_(b, alpha=2),
                            torch.sub(a, b, out=a.new_empty(3, 4))),
    "mul": lambda a, b, m: (a * b, a * 0.5, a.clone().mul_(b), a.clone().mul_(2),
                            torch.mul(a, b, out=a.new_empty(3, 4))),
    "div": lambda a, b, m: (a / b, a / 2, a.clone().div_(b),
                            torch.div(a, b, out=a.new_empty(3, 4))),
    "maximum_minimum": lambda a, b, m: (torch.maximum(a, b), torch.minimum(a, b),
                                        torch.maximum(a, b, out=a.new_empty(3, 4))),
    "mm_addmm": lambda a, b, m: (a @ m, torch.mm(a, m), torch.addmm(b[:, :2], a, m),
                                 b[:, :2].clone().addmm_(a, m),
                                 torch.mm(a, m, out=a.new_empty(3, 2))),
    "unary": lambda a, b, m: (a.exp(), a.neg(), a.relu(), a.sigmoid(), a.abs().sqrt(), a.tanh(),
                              a.clone().exp_(), a.clone().relu_(), a.clone().tanh_()),
    "sum": lambda a, b, m: (a.sum(), a.sum(0), a.sum((0, 1)),
                            torch.sum(a, 1, out=a.new_empty(3))),
    "fill_copy": lambda a, b, m: (a.new_empty(3).fill_(2),
                                  torch.zeros_like(a).copy_(b), a.to(F64), a.t().contiguous(),
                                  a.clone(), torch.full((2,), 3.0, device=a.device)),
    "threshold_backward": lambda a, b, m: (torch.ops.aten.threshold_backward(a, b, 0.0),),
    "views_and_transfers": lambda a, b, m: (a[1:].view(-1)[::2], a.t()[1:].unsqueeze(0),
                                            a.cpu().to(a.device), a.sum().item(),
                                            torch.tensor([1.0, 2.0], device=a.device)),
}


@pytest.mark.parametrize("group", list(NATIVE_CALLS))
def test_native_ops_do_not_fall_back(group, fresh_stats):
    a = make((3, 4), F32, seed=69)
    b = make((3, 4), F32, seed=70)
    m = make((4, 2), F32, seed=71)
    ta, tb, tm = to_dev(a, b, m)
    with torch_pjrt.strict():
        results = NATIVE_CALLS[group](ta, tb, tm)
        torch.tpu.synchronize()
    assert fallbacks() == {}
    # and they computed the CPU answer
    for got, want in zip(results, NATIVE_CALLS[group](a, b, m)):
        if isinstance(want, torch.Tensor):
            assert_same(got, want)
        else:
            assert got == pytest.approx(want, rel=1e-5)
    assert torch_pjrt.stats()["executes"] > 0
