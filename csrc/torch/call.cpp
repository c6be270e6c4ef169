// The description of an ATen call for the C op table: a call's IValues become tp_eager_arg_t
// arguments (tpu tensors as views, CPU 0-d tensors and Scalars as program scalars, ints, lists
// and strings as attributes). The table kernel (kernel.cpp) and the graph object (graph.cpp) use
// it. See glue.h.
#include <ATen/core/function_schema.h>

#include <cstring>

#include "torch/glue.h"

namespace tp_glue {

bool cpu_scalar_tensor(const at::Tensor& t) { return t.device().is_cpu() && t.dim() == 0; }

void layout_flags(const at::Tensor& t, tp_op_arg_t* a) {
  a->contiguous = t.is_contiguous();
  a->channels_last = !a->contiguous &&
                     ((t.dim() == 4 && t.is_contiguous(at::MemoryFormat::ChannelsLast)) ||
                      (t.dim() == 5 && t.is_contiguous(at::MemoryFormat::ChannelsLast3d)));
}

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
      layout_flags(t, &a->arg);
      a->param = t.requires_grad() && (t.is_leaf() || (t.is_view() && t._base().is_leaf()));
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

}  // namespace tp_glue
