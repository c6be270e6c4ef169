/* What every op family shares: shape arithmetic (dims, broadcasting, reduced shapes), PyTorch's
 * type promotion (result_type), the complex-support check both executors make, and the casts
 * emitters end with. Declared in op.h (what the executors use too) and common.h. Depends on
 * base/ and hlo/ only. */
#include <stdio.h>
#include <string.h>

#include "ops/common.h"
#include "ops/emit.h"

int tp_norm_dim(int64_t d, int nd) {
  int64_t lim = nd ? nd : 1; /* a 0-dim tensor accepts dim 0 and -1 */
  if (d < -lim || d >= lim) return -1;
  return (int)(d < 0 ? d + lim : d);
}

tp_status_t *tp_dim_error(const tp_op_def_t *op, int64_t d, int nd) {
  return tp_make_status(TP_OUT_OF_RANGE,
                        "%s: Dimension out of range (expected to be in range of [%d, %d], but got "
                        "%lld)", op->name, -(nd ? nd : 1), (nd ? nd : 1) - 1, (long long)d);
}

void tp_meta_reduce(const tp_meta_t *x, const bool *mask, bool keep, tp_meta_t *out) {
  int n = 0;
  for (int i = 0; i < x->ndim; i++)
    if (!mask[i]) out->sizes[n++] = x->sizes[i];
    else if (keep) out->sizes[n++] = 1;
  out->ndim = n;
}

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

void tp_format_ints(char *buf, size_t n, const int64_t *v, int count) {
  size_t off = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < count && off < n; i++)
    off += (size_t)snprintf(buf + off, n - off, "%s%lld", i ? ", " : "", (long long)v[i]);
  if (off < n) snprintf(buf + off, n - off, "]");
}

tp_status_t *tp_broadcast_shapes(const tp_meta_t *a, const tp_meta_t *b, tp_meta_t *out) {
  int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
  tp_meta_t r = *a; /* |out| may alias |a| or |b| */
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
    r.sizes[i] = sa == 1 ? sb : sa;
  }
  r.ndim = nd;
  *out = r;
  return NULL;
}

static int category(tp_dtype_t t) {
  return t == TP_DTYPE_BOOL ? 0 : tp_dtype_is_complex(t) ? 3 : tp_dtype_is_float(t) ? 2 : 1;
}

/* c10's combine_categories: a lower-priority group only matters if its category is higher. */
static tp_dtype_t combine(tp_dtype_t higher, tp_dtype_t lower) {
  if (higher == TP_DTYPE_INVALID) return lower;
  if (lower == TP_DTYPE_INVALID) return higher;
  if (tp_dtype_is_complex(higher)) return higher;
  if (tp_dtype_is_complex(lower)) /* a float keeps its width: float32 -> complex64 */
    return tp_dtype_is_float(higher) ? tp_dtype_to_complex(higher) : lower;
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
      zero = promote_opt(zero, a->meta.dtype); /* 0-dim tensors, host ones included */
    } else if (a->kind == TP_ARG_SCALAR) {
      /* Python numbers and Scalar arguments promote by category, at the default types. */
      int c = category(a->meta.dtype);
      wrapped = promote_opt(wrapped, c == 3 ? TP_DTYPE_C64 : c == 2 ? TP_DTYPE_F32
                                     : c == 1 ? TP_DTYPE_I64 : TP_DTYPE_BOOL);
    }
  }
  return combine(dim, combine(zero, wrapped));
}

tp_status_t *tp_op_check_complex(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                                 const tp_meta_t *outs, int n_outs) {
  bool any = false, bad = false;
  for (int i = 0; i < n_args; i++)
    if (args[i].kind == TP_ARG_TENSOR || args[i].kind == TP_ARG_SCALAR) {
      any = any || tp_dtype_is_complex(args[i].meta.dtype);
      bad = bad || args[i].meta.dtype == TP_DTYPE_INVALID;
    }
  for (int k = 0; k < n_outs; k++) {
    any = any || tp_dtype_is_complex(outs[k].dtype);
    bad = bad || outs[k].dtype == TP_DTYPE_INVALID;
  }
  if (bad) return tp_make_status(TP_UNIMPLEMENTED, "%s: a type the tpu has no form for", op->name);
  if (any && !(op->flags & TP_OPF_COMPLEX))
    return tp_make_status(TP_UNIMPLEMENTED, "%s: no complex lowering", op->name);
  return NULL;
}

tp_status_t *tp_op_check_text(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args) {
  for (int i = 0; i < n_args; i++)
    if (args[i].kind == TP_ARG_STR && args[i].text && strlen(args[i].text) >= sizeof(args[i].s))
      return tp_make_status(TP_UNIMPLEMENTED, "%s: a string argument longer than %zu bytes",
                            op->name, sizeof(args[i].s) - 1);
  return NULL;
}

tp_dtype_t tp_math_dtype(tp_dtype_t t) {
  return t == TP_DTYPE_BF16 || t == TP_DTYPE_F16 ? TP_DTYPE_F32 : t;
}

tp_hlo_value_t tp_emit_cast_to(tp_hlo_builder_t *b, tp_hlo_value_t v, const tp_meta_t *meta) {
  v = tp_hlo_convert(b, v, meta->dtype);
  return tp_hlo_broadcast_to(b, v, meta->ndim, meta->sizes);
}

tp_hlo_value_t tp_emit_cast_shape(tp_hlo_builder_t *b, tp_hlo_value_t v, tp_dtype_t dtype,
                                  const tp_meta_t *shape) {
  tp_meta_t m = *shape;
  m.dtype = dtype;
  return tp_emit_cast_to(b, v, &m);
}

/* Sign bit of a float: the bits read as a signed integer are negative. */
tp_hlo_value_t tp_emit_signbit(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  if (!tp_dtype_is_float(x.dtype)) {
    if (tp_dtype_is_unsigned(x.dtype))
      return tp_hlo_convert(b, tp_k(b, 0, x), TP_DTYPE_BOOL);
    return tp_hlo_compare(b, TP_CMP_LT, x, tp_k(b, 0, x));
  }
  tp_dtype_t it = x.dtype == TP_DTYPE_F64 ? TP_DTYPE_I64 : x.dtype == TP_DTYPE_F32 ? TP_DTYPE_I32
                                                                                 : TP_DTYPE_I16;
  tp_hlo_value_t bits = tp_hlo_bitcast(b, x, it, x.ndim, x.dims);
  return tp_hlo_compare(b, TP_CMP_LT, bits, tp_k(b, 0, bits));
}

tp_status_t *tp_infer_like_self(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                                tp_meta_t *out, int *n_out) {
  if (!tp_arg_is_tensor(args, n_args, 0))
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: self must be a tensor", op->name);
  *n_out = 1;
  out[0] = args[0].meta;
  return NULL;
}

tp_hlo_value_t tp_emit_linear_index(tp_hlo_builder_t *b, tp_hlo_value_t idx, int d, int ndim,
                                    const int64_t *shape) {
  tp_hlo_value_t lin = tp_k(b, 0, idx);
  int64_t stride = 1;
  for (int j = ndim - 1; j >= 0; j--) {
    tp_hlo_value_t c = j == d ? idx : tp_hlo_iota(b, TP_DTYPE_I64, idx.ndim, idx.dims, j);
    lin = tp_add(b, lin, tp_mul(b, c, tp_k(b, (double)stride, c)));
    stride *= shape[j];
  }
  return lin;
}
