"""The C op table is the one list of native ops: every name in it is a real ATen schema, and every
one of them reaches a tpu kernel (a misspelt row would otherwise silently fall back)."""
import torch
import torch_pjrt


def test_every_native_op_is_a_registered_aten_op():
    names = torch_pjrt.native_ops()
    assert len(names) == len(set(names))
    def has(n, key):
        return torch._C._dispatch_has_kernel_for_dispatch_key(
            "aten::" + n.split(".")[0] + ("." + n.split(".")[1] if "." in n else ""), key)

    # Composite ops without an autograd kernel get no tpu kernel (it would hide the composite
    # from autograd): they decompose.
    def composite(n):
        return has(n, "CompositeImplicitAutograd") and not has(n, "Autograd")

    missing = [n for n in names if not has(n, "PrivateUse1") and not composite(n)]
    assert not missing, f"table rows without a tpu kernel: {missing}"
    hiding = [n for n in names if has(n, "PrivateUse1") and composite(n)]
    assert not hiding, f"tpu kernels that hide a composite from autograd: {hiding}"
    for n in names:
        base, _, overload = n.partition(".")
        packet = getattr(torch.ops.aten, base)
        assert (overload or "default") in packet.overloads(), n


def test_native_ops_run_without_fallback():
    x = torch.randn(4, 4).to("tpu")
    torch_pjrt.reset_stats()
    with torch_pjrt.strict():
        y = (x.abs().sqrt() + x.sin() * 2 - x.clamp(-1, 1)).where(x > 0, x.exp())
        y.sum().item()
    assert torch_pjrt.stats()["fallbacks"] == {}
