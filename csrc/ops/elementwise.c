/* Elementwise family: unary and binary math, copy, fill, relu and its backward, plus the shared
 * broadcasting and type-promotion helpers. Half types compute in f32 and round once, as PyTorch's
 * CPU kernels do. */
#include <stdio.h>
#include <string.h>

#include "ops/families.h"

int64_t tp_meta_numel(const tp_meta_t *m) {
  int64_t n = 1;
  for (int i = 0; i < m->ndim; i++) n *= m->sizes[i];
  return n;
}

static void fmt_sizes(char *buf, size_t n, const tp_meta_t *m) {
  size_t off = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < m->ndim && off < n; i++)
    off += (size_t)snprintf(buf + off, n - off, "%s%lld", i ? ", " : "", (long long)m->sizes[i]);
  if (off < n) snprintf(buf + off, n - off, "]");
}

tp_status_t *tp_broadcast_shapes(const tp_meta_t *a, const tp_meta_t *b, tp_meta_t *out) {
  int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
  out->ndim = nd;
  for (int i = 0; i < nd; i++) {
    int ia = i - (nd - a->ndim), ib = i - (nd - b->ndim);
    int64_t sa = ia >= 0 ? a->sizes[ia] : 1, sb = ib >= 0 ? b->sizes[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      char x[256], y[256];
      fmt_sizes(x, sizeof(x), a);
      fmt_sizes(y, sizeof(y), b);
      return tp_make_status(TP_INVALID_ARGUMENT,
                            "The size of tensor a (%lld) must match the size of tensor b (%lld) "
                            "at non-singleton dimension %d (shapes %s and %s)",
                            (long long)sa, (long long)sb, i, x, y);
    }
    out->sizes[i] = sa == 1 ? sb : sa;
  }
  return NULL;
}

static int category(tp_dtype_t t) {
  return t == TP_DTYPE_BOOL ? 0 : tp_dtype_is_float(t) ? 2 : 1;
}

/* c10's combine_categories: a lower-priority group only matters if its category is higher. */
static tp_dtype_t combine(tp_dtype_t higher, tp_dtype_t lower) {
  if (higher == TP_DTYPE_INVALID) return lower;
  if (lower == TP_DTYPE_INVALID) return higher;
  if (tp_dtype_is_float(higher)) return higher;
  if (higher == TP_DTYPE_BOOL || tp_dtype_is_float(lower)) return tp_dtype_promote(higher, lower);
  return higher;
}

static tp_dtype_t promote_opt(tp_dtype_t a, tp_dtype_t b) {
  if (a == TP_DTYPE_INVALID) return b;
  return tp_dtype_promote(a, b);
}

tp_dtype_t tp_result_type(const tp_op_arg_t *args, int n) {
  tp_dtype_t dim = TP_DTYPE_INVALID, zero = TP_DTYPE_INVALID, wrapped = TP_DTYPE_INVALID;
  for (int i = 0; i < n; i++) {
    const tp_op_arg_t *a = &args[i];
    if (a->kind == TP_ARG_TENSOR && a->meta.ndim > 0) {
      dim = promote_opt(dim, a->meta.dtype);
    } else if (a->kind == TP_ARG_TENSOR || (a->kind == TP_ARG_SCALAR && !a->wrapped)) {
      /* 0-dim tensors; an explicit Scalar argument promotes like a wrapped number. */
      if (a->kind == TP_ARG_SCALAR) {
        int c = category(a->meta.dtype);
        wrapped = promote_opt(wrapped, c == 2 ? TP_DTYPE_F32 : c == 1 ? TP_DTYPE_I64 : TP_DTYPE_BOOL);
      } else {
        zero = promote_opt(zero, a->meta.dtype);
      }
    } else if (a->kind == TP_ARG_SCALAR) {
      int c = category(a->meta.dtype);
      wrapped = promote_opt(wrapped, c == 2 ? TP_DTYPE_F32 : c == 1 ? TP_DTYPE_I64 : TP_DTYPE_BOOL);
    }
  }
  return combine(dim, combine(zero, wrapped));
}

static tp_dtype_t math_dtype(tp_dtype_t t) {
  return t == TP_DTYPE_BF16 || t == TP_DTYPE_F16 ? TP_DTYPE_F32 : t;
}

tp_hlo_value_t tp_emit_cast_to(tp_hlo_builder_t *b, tp_hlo_value_t v, const tp_meta_t *meta) {
  v = tp_hlo_convert(b, v, meta->dtype);
  return tp_hlo_broadcast_to(b, v, meta->ndim, meta->sizes);
}

/* |v| converted to |dtype| and broadcast to |shape|'s sizes. */
static tp_hlo_value_t cast_shape(tp_hlo_builder_t *b, tp_hlo_value_t v, tp_dtype_t dtype,
                                 const tp_meta_t *shape) {
  tp_meta_t m = *shape;
  m.dtype = dtype;
  return tp_emit_cast_to(b, v, &m);
}

static tp_status_t *need_tensor(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                                int i) {
  if (i >= n_args || args[i].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: argument %d must be a tensor", op->name, i);
  return NULL;
}

tp_status_t *tp_infer_unary(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                            int *n_out) {
  TP_RETURN_IF_ERROR(need_tensor(op, args, n_args, 0));
  out[0] = args[0].meta;
  if ((op->flags & TP_OPF_FLOAT_RESULT) && !tp_dtype_is_float(out[0].dtype))
    out[0].dtype = TP_DTYPE_F32;
  if ((op->flags & TP_OPF_NO_BOOL) && args[0].meta.dtype == TP_DTYPE_BOOL)
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "%s: not supported on bool tensors; use logical_not or ~ instead",
                          op->name);
  *n_out = 1;
  return NULL;
}

void tp_emit_unary(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                   int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                   tp_hlo_value_t *out) {
  (void)args, (void)n_args;
  tp_dtype_t md = math_dtype(out_meta->dtype);
  tp_hlo_value_t x = tp_hlo_convert(b, in[0], md);
  out[0] = tp_hlo_convert(b, tp_hlo_unary(b, (tp_hlo_unary_t)op->code, x), out_meta->dtype);
}

tp_status_t *tp_infer_binary(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                             int *n_out) {
  TP_RETURN_IF_ERROR(need_tensor(op, args, n_args, 0));
  if (n_args < 2 || (args[1].kind != TP_ARG_TENSOR && args[1].kind != TP_ARG_SCALAR))
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: second argument must be a tensor or number",
                          op->name);
  tp_meta_t shape = args[0].meta;
  if (args[1].kind == TP_ARG_TENSOR)
    TP_RETURN_IF_ERROR(tp_broadcast_shapes(&args[0].meta, &args[1].meta, &shape));
  tp_dtype_t rt = tp_result_type(args, 2);
  if ((op->flags & TP_OPF_NO_BOOL) && args[0].meta.dtype == TP_DTYPE_BOOL &&
      args[1].meta.dtype == TP_DTYPE_BOOL)
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "Subtraction, the `-` operator, with two bool tensors is not supported. "
                          "Use the `^` or `logical_xor()` operator instead.");
  if ((op->flags & TP_OPF_FLOAT_RESULT) && !tp_dtype_is_float(rt)) rt = TP_DTYPE_F32;
  if ((op->flags & TP_OPF_ALPHA) && n_args > 2 && args[2].kind == TP_ARG_SCALAR) {
    if (!tp_dtype_is_float(rt) && tp_dtype_is_float(args[2].meta.dtype))
      return tp_make_status(TP_INVALID_ARGUMENT,
                            "For integral input tensors, argument alpha must not be a floating "
                            "point number.");
    args[2].scalar_dtype = math_dtype(rt);
  }
  if (args[1].kind == TP_ARG_SCALAR) args[1].scalar_dtype = math_dtype(rt);
  shape.dtype = rt;
  out[0] = shape;
  *n_out = 1;
  return NULL;
}

void tp_emit_binary(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                    int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                    tp_hlo_value_t *out) {
  tp_dtype_t md = math_dtype(out_meta->dtype);
  tp_hlo_value_t x = cast_shape(b, in[0], md, out_meta);
  tp_hlo_value_t y = cast_shape(b, in[1], md, out_meta);
  if ((op->flags & TP_OPF_ALPHA) && n_args > 2 && args[2].kind == TP_ARG_SCALAR)
    y = tp_hlo_binary(b, TP_HLO_MUL, y, cast_shape(b, in[2], md, out_meta));
  tp_hlo_binary_t code = (tp_hlo_binary_t)op->code;
  if (md == TP_DTYPE_BOOL && code == TP_HLO_ADD) code = TP_HLO_OR;
  if (md == TP_DTYPE_BOOL && code == TP_HLO_MUL) code = TP_HLO_AND;
  out[0] = tp_hlo_convert(b, tp_hlo_binary(b, code, x, y), out_meta->dtype);
}

tp_status_t *tp_infer_copy(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                           int *n_out) {
  TP_RETURN_IF_ERROR(need_tensor(op, args, n_args, 0));
  TP_RETURN_IF_ERROR(need_tensor(op, args, n_args, 1));
  tp_meta_t shape;
  TP_RETURN_IF_ERROR(tp_broadcast_shapes(&args[0].meta, &args[1].meta, &shape));
  if (shape.ndim != args[0].meta.ndim ||
      memcmp(shape.sizes, args[0].meta.sizes, sizeof(int64_t) * (size_t)shape.ndim) != 0)
    return tp_make_status(TP_INVALID_ARGUMENT, "copy: source of shape %d-d cannot be broadcast "
                          "to the destination's shape", args[1].meta.ndim);
  out[0] = args[0].meta;
  *n_out = 1;
  return NULL;
}

void tp_emit_copy(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                  const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  (void)op, (void)args, (void)n_args;
  out[0] = tp_emit_cast_to(b, in[1], out_meta);
}

tp_status_t *tp_infer_fill(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                           int *n_out) {
  TP_RETURN_IF_ERROR(need_tensor(op, args, n_args, 0));
  if (n_args < 2 || args[1].kind != TP_ARG_SCALAR)
    return tp_make_status(TP_INVALID_ARGUMENT, "fill: value must be a number");
  args[1].scalar_dtype = args[0].meta.dtype;
  out[0] = args[0].meta;
  *n_out = 1;
  return NULL;
}

void tp_emit_fill(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                  const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  (void)op, (void)args, (void)n_args;
  out[0] = tp_emit_cast_to(b, in[1], out_meta);
}

void tp_emit_relu(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                  const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  (void)op, (void)args, (void)n_args;
  tp_hlo_value_t zero = cast_shape(b, tp_hlo_constant(b, in[0].dtype, 0), in[0].dtype, out_meta);
  /* select keeps NaN (max would too, but select matches PyTorch's x > 0 ? x : 0 exactly). */
  tp_hlo_value_t pos = tp_hlo_compare(b, TP_CMP_GT, in[0], zero);
  tp_hlo_value_t nan = tp_hlo_compare(b, TP_CMP_NE, in[0], in[0]);
  out[0] = tp_hlo_select(b, tp_hlo_binary(b, TP_HLO_OR, pos, nan), in[0], zero);
}

tp_status_t *tp_infer_threshold_backward(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                         tp_meta_t *out, int *n_out) {
  TP_RETURN_IF_ERROR(need_tensor(op, args, n_args, 0));
  TP_RETURN_IF_ERROR(need_tensor(op, args, n_args, 1));
  if (n_args < 3 || args[2].kind != TP_ARG_SCALAR)
    return tp_make_status(TP_INVALID_ARGUMENT, "threshold_backward: threshold must be a number");
  tp_meta_t shape;
  TP_RETURN_IF_ERROR(tp_broadcast_shapes(&args[0].meta, &args[1].meta, &shape));
  shape.dtype = tp_result_type(args, 2);
  args[2].scalar_dtype = math_dtype(shape.dtype);
  out[0] = shape;
  *n_out = 1;
  return NULL;
}

void tp_emit_threshold_backward(const tp_op_def_t *op, tp_hlo_builder_t *b,
                                const tp_op_arg_t *args, int n_args, const tp_hlo_value_t *in,
                                const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  (void)op, (void)args, (void)n_args;
  tp_dtype_t md = math_dtype(out_meta->dtype);
  tp_hlo_value_t g = cast_shape(b, in[0], md, out_meta);
  tp_hlo_value_t x = cast_shape(b, in[1], md, out_meta);
  tp_hlo_value_t t = cast_shape(b, in[2], md, out_meta);
  tp_hlo_value_t zero = cast_shape(b, tp_hlo_constant(b, md, 0), md, out_meta);
  tp_hlo_value_t keep = tp_hlo_compare(b, TP_CMP_GT, x, t);
  out[0] = tp_hlo_convert(b, tp_hlo_select(b, keep, g, zero), out_meta->dtype);
}

void tp_emit_zero(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                  const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  (void)op, (void)args, (void)n_args, (void)in;
  out[0] = tp_emit_cast_to(b, tp_hlo_constant(b, out_meta->dtype, 0), out_meta);
}
