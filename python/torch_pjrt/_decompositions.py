"""CUDA-only ops that PyTorch also decomposes: on tpu they run as their decomposition.

An op PyTorch implements for CUDA only (cudnn_batch_norm, _fused_dropout, addmm.dtype, ...) has
no CPU kernel, so the CPU fallback cannot run it; where torch._decomp holds a decomposition, that
decomposition is registered as the op's tpu kernel, and its parts run natively or fall back like
any op. A few such ops torch._decomp lacks are decomposed here: mm/bmm with an output dtype
(which torch._decomp's addmm.dtype and baddbmm.dtype call), and the *_overrideable convolutions
PyTorch's _convolution routes a non-CPU backend to, whose CPU entries are error stubs: they are
the convolution ops the op table lowers (or the fallback runs on CPU). Every other op without a CPU kernel
raises NotImplementedError saying so (in the glue's fallback). `decomposed_ops()` lists what was
registered.
"""
import torch

_lib = None
_registered = []


# mm/bmm accumulating into |out_dtype| (CUDA: 16-bit inputs, float32 results): products of the
# inputs upcast to out_dtype are exact for 16-bit floats in float32, so this is that accumulation.
def _mm_dtype(self, mat2, out_dtype):
    return torch.mm(self.to(out_dtype), mat2.to(out_dtype))


def _mm_dtype_out(self, mat2, out_dtype, *, out):
    return torch.mm(self.to(out_dtype), mat2.to(out_dtype), out=out)


def _bmm_dtype(self, mat2, out_dtype):
    return torch.bmm(self.to(out_dtype), mat2.to(out_dtype))


def _bmm_dtype_out(self, mat2, out_dtype, *, out):
    return torch.bmm(self.to(out_dtype), mat2.to(out_dtype), out=out)


def _convolution_overrideable(input, weight, bias, stride, padding, dilation, transposed,
                              output_padding, groups):
    return torch.ops.aten.convolution(input, weight, bias, stride, padding, dilation, transposed,
                                      output_padding, groups)


def _convolution_backward_overrideable(grad_output, input, weight, stride, padding, dilation,
                                       transposed, output_padding, groups, output_mask):
    bias_sizes = [weight.shape[1] * groups if transposed else weight.shape[0]]
    return torch.ops.aten.convolution_backward(grad_output, input, weight, bias_sizes, stride,
                                               padding, dilation, transposed, output_padding,
                                               groups, output_mask)


def _own_decompositions():
    aten = torch.ops.aten
    return {aten.mm.dtype: _mm_dtype, aten.mm.dtype_out: _mm_dtype_out,
            aten.bmm.dtype: _bmm_dtype, aten.bmm.dtype_out: _bmm_dtype_out,
            aten.convolution_overrideable.default: _convolution_overrideable,
            aten.convolution_backward_overrideable.default: _convolution_backward_overrideable}


def register():
    global _lib
    from torch._decomp import decomposition_table
    if _lib is not None:
        return
    _lib = torch.library.Library("aten", "IMPL")
    _own = _own_decompositions()
    for op, fn in {**decomposition_table, **_own}.items():
        if not isinstance(op, torch._ops.OpOverload) or op.namespace != "aten":
            continue
        name = op.name()
        own = fn is _own.get(op)
        if not own and (torch._C._dispatch_has_computed_kernel_for_dispatch_key(name, "CPU")
                        or torch._C._dispatch_has_kernel_for_dispatch_key(name, "PrivateUse1")):
            continue
        _lib.impl(op, fn, "PrivateUse1")
        _registered.append(name)
    _registered.sort()


def decomposed_ops():
    """The ops registered here (aten::name.overload)."""
    return list(_registered)
