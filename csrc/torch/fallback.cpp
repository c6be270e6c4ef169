// The CPU fallback: every call the op table does not lower runs on CPU through PyTorch's boxed
// fallback, counted per op, warned once, refused in strict mode; random ops draw from the tpu
// generator's keys. Sparse and nested tpu tensors: PyTorch's device-generic kernels make and take
// them apart, every other op on them falls back likewise. See glue.h.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/ccol_indices_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/col_indices_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/crow_indices_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/row_indices_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/values_native.h>
#include <torch/library.h>

#include <atomic>
#include <map>
#include <mutex>

#include "torch/glue.h"

namespace tp_glue {

// ---- fallback accounting ----

std::mutex g_fallback_lock;
std::map<std::string, int64_t> g_fallbacks;
std::atomic<bool> g_strict{false};
std::atomic<bool> g_warn{true};

void set_strict(bool on) { g_strict = on; }
bool strict() { return g_strict.load(); }
void set_fallback_warnings(bool on) { g_warn = on; }

std::vector<std::pair<std::string, int64_t>> fallback_counts() {
  std::lock_guard<std::mutex> g(g_fallback_lock);
  return {g_fallbacks.begin(), g_fallbacks.end()};
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> g(g_fallback_lock);
  g_fallbacks.clear();
}

std::string op_name(const c10::OperatorHandle& op) {
  const auto& n = op.schema().operator_name();
  std::string base = n.name.rfind("aten::", 0) == 0 ? n.name.substr(6) : n.name;
  return n.overload_name.empty() ? base : base + "." + n.overload_name;
}

void note_fallback(const std::string& name) {
  TORCH_CHECK(!g_strict.load(), "tpu strict mode: '", name,
              "' has no native tpu lowering and would fall back to CPU");
  bool first;
  {
    std::lock_guard<std::mutex> g(g_fallback_lock);
    first = g_fallbacks[name]++ == 0;
  }
  if (first && g_warn.load())
    TORCH_WARN("tpu: '", name, "' has no native lowering; it runs on CPU (counted in "
               "torch_pjrt.fallback_report())");
}

void generators_to_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Counts |name|'s fallback and runs |op| with PyTorch's CPU fallback on |key|'s kernel, as one
// span of the device's trace.
void fall_back(const std::string& name, const c10::OperatorHandle& op, torch::jit::Stack* stack,
               c10::DispatchKey key = c10::DispatchKey::CPU) {
  note_fallback(name);
  TracedScope traced(TP_TRACE_FALLBACK, -1, name.c_str());
  if (key == c10::DispatchKey::CPU) generators_to_cpu(op, stack);
  at::native::cpu_fallback(op, stack, false, key);
}

// A sparse COO tpu tensor is PyTorch's own SparseTensorImpl over dense tpu tensors (its indices
// and values): made and taken apart by PyTorch's device-generic kernels, below. Every other op on
// one runs on CPU (the tensors copied there and the results back), counted as a fallback and
// refused in strict mode like any other.
void sparse_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  fall_back(op_name(op) + " (sparse)", op, stack, c10::DispatchKey::SparseCPU);
}

void sparse_csr_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  fall_back(op_name(op) + " (sparse)", op, stack, c10::DispatchKey::SparseCsrCPU);
}

// Composite kernels that cannot run for tpu tensors, registered to the CPU fallback directly:
// mode.values checks for a CPU/CUDA/XPU device itself and refuses tpu tensors; the others read or
// write tensor memory on the host (data_ptr loops, or at::native CPU functions called directly)
// and would crash on a tpu tensor's never-mapped address. The host-read sweep
// (tools/compat_host.py) finds them: every registered op, called on tpu inputs.
const char* const kCompositesOnCpu[] = {
    "_grid_sampler_2d_cpu_fallback", "_grid_sampler_2d_cpu_fallback.out",
    "_nnpack_spatial_convolution",   "_saturate_weight_to_fp16",      "choose_qparams_optimized",
    "fbgemm_linear_quantize_weight", "fbgemm_pack_gemm_matrix_fp16",
    "mode.values",                   "range.out_",
};

// The tpu device a call runs on: that of its first tpu tensor or Device argument, else the
// current one.
c10::DeviceIndex call_device(c10::ArrayRef<c10::IValue> args) {
  for (const c10::IValue& v : args) {
    if (v.isTensor() && v.toTensor().defined() &&
        v.toTensor().device().type() == DeviceType::PrivateUse1)
      return v.toTensor().device().index();
    if (v.isDevice() && v.toDevice().type() == DeviceType::PrivateUse1 && v.toDevice().has_index())
      return v.toDevice().index();
  }
  return g_current_device;
}

// A random op run on CPU draws from a CPU generator seeded with the next key of the tpu
// generator (the call's own, else the device's default), so torch.tpu.manual_seed and the tpu
// RNG state govern it as they govern native random ops, and a tpu Generator argument works
// (CPU kernels accept only CPU generators). A CPU generator argument is passed as it is.
void generators_to_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema().arguments();
  const size_t n = schema.size(), base = stack->size() - n;
  for (size_t i = 0; i < n; i++) {
    if (schema[i].real_type()->str().find("Generator") == std::string::npos) continue;
    c10::IValue& v = (*stack)[base + i];
    std::optional<at::Generator> given;
    if (!v.isNone()) {
      given = v.toGenerator();
      if (given->device().type() != DeviceType::PrivateUse1) continue;
    }
    c10::DeviceIndex dev = given && given->device().has_index()
                               ? given->device().index()
                               : call_device(c10::ArrayRef<c10::IValue>(*stack).slice(base, n));
    v = at::detail::createCPUGenerator(static_cast<uint64_t>(next_random_key(given, dev)));
  }
}

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::string name = op_name(op);
  // Ops PyTorch implements for CUDA (or MPS, sparse, quantized tensors) only have no CPU kernel
  // to fall back to: say so, rather than PyTorch's "could not run with the 'CPU' backend".
  TORCH_CHECK_NOT_IMPLEMENTED(
      op.hasComputedKernelForDispatchKey(c10::DispatchKey::CPU), "tpu: '", name,
      "' has no tpu lowering, and PyTorch has no CPU kernel for it to fall back to",
      op.hasComputedKernelForDispatchKey(c10::DispatchKey::CUDA) ? " (it has a CUDA kernel only)"
                                                                  : "");
  fall_back(name, op, stack);
}

std::vector<std::string> cpu_routed_ops() {
  std::vector<std::string> names;
  for (const char* name : kCompositesOnCpu)
    if (tp_op_lookup(name, nullptr) < 0) names.push_back(name);
  return names;
}

// Registered to the CPU fallback directly, unless the table lowers them.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : kCompositesOnCpu)
    if (tp_op_lookup(name, nullptr) < 0) m.impl(name, torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

// Nested tensors on tpu hold a tpu buffer (a CPU fallback's nested result copied back, as
// nn.TransformerEncoder's padding-mask fast path makes one). Allocating, copying and moving one
// are PyTorch's own device-agnostic kernels (they work on the buffer, whose ops are ours); every
// other op on one runs on CPU, counted as a fallback.
void nested_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  fall_back(op_name(op) + " (nested)", op, stack, c10::DispatchKey::NestedTensorCPU);
}

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("_to_copy", TORCH_FN(at::native::_to_copy_nested));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_nested));
  m.impl("copy_", TORCH_FN(at::native::copy_nested_));
  m.impl("clone", TORCH_FN(at::native::clone_nested));
}

TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&nested_fallback>());
}

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_sparse_coo_tensor_with_dims_and_tensors",
         TORCH_FN(at::native::new_with_dims_and_tensor_sparse_symint));
  m.impl("_indices", TORCH_FN(at::native::_indices_sparse));
  m.impl("_values", TORCH_FN(at::native::_values_sparse));
  m.impl("indices", TORCH_FN(at::native::indices_sparse));
  m.impl("values", TORCH_FN(at::native::values_sparse));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("is_coalesced", TORCH_FN(at::native::is_coalesced_sparse));
  m.impl("_coalesced_", TORCH_FN(at::native::_coalesced_sparse_));
}

// Compressed layouts (CSR, CSC, BSR, BSC) likewise: PyTorch's SparseCsrTensorImpl over tpu tensors.
TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  m.impl("crow_indices", TORCH_FN(at::native::crow_indices_sparse_csr));
  m.impl("col_indices", TORCH_FN(at::native::col_indices_sparse_csr));
  m.impl("ccol_indices", TORCH_FN(at::native::ccol_indices_sparse_csr));
  m.impl("row_indices", TORCH_FN(at::native::row_indices_sparse_csr));
  m.impl("values", TORCH_FN(at::native::values_sparse_csr));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse_csr));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse_csr));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse_csr));
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_csr_fallback>());
}

}  // namespace tp_glue
