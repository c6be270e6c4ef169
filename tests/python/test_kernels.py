"""Custom kernels (torch_pjrt.kernels): a plain JAX function, a Pallas kernel (interpret mode on
the CPU plugin) and a StableHLO module written by hand, each as a PyTorch op on tpu: forward and
backward equal to the same math in PyTorch on CPU; inside torch.compile(backend="tpu") one
program; exported once per input signature; bad modules and inputs refused with a clear error."""
import pytest
import torch
import torch.nn.functional as F

import torch_pjrt
import torch_pjrt.compile as tc
from tpu_helpers import assert_same

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

from torch_pjrt import kernels  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _leaves(*cpu):
    """CPU leaves and their tpu copies, both requiring grad."""
    tpu = [t.detach().to("tpu").requires_grad_() for t in cpu]
    return [t.requires_grad_() for t in cpu], tpu


def _gelu_mm(x, w):
    return jax.nn.gelu(x @ w)  # JAX's default GELU: the tanh approximation


GELU_MM = kernels.jax_op(_gelu_mm, name="gelu_mm")


def _mm_block(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


def _pallas_mm(x, y, block=8):
    (m, k), n = x.shape, y.shape[1]
    return pl.pallas_call(
        _mm_block, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32), grid=(m // block, n // block),
        in_specs=[pl.BlockSpec((block, k), lambda i, j: (i, 0)),
                  pl.BlockSpec((k, block), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((block, block), lambda i, j: (i, j)), interpret=True)(x, y)


@jax.custom_vjp
def _tiled_matmul(x, y):
    return _pallas_mm(x, y)


def _tiled_fwd(x, y):
    return _pallas_mm(x, y), (x, y)


def _tiled_bwd(res, g):
    x, y = res
    return _pallas_mm(g, y.T), _pallas_mm(x.T, g)


_tiled_matmul.defvjp(_tiled_fwd, _tiled_bwd)
TILED_MM = kernels.jax_op(_tiled_matmul, name="tiled_matmul")

# x * scale[None, :] by hand, and its VJP: (grad * scale, sum over rows of grad * x).
SCALE_ROWS = """
module @scale_rows {
  func.func public @main(%x: tensor<6x4xf32>, %s: tensor<4xf32>) -> tensor<6x4xf32> {
    %b = stablehlo.broadcast_in_dim %s, dims = [1] : (tensor<4xf32>) -> tensor<6x4xf32>
    %y = stablehlo.multiply %x, %b : tensor<6x4xf32>
    return %y : tensor<6x4xf32>
  }
}
"""
SCALE_ROWS_VJP = """
func.func public @main(%x: tensor<6x4xf32>, %s: tensor<4xf32>, %g: tensor<6x4xf32>)
    -> (tensor<6x4xf32>, tensor<4xf32>) {
  %b = stablehlo.broadcast_in_dim %s, dims = [1] : (tensor<4xf32>) -> tensor<6x4xf32>
  %gx = stablehlo.multiply %g, %b : tensor<6x4xf32>
  %p = stablehlo.multiply %g, %x : tensor<6x4xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %gs = stablehlo.reduce(%p init: %z) applies stablehlo.add across dimensions = [0]
      : (tensor<6x4xf32>, tensor<f32>) -> tensor<4xf32>
  return %gx, %gs : tensor<6x4xf32>, tensor<4xf32>
}
"""
SCALE = kernels.stablehlo_op(SCALE_ROWS, name="scale_rows", vjp=SCALE_ROWS_VJP)

CASES = {
    "jax": (GELU_MM, lambda x, w: F.gelu(x @ w, approximate="tanh"), [(4, 8), (8, 16)]),
    "pallas": (TILED_MM, torch.mm, [(16, 24), (24, 32)]),
    "stablehlo": (SCALE, lambda x, s: x * s, [(6, 4), (4,)]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_kernel_forward_and_backward_match_cpu(case):
    op, math, shapes = CASES[case]
    torch.manual_seed(0)
    cpu, tpu = _leaves(*[torch.randn(s) for s in shapes])
    torch_pjrt.reset_stats()
    got, want = op(*tpu), math(*cpu)
    assert got.device.type == "tpu"
    assert_same(got, want, rtol=1e-5, atol=1e-5)
    got.pow(2).sum().backward()
    want.pow(2).sum().backward()
    for t, c in zip(tpu, cpu):
        assert_same(t.grad, c.grad, rtol=1e-4, atol=1e-4)
    assert not torch_pjrt.stats()["fallbacks"]


@pytest.mark.parametrize("case", list(CASES))
def test_kernel_in_a_compiled_graph_is_one_program(case):
    op, math, shapes = CASES[case]
    torch.manual_seed(1)
    cpu = [torch.randn(s) for s in shapes]

    def model(a, b):
        return torch.tanh(op(a * 2, b) + 1)

    tc.reset_stats()
    with torch.no_grad():
        got = torch.compile(model, backend="tpu")(*[t.to("tpu") for t in cpu])
    assert_same(got, torch.tanh(math(cpu[0] * 2, cpu[1]) + 1), rtol=1e-5, atol=1e-5)
    s = tc.stats()
    assert (s["graphs"], s["partitions"], s["host_ops"], s["splits"]) == (1, 1, 0, {}), s


def test_a_new_signature_exports_once_a_repeated_one_never():
    op = kernels.jax_op(lambda x: jnp.sin(x) * 2, name="sin2")
    x = torch.randn(5).to("tpu")
    assert_same(op(x), torch.sin(x.cpu()) * 2)
    assert op.exports() == 1
    op(x * 3)
    assert op.exports() == 1  # the same signature
    op(torch.randn(7).to("tpu"))
    assert op.exports() == 2  # a new shape: one more
    op(torch.randn(7).to("tpu"))
    assert op.exports() == 2


def test_bad_modules_and_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="no function @main"):
        kernels.stablehlo_op("module { }", name="empty")
    with pytest.raises(ValueError, match="dynamic dimension"):
        kernels.stablehlo_op("func.func public @main(%a: tensor<?xf32>) -> tensor<?xf32> {\n"
                             "  return %a : tensor<?xf32>\n}", name="dynamic")
    # A module XLA cannot compile: the plugin's message, as a Python error.
    broken = kernels.stablehlo_op("func.func public @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
                                  "  %b = stablehlo.no_such_op %a : tensor<2xf32>\n"
                                  "  return %b : tensor<2xf32>\n}", name="broken")
    with pytest.raises(RuntimeError):
        broken(torch.ones(2, device="tpu"))
    with pytest.raises(ValueError, match=r"takes \(float32\[6, 4\], float32\[4\]\), got "
                                         r"\(float64\[6, 4\], float32\[4\]\)"):
        SCALE(torch.ones(6, 4, dtype=torch.float64, device="tpu"), torch.ones(4, device="tpu"))
    with pytest.raises(ValueError, match="exists already"):
        kernels.stablehlo_op(SCALE_ROWS, name="scale_rows")
    # A module without a VJP: a backward through it says so.
    plain = kernels.stablehlo_op(SCALE_ROWS.replace("@scale_rows", "@plain"), name="plain")
    x = torch.ones(6, 4, device="tpu", requires_grad=True)
    with pytest.raises(RuntimeError, match="has no backward"):
        plain(x, torch.ones(4, device="tpu")).sum().backward()
    # A dtype the JAX function rejects: JAX's reason, raised at the call.
    bitwise = kernels.jax_op(lambda x: jnp.bitwise_not(x), name="bitwise")
    with pytest.raises(ValueError, match="JAX could not export"):
        bitwise(torch.ones(3, device="tpu"))
    # The process is fine afterwards.
    assert_same(bitwise(torch.ones(3, dtype=torch.int32, device="tpu")),
                torch.full((3,), -2, dtype=torch.int32))


def test_torch_export_sees_the_kernel():
    class M(torch.nn.Module):
        def forward(self, x, w):
            return GELU_MM(x, w) * 2

    torch.manual_seed(2)
    x, w = torch.randn(4, 8), torch.randn(8, 16)
    ep = torch.export.export(M(), (x.to("tpu"), w.to("tpu")))
    assert "torch_pjrt_kernels.gelu_mm" in ep.graph_module.code
    assert_same(ep.module()(x.to("tpu"), w.to("tpu")), F.gelu(x @ w, approximate="tanh") * 2,
                rtol=1e-5, atol=1e-5)
