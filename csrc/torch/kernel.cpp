// The kernel interface: the one boxed kernel that runs an ATen call as a call of the C op table
// (its outputs: fresh, in-place or out=, with PyTorch's checks), its registration for every row,
// and torch.autocast("tpu")'s op policy. The call's description is call.cpp's, the CPU fallback
// fallback.cpp's. See glue.h.
#include <ATen/Context.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/autocast_mode.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cstring>
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

// "aminmax" of aten::aminmax.out: the name PyTorch's messages give an op.
std::string base_name(const c10::OperatorHandle& op) {
  const std::string& n = op.schema().operator_name().name;
  return n.rfind("aten::", 0) == 0 ? n.substr(6) : n;
}

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

// ---- the table kernel ----

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

// The tpu device of a call's first tensor argument, else the current one: where fresh outputs go.
static c10::DeviceIndex args_device(const tp_eager_arg_t* eargs, int ne) {
  for (int i = 0; i < ne; i++)
    if (eargs[i].arg.kind == TP_ARG_TENSOR)
      return static_cast<c10::DeviceIndex>(tp_storage_device(eargs[i].view.storage));
  return g_current_device;
}

// Appends an argument of |kind| and value |i| (a random key, a count); false when there's no room.
static bool append_arg(tp_eager_arg_t* eargs, int* ne, tp_arg_kind_t kind, int64_t i) {
  if (*ne >= TP_MAX_ARGS) return false;
  std::memset(&eargs[*ne], 0, sizeof(eargs[0]));
  eargs[*ne].arg.kind = kind;
  if (kind == TP_ARG_SCALAR) eargs[*ne].arg.meta.dtype = TP_DTYPE_I64;
  eargs[(*ne)++].arg.i = i;
  return true;
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
    const unsigned flags = tp_op_table[op_].flags;
    if (flags & TP_OPF_LIST_CHUNKS) chunk_long_lists(op_, stack, n_args, n_in);
    auto args = torch::jit::last(*stack, n_args);
    std::call_once(roles_once_, [&] { roles_ = arg_roles(schema); });
    if (flags & TP_OPF_LIST_ZIP) return run_zipped(op_, roles_, h, stack);
    Call c;
    if (!describe(args, n_in, c)) return cpu_fallback(h, stack);
    tp_status_t* st = tp_eager_infer(op_, c.eargs, c.ne, c.metas, &c.n_out);
    if (st && tp_status_code(st) == TP_UNIMPLEMENTED) {  // no native lowering for this call
      tp_status_free(st);
      return cpu_fallback(h, stack);
    }
    check(st);
    const c10::Device dev(DeviceType::PrivateUse1, args_device(c.eargs, c.ne));
    const int64_t rows = flags & TP_OPF_COUNTED
                             ? count_pass(op_, c.eargs, c.ne, c.metas, &c.n_out, dev,
                                          variant_ == TP_VARIANT_OUT)
                             : -1;
    std::vector<at::Tensor> outs;
    if (!outputs(h, args, n_in, dev, c, outs)) return cpu_fallback(h, stack);
    tp_view_t views[TP_MAX_OUTS];
    for (int k = 0; k < c.n_out; k++) {
      TORCH_CHECK(outs[k].device().type() == DeviceType::PrivateUse1, op_name(h),
                  ": output must be a tpu tensor, got ", outs[k].device());
      views[k] = view_or_throw(outs[k], schema.name().c_str());
    }
    check(run_on_device(op_, c.eargs, c.ne, c.metas, views, c.n_out));
    if (rows >= 0)  // the count's rows of outputs padded to its capacity
      for (int k = 0; k < c.n_out; k++) outs[k] = outs[k].narrow(0, 0, rows);
    push_results(schema, args, c, outs, stack);
  }

 private:
  // A call as the C op table takes it.
  struct Call {
    tp_eager_arg_t eargs[TP_MAX_ARGS];
    at::Tensor tensors[TP_MAX_ARGS];  // the tpu tensor behind each TENSOR argument
    tp_meta_t metas[TP_MAX_OUTS];
    int ne = 0, n_out = 0;
  };

  // The call's arguments, with the random key (TP_OPF_RANDOM) or the count argument
  // (TP_OPF_COUNTED, op.h) the row takes last; false: not describable natively.
  bool describe(c10::ArrayRef<c10::IValue> args, size_t n_in, Call& c) {
    std::optional<at::Generator> generator;
    if (!convert_call(roles_, args, n_in, false, c.eargs, c.tensors, &c.ne, &generator))
      return false;
    const unsigned flags = tp_op_table[op_].flags;
    if ((flags & TP_OPF_RANDOM) &&
        !append_arg(c.eargs, &c.ne, TP_ARG_SCALAR,
                    next_random_key(generator, args_device(c.eargs, c.ne))))
      return false;
    if ((flags & TP_OPF_COUNTED) && !append_arg(c.eargs, &c.ne, TP_ARG_INT, TP_COUNT_UNKNOWN))
      return false;
    return true;
  }

  // The tensors the call writes: the returned ones (fresh, self for in-place, or the out=
  // tensors), then those the op writes into its own arguments (metas[k].writes_arg), which are
  // not returned. False: the call is CPU's to run (an in-place result shaped unlike self).
  bool outputs(const c10::OperatorHandle& h, c10::ArrayRef<c10::IValue> args, size_t n_in,
               c10::Device dev, Call& c, std::vector<at::Tensor>& outs) {
    const unsigned flags = tp_op_table[op_].flags;
    size_t next_out = n_in;
    for (int k = 0; k < c.n_out; k++) {
      tp_meta_t& m = c.metas[k];
      if (m.writes_arg) {
        int a = m.writes_arg - 1;
        TORCH_CHECK(a < c.ne && c.tensors[a].defined(), op_name(h), ": bad in-place argument");
        outs.push_back(c.tensors[a]);
      } else if (variant_ == TP_VARIANT_FUNCTIONAL) {
        // Laid out as CPU's kernel lays it out (exec/layout.h): channels-last stays so.
        c10::DeviceGuard guard(dev);
        const c10::IntArrayRef sizes(m.sizes, m.ndim);
        const auto options = at::TensorOptions().dtype(from_tp(m.dtype)).device(dev);
        int64_t strides[TP_MAX_DIMS];
        outs.push_back(tp_exec_output_strides(op_, c.eargs, c.ne, &m, strides)
                           ? at::empty_strided(sizes, c10::IntArrayRef(strides, m.ndim), options)
                           : at::empty(sizes, options));
      } else if (variant_ == TP_VARIANT_INPLACE) {
        TORCH_CHECK(k == 0, op_name(h), ": an in-place op returns one tensor");
        // A result shaped unlike self (a broadcast self): PyTorch's in-place kernel raises, or
        // resizes self (addbmm_); CPU's kernel does whichever PyTorch does.
        if (args[0].toTensor().sizes() != c10::IntArrayRef(m.sizes, m.ndim)) return false;
        outs.push_back(args[0].toTensor());
        at::assert_no_internal_overlap(outs.back());
        check_overlap(outs.back(), args, n_in, flags, true);
      } else {
        TORCH_CHECK(next_out < args.size(), op_name(h), ": expected ", c.n_out, " outputs");
        outs.push_back(out_tensor(h, args, n_in, next_out++, c, m));
      }
    }
    if (variant_ == TP_VARIANT_OUT)  // every out= tensor passed its checks: now resize them
      for (int k = 0; k < c.n_out; k++)
        if (!c.metas[k].writes_arg)
          at::native::resize_output(outs[k], c10::IntArrayRef(c.metas[k].sizes, c.metas[k].ndim));
    return true;
  }

  // Out= argument |j| for result |m|, after PyTorch's checks, all made before any out= tensor is
  // resized or written.
  at::Tensor out_tensor(const c10::OperatorHandle& h, c10::ArrayRef<c10::IValue> args,
                        size_t n_in, size_t j, const Call& c, tp_meta_t& m) {
    const auto& schema = h.schema();
    const unsigned flags = tp_op_table[op_].flags;
    at::Tensor o = args[j].toTensor();
    if (flags & TP_OPF_OUT_DTYPE) m.dtype = to_tp(o.scalar_type());
    at::assert_no_internal_overlap(o);
    check_out_dtype(o, m.dtype, flags);
    check_overlap(o, args, n_in, flags, false);
    if (flags & TP_OPF_OUTS_DISJOINT)
      for (size_t i = n_in; i < j; i++) {
        const auto st = at::get_overlap_status(args[i].toTensor(), o);
        TORCH_CHECK_VALUE(st != at::MemOverlapStatus::Full && st != at::MemOverlapStatus::Partial,
                          base_name(h), "(): the `", schema.arguments()[i].name(), "` and `",
                          schema.arguments()[j].name(), "` out= tensors must not overlap.");
      }
    c10::IntArrayRef shape(m.sizes, m.ndim);
    // An out= tensor sharing storage with an input cannot be resized (the input's view would
    // lose its storage): PyTorch treats it as in-place and refuses, and so do we.
    if (o.sizes() != shape)
      for (int i = 0; i < c.ne; i++)
        TORCH_CHECK(!c.tensors[i].defined() || !c.tensors[i].storage().is_alias_of(o.storage()),
                    "output with shape ", o.sizes(), " doesn't match the broadcast shape ", shape);
    return o;
  }

  // Replaces the call's arguments on |stack| with what the schema returns.
  void push_results(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args,
                    const Call& c, std::vector<at::Tensor>& outs, torch::jit::Stack* stack) {
    std::vector<c10::IValue> ret;  // a mutating op's returned arguments
    if (variant_ == TP_VARIANT_FUNCTIONAL) ret = returned_args(schema, args);
    torch::jit::drop(*stack, schema.arguments().size());
    if (!ret.empty()) {
      for (c10::IValue& v : ret) torch::jit::push(*stack, std::move(v));
      return;
    }
    // An op returning a list (torch_pjrt::call_module) returns its outputs as one.
    if (schema.returns().size() == 1 && schema.returns()[0].type()->kind() == c10::TypeKind::ListType) {
      std::vector<at::Tensor> list(outs.begin(), outs.begin() + c.n_out);
      torch::jit::push(*stack, std::move(list));
      return;
    }
    // An op returning a bool (equal) computes it as a 0-d tensor; the caller gets its value.
    if (schema.returns().size() == 1 && schema.returns()[0].type()->kind() == c10::TypeKind::BoolType) {
      torch::jit::push(*stack, outs[0].item<bool>());
      return;
    }
    for (int k = 0; k < c.n_out; k++)
      if (!c.metas[k].writes_arg) torch::jit::push(*stack, outs[k]);
  }

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
}

// torchvision's operators, defined when torchvision loads its library (an implementation may be
// registered before its definition); nothing happens where torchvision is not installed.
TORCH_LIBRARY_IMPL(torchvision, PrivateUse1, m) {
  for (int i = 0; i < tp_op_count; i++)
    if (const char* name = in_library(tp_op_table[i], "torchvision"))
      m.impl(name, torch::CppFunction::makeFromBoxedFunctor(
                       std::make_unique<TableKernel>(i, TP_VARIANT_FUNCTIONAL)));
}

// This package's own operators. call_module runs a registered StableHLO module (hlo/module.h,
// torch_pjrt.kernels); its fake implementation, for tracing, is Python's (kernels.py).
TORCH_LIBRARY(torch_pjrt, m) {
  m.def("call_module(Tensor[] inputs, int module) -> Tensor[]");
}

TORCH_LIBRARY_IMPL(torch_pjrt, PrivateUse1, m) {
  for (int i = 0; i < tp_op_count; i++)
    if (const char* name = in_library(tp_op_table[i], "torch_pjrt"))
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

}  // namespace tp_glue
