// What the glue's files share: errors, dtypes and views, the device state, the generator, the CPU
// fallback and the description of a call for the C op table. The glue is the only C++ in the
// project: it turns PyTorch's interfaces into calls of the C core and holds no op logic. One file
// per PyTorch interface: device.cpp (allocator, guard, generator, hooks), kernel.cpp (the table
// kernel, autocast), call.cpp (a call described for the op table), fallback.cpp (the CPU
// fallback; sparse and nested tensors), copy.cpp (copies, views, storage ops), graph.cpp (the
// graph object of the torch.compile backend), sdpa.cpp (the SDPA kernel choice), distributed/
// (the c10d backend: distributed.h), module.cpp (torch_pjrt._C).
#ifndef TP_TORCH_GLUE_H_
#define TP_TORCH_GLUE_H_

#include <ATen/ATen.h>
#include <ATen/core/stack.h>

#include <optional>
#include <string>
#include <vector>

extern "C" {
#include "exec/eager.h"
#include "exec/exec.h"
#include "exec/layout.h"
}

namespace tp_glue {

using c10::DeviceType;

// ---- errors (device.cpp) ----

// Throws |st| (taken) as the exception PyTorch's own kernels raise for the same kind of error,
// chosen by its code: RESOURCE_EXHAUSTED -> OutOfMemoryError, UNIMPLEMENTED ->
// NotImplementedError, OUT_OF_RANGE -> IndexError, anything else -> RuntimeError.
[[noreturn]] void throw_status(tp_status_t* st);
inline void check(tp_status_t* st) {
  if (st) throw_status(st);
}
// Why the device could not be initialized (set from Python).
extern std::string g_init_error;
// The process's client; throws when the device is unavailable.
tp_client_t* client();

// ---- the device's trace (runtime/trace.h; read by profiler.cpp) ----

// One event of the device's trace spanning a scope; nothing when no trace runs.
struct TracedScope {
  tp_trace_event_t* event;
  TracedScope(tp_trace_kind_t kind, int device, const char* name)
      : event(tp_trace_on() ? tp_trace_begin(kind, device, name) : nullptr) {}
  ~TracedScope() { tp_trace_end(event); }
  TracedScope(const TracedScope&) = delete;
  TracedScope& operator=(const TracedScope&) = delete;
};

// ---- storages (copy.cpp) ----

// Resizes a tpu storage to |nbytes|, keeping the contents that fit.
void resize_storage(const c10::Storage& storage, size_t nbytes);

// ---- dtypes and views (device.cpp) ----

tp_dtype_t to_tp(c10::ScalarType t);  // TP_DTYPE_INVALID when the core has no such type
c10::ScalarType from_tp(tp_dtype_t t);
// The storage record behind a tpu tensor (borrowed, valid while the tensor's storage lives),
// also for a tensor PyTorch made around a tpu address (from_blob); |out_byte_offset|, if given,
// is where the tensor's first element lies in the record, in bytes. NULL for no tpu storage.
tp_storage_t* storage_of(const at::Tensor& t, int64_t* out_byte_offset = nullptr);
// Fills |v| from a tpu tensor; false when the tensor cannot be described (dtype, rank).
bool make_view(const at::Tensor& t, tp_view_t* v);
tp_view_t view_or_throw(const at::Tensor& t, const char* what);

// ---- device state, allocator, generator (device.cpp) ----

extern thread_local c10::DeviceIndex g_current_device;
c10::DeviceIndex device_count();
void check_device_index(c10::DeviceIndex d);
c10::Allocator& allocator();
// Pinned host memory (Tensor.pin_memory()): whether |p| lies in a pinned block, and, for a
// non_blocking copy from one, hands the block |read| (the copy's done-with-host event; taken):
// freeing the block waits for it. False (|read| not taken) when |p| is not pinned.
bool is_pinned(const void* p);
bool note_pinned_read(const void* p, PJRT_Event* read);
// Installs the allocator and the hooks (once; after the client exists).
void install_device();
const at::Generator& default_generator(c10::DeviceIndex d);
// The key of the next random call on |device|: from |given| (a tpu generator) or the device's
// default generator, whose offset advances by one per call.
int64_t next_random_key(const std::optional<at::Generator>& given, c10::DeviceIndex device);

// ---- the CPU fallback (fallback.cpp) and the description of a call (call.cpp) ----

std::string op_name(const c10::OperatorHandle& op);  // "add.Tensor"
// Strict mode, counting, one warning per op: every CPU fallback goes through here.
void note_fallback(const std::string& name);
void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);
void set_strict(bool on);
bool strict();
void set_fallback_warnings(bool on);
std::vector<std::pair<std::string, int64_t>> fallback_counts();
void reset_fallback_counts();
// The ops registered to the CPU fallback directly (see kCompositesOnCpu).
std::vector<std::string> cpu_routed_ops();

// How the table kernel treats each schema argument; computed once per kernel.
enum ArgRole : uint8_t { kValue, kScalar, kDtype, kGenerator, kIgnored };
std::vector<ArgRole> arg_roles(const c10::FunctionSchema& schema);
// Schema arguments [0, n_in) become C arguments one to one, except that a tensor list becomes
// its length (an INT) followed by its tensors. |meta_ok|: a meta tensor stands for a value of a
// graph being built. False: the call has no native description.
bool convert_call(const std::vector<ArgRole>& roles, c10::ArrayRef<c10::IValue> args, size_t n_in,
                  bool meta_ok, tp_eager_arg_t* eargs, at::Tensor* earg_tensor, int* n_eargs,
                  std::optional<at::Generator>* generator);
// Sets |a|'s contiguous and channels_last flags from |t|'s strides (what an emitter may choose
// its form by).
void layout_flags(const at::Tensor& t, tp_op_arg_t* a);

// ---- the graph object (graph.cpp) ----

int64_t graph_runs();
int64_t graph_compiles();
void reset_graph_stats();

}  // namespace tp_glue

#endif  // TP_TORCH_GLUE_H_
