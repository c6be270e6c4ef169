// PrivateUse1 glue: the only C++ in the project. It renames nothing itself (Python does), and holds
// no op logic: it turns ATen calls into calls of the C op table (one boxed kernel), registers the
// CPU fallback for everything else, and supplies what PyTorch needs of a device backend
// (allocator, device guard, hooks, generator, views, copies). C statuses become exceptions here.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/autocast_mode.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ScalarOps.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/library.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

extern "C" {
#include "eager/eager.h"
#include "eager/graph.h"
#include "runtime/executable.h"
}

namespace {

using c10::DeviceType;

// ---- errors ----

[[noreturn]] void throw_status(tp_status_t* st) {
  std::string msg = tp_status_message(st);
  tp_status_code_t code = tp_status_code(st);
  tp_status_free(st);
  if (code == TP_RESOURCE_EXHAUSTED && msg.find("out of memory") != std::string::npos)
    throw c10::OutOfMemoryError(c10::SourceLocation{__func__, __FILE__, __LINE__}, msg);
  // The exception types PyTorch's CPU kernels raise for the same mistakes.
  if (code == TP_UNIMPLEMENTED) TORCH_CHECK_NOT_IMPLEMENTED(false, msg);
  if (code == TP_OUT_OF_RANGE) TORCH_CHECK_INDEX(false, msg);
  TORCH_CHECK(false, msg);
}

inline void check(tp_status_t* st) {
  if (st) throw_status(st);
}

std::string g_init_error = "torch_pjrt was not imported";

tp_client_t* client() {
  tp_client_t* c = tp_eager_client();
  TORCH_CHECK(c, "the tpu device is unavailable: ", g_init_error);
  return c;
}

// ---- dtypes and views ----

tp_dtype_t to_tp(c10::ScalarType t) {
  switch (t) {
    case c10::kBool: return TP_DTYPE_BOOL;
    case c10::kByte: return TP_DTYPE_U8;
    case c10::kChar: return TP_DTYPE_I8;
    case c10::kShort: return TP_DTYPE_I16;
    case c10::kInt: return TP_DTYPE_I32;
    case c10::kLong: return TP_DTYPE_I64;
    case c10::kHalf: return TP_DTYPE_F16;
    case c10::kBFloat16: return TP_DTYPE_BF16;
    case c10::kFloat: return TP_DTYPE_F32;
    case c10::kDouble: return TP_DTYPE_F64;
    case c10::kComplexFloat: return TP_DTYPE_C64;
    case c10::kComplexDouble: return TP_DTYPE_C128;
    default: return TP_DTYPE_INVALID;
  }
}

c10::ScalarType from_tp(tp_dtype_t t) {
  static const c10::ScalarType map[] = {c10::kBool, c10::kByte, c10::kChar, c10::kShort,
                                        c10::kInt,  c10::kLong, c10::kHalf, c10::kBFloat16,
                                        c10::kFloat, c10::kDouble, c10::kComplexFloat,
                                        c10::kComplexDouble};
  return map[t];
}

tp_storage_t* storage_of(const at::Tensor& t) {
  return static_cast<tp_storage_t*>(t.storage().data_ptr().get_context());
}

// Fills |v| from a tpu tensor; false when the tensor cannot be described (dtype, rank).
bool make_view(const at::Tensor& t, tp_view_t* v) {
  tp_dtype_t dt = to_tp(t.scalar_type());
  if (dt == TP_DTYPE_INVALID || t.dim() > TP_MAX_DIMS) return false;
  v->storage = storage_of(t);
  if (!v->storage) return false;
  v->dtype = dt;
  v->ndim = static_cast<int>(t.dim());
  for (int i = 0; i < v->ndim; i++) {
    v->sizes[i] = t.size(i);
    v->strides[i] = t.stride(i);
  }
  v->offset = t.storage_offset();
  return true;
}

tp_view_t view_or_throw(const at::Tensor& t, const char* what) {
  tp_view_t v;
  TORCH_CHECK_NOT_IMPLEMENTED(make_view(t, &v), what, ": tpu tensors of dtype ", t.scalar_type(),
                              " with ", t.dim(), " dims are not supported");
  return v;
}

// ---- device state ----

thread_local c10::DeviceIndex g_current_device = 0;

c10::DeviceIndex device_count() {
  tp_client_t* c = tp_eager_client();
  return c ? static_cast<c10::DeviceIndex>(tp_client_device_count(c)) : 0;
}

void check_device_index(c10::DeviceIndex d) {
  TORCH_CHECK(d >= 0 && d < device_count(), "tpu device index ", static_cast<int>(d),
              " is out of range: ", static_cast<int>(device_count()), " tpu device(s) available");
}

// ---- allocator ----

void release_storage(void* ctx) { tp_storage_release(static_cast<tp_storage_t*>(ctx)); }

struct TpuAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DeviceIndex dev = g_current_device;
    tp_storage_t* s = nullptr;
    check(tp_storage_create(client(), dev, nbytes, &s));
    return {s->addr, s, &release_storage, c10::Device(DeviceType::PrivateUse1, dev)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void*, const void*, std::size_t) const override {
    TORCH_CHECK(false, "tpu memory cannot be copied by the host; use Tensor.copy_");
  }
};
TpuAllocator g_allocator;

// ---- events over the in-order device queue ----

struct Marker {
  tp_marker_t m;
};

// ---- device guard ----

struct TpuGuard final : c10::impl::DeviceGuardImplInterface {
  DeviceType type() const override { return DeviceType::PrivateUse1; }
  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    if (d.index() >= 0) g_current_device = d.index();
    return old;
  }
  c10::Device getDevice() const override { return {DeviceType::PrivateUse1, g_current_device}; }
  void setDevice(c10::Device d) const override {
    check_device_index(d.index());
    g_current_device = d.index();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) g_current_device = d.index();
  }
  c10::Stream getStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getNewStream(c10::Device d, int) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    return c10::Stream(c10::Stream::DEFAULT, s.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }
  void record(void** event, const c10::Stream&, const c10::DeviceIndex,
              const c10::EventFlag) const override {
    if (!*event) *event = new Marker();
    tp_client_mark(client(), &static_cast<Marker*>(*event)->m);
  }
  void block(void*, const c10::Stream&) const override {
    // One in-order queue per device: work enqueued after this point already follows the event.
  }
  bool queryEvent(void* event) const override {
    return !event || tp_client_marker_done(client(), &static_cast<Marker*>(event)->m);
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<Marker*>(event);
  }
  void synchronizeEvent(void* event) const override {
    if (event) check(tp_client_marker_wait(client(), &static_cast<Marker*>(event)->m));
  }
  double elapsedTime(void* a, void* b, const c10::DeviceIndex) const override {
    TORCH_CHECK(a && b, "elapsed_time: both events must be recorded first");
    auto* ma = static_cast<Marker*>(a);
    auto* mb = static_cast<Marker*>(b);
    check(tp_client_marker_wait(client(), &mb->m));
    return (tp_client_marker_time(client(), &mb->m) - tp_client_marker_time(client(), &ma->m)) /
           1e6;
  }
  bool queryStream(const c10::Stream&) const override {
    tp_marker_t m;
    tp_client_mark(client(), &m);
    return tp_client_marker_done(client(), &m);
  }
  void synchronizeStream(const c10::Stream&) const override { check(tp_client_synchronize(client())); }
  void synchronizeDevice(const c10::DeviceIndex) const override {
    check(tp_client_synchronize(client()));
  }
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};
C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuard);

// ---- generator ----

struct TpuGenerator final : c10::GeneratorImpl {
  explicit TpuGenerator(c10::DeviceIndex d)
      : c10::GeneratorImpl(c10::Device(DeviceType::PrivateUse1, d),
                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}
  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    offset_ = 0;
  }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    seed_ = c10::detail::getNonDeterministicRandom();
    offset_ = 0;
    return seed_;
  }
  void set_state(const c10::TensorImpl& state) override {
    TORCH_CHECK(state.numel() == 16 && state.dtype() == at::kByte,
                "tpu RNG state must be a uint8 tensor of 16 bytes");
    const auto* p = static_cast<const uint64_t*>(state.data());
    seed_ = p[0];
    offset_ = p[1];
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    at::Tensor t = at::empty({16}, at::kByte);
    auto* p = t.data_ptr<uint8_t>();
    std::memcpy(p, &seed_, 8);
    std::memcpy(p + 8, &offset_, 8);
    return t.getIntrusivePtr();
  }
  TpuGenerator* clone_impl() const override {
    auto* g = new TpuGenerator(device().index());
    g->seed_ = seed_;
    g->offset_ = offset_;
    return g;
  }
  static c10::DeviceType device_type() { return DeviceType::PrivateUse1; }

 private:
  uint64_t seed_ = 67280421310721ull;
  uint64_t offset_ = 0;
};

const at::Generator& default_generator(c10::DeviceIndex d) {
  static std::vector<at::Generator> gens;
  static std::once_flag once;
  std::call_once(once, [] {
    c10::DeviceIndex n = std::max<c10::DeviceIndex>(device_count(), 1);
    for (c10::DeviceIndex i = 0; i < n; i++) {
      gens.push_back(at::make_generator<TpuGenerator>(i));
      gens.back().set_current_seed(c10::detail::getNonDeterministicRandom());
    }
  });
  if (d < 0) d = g_current_device;
  check_device_index(d);
  return gens[d];
}

// ---- hooks ----

struct TpuHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex d) const override {
    check_device_index(d);
    g_current_device = d;
  }
  c10::DeviceIndex getCurrentDevice() const override { return g_current_device; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    c10::DeviceIndex old = g_current_device;
    g_current_device = d;
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
    return exchangeDevice(d);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override {
    return default_generator(d);
  }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override {
    return at::make_generator<TpuGenerator>(d < 0 ? g_current_device : d);
  }
  at::Device getDeviceFromPtr(void*) const override {
    return {DeviceType::PrivateUse1, g_current_device};
  }
  bool isPinnedPtr(const void*) const override { return false; }
  at::Allocator* getPinnedMemoryAllocator() const override { return at::getCPUAllocator(); }
};

// ---- fallback accounting ----

std::mutex g_fallback_lock;
std::map<std::string, int64_t> g_fallbacks;
std::atomic<bool> g_strict{false};
std::atomic<bool> g_warn{true};

std::string op_name(const c10::OperatorHandle& op) {
  const auto& n = op.schema().operator_name();
  std::string base = n.name.rfind("aten::", 0) == 0 ? n.name.substr(6) : n.name;
  return n.overload_name.empty() ? base : base + "." + n.overload_name;
}

// Every CPU fallback goes through here: strict mode, counting, one warning per op.
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

at::Tensor convolution_on_cpu(const at::Tensor& input, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                              c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                              c10::IntArrayRef output_padding, int64_t groups);
std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_on_cpu(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
    c10::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask);

// Sparse layouts have no tpu storage: any op that reaches a sparse tpu tensor, or would make one
// (copying a CPU fallback's sparse result back), ends here with one clear error.
void sparse_unsupported(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu: sparse layouts are not supported on the tpu device ('",
                              op_name(op), "' with a sparse tpu tensor); keep sparse tensors on CPU");
}

// Composite kernels that cannot run for tpu tensors, registered to the CPU fallback directly:
// mode.values checks for a CPU/CUDA/XPU device itself and refuses tpu tensors; the others read or
// write tensor memory on the host (data_ptr loops, or at::native CPU functions called directly)
// and would crash on a tpu tensor's never-mapped address. The host-read sweep
// (python -m torch_pjrt.compat_host) finds them: every registered op, called on tpu inputs.
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

int64_t next_random_key(const std::optional<at::Generator>& given, c10::DeviceIndex device);

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
  // (The *_overrideable convolutions have a CPU entry, an error kernel: they are served below.)
  TORCH_CHECK_NOT_IMPLEMENTED(
      op.hasComputedKernelForDispatchKey(c10::DispatchKey::CPU), "tpu: '", name,
      "' has no tpu lowering, and PyTorch has no CPU kernel for it to fall back to",
      op.hasComputedKernelForDispatchKey(c10::DispatchKey::CUDA) ? " (it has a CUDA kernel only)"
                                                                  : "");
  note_fallback(name);
  generators_to_cpu(op, stack);
  // A non-CPU backend reaches convolution through *_overrideable ops, which CPU does not
  // implement: run PyTorch's CPU convolution for them instead.
  if (name == "convolution_overrideable") {
    auto a = torch::jit::last(*stack, 9);
    at::Tensor r = convolution_on_cpu(a[0].toTensor(), a[1].toTensor(), a[2].toOptional<at::Tensor>(),
                                      a[3].toIntVector(), a[4].toIntVector(), a[5].toIntVector(),
                                      a[6].toBool(), a[7].toIntVector(), a[8].toInt());
    torch::jit::drop(*stack, 9);
    torch::jit::push(*stack, r);
    return;
  }
  if (name == "convolution_backward_overrideable") {
    auto a = torch::jit::last(*stack, 10);
    auto mask = a[9].toBoolList();
    auto r = convolution_backward_on_cpu(a[0].toTensor(), a[1].toTensor(), a[2].toTensor(),
                                         a[3].toIntVector(), a[4].toIntVector(), a[5].toIntVector(),
                                         a[6].toBool(), a[7].toIntVector(), a[8].toInt(),
                                         {mask.get(0), mask.get(1), mask.get(2)});
    torch::jit::drop(*stack, 10);
    torch::jit::push(*stack, std::get<0>(r), std::get<1>(r), std::get<2>(r));
    return;
  }
  at::native::cpu_fallback(op, stack);
}

at::Tensor convolution_on_cpu(const at::Tensor& input, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                              c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                              c10::IntArrayRef output_padding, int64_t groups) {
  std::optional<at::Tensor> b;
  if (bias && bias->defined()) b = bias->cpu();
  return at::convolution(input.cpu(), weight.cpu(), b, stride, padding, dilation, transposed,
                         output_padding, groups)
      .to(input.device());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_on_cpu(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
    c10::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  int64_t bias_size = transposed ? weight.size(1) * groups : weight.size(0);
  auto [gi, gw, gb] = at::convolution_backward(
      grad_output.cpu(), input.cpu(), weight.cpu(), std::vector<int64_t>{bias_size}, stride,
      padding, dilation, transposed, output_padding, groups, output_mask);
  auto dev = [&](const at::Tensor& t) { return t.defined() ? t.to(input.device()) : t; };
  return {dev(gi), dev(gw), dev(gb)};
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
    if (str.size() >= sizeof(a->arg.s)) return false;
    a->arg.kind = TP_ARG_STR;
    std::memcpy(a->arg.s, str.c_str(), str.size() + 1);
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

// The key of the next random call on |device|: from the call's generator (a tpu one) or the
// device's default generator, whose offset advances by one per call.
int64_t next_random_key(const std::optional<at::Generator>& given, c10::DeviceIndex device) {
  at::Generator gen = given && given->defined() ? *given : default_generator(device);
  TORCH_CHECK(gen.device().type() == DeviceType::PrivateUse1,
              "Expected a 'tpu' device type for generator but found '", gen.device().type(), "'");
  std::lock_guard<std::mutex> lock(gen.mutex());
  uint64_t seed = gen.current_seed(), offset = gen.get_offset();
  gen.set_offset(offset + 1);
  return static_cast<int64_t>(seed * 6364136223846793005ull + offset * 1442695040888963407ull + 1);
}

// How the table kernel treats each schema argument; computed once per kernel.
enum ArgRole : uint8_t { kValue, kScalar, kDtype, kGenerator, kIgnored };

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

// PyTorch's rules for writing into an existing tensor: no element written twice, and no input
// that partly overlaps the output.
void check_overlap(const at::Tensor& out, c10::ArrayRef<c10::IValue> args, size_t n_in) {
  at::assert_no_internal_overlap(out);
  for (size_t i = 0; i < n_in; i++)
    if (args[i].isTensor() && args[i].toTensor().defined() &&
        args[i].toTensor().device() == out.device())
      at::assert_no_partial_overlap(out, args[i].toTensor());
}

// Schema arguments [0, n_in) become C arguments one to one, except that a tensor list becomes
// its length (an INT) followed by its tensors. False: the call has no native description.
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

struct TableKernel final : c10::OperatorKernel {
  TableKernel(int op, int variant) : op_(op), variant_(variant) {}

  void operator()(const c10::OperatorHandle& h, c10::DispatchKeySet, torch::jit::Stack* stack) {
    const auto& schema = h.schema();
    const size_t n_args = schema.arguments().size();
    size_t n_in = n_args;
    if (variant_ == 2)
      while (n_in > 0 && schema.arguments()[n_in - 1].alias_info() &&
             schema.arguments()[n_in - 1].alias_info()->isWrite())
        n_in--;
    if (tp_op_table[op_].flags & TP_OPF_LIST_CHUNKS) chunk_long_lists(op_, stack, n_args, n_in);
    auto args = torch::jit::last(*stack, n_args);
    std::call_once(roles_once_, [&] { roles_ = arg_roles(schema); });
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
          dev = static_cast<c10::DeviceIndex>(eargs[i].view.storage->device);
          break;
        }
      std::memset(&eargs[ne], 0, sizeof(eargs[0]));
      eargs[ne].arg.kind = TP_ARG_SCALAR;
      eargs[ne].arg.meta.dtype = TP_DTYPE_I64;
      eargs[ne++].arg.i = next_random_key(generator, dev);
    }
    if (!native) return cpu_fallback(h, stack);
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
        dev = c10::Device(DeviceType::PrivateUse1, eargs[i].view.storage->device);
        break;
      }
    for (int k = 0; k < n_out; k++) {
      if (metas[k].writes_arg) {
        int a = metas[k].writes_arg - 1;
        TORCH_CHECK(a < ne && earg_tensor[a].defined(), op_name(h), ": bad in-place argument");
        outs.push_back(earg_tensor[a]);
        continue;
      }
      if (variant_ == 0) {
        c10::DeviceGuard guard(dev);
        outs.push_back(at::empty(c10::IntArrayRef(metas[k].sizes, metas[k].ndim),
                                 at::TensorOptions().dtype(from_tp(metas[k].dtype)).device(dev)));
      } else if (variant_ == 1) {
        TORCH_CHECK(k == 0, op_name(h), ": an in-place op returns one tensor");
        outs.push_back(args[0].toTensor());
        check_overlap(outs.back(), args, n_in);
      } else {
        TORCH_CHECK(next_out < n_args, op_name(h), ": expected ", n_out, " outputs");
        at::Tensor o = args[next_out++].toTensor();
        if (tp_op_table[op_].flags & TP_OPF_OUT_DTYPE) metas[k].dtype = to_tp(o.scalar_type());
        c10::IntArrayRef shape(metas[k].sizes, metas[k].ndim);
        // An out= tensor sharing storage with an input cannot be resized (the input's view
        // would lose its storage): PyTorch treats it as in-place and refuses, and so do we.
        if (o.sizes() != shape)
          for (int i = 0; i < ne; i++)
            TORCH_CHECK(!earg_tensor[i].defined() ||
                            !earg_tensor[i].storage().is_alias_of(o.storage()),
                        "output with shape ", o.sizes(), " doesn't match the broadcast shape ",
                        shape);
        at::native::resize_output(o, shape);
        check_overlap(o, args, n_in);
        outs.push_back(o);
      }
    }
    tp_view_t views[TP_MAX_OUTS];
    for (int k = 0; k < n_out; k++) {
      TORCH_CHECK(outs[k].device().type() == DeviceType::PrivateUse1, op_name(h),
                  ": output must be a tpu tensor, got ", outs[k].device());
      views[k] = view_or_throw(outs[k], schema.name().c_str());
    }
    check(tp_eager_run(op_, eargs, ne, metas, views, n_out));
    torch::jit::drop(*stack, n_args);
    // An op returning a bool (equal) computes it as a 0-d tensor; the caller gets its value.
    if (schema.returns().size() == 1 && schema.returns()[0].type()->kind() == c10::TypeKind::BoolType) {
      torch::jit::push(*stack, outs[0].item<bool>());
      return;
    }
    for (int k = 0; k < n_out; k++)
      if (!metas[k].writes_arg) torch::jit::push(*stack, outs[k]);
  }

 private:
  int op_, variant_;
  std::once_flag roles_once_;
  std::vector<ArgRole> roles_;
};


// ---- whole graphs (the torch.compile backend) ----

std::atomic<int64_t> g_graph_runs{0}, g_graph_compiles{0};

// A graph under construction and its runs. Python names values with meta tensors: each graph
// input and node output is one, and passing it back as an argument refers to that value.
struct Graph {
  tp_graph_t* g = nullptr;
  std::unordered_map<const c10::TensorImpl*, int> ids;
  std::vector<at::Tensor> values;  // keeps the naming tensors alive
  std::vector<int> outputs;

  Graph() { check(tp_graph_create(&g)); }
  ~Graph() { tp_graph_free(g); }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  at::Tensor name_value(int v) {
    const tp_meta_t* m = tp_graph_value_meta(g, v);
    TORCH_CHECK(m, "graph: bad value");
    at::Tensor t = at::empty(c10::IntArrayRef(m->sizes, m->ndim),
                             at::TensorOptions().dtype(from_tp(m->dtype)).device(at::kMeta));
    ids[t.unsafeGetTensorImpl()] = v;
    values.push_back(t);
    return t;
  }

  at::Tensor input(c10::ScalarType dtype, std::vector<int64_t> sizes) {
    tp_meta_t m{};
    m.dtype = to_tp(dtype);
    TORCH_CHECK_NOT_IMPLEMENTED(m.dtype != TP_DTYPE_INVALID && sizes.size() <= TP_MAX_DIMS,
                                "graph input of dtype ", dtype, " and ", sizes.size(), " dims");
    m.ndim = static_cast<int>(sizes.size());
    std::copy(sizes.begin(), sizes.end(), m.sizes);
    int v = tp_graph_input(g, &m);
    TORCH_CHECK(v >= 0, "graph: out of host memory");
    return name_value(v);
  }

  // Adds a call of ATen op |op| (an OpOverload); returns the meta tensors of its outputs, or the
  // reason it has no native lowering (a str): the caller then runs it eagerly.
  py::object node(const py::object& op, const py::args& args, const py::kwargs& kwargs) {
    const c10::FunctionSchema& schema = py::cast<const c10::FunctionSchema&>(op.attr("_schema"));
    const std::string& full = schema.name();
    if (full.rfind("aten::", 0) != 0) return py::str("not an aten op");
    std::string name = full.substr(6);
    if (!schema.overload_name().empty()) name += "." + schema.overload_name();
    int variant = 0;
    int opi = tp_op_lookup(name.c_str(), &variant);
    if (opi < 0 || variant != 0) return py::str("no native lowering");
    // A Python number where the schema wants a Tensor (add.Tensor(x, 1) in a traced graph) is a
    // wrapped number, as the eager dispatcher makes it.
    py::list fixed;
    for (size_t i = 0; i < args.size(); i++) {
      py::handle a = args[i];
      bool want_tensor = i < schema.arguments().size() &&
                         schema.arguments()[i].type()->kind() == c10::TypeKind::TensorType;
      if (want_tensor && (py::isinstance<py::bool_>(a) || py::isinstance<py::int_>(a) ||
                          py::isinstance<py::float_>(a))) {
        c10::Scalar sc = py::isinstance<py::bool_>(a)  ? c10::Scalar(a.cast<bool>())
                         : py::isinstance<py::int_>(a) ? c10::Scalar(a.cast<int64_t>())
                                                       : c10::Scalar(a.cast<double>());
        at::Tensor t = c10::scalar_to_tensor(sc);
        t.unsafeGetTensorImpl()->set_wrapped_number(true);
        fixed.append(py::cast(t));
      } else {
        fixed.append(a);
      }
    }
    torch::jit::Stack stack = torch::jit::createStackForSchema(
        schema, py::tuple(fixed), kwargs, std::nullopt);
    tp_eager_arg_t eargs[TP_MAX_ARGS];
    at::Tensor earg_tensor[TP_MAX_ARGS];
    std::optional<at::Generator> generator;
    int ne = 0;
    if (!convert_call(arg_roles(schema), stack, stack.size(), true, eargs, earg_tensor, &ne,
                      &generator))
      return py::str("arguments not describable natively");
    if (generator) return py::str("an explicit generator");
    tp_op_arg_t a[TP_MAX_ARGS];
    int vals[TP_MAX_ARGS];
    for (int i = 0; i < ne; i++) {
      a[i] = eargs[i].arg;
      vals[i] = -1;
      if (a[i].kind != TP_ARG_TENSOR) continue;
      auto it = ids.find(earg_tensor[i].unsafeGetTensorImpl());
      if (it == ids.end()) return py::str("a tensor argument that is not a graph value");
      vals[i] = it->second;
    }
    tp_meta_t metas[TP_MAX_OUTS];
    int n_out = 0, first = 0;
    tp_status_t* st = tp_graph_node(g, opi, a, vals, ne, metas, &n_out, &first);
    if (st) {
      std::string msg = tp_status_message(st);
      tp_status_free(st);
      return py::str(msg);
    }
    py::list outs;
    for (int k = 0; k < n_out; k++) outs.append(name_value(first + k));
    return outs;
  }

  void set_outputs(const std::vector<at::Tensor>& outs) {
    outputs.clear();
    for (const at::Tensor& t : outs) {
      auto it = ids.find(t.unsafeGetTensorImpl());
      TORCH_CHECK(it != ids.end(), "graph output is not a value of this graph");
      outputs.push_back(it->second);
    }
    check(tp_graph_set_outputs(g, outputs.data(), static_cast<int>(outputs.size())));
  }

  // Runs on tpu tensors (views allowed); returns fresh dense outputs.
  // |into|: per output, None or a tensor to receive it in place (a mutated graph input: its
  // storage takes the result's buffer, no copy). A usable |into| tensor is dense, of the output's
  // dtype and shape, and the whole of its storage; for it the returned entry is None, else the
  // caller gets a fresh tensor to copy from.
  std::vector<std::optional<at::Tensor>> run(const std::vector<at::Tensor>& inputs,
                                             const std::vector<std::optional<at::Tensor>>& into) {
    TORCH_CHECK(into.empty() || into.size() == outputs.size(), "graph: expected ",
                outputs.size(), " output targets, got ", into.size());
    TORCH_CHECK(static_cast<int>(inputs.size()) == tp_graph_input_count(g), "graph: expected ",
                tp_graph_input_count(g), " inputs, got ", inputs.size());
    c10::DeviceIndex device = g_current_device;
    std::vector<tp_view_t> views(inputs.size() + 1);
    for (size_t i = 0; i < inputs.size(); i++) {
      TORCH_CHECK(inputs[i].device().type() == DeviceType::PrivateUse1,
                  "graph input ", i, " is on ", inputs[i].device(), ", expected a tpu tensor");
      if (i == 0) device = inputs[i].device().index();
      views[i] = view_or_throw(inputs[i], "graph input");
    }
    c10::Device dev(DeviceType::PrivateUse1, device);
    std::vector<int64_t> keys(tp_graph_random_count(g) + 1);
    for (int r = 0; r < tp_graph_random_count(g); r++) keys[r] = next_random_key(std::nullopt, device);
    std::vector<std::optional<at::Tensor>> outs;
    std::vector<tp_storage_t*> out_storages;
    {
      c10::DeviceGuard guard(dev);
      for (size_t k = 0; k < outputs.size(); k++) {
        const tp_meta_t* m = tp_graph_value_meta(g, outputs[k]);
        c10::IntArrayRef shape(m->sizes, m->ndim);
        if (!into.empty() && into[k] && into[k]->defined()) {
          const at::Tensor& t = *into[k];
          if (t.device() == dev && to_tp(t.scalar_type()) == m->dtype && t.sizes() == shape &&
              t.is_contiguous() && t.storage_offset() == 0 &&
              t.storage().nbytes() == static_cast<size_t>(t.numel()) * t.element_size()) {
            out_storages.push_back(storage_of(t));
            outs.emplace_back(std::nullopt);
            continue;
          }
        }
        outs.emplace_back(at::empty(shape, at::TensorOptions().dtype(from_tp(m->dtype)).device(dev)));
        out_storages.push_back(storage_of(*outs.back()));
      }
    }
    out_storages.push_back(nullptr);
    int compiled = 0;
    tp_status_t* st;
    {
      py::gil_scoped_release no_gil;
      st = tp_graph_run(g, device, views.data(), keys.data(), out_storages.data(), &compiled);
    }
    check(st);
    g_graph_runs++;
    if (compiled) g_graph_compiles++;
    return outs;
  }
};

// ---- copies, views, storage ops ----

// A tpu tensor of a dtype the C core does not know (complex32, uint16, ...) is kept as bytes, so it can
// still be stored and moved: ops on it run on CPU through the fallback. Such a tensor is read and
// written through the run of storage bytes it reaches, from its first element to its last.
int64_t element_span(const at::Tensor& t) {
  int64_t span = 1;
  for (int64_t i = 0; i < t.dim(); i++) span += (t.size(i) - 1) * t.stride(i);
  return span;
}

tp_view_t byte_span(const at::Tensor& t) {
  int64_t item = static_cast<int64_t>(t.itemsize());
  tp_view_t v{};
  v.storage = storage_of(t);
  v.dtype = TP_DTYPE_U8;
  v.ndim = 1;
  v.sizes[0] = element_span(t) * item;
  v.strides[0] = 1;
  v.offset = t.storage_offset() * item;
  return v;
}

// A tensor's lazy conjugate and negative bits are not in its bytes: its values are |host| with
// the bits of |t| applied (both bits are involutions, so this converts either way).
at::Tensor with_bits_of(const at::Tensor& t, at::Tensor host) {
  if (t.is_conj()) host = host.conj();
  if (t.is_neg()) host = host._neg_view();
  return host;
}

// The values of such a tpu tensor (any strides) as a CPU tensor: a strided view of its span. It
// must not go through .cpu(), which resolves the bits with a clone on tpu: a copy_ again.
at::Tensor bytes_to_host(const at::Tensor& src) {
  at::Tensor span = at::empty({element_span(src)}, src.options().device(c10::kCPU));
  tp_view_t s = byte_span(src);
  check(tp_eager_copy_to_host(&s, span.data_ptr()));
  return with_bits_of(src, span.as_strided(src.sizes(), src.strides(), 0));
}

// Writes |host| (dst's dtype, broadcastable to its sizes) into such a tpu tensor. A strided |dst|
// rewrites the whole span it reaches, so the bytes between its elements are read first and kept.
void bytes_from_host(const at::Tensor& dst, const at::Tensor& host) {
  at::Tensor span = dst.is_contiguous() ? at::empty({dst.numel()}, host.options())
                                        : bytes_to_host(dst).as_strided({element_span(dst)}, {1}, 0);
  span.as_strided(dst.sizes(), dst.strides(), 0).copy_(with_bits_of(dst, host));
  tp_view_t d = byte_span(dst);
  check(tp_eager_copy_from_host(&d, span.data_ptr()));
}

at::Tensor& tpu_copy_(at::Tensor& self, const at::Tensor& src, bool /*non_blocking*/) {
  if (self.numel() == 0) return self;
  bool dst_tpu = self.device().type() == DeviceType::PrivateUse1;
  bool src_tpu = src.device().type() == DeviceType::PrivateUse1;
  if (to_tp(self.scalar_type()) == TP_DTYPE_INVALID || to_tp(src.scalar_type()) == TP_DTYPE_INVALID) {
    if (dst_tpu && src_tpu && self.scalar_type() == src.scalar_type() && self.sizes() == src.sizes() &&
        self.is_contiguous() && src.is_contiguous() && self.is_conj() == src.is_conj() &&
        self.is_neg() == src.is_neg()) {
      tp_view_t d = byte_span(self), s = byte_span(src);
      check(tp_eager_copy(&d, &s));
    } else if (dst_tpu && src_tpu) {
      // Converting, broadcasting or strided: the device cannot compute on these bytes, so the
      // copy goes through the host, counted as a fallback like any op that runs on CPU.
      note_fallback("copy_");
      self.copy_(to_tp(src.scalar_type()) == TP_DTYPE_INVALID ? bytes_to_host(src) : src.cpu());
    } else if (dst_tpu) {
      TORCH_CHECK(src.device().is_cpu(), "copy_: cannot copy from ", src.device(), " to tpu");
      bytes_from_host(self, src.to(self.scalar_type()));
    } else {
      TORCH_CHECK(self.device().is_cpu(), "copy_: cannot copy from tpu to ", self.device());
      self.copy_(bytes_to_host(src));
    }
    return self;
  }
  // Lazy conjugate/negative bits are not in the bytes: a copy between tensors whose bits differ
  // conjugates/negates the values it moves, as PyTorch's own copy_ does.
  if (dst_tpu && src_tpu) {
    tp_view_t d = view_or_throw(self, "copy_"), s = view_or_throw(src, "copy_");
    check(tp_eager_copy_bits(&d, &s, self.is_conj() != src.is_conj(), self.is_neg() != src.is_neg()));
  } else if (dst_tpu) {
    TORCH_CHECK(src.device().is_cpu(), "copy_: cannot copy from ", src.device(), " to tpu");
    tp_view_t d = view_or_throw(self, "copy_");
    at::Tensor host = with_bits_of(self, src.to(self.scalar_type()).expand(self.sizes()))
                          .resolve_conj().resolve_neg().contiguous();
    check(tp_eager_copy_from_host(&d, host.data_ptr()));
  } else {
    TORCH_CHECK(self.device().is_cpu(), "copy_: cannot copy from tpu to ", self.device());
    tp_view_t s = view_or_throw(src, "copy_");
    at::Tensor host = at::empty(src.sizes(), src.options().device(c10::kCPU));
    check(tp_eager_copy_to_host(&s, host.data_ptr()));
    self.copy_(with_bits_of(src, host));
  }
  return self;
}

at::Tensor tpu_copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor d = dst;
  tpu_copy_(d, self, non_blocking);
  return dst;
}

at::Tensor tpu_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::native::resize_output(dst, self.sizes());
  return tpu_copy_from(self, dst, false);
}

c10::Scalar tpu_local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  if (to_tp(self.scalar_type()) == TP_DTYPE_INVALID) return at::_local_scalar_dense(bytes_to_host(self));
  tp_view_t v = view_or_throw(self, "item");
  at::Tensor host = at::empty({}, self.options().device(c10::kCPU));
  v.ndim = 0;
  check(tp_eager_copy_to_host(&v, host.data_ptr()));
  return at::_local_scalar_dense(with_bits_of(self, host).resolve_conj().resolve_neg());
}

at::Tensor tpu_empty(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                     std::optional<c10::Layout>, std::optional<c10::Device> device,
                     std::optional<bool>, std::optional<c10::MemoryFormat> fmt) {
  c10::Device dev = device.value_or(c10::Device(DeviceType::PrivateUse1, g_current_device));
  if (dev.index() < 0) dev = c10::Device(DeviceType::PrivateUse1, g_current_device);
  check_device_index(dev.index());
  c10::DeviceGuard guard(dev);
  return at::detail::empty_generic(size, &g_allocator,
                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   dtype.value_or(c10::get_default_dtype_as_scalartype()), fmt);
}

at::Tensor tpu_empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                             std::optional<c10::ScalarType> dtype, std::optional<c10::Layout>,
                             std::optional<c10::Device> device, std::optional<bool>) {
  c10::Device dev = device.value_or(c10::Device(DeviceType::PrivateUse1, g_current_device));
  if (dev.index() < 0) dev = c10::Device(DeviceType::PrivateUse1, g_current_device);
  check_device_index(dev.index());
  c10::DeviceGuard guard(dev);
  return at::detail::empty_strided_generic(
      size, stride, &g_allocator, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      dtype.value_or(c10::get_default_dtype_as_scalartype()));
}

// Grows |storage| to |nbytes|, keeping its contents (a device copy into the new buffer).
void grow_storage(const c10::Storage& storage, size_t nbytes) {
  tp_storage_t* old = static_cast<tp_storage_t*>(storage.data_ptr().get_context());
  c10::DeviceGuard guard(storage.device());
  c10::DataPtr fresh = g_allocator.allocate(nbytes);
  if (old && old->buffer && old->numel > 0) {
    tp_view_t src{};
    src.storage = old;
    src.dtype = old->dtype;
    src.ndim = 1;
    src.sizes[0] = old->numel;
    src.strides[0] = 1;
    tp_view_t dst = src;
    dst.storage = static_cast<tp_storage_t*>(fresh.get_context());
    check(tp_eager_copy(&dst, &src));
  }
  storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(fresh));
  storage.unsafeGetStorageImpl()->set_nbytes(nbytes);
}

const at::Tensor& tpu_resize_(const at::Tensor& self, c10::IntArrayRef size,
                              std::optional<c10::MemoryFormat> fmt) {
  int64_t numel = c10::multiply_integers(size);
  size_t need = numel == 0 ? 0 : static_cast<size_t>(self.storage_offset() + numel) * self.itemsize();
  if (need > self.storage().nbytes()) grow_storage(self.storage(), need);
  self.unsafeGetTensorImpl()->set_sizes_contiguous(size);
  if (fmt) self.unsafeGetTensorImpl()->empty_tensor_restride(*fmt);
  return self;
}

at::Tensor& tpu_set_storage(at::Tensor& self, c10::Storage source, int64_t offset,
                            c10::IntArrayRef size, c10::IntArrayRef stride) {
  self.unsafeGetTensorImpl()->set_storage_keep_dtype(std::move(source));
  self.unsafeGetTensorImpl()->set_sizes_and_strides(size, stride, offset);
  int64_t extent = 1;
  bool empty = false;
  for (size_t i = 0; i < size.size(); i++) {
    if (size[i] == 0) empty = true;
    extent += (size[i] - 1) * stride[i];
  }
  size_t need = empty ? 0 : static_cast<size_t>(offset + extent) * self.itemsize();
  if (need > self.storage().nbytes()) grow_storage(self.storage(), need);
  return self;
}

at::Tensor& tpu_set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.itemsize());
  return tpu_set_storage(self, std::move(source), 0, {n}, {1});
}

at::Tensor& tpu_set_tensor(at::Tensor& self, const at::Tensor& src) {
  if (self.is_same(src)) return self;
  return tpu_set_storage(self, src.storage(), src.storage_offset(), src.sizes(), src.strides());
}

at::Tensor& tpu_set_empty(at::Tensor& self) {
  c10::Storage s(c10::Storage::use_byte_size_t(), 0, &g_allocator, true);
  return tpu_set_storage(self, std::move(s), 0, {0}, {1});
}

at::Tensor tpu_as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                          std::optional<int64_t> offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, offset);
}

at::Tensor tpu_view(const at::Tensor& self, c10::IntArrayRef size) {
  return at::native::view(self, size);
}

at::Tensor tpu_reshape_alias(const at::Tensor& self, c10::IntArrayRef size,
                             c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

at::Tensor tpu_unfold(const at::Tensor& self, int64_t dim, int64_t size, int64_t step) {
  return at::native::unfold(self, dim, size, step);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (int i = 0; i < tp_op_count; i++) {
    const tp_op_def_t& d = tp_op_table[i];
    if (d.flags & TP_OPF_GRAPH) continue;  // views and factories: PyTorch's own kernels
    if (!is_composite_implicit(d.name))
      m.impl(d.name, torch::CppFunction::makeFromBoxedFunctor(std::make_unique<TableKernel>(i, 0)));
    if (d.inplace)
      m.impl(d.inplace,
             torch::CppFunction::makeFromBoxedFunctor(std::make_unique<TableKernel>(i, 1)));
    if (d.out)
      m.impl(d.out, torch::CppFunction::makeFromBoxedFunctor(std::make_unique<TableKernel>(i, 2)));
  }
  for (const char* name : kCompositesOnCpu)
    if (tp_op_lookup(name, nullptr) < 0)  // unless the table lowers it
      m.impl(name, torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
  m.impl("empty.memory_format", tpu_empty);
  m.impl("empty_strided", tpu_empty_strided);
  m.impl("copy_", tpu_copy_);
  m.impl("_copy_from", tpu_copy_from);
  m.impl("_copy_from_and_resize", tpu_copy_from_and_resize);
  m.impl("_local_scalar_dense", tpu_local_scalar_dense);
  // tpu tensors are plain strided TensorImpls, like CPU ones: `param.data = t` and
  // Module.to("tpu") may swap them in place, which keeps tied parameters tied (as on CUDA).
  m.impl("_has_compatible_shallow_copy_type", [](const at::Tensor& self, const at::Tensor& from) {
    return self.layout() == c10::kStrided && from.layout() == c10::kStrided;
  });
  m.impl("resize_", tpu_resize_);
  m.impl("set_.source_Storage_storage_offset", tpu_set_storage);
  m.impl("set_.source_Storage", tpu_set_source_storage);
  m.impl("set_.source_Tensor", tpu_set_tensor);
  m.impl("set_", tpu_set_empty);
  m.impl("as_strided", tpu_as_strided);
  m.impl("view", tpu_view);
  m.impl("_reshape_alias", tpu_reshape_alias);
  m.impl("unfold", tpu_unfold);
  // A complex tensor's storage holds its interleaved parts, so its real views are PyTorch's own
  // metadata views of the same storage.
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
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

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_unsupported>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_unsupported>());
}

// ---- Python surface (torch_pjrt._C) ----

void init(const std::string& plugin, const std::string& cache_dir, int64_t capacity,
          bool blocking) {
  char* warning = nullptr;
  check(tp_eager_init(plugin.c_str(), cache_dir.c_str(), static_cast<size_t>(capacity), &warning));
  if (warning) {
    TORCH_WARN("tpu: on-disk executable cache disabled: ", warning);
    free(warning);
  }
  tp_eager_set_blocking(blocking);
  static std::once_flag once;
  std::call_once(once, [] {
    c10::SetAllocator(DeviceType::PrivateUse1, &g_allocator);
    at::RegisterPrivateUse1HooksInterface(new TpuHooks());
  });
}

py::dict stats() {
  tp_runtime_stats_t s;
  tp_runtime_stats(&s);
  py::dict d;
  d["compiles"] = s.compiles;
  d["memory_cache_hits"] = s.memory_cache_hits;
  d["disk_cache_hits"] = s.disk_cache_hits;
  d["executes"] = s.executes;
  d["compile_seconds"] = s.compile_seconds;
  py::dict fb;
  {
    std::lock_guard<std::mutex> g(g_fallback_lock);
    for (auto& kv : g_fallbacks) fb[py::str(kv.first)] = kv.second;
  }
  d["fallbacks"] = fb;
  d["graph_runs"] = g_graph_runs.load();
  d["graph_compiles"] = g_graph_compiles.load();
  tp_exec_cache_t* c = tp_eager_cache();
  d["cached_executables"] = c ? tp_exec_cache_size(c) : 0;
  return d;
}

void reset_stats() {
  tp_runtime_stats_reset();
  g_graph_runs = 0;
  g_graph_compiles = 0;
  std::lock_guard<std::mutex> g(g_fallback_lock);
  g_fallbacks.clear();
}

py::list native_ops() {
  py::list l;
  for (int i = 0; i < tp_op_count; i++) {
    if (tp_op_table[i].flags & TP_OPF_GRAPH) continue;
    l.append(tp_op_table[i].name);
    if (tp_op_table[i].inplace) l.append(tp_op_table[i].inplace);
    if (tp_op_table[i].out) l.append(tp_op_table[i].out);
  }
  return l;
}

py::dict plugin_info() {
  tp_client_t* c = client();
  py::dict d;
  int major, minor;
  tp_client_api_version(c, &major, &minor);
  d["platform"] = tp_client_platform_name(c);
  d["platform_version"] = tp_client_platform_version(c);
  d["plugin_path"] = tp_client_plugin_path(c);
  d["pjrt_api_version"] = py::make_tuple(major, minor);
  py::list devs;
  for (int i = 0; i < tp_client_device_count(c); i++) devs.append(tp_client_device_kind(c, i));
  d["devices"] = devs;
  d["cache_dir"] = tp_exec_cache_dir(tp_eager_cache());
  return d;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_pjrt native core";
  m.def("init", &init, py::arg("plugin"), py::arg("cache_dir"), py::arg("cache_capacity"),
        py::arg("blocking"));
  m.def("initialized", [] { return tp_eager_client() != nullptr; });
  m.def("set_init_error", [](const std::string& e) { g_init_error = e; });
  m.def("stats", &stats);
  m.def("reset_stats", &reset_stats);
  m.def("native_ops", &native_ops);
  m.def("cpu_routed_ops", [] {
    py::list l;
    for (const char* name : kCompositesOnCpu)
      if (tp_op_lookup(name, nullptr) < 0) l.append(name);
    return l;
  });
  m.def("graph_ops", [] {  // rows only whole graphs use (views, factories)
    py::list l;
    for (int i = 0; i < tp_op_count; i++)
      if (tp_op_table[i].flags & TP_OPF_GRAPH) l.append(tp_op_table[i].name);
    return l;
  });
  m.def("plugin_info", &plugin_info);
  m.def("set_strict", [](bool on) { g_strict = on; });
  m.def("strict", [] { return g_strict.load(); });
  m.def("set_fallback_warnings", [](bool on) { g_warn = on; });
  m.def("set_blocking", [](bool on) { tp_eager_set_blocking(on); });
  m.def("device_count", [] { return static_cast<int>(device_count()); });
  m.def("current_device", [] { return static_cast<int>(g_current_device); });
  m.def("set_device", [](int d) {
    check_device_index(static_cast<c10::DeviceIndex>(d));
    g_current_device = static_cast<c10::DeviceIndex>(d);
  });
  m.def("synchronize", [] {
    py::gil_scoped_release no_gil;
    check(tp_client_synchronize(client()));
  });
  m.def("device_name", [](int d) { return std::string(tp_client_device_kind(client(), d)); });
  m.def("memory_allocated", [](int d) { return tp_storage_bytes_in_use(d); });
  m.def("max_memory_allocated", [](int d) { return tp_storage_peak_bytes(d); });
  m.def("reset_peak_memory_stats", [](int d) { tp_storage_reset_peak(d); });
  m.def("memory_limit", [] { return tp_client_memory_limit(client()); });
  m.def("set_memory_limit", [](int64_t b) { tp_client_set_memory_limit(client(), b); });
  m.def("set_cache_capacity", [](int64_t n) {
    tp_exec_cache_set_capacity(tp_eager_cache(), static_cast<size_t>(n));
  });
  m.def("clear_cache", [] { tp_exec_cache_clear(tp_eager_cache()); });
  m.def("default_generator", [](int d) { return default_generator(static_cast<c10::DeviceIndex>(d)); });
  // Compiles MLIR text with the plugin and discards the result: lets tests and tools check how
  // a plugin error (its diagnostics) reaches Python.
  m.def("_compile", [](const std::string& mlir) {
    tp_executable_t* exe = nullptr;
    check(tp_executable_compile(client(), mlir.c_str(), mlir.size(), &exe));
    tp_executable_release(exe);
  });
  py::class_<Graph>(m, "Graph")
      .def(py::init<>())
      .def("input", &Graph::input)
      .def("node", &Graph::node)
      .def("set_outputs", &Graph::set_outputs)
      .def("run", &Graph::run, py::arg("inputs"), py::arg("into") = std::vector<std::optional<at::Tensor>>{})
      .def_property_readonly("node_count", [](const Graph& g) { return tp_graph_node_count(g.g); })
      .def_property_readonly("random_count", [](const Graph& g) { return tp_graph_random_count(g.g); });
  m.def("storage_buffer_dtype", [](const at::Tensor& t) {
    tp_storage_t* s = storage_of(t);
    return s && s->buffer ? std::string(tp_dtype_name(s->dtype)) : std::string();
  });
}
