// The kernel interface: the one boxed kernel that runs an ATen call as a call of the C op table,
// the CPU fallback for every op the table does not lower (counted, strict mode), and
// torch.autocast("tpu")'s op policy. See glue.h.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/autocast_mode.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/ccol_indices_native.h>
#include <ATen/ops/col_indices_native.h>
#include <ATen/ops/crow_indices_native.h>
#include <ATen/ops/row_indices_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/empty_like_native.h>
#include <torch/library.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

#include "torch/glue.h"

#include "exec/bucket.h"

namespace tp_glue {

// Runs a call on the device. Under torch.use_deterministic_algorithms(True) it runs its exact
// program: whether a call runs bucketed depends on what ran before it (exec/bucket.c), and a
// bucketed program's padded reductions round unlike the exact one's, so results would depend on
// the process's history (a run resumed from a checkpoint would part from the first by rounding).
static tp_status_t* run_on_device(int op, tp_eager_arg_t* args, int n_args, const tp_meta_t* metas,
                                  const tp_view_t* outs, int n_out) {
  if (!at::globalContext().deterministicAlgorithms())
    return tp_eager_run(op, args, n_args, metas, outs, n_out);
  const bool was = tp_bucket_pause(true);
  tp_status_t* s = tp_eager_run(op, args, n_args, metas, outs, n_out);
  tp_bucket_pause(was);
  return s;
}

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

// "aminmax" of aten::aminmax.out: the name PyTorch's messages give an op.
std::string base_name(const c10::OperatorHandle& op) {
  const std::string& n = op.schema().operator_name().name;
  return n.rfind("aten::", 0) == 0 ? n.substr(6) : n;
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

// A sparse COO tpu tensor is PyTorch's own SparseTensorImpl over dense tpu tensors (its indices
// and values): made and taken apart by PyTorch's device-generic kernels, below. Every other op on
// one runs on CPU (the tensors copied there and the results back), counted as a fallback and
// refused in strict mode like any other.
void sparse_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  note_fallback(op_name(op) + " (sparse)");
  at::native::cpu_fallback(op, stack, false, c10::DispatchKey::SparseCPU);
}

void sparse_csr_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  note_fallback(op_name(op) + " (sparse)");
  at::native::cpu_fallback(op, stack, false, c10::DispatchKey::SparseCsrCPU);
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

// Whether |name| ("op.overload") is a CompositeImplicitAutograd op with no autograd kernel of its
// own. Such an op gets no tpu kernel: a backend kernel hides the composite from the Autograd key
// too, and gradients through the op then silently come back None (where.ScalarOther in logdet's
// backward). It decomposes into ops that have their own tpu kernels instead.
bool is_composite_implicit(const char* name) {
  std::string s(name);
  size_t dot = s.find('.');
  auto op = c10::Dispatcher::singleton().findOp(c10::OperatorName(
      "aten::" + s.substr(0, dot), dot == std::string::npos ? "" : s.substr(dot + 1)));
  return op && op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) &&
         !op->hasKernelForDispatchKey(c10::DispatchKey::Autograd);
}

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
  note_fallback(name);
  generators_to_cpu(op, stack);
  at::native::cpu_fallback(op, stack);
}

std::vector<std::string> cpu_routed_ops() {
  std::vector<std::string> names;
  for (const char* name : kCompositesOnCpu)
    if (tp_op_lookup(name, nullptr) < 0) names.push_back(name);
  return names;
}

// ---- the table kernel ----

bool cpu_scalar_tensor(const at::Tensor& t) { return t.device().is_cpu() && t.dim() == 0; }

// Converts one IValue; false means "not describable natively" (the call falls back).
// |scalar_typed|: the schema says Scalar (a program input) rather than int/bool/float (attributes).
// |meta_ok|: a meta tensor stands for a value of a graph being built (meta only, no view).
bool convert_arg(const c10::IValue& v, bool scalar_typed, tp_eager_arg_t* a, bool meta_ok) {
  std::memset(a, 0, sizeof(*a));
  a->arg.scalar_dtype = TP_DTYPE_INVALID;
  if (v.isNone()) {
    a->arg.kind = TP_ARG_NONE;
  } else if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) {
      a->arg.kind = TP_ARG_NONE;
    } else if (t.device().type() == DeviceType::PrivateUse1) {
      if (!make_view(t, &a->view)) return false;
      a->arg.kind = TP_ARG_TENSOR;
      a->arg.meta.dtype = a->view.dtype;
      a->arg.meta.ndim = a->view.ndim;
      std::memcpy(a->arg.meta.sizes, a->view.sizes, sizeof(int64_t) * a->view.ndim);
      a->arg.contiguous = t.is_contiguous();
    } else if (meta_ok && t.is_meta()) {
      a->arg.kind = TP_ARG_TENSOR;
      a->arg.contiguous = t.is_contiguous();
      a->arg.meta.dtype = to_tp(t.scalar_type());
      a->arg.meta.ndim = static_cast<int>(t.dim());
      if (a->arg.meta.dtype == TP_DTYPE_INVALID || t.dim() > TP_MAX_DIMS) return false;
      for (int i = 0; i < a->arg.meta.ndim; i++) a->arg.meta.sizes[i] = t.size(i);
    } else if (cpu_scalar_tensor(t)) {
      tp_dtype_t dt = to_tp(t.scalar_type());
      if (dt == TP_DTYPE_INVALID) return false;
      a->arg.kind = TP_ARG_SCALAR;
      a->arg.wrapped = t.unsafeGetTensorImpl()->is_wrapped_number();
      a->arg.meta.dtype = dt;
      // Read straight from host memory: no dispatch (which a Python mode could intercept).
      if (tp_dtype_is_complex(dt)) {
        c10::complex<double> z = dt == TP_DTYPE_C64
                                     ? c10::complex<double>(*t.const_data_ptr<c10::complex<float>>())
                                     : *t.const_data_ptr<c10::complex<double>>();
        if (t.is_conj()) z = std::conj(z);
        if (t.is_neg()) z = -z;
        a->arg.f = z.real();
        a->arg.fi = z.imag();
        // A Python complex (a wrapped complex128) promotes by category, like a float: as the
        // default complex type.
        if (a->arg.wrapped) a->arg.meta.dtype = TP_DTYPE_C64;
        return true;
      }
      AT_DISPATCH_ALL_TYPES_AND3(c10::kBool, c10::kHalf, c10::kBFloat16, t.scalar_type(),
                                 "tpu_scalar_arg", [&] {
        scalar_t v = *t.const_data_ptr<scalar_t>();
        if (tp_dtype_is_float(dt)) a->arg.f = static_cast<double>(v);
        else a->arg.i = static_cast<int64_t>(v);
      });
    } else {
      TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two "
                  "devices, tpu:", static_cast<int>(g_current_device), " and ", t.device(), "!");
    }
  } else if (v.isScalar() && scalar_typed) {
    c10::Scalar s = v.toScalar();
    a->arg.kind = TP_ARG_SCALAR;
    a->arg.wrapped = true;  // Scalar arguments promote like Python numbers
    if (s.isBoolean()) {
      a->arg.meta.dtype = TP_DTYPE_BOOL;
      a->arg.i = s.toBool();
    } else if (s.isIntegral(false)) {
      a->arg.meta.dtype = TP_DTYPE_I64;
      a->arg.i = s.toLong();
    } else if (s.isFloatingPoint()) {
      a->arg.meta.dtype = TP_DTYPE_F64;
      a->arg.f = s.toDouble();
    } else if (s.isComplex()) {
      // A Python complex promotes by category (to complex64), like a float to float32.
      c10::complex<double> z = s.toComplexDouble();
      a->arg.meta.dtype = TP_DTYPE_C64;
      a->arg.f = z.real();
      a->arg.fi = z.imag();
    } else {
      return false;
    }
  } else if (v.isBool()) {
    a->arg.kind = TP_ARG_INT;
    a->arg.i = v.toBool();
  } else if (v.isInt()) {
    a->arg.kind = TP_ARG_INT;
    a->arg.i = v.toInt();
  } else if (v.isDouble()) {
    a->arg.kind = TP_ARG_FLOAT;
    a->arg.f = v.toDouble();
  } else if (v.isString()) {
    const std::string& str = v.toStringRef();
    const size_t n = std::min(str.size(), sizeof(a->arg.s) - 1);
    a->arg.kind = TP_ARG_STR;
    std::memcpy(a->arg.s, str.c_str(), n);
    a->arg.s[n] = 0;
    a->arg.text = str.c_str();
  } else if (v.isBoolList()) {
    auto l = v.toBoolList();
    if (l.size() > TP_MAX_DIMS) return false;
    a->arg.kind = TP_ARG_INTS;
    a->arg.n = static_cast<int>(l.size());
    for (size_t i = 0; i < l.size(); i++) a->arg.ints[i] = l.get(i);
  } else if (v.isIntList()) {
    auto l = v.toIntVector();
    if (l.size() > TP_MAX_DIMS) return false;
    a->arg.kind = TP_ARG_INTS;
    a->arg.n = static_cast<int>(l.size());
    for (size_t i = 0; i < l.size(); i++) a->arg.ints[i] = l[i];
  } else {
    return false;
  }
  return true;
}

std::vector<ArgRole> arg_roles(const c10::FunctionSchema& schema) {
  std::vector<ArgRole> roles;
  for (const auto& a : schema.arguments()) {
    const auto& n = a.name();
    // Fields PyTorch passes but the lowering has no use for.
    if (n == "layout" || n == "device" || n == "pin_memory" || n == "memory_format")
      roles.push_back(kIgnored);
    else if (a.real_type()->str().find("ScalarType") != std::string::npos)
      roles.push_back(kDtype);
    else if (a.real_type()->str().find("Generator") != std::string::npos)
      roles.push_back(kGenerator);
    else if (a.type()->kind() == c10::TypeKind::NumberType ||
             (a.type()->kind() == c10::TypeKind::OptionalType &&
              a.type()->containedType(0)->kind() == c10::TypeKind::NumberType))
      roles.push_back(kScalar);
    else
      roles.push_back(kValue);
  }
  return roles;
}

// PyTorch's rule for the inputs of an op writing into an existing tensor |out| (an out= tensor,
// or the self of an in-place form, which is skipped): none may partly overlap it, and, for the
// arguments the row's TP_OPF_DISJOINT_* flags name, none may share memory with it at all.
void check_overlap(const at::Tensor& out, c10::ArrayRef<c10::IValue> args, size_t n_in,
                   unsigned flags, bool inplace) {
  for (size_t i = inplace ? 1 : 0; i < n_in; i++) {
    const bool disjoint = flags & (i == 0 ? TP_OPF_DISJOINT_ARG0 : TP_OPF_DISJOINT_ARGS);
    auto check = [&](const at::Tensor& t) {
      if (!t.defined() || t.device() != out.device()) return;
      if (disjoint) at::assert_no_overlap(out, t);
      else at::assert_no_partial_overlap(out, t);
    };
    if (args[i].isTensor()) {
      check(args[i].toTensor());
    } else if (args[i].isTensorList()) {
      for (const at::Tensor& t : args[i].toTensorList()) check(t);
    } else if (args[i].isOptionalTensorList()) {
      for (const std::optional<at::Tensor> t : args[i].toOptionalTensorList())
        if (t) check(*t);
    }
  }
}

// PyTorch's rule for an out= tensor's dtype, given the result's: exactly it, or (TensorIterator
// ops, TP_OPF_OUT_CAST) any dtype it can be cast to. Checked, as on CPU, before anything is
// resized or written.
void check_out_dtype(const at::Tensor& out, tp_dtype_t result, unsigned flags) {
  const c10::ScalarType want = from_tp(result), got = out.scalar_type();
  if (want == got) return;
  if (flags & TP_OPF_OUT_CAST) {
    TORCH_CHECK(c10::canCast(want, got), "result type ", want,
                " can't be cast to the desired output type ", got);
  } else {
    TORCH_CHECK(false, "Expected out tensor to have dtype ", c10::scalarTypeToTypeMeta(want),
                ", but got ", out.dtype(), " instead");
  }
}

bool convert_call(const std::vector<ArgRole>& roles, c10::ArrayRef<c10::IValue> args, size_t n_in,
                  bool meta_ok, tp_eager_arg_t* eargs, at::Tensor* earg_tensor, int* n_eargs,
                  std::optional<at::Generator>* generator) {
  int ne = 0;
  bool native = true;
  for (size_t i = 0; native && i < n_in; i++) {
    if (ne >= TP_MAX_ARGS) return false;
    if (roles[i] == kIgnored || roles[i] == kGenerator) {
      if (roles[i] == kGenerator && !args[i].isNone()) *generator = args[i].toGenerator();
      std::memset(&eargs[ne++], 0, sizeof(eargs[0]));
      continue;
    }
    if (args[i].isTensorList() || args[i].isOptionalTensorList()) {
      std::vector<std::optional<at::Tensor>> list;
      if (args[i].isTensorList())
        for (const at::Tensor& t : args[i].toTensorList()) list.emplace_back(t);
      else
        for (const auto& t : args[i].toOptionalTensorList()) list.push_back(t);
      if (ne + 1 + static_cast<int>(list.size()) > TP_MAX_ARGS) return false;
      std::memset(&eargs[ne], 0, sizeof(eargs[0]));
      eargs[ne].arg.kind = TP_ARG_INT;
      eargs[ne++].arg.i = static_cast<int64_t>(list.size());
      for (size_t k = 0; native && k < list.size(); k++) {
        if (!list[k] || !list[k]->defined()) {
          std::memset(&eargs[ne++], 0, sizeof(eargs[0]));  // None
          continue;
        }
        const at::Tensor& t = *list[k];
        // A Tensor[] (cat, stack, the foreach ops) is on one device, as CUDA requires; an
        // optional one (indices) may hold CPU tensors, which the fallback moves.
        TORCH_CHECK(!args[i].isTensorList() || t.device().type() == DeviceType::PrivateUse1 ||
                        t.is_meta(),
                    "Expected all tensors to be on the same device, but found at least two "
                    "devices, tpu:", static_cast<int>(g_current_device), " and ", t.device(), "!");
        native = (t.device().type() == DeviceType::PrivateUse1 || (meta_ok && t.is_meta())) &&
                 convert_arg(t, false, &eargs[ne], meta_ok);
        earg_tensor[ne++] = t;
      }
      continue;
    }
    native = convert_arg(args[i], roles[i] == kScalar, &eargs[ne], meta_ok);
    if (native && eargs[ne].arg.kind == TP_ARG_TENSOR) earg_tensor[ne] = args[i].toTensor();
    if (native && roles[i] == kDtype && !args[i].isNone()) {
      eargs[ne].arg.i = to_tp(args[i].toScalarType());
      native = eargs[ne].arg.i != TP_DTYPE_INVALID;
    }
    ne++;
  }
  *n_eargs = ne;
  return native;
}

// For a TP_OPF_LIST_CHUNKS row: a tensor list argument longer than one call takes is replaced by
// the results of the op's functional form over consecutive chunks of it (cat of 300 gradient
// norms in clip_grad_norm_ becomes cat of 22 partial cats), until it fits.
void chunk_long_lists(int op, torch::jit::Stack* stack, size_t n_args, size_t n_in) {
  const size_t chunk = TP_MAX_ARGS - n_in;  // room for the list's length and the other arguments
  for (size_t i = 0; i < n_in; i++) {
    c10::IValue& v = (*stack)[stack->size() - n_args + i];
    if (!v.isTensorList() || v.toTensorList().size() <= chunk) continue;
    std::string name = tp_op_table[op].name;
    size_t dot = name.find('.');
    auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(
        ("aten::" + name.substr(0, dot)).c_str(), dot == std::string::npos ? "" : name.c_str() + dot + 1);
    std::vector<at::Tensor> list = v.toTensorVector();
    while (list.size() > chunk) {
      std::vector<at::Tensor> next;
      for (size_t k = 0; k < list.size(); k += chunk) {
        torch::jit::Stack call(stack->end() - n_args, stack->end() - n_args + n_in);
        call[i] = std::vector<at::Tensor>(list.begin() + k, list.begin() + std::min(list.size(), k + chunk));
        handle.callBoxed(call);
        next.push_back(call[0].toTensor());
      }
      list = std::move(next);
    }
    v = list;
  }
}

// The count protocol of a TP_OPF_COUNTED row (op.h), once infer has seen the count argument
// (eargs[ne - 1]): when it asked for the count pass, runs that on |dev|, reads the count (the
// call's one device-to-host sync) and infers the call again, for outputs of the count's capacity
// where infer allows (and not |exact|: out= tensors the caller gave get exactly the count).
// Returns the rows the caller keeps of outputs padded to a capacity, else -1.
int64_t count_pass(int op, tp_eager_arg_t* eargs, int ne, tp_meta_t* metas, int* n_out,
                   c10::Device dev, bool exact) {
  tp_op_arg_t& count = eargs[ne - 1].arg;
  if (count.kind != TP_ARG_INT || (count.i != TP_COUNT_PASS && count.i != TP_COUNT_PASS_EXACT))
    return -1;
  exact = exact || count.i == TP_COUNT_PASS_EXACT;
  at::Tensor t;
  {
    c10::DeviceGuard guard(dev);
    t = at::empty({}, at::TensorOptions().dtype(at::kLong).device(dev));
  }
  tp_view_t v = view_or_throw(t, tp_op_table[op].name);
  check(run_on_device(op, eargs, ne, metas, &v, 1));
  int64_t n = 0;
  check(tp_eager_copy_to_host(&v, &n));
  TORCH_CHECK(n >= 0, tp_op_table[op].name, ": bad count ", n);
  count.i = exact ? n : tp_op_count_capacity(n);
  check(tp_eager_infer(op, eargs, ne, metas, n_out));
  return count.i == n ? -1 : n;
}

// The arguments a call returns when its schema's returns are arguments it writes (a row named
// for an op's mutating form, as _amp_update_scale_ returns self), matched by alias set; empty
// when the returns are not all such arguments.
std::vector<c10::IValue> returned_args(const c10::FunctionSchema& schema,
                                       c10::ArrayRef<c10::IValue> args) {
  std::vector<c10::IValue> ret;
  for (const auto& r : schema.returns()) {
    const size_t before = ret.size();
    for (size_t i = 0; r.alias_info() && r.alias_info()->isWrite() && i < args.size() &&
                       ret.size() == before;
         i++) {
      const c10::AliasInfo* a = schema.arguments()[i].alias_info();
      if (a && a->beforeSets() == r.alias_info()->beforeSets()) ret.push_back(args[i]);
    }
    if (ret.size() == before) return {};
  }
  return ret;
}

// A TP_OPF_LIST_ZIP row's call (op.h): one call per index of its tensor lists, each list replaced
// by its element there (an empty list by None), every output written into an argument. Every
// index is converted and inferred before any runs: the call falls back to CPU whole, or is
// refused whole, or runs whole natively, never partly updated.
void run_zipped(int op, const std::vector<ArgRole>& roles, const c10::OperatorHandle& h,
                torch::jit::Stack* stack) {
  const auto& schema = h.schema();
  const size_t n_args = schema.arguments().size();
  auto args = torch::jit::last(*stack, n_args);
  size_t n = 0;
  for (size_t i = 0; i < n_args; i++) {
    const size_t len = args[i].isTensorList() ? args[i].toTensorList().size() : 0;
    TORCH_CHECK(len == 0 || n == 0 || len == n, op_name(h), ": expected the tensor lists to have "
                "the same length, but ", schema.arguments()[i].name(), " has ", len,
                " tensors where an earlier list has ", n);
    if (len) n = len;
  }
  struct Call {
    tp_eager_arg_t eargs[TP_MAX_ARGS];
    at::Tensor tensors[TP_MAX_ARGS];
    tp_meta_t metas[TP_MAX_OUTS];
    int ne = 0, n_out = 0;
  };
  std::vector<Call> calls(n);
  std::vector<c10::IValue> one(args.begin(), args.end());
  for (size_t k = 0; k < n; k++) {
    for (size_t i = 0; i < n_args; i++)
      if (args[i].isTensorList()) {
        auto list = args[i].toTensorList();
        one[i] = list.empty() ? c10::IValue() : c10::IValue(list.get(k));
      }
    Call& c = calls[k];
    std::optional<at::Generator> generator;
    if (!convert_call(roles, one, n_args, false, c.eargs, c.tensors, &c.ne, &generator))
      return cpu_fallback(h, stack);
    tp_status_t* st = tp_eager_infer(op, c.eargs, c.ne, c.metas, &c.n_out);
    if (st && tp_status_code(st) == TP_UNIMPLEMENTED) {
      tp_status_free(st);
      return cpu_fallback(h, stack);
    }
    if (st && n > 1) st = tp_status_annotate(st, "at index %zu of the lists", k);
    check(st);
    for (int j = 0; j < c.n_out; j++) {
      const int a = c.metas[j].writes_arg - 1;
      TORCH_CHECK(a >= 0 && a < c.ne && c.tensors[a].defined(), op_name(h),
                  ": an op over tensor lists writes every output into an argument");
    }
  }
  for (Call& c : calls) {
    tp_view_t views[TP_MAX_OUTS];
    for (int j = 0; j < c.n_out; j++)
      views[j] = view_or_throw(c.tensors[c.metas[j].writes_arg - 1], schema.name().c_str());
    check(run_on_device(op, c.eargs, c.ne, c.metas, views, c.n_out));
  }
  std::vector<c10::IValue> ret = returned_args(schema, args);
  torch::jit::drop(*stack, n_args);
  for (c10::IValue& v : ret) torch::jit::push(*stack, std::move(v));
}

struct TableKernel final : c10::OperatorKernel {
  TableKernel(int op, tp_op_variant_t variant) : op_(op), variant_(variant) {}

  void operator()(const c10::OperatorHandle& h, c10::DispatchKeySet, torch::jit::Stack* stack) {
    const auto& schema = h.schema();
    const size_t n_args = schema.arguments().size();
    size_t n_in = n_args;
    if (variant_ == TP_VARIANT_OUT)
      while (n_in > 0 && schema.arguments()[n_in - 1].alias_info() &&
             schema.arguments()[n_in - 1].alias_info()->isWrite())
        n_in--;
    if (tp_op_table[op_].flags & TP_OPF_LIST_CHUNKS) chunk_long_lists(op_, stack, n_args, n_in);
    auto args = torch::jit::last(*stack, n_args);
    std::call_once(roles_once_, [&] { roles_ = arg_roles(schema); });
    if (tp_op_table[op_].flags & TP_OPF_LIST_ZIP) return run_zipped(op_, roles_, h, stack);
    tp_eager_arg_t eargs[TP_MAX_ARGS];
    at::Tensor earg_tensor[TP_MAX_ARGS];  // the tpu tensor behind each TENSOR argument
    std::optional<at::Generator> generator;
    int ne = 0;
    bool native = convert_call(roles_, args, n_in, false, eargs, earg_tensor, &ne, &generator);
    if (native && (tp_op_table[op_].flags & TP_OPF_RANDOM)) {
      if (ne >= TP_MAX_ARGS) return cpu_fallback(h, stack);
      c10::DeviceIndex dev = g_current_device;
      for (int i = 0; i < ne; i++)
        if (eargs[i].arg.kind == TP_ARG_TENSOR) {
          dev = static_cast<c10::DeviceIndex>(tp_storage_device(eargs[i].view.storage));
          break;
        }
      std::memset(&eargs[ne], 0, sizeof(eargs[0]));
      eargs[ne].arg.kind = TP_ARG_SCALAR;
      eargs[ne].arg.meta.dtype = TP_DTYPE_I64;
      eargs[ne++].arg.i = next_random_key(generator, dev);
    }
    if (native && (tp_op_table[op_].flags & TP_OPF_COUNTED)) {  // the count argument (op.h)
      if (ne >= TP_MAX_ARGS) return cpu_fallback(h, stack);
      std::memset(&eargs[ne], 0, sizeof(eargs[0]));
      eargs[ne].arg.kind = TP_ARG_INT;
      eargs[ne++].arg.i = TP_COUNT_UNKNOWN;
    }
    if (!native) return cpu_fallback(h, stack);
    const unsigned flags = tp_op_table[op_].flags;
    tp_meta_t metas[TP_MAX_OUTS];
    int n_out = 0;
    tp_status_t* st = tp_eager_infer(op_, eargs, ne, metas, &n_out);
    if (st && tp_status_code(st) == TP_UNIMPLEMENTED) {  // no native lowering for this call
      tp_status_free(st);
      return cpu_fallback(h, stack);
    }
    check(st);
    // Outputs: the returned ones (fresh, self for in-place, or the out= tensors), then those the
    // op writes into its own arguments (metas[k].writes_arg), which are not returned.
    std::vector<at::Tensor> outs;
    size_t next_out = n_in;
    c10::Device dev(DeviceType::PrivateUse1, g_current_device);  // where fresh outputs go
    for (int i = 0; i < ne; i++)
      if (eargs[i].arg.kind == TP_ARG_TENSOR) {
        dev = c10::Device(DeviceType::PrivateUse1, tp_storage_device(eargs[i].view.storage));
        break;
      }
    const int64_t rows = flags & TP_OPF_COUNTED
                             ? count_pass(op_, eargs, ne, metas, &n_out, dev, variant_ == TP_VARIANT_OUT)
                             : -1;
    for (int k = 0; k < n_out; k++) {
      if (metas[k].writes_arg) {
        int a = metas[k].writes_arg - 1;
        TORCH_CHECK(a < ne && earg_tensor[a].defined(), op_name(h), ": bad in-place argument");
        outs.push_back(earg_tensor[a]);
        continue;
      }
      if (variant_ == TP_VARIANT_FUNCTIONAL) {
        // Laid out as CPU's kernel lays it out (exec/layout.h): channels-last stays so.
        c10::DeviceGuard guard(dev);
        const c10::IntArrayRef sizes(metas[k].sizes, metas[k].ndim);
        const auto options = at::TensorOptions().dtype(from_tp(metas[k].dtype)).device(dev);
        int64_t strides[TP_MAX_DIMS];
        outs.push_back(tp_exec_output_strides(op_, eargs, ne, &metas[k], strides)
                           ? at::empty_strided(sizes, c10::IntArrayRef(strides, metas[k].ndim), options)
                           : at::empty(sizes, options));
      } else if (variant_ == TP_VARIANT_INPLACE) {
        TORCH_CHECK(k == 0, op_name(h), ": an in-place op returns one tensor");
        // A result shaped unlike self (a broadcast self): PyTorch's in-place kernel raises, or
        // resizes self (addbmm_); CPU's kernel does whichever PyTorch does.
        if (args[0].toTensor().sizes() != c10::IntArrayRef(metas[k].sizes, metas[k].ndim))
          return cpu_fallback(h, stack);
        outs.push_back(args[0].toTensor());
        at::assert_no_internal_overlap(outs.back());
        check_overlap(outs.back(), args, n_in, flags, true);
      } else {
        TORCH_CHECK(next_out < n_args, op_name(h), ": expected ", n_out, " outputs");
        const std::string& out_name = schema.arguments()[next_out].name();
        at::Tensor o = args[next_out++].toTensor();
        if (flags & TP_OPF_OUT_DTYPE) metas[k].dtype = to_tp(o.scalar_type());
        // PyTorch's checks, all before the out= tensor is resized or written.
        at::assert_no_internal_overlap(o);
        check_out_dtype(o, metas[k].dtype, flags);
        check_overlap(o, args, n_in, flags, false);
        if (flags & TP_OPF_OUTS_DISJOINT)
          for (size_t j = n_in; j < next_out - 1; j++) {
            const auto st = at::get_overlap_status(args[j].toTensor(), o);
            TORCH_CHECK_VALUE(st != at::MemOverlapStatus::Full && st != at::MemOverlapStatus::Partial,
                              base_name(h), "(): the `", schema.arguments()[j].name(), "` and `",
                              out_name, "` out= tensors must not overlap.");
          }
        c10::IntArrayRef shape(metas[k].sizes, metas[k].ndim);
        // An out= tensor sharing storage with an input cannot be resized (the input's view
        // would lose its storage): PyTorch treats it as in-place and refuses, and so do we.
        if (o.sizes() != shape)
          for (int i = 0; i < ne; i++)
            TORCH_CHECK(!earg_tensor[i].defined() ||
                            !earg_tensor[i].storage().is_alias_of(o.storage()),
                        "output with shape ", o.sizes(), " doesn't match the broadcast shape ",
                        shape);
        outs.push_back(o);
      }
    }
    if (variant_ == TP_VARIANT_OUT)  // every out= tensor passed its checks: now resize them
      for (int k = 0; k < n_out; k++)
        if (!metas[k].writes_arg)
          at::native::resize_output(outs[k], c10::IntArrayRef(metas[k].sizes, metas[k].ndim));
    tp_view_t views[TP_MAX_OUTS];
    for (int k = 0; k < n_out; k++) {
      TORCH_CHECK(outs[k].device().type() == DeviceType::PrivateUse1, op_name(h),
                  ": output must be a tpu tensor, got ", outs[k].device());
      views[k] = view_or_throw(outs[k], schema.name().c_str());
    }
    check(run_on_device(op_, eargs, ne, metas, views, n_out));
    if (rows >= 0)  // the count's rows of outputs padded to its capacity
      for (int k = 0; k < n_out; k++) outs[k] = outs[k].narrow(0, 0, rows);
    std::vector<c10::IValue> ret;  // a mutating op's returned arguments
    if (variant_ == TP_VARIANT_FUNCTIONAL) ret = returned_args(schema, args);
    torch::jit::drop(*stack, n_args);
    if (!ret.empty()) {
      for (c10::IValue& v : ret) torch::jit::push(*stack, std::move(v));
      return;
    }
    // An op returning a bool (equal) computes it as a 0-d tensor; the caller gets its value.
    if (schema.returns().size() == 1 && schema.returns()[0].type()->kind() == c10::TypeKind::BoolType) {
      torch::jit::push(*stack, outs[0].item<bool>());
      return;
    }
    for (int k = 0; k < n_out; k++)
      if (!metas[k].writes_arg) torch::jit::push(*stack, outs[k]);
  }

 private:
  int op_;
  tp_op_variant_t variant_;
  std::once_flag roles_once_;
  std::vector<ArgRole> roles_;
};


// A row of another library's operator ("torchvision::nms"): its name within that library, else
// nullptr. Such rows register under their library, whose own kernels (CPU, autograd) stay.
const char* in_library(const tp_op_def_t& d, const char* lib) {
  size_t n = strlen(lib);
  return strncmp(d.name, lib, n) == 0 && strncmp(d.name + n, "::", 2) == 0 ? d.name + n + 2 : nullptr;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (int i = 0; i < tp_op_count; i++) {
    const tp_op_def_t& d = tp_op_table[i];
    if (d.flags & TP_OPF_GRAPH) continue;  // views and factories: PyTorch's own kernels
    if (strstr(d.name, "::")) continue;    // another library's operator (below)
    if (!is_composite_implicit(d.name))
      m.impl(d.name, torch::CppFunction::makeFromBoxedFunctor(
                         std::make_unique<TableKernel>(i, TP_VARIANT_FUNCTIONAL)));
    if (d.inplace)
      m.impl(d.inplace,
             torch::CppFunction::makeFromBoxedFunctor(std::make_unique<TableKernel>(i, TP_VARIANT_INPLACE)));
    if (d.out)
      m.impl(d.out, torch::CppFunction::makeFromBoxedFunctor(
                        std::make_unique<TableKernel>(i, TP_VARIANT_OUT)));
  }
  for (const char* name : kCompositesOnCpu)
    if (tp_op_lookup(name, nullptr) < 0)  // unless the table lowers it
      m.impl(name, torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

// torchvision's operators, defined when torchvision loads its library (an implementation may be
// registered before its definition); nothing happens where torchvision is not installed.
TORCH_LIBRARY_IMPL(torchvision, PrivateUse1, m) {
  for (int i = 0; i < tp_op_count; i++)
    if (const char* name = in_library(tp_op_table[i], "torchvision"))
      m.impl(name, torch::CppFunction::makeFromBoxedFunctor(
                       std::make_unique<TableKernel>(i, TP_VARIANT_FUNCTIONAL)));
}

// torch.autocast("tpu"): PyTorch's own op policy lists (the ones CUDA uses): matmuls and
// convolutions in the lower precision, reductions, norms and losses in f32, mixed inputs promoted.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

#define TP_AUTOCAST_LOWER(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define TP_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define TP_AUTOCAST_FP32_OPT(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define TP_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  using namespace at::autocast;
  AT_FORALL_LOWER_PRECISION_FP(TP_AUTOCAST_LOWER)
  AT_FORALL_FP32(TP_AUTOCAST_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(TP_AUTOCAST_FP32_OPT)
  AT_FORALL_PROMOTE(TP_AUTOCAST_PROMOTE)
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

// Nested tensors on tpu hold a tpu buffer (a CPU fallback's nested result copied back, as
// nn.TransformerEncoder's padding-mask fast path makes one). Allocating, copying and moving one
// are PyTorch's own device-agnostic kernels (they work on the buffer, whose ops are ours); every
// other op on one runs on CPU, counted as a fallback.
void nested_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  note_fallback(op_name(op) + " (nested)");
  at::native::cpu_fallback(op, stack, false, c10::DispatchKey::NestedTensorCPU);
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
