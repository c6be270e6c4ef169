"""Custom kernels on the "tpu" device: a JAX function, a Pallas kernel and a StableHLO module,
each as a PyTorch op, used eagerly, with autograd, and inside torch.compile.

    python examples/custom_kernel.py

On the CPU plugin the Pallas kernel runs in Pallas' interpret mode (`interpret=True`); on a TPU
drop that flag and it lowers to Mosaic.
"""
import jax
import jax.numpy as jnp
import torch
import torch.nn.functional as F
from jax.experimental import pallas as pl

from torch_pjrt import kernels


# 1. A plain JAX function: a fused matmul + GELU.
@kernels.jax_op
def gelu_matmul(x, w):
    return jax.nn.gelu(x @ w)


# 2. A Pallas kernel: a row-wise softmax, one block of rows per grid step.
def _softmax_block(x_ref, o_ref):
    x = x_ref[...]
    e = jnp.exp(x - x.max(axis=-1, keepdims=True))
    o_ref[...] = e / e.sum(axis=-1, keepdims=True)


def pallas_softmax(x):
    rows, cols = x.shape
    return pl.pallas_call(_softmax_block, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(rows // 8,), in_specs=[pl.BlockSpec((8, cols), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((8, cols), lambda i: (i, 0)),
                          interpret=True)(x)


# JAX cannot differentiate a Pallas call by itself: the kernel brings its VJP.
@jax.custom_vjp
def softmax_fn(x):
    return pallas_softmax(x)


def _softmax_fwd(x):
    y = pallas_softmax(x)
    return y, y


def _softmax_bwd(y, g):
    return (y * (g - (g * y).sum(axis=-1, keepdims=True)),)


softmax_fn.defvjp(_softmax_fwd, _softmax_bwd)
softmax = kernels.jax_op(softmax_fn, name="pallas_softmax")

# 3. A StableHLO module you already have (here written by hand): y = x * x + 1, with its VJP
#    (the inputs, then a gradient per result -> a gradient per input).
square_plus_one = kernels.stablehlo_op("""
func.func public @main(%x: tensor<16x32xf32>) -> tensor<16x32xf32> {
  %one = stablehlo.constant dense<1.0> : tensor<16x32xf32>
  %sq = stablehlo.multiply %x, %x : tensor<16x32xf32>
  %y = stablehlo.add %sq, %one : tensor<16x32xf32>
  return %y : tensor<16x32xf32>
}
""", name="square_plus_one", vjp="""
func.func public @main(%x: tensor<16x32xf32>, %g: tensor<16x32xf32>) -> tensor<16x32xf32> {
  %two = stablehlo.constant dense<2.0> : tensor<16x32xf32>
  %d = stablehlo.multiply %x, %two : tensor<16x32xf32>
  %gx = stablehlo.multiply %g, %d : tensor<16x32xf32>
  return %gx : tensor<16x32xf32>
}
""")


def main():
    torch.manual_seed(0)
    x = torch.randn(16, 24, device="tpu", requires_grad=True)
    w = torch.randn(24, 32, device="tpu", requires_grad=True)

    h = gelu_matmul(x, w)                      # eager, on the device
    y = softmax(square_plus_one(h))
    y[:, 0].sum().backward()                   # JAX's VJPs, exported once per signature
    print("eager: y", tuple(y.shape), "x.grad norm", round(x.grad.norm().item(), 4))

    xc, wc = x.detach().cpu().requires_grad_(), w.detach().cpu().requires_grad_()
    hc = F.gelu(xc @ wc, approximate="tanh")
    ref = torch.softmax(hc * hc + 1, dim=-1)
    ref[:, 0].sum().backward()
    print("max difference from PyTorch on CPU: y", (y.detach().cpu() - ref).abs().max().item(),
          "x.grad", (x.grad.cpu() - xc.grad).abs().max().item())
    ref = ref.detach()

    @torch.compile(backend="tpu")
    def block(x, w):
        return softmax(square_plus_one(gelu_matmul(x, w))) * 2

    with torch.no_grad():
        z = block(x, w)
    import torch_pjrt.compile as tc
    print("compiled: partitions", tc.stats()["partitions"], "(the kernels inside one program);",
          "max difference", (z.cpu() - ref * 2).abs().max().item())


if __name__ == "__main__":
    main()
