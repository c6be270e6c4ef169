// The choice of kernel for scaled_dot_product_attention on tpu tensors (see glue.h).
//
// Without an entry here PyTorch takes its math path on every PrivateUse1 device. That path is a
// composite of plain ops which, for a causal or masked call, adds a mask made inside it to the
// scores; DTensor cannot add a plain tensor to a DTensor, so a tensor-parallel attention fails.
// CUDA picks a fused kernel, which DTensor shards by heads. The tpu kernel of the memory-efficient
// one is the same computation as the math path in the ops the device runs
// (torch_pjrt/_decompositions.py), so this picks it wherever it applies, as CUDA does.
#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>

namespace {

int64_t choose(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
               const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
               std::optional<double> scale, bool enable_gqa) {
  (void)attn_mask, (void)dropout_p, (void)is_causal, (void)scale;
  auto math = static_cast<int64_t>(at::SDPBackend::math);
  if (!at::globalContext().userEnabledMemEfficientSDP()) return math;
  if (query.dim() != 4 || key.dim() != 4 || value.dim() != 4) return math;
  if (query.is_nested() || key.is_nested() || value.is_nested()) return math;
  if (!query.is_floating_point() || key.scalar_type() != query.scalar_type() ||
      value.scalar_type() != query.scalar_type())
    return math;
  // Traced with symbolic sizes, a DTensor cannot wrap the kernel's log-sum-exp (PyTorch's tracer
  // cannot rebuild the stride its meta kernel computes): math, as before there was a choice.
  for (const at::Tensor* t : {&query, &key, &value})
    for (const c10::SymInt& d : t->sym_sizes())
      if (d.is_symbolic()) return math;
  // Grouped heads (fewer key/value heads) and broadcast batches: the math path repeats them.
  (void)enable_gqa;
  for (int64_t d : {0, 1})
    if (query.sym_size(d) != key.sym_size(d) || key.sym_size(d) != value.sym_size(d)) return math;
  return static_cast<int64_t>(at::SDPBackend::efficient_attention);
}

}  // namespace

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &choose)
}  // namespace at::native
