/* Reduction family: sum, mean, prod, amax/amin, max/min (with indices), argmax/argmin, any/all,
 * var/std, logsumexp, vector norm, and the cumulative cumsum/cumprod; beside it equal (a bool the
 * glue reads back to the host) and logcumsumexp (a log-add-exp scan). Half types accumulate in
 * f32. Argument layouts differ per op; parse_reduction reads them by the row's code. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ops/families.h"

typedef struct {
  bool mask[TP_MAX_DIMS]; /* reduced dims */
  bool keepdim;
  tp_dtype_t dtype;       /* requested dtype= or TP_DTYPE_INVALID */
  int dim;                /* cumulative ops: the one dim */
  int correction_arg;     /* var/std: index of the correction Scalar, or -1 */
  int ord_arg;            /* norm: index of the ord Scalar */
} reduction_t;

/* Marks the dims named by |a| (INT, INTS or NONE = all) of a rank-|nd| tensor. */
static tp_status_t *mark_dims(const tp_op_arg_t *a, int nd, bool *mask) {
  bool all = !a || a->kind == TP_ARG_NONE || (a->kind == TP_ARG_INTS && a->n == 0);
  for (int i = 0; i < TP_MAX_DIMS; i++) mask[i] = all;
  if (all) return NULL;
  int n = a->kind == TP_ARG_INTS ? a->n : 1;
  int64_t lim = nd ? nd : 1;
  for (int k = 0; k < n; k++) {
    int64_t d = a->kind == TP_ARG_INTS ? a->ints[k] : a->i;
    if (d < -lim || d >= lim)
      return tp_make_status(TP_OUT_OF_RANGE,
                            "Dimension out of range (expected to be in range of [%lld, %lld], "
                            "but got %lld)", (long long)-lim, (long long)lim - 1, (long long)d);
    if (d < 0) d += lim;
    if (mask[d] && nd)
      return tp_make_status(TP_INVALID_ARGUMENT,
                            "dim %lld appears multiple times in the list of dims", (long long)d);
    mask[d] = true;
  }
  return NULL;
}

static const tp_op_arg_t *arg_at(const tp_op_arg_t *args, int n_args, int i) {
  return i < n_args ? &args[i] : NULL;
}

static bool flag_at(const tp_op_arg_t *args, int n_args, int i) {
  return i < n_args && args[i].kind == TP_ARG_INT && args[i].i;
}

static tp_dtype_t dtype_at(const tp_op_arg_t *args, int n_args, int i) {
  return i < n_args && args[i].kind == TP_ARG_INT ? (tp_dtype_t)args[i].i : TP_DTYPE_INVALID;
}

static bool code_is_cumext(int code) { return code == TP_R_CUMMAX || code == TP_R_CUMMIN; }

static tp_status_t *parse_reduction(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                                    reduction_t *r) {
  memset(r, 0, sizeof(*r));
  r->dtype = TP_DTYPE_INVALID;
  r->correction_arg = r->ord_arg = -1;
  int nd = args[0].meta.ndim;
  switch ((tp_reduce_t)op->code) {
    case TP_R_SUM: case TP_R_MEAN: case TP_R_PROD:
      if (n_args <= 2) { /* full form: (self, *, dtype) */
        r->dtype = dtype_at(args, n_args, 1);
        return mark_dims(NULL, nd, r->mask);
      }
      r->keepdim = flag_at(args, n_args, 2);
      r->dtype = dtype_at(args, n_args, 3);
      return mark_dims(&args[1], nd, r->mask);
    case TP_R_AMAX: case TP_R_AMIN: case TP_R_ARGMAX: case TP_R_ARGMIN: case TP_R_LOGSUMEXP:
    case TP_R_MAX: case TP_R_MIN: case TP_R_ANY: case TP_R_ALL:
      r->keepdim = flag_at(args, n_args, 2);
      return mark_dims(arg_at(args, n_args, 1), nd, r->mask);
    case TP_R_VAR: case TP_R_STD: case TP_R_VAR_MEAN: case TP_R_STD_MEAN:
      r->correction_arg = 2;
      r->keepdim = flag_at(args, n_args, 3);
      return mark_dims(arg_at(args, n_args, 1), nd, r->mask);
    case TP_R_NORM:
      r->ord_arg = 1;
      r->keepdim = flag_at(args, n_args, 3);
      r->dtype = dtype_at(args, n_args, 4);
      return mark_dims(arg_at(args, n_args, 2), nd, r->mask);
    case TP_R_AMINMAX:
      r->keepdim = flag_at(args, n_args, 2);
      return mark_dims(arg_at(args, n_args, 1), nd, r->mask);
    case TP_R_NANSUM:
      r->keepdim = flag_at(args, n_args, 2);
      r->dtype = dtype_at(args, n_args, 3);
      return mark_dims(arg_at(args, n_args, 1), nd, r->mask);
    case TP_R_COUNT_NONZERO:
      return mark_dims(arg_at(args, n_args, 1), nd, r->mask);
    case TP_R_TRACE:
      return mark_dims(NULL, nd, r->mask);
    case TP_R_CUMSUM: case TP_R_CUMPROD: case TP_R_CUMMAX: case TP_R_CUMMIN: {
      /* cumsum(self, dim, dtype); _cummax_helper(self, values, indices, dim) */
      bool helper = code_is_cumext(op->code);
      r->dtype = helper ? TP_DTYPE_INVALID : dtype_at(args, n_args, 2);
      if (helper && (n_args < 4 || args[3].kind != TP_ARG_INT))
        return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected (self, values, indices, dim)", op->name);
      TP_RETURN_IF_ERROR(mark_dims(&args[helper ? 3 : 1], nd, r->mask));
      for (int i = 0; i < nd; i++)
        if (r->mask[i]) r->dim = i;
      return NULL;
    }
  }
  return NULL;
}

bool tp_reduce_dims(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args, bool *mask) {
  reduction_t r;
  if (n_args < 1 || args[0].kind != TP_ARG_TENSOR) return false;
  tp_status_t *st = parse_reduction(op, args, n_args, &r);
  if (st) {
    tp_status_free(st);
    return false;
  }
  memcpy(mask, r.mask, sizeof(bool) * (size_t)args[0].meta.ndim);
  return true;
}

static bool cumulative(int code) {
  return code == TP_R_CUMSUM || code == TP_R_CUMPROD || code_is_cumext(code);
}
/* Ops with a second output of the first one's shape: (var, mean), (min, max), cummax's. */
static bool two_outputs(int code) {
  return code == TP_R_VAR_MEAN || code == TP_R_STD_MEAN || code == TP_R_AMINMAX ||
         code_is_cumext(code);
}
static bool with_indices(const tp_op_def_t *op, int n_args) {
  return (op->code == TP_R_MAX || op->code == TP_R_MIN) && n_args > 1;
}

/* The result dtype by the row's code into *out_dtype, or the error CPU raises for the input. */
static tp_status_t *result_dtype(const tp_op_def_t *op, const tp_op_arg_t *args,
                                 const reduction_t *r, tp_dtype_t *out_dtype) {
  const tp_meta_t *m = &args[0].meta;
  tp_dtype_t in = m->dtype, dt = in;
  switch ((tp_reduce_t)op->code) {
    case TP_R_TRACE:
      if (m->ndim != 2)
        return tp_make_status(TP_INVALID_ARGUMENT, "trace: expected a matrix, but got tensor with dim %d",
                              m->ndim);
      if (in == TP_DTYPE_BOOL) return tp_make_status(TP_UNIMPLEMENTED, "trace of bool"); /* CPU raises */
      dt = tp_dtype_is_float(in) ? in : TP_DTYPE_I64;
      break;
    case TP_R_COUNT_NONZERO: dt = TP_DTYPE_I64; break;
    case TP_R_VAR_MEAN: case TP_R_STD_MEAN:
      if (!tp_dtype_is_float(in))
        return tp_make_status(TP_INVALID_ARGUMENT, "%s only support floating point and complex dtypes",
                              op->code == TP_R_VAR_MEAN ? "var_mean" : "std_mean");
      break;
    case TP_R_AMINMAX:
      for (int i = 0; i < m->ndim; i++)
        if (r->mask[i] && m->sizes[i] == 0) /* CPU's error names the empty dimension */
          return tp_make_status(TP_UNIMPLEMENTED, "aminmax over an empty dimension");
      if (m->ndim == 0 && tp_meta_numel(m) == 0)
        return tp_make_status(TP_UNIMPLEMENTED, "aminmax of an empty tensor");
      break;
    case TP_R_CUMMAX: case TP_R_CUMMIN:
      if (args[1].kind != TP_ARG_TENSOR || args[2].kind != TP_ARG_TENSOR ||
          args[1].meta.dtype != in || args[2].meta.dtype != TP_DTYPE_I64)
        return tp_make_status(TP_UNIMPLEMENTED, "%s: unexpected output tensors", op->name);
      break;
    case TP_R_SUM: case TP_R_PROD: case TP_R_CUMSUM: case TP_R_CUMPROD: case TP_R_NANSUM:
      dt = r->dtype != TP_DTYPE_INVALID              ? r->dtype
           : tp_dtype_is_float(in) || tp_dtype_is_complex(in) ? in : TP_DTYPE_I64;
      break;
    case TP_R_MEAN:
      dt = r->dtype != TP_DTYPE_INVALID ? r->dtype : in;
      if (!tp_dtype_is_float(dt)) /* CPU raises NotImplementedError, in its words */
        return tp_make_status(TP_UNIMPLEMENTED, "mean of %s", tp_dtype_name(dt));
      break;
    case TP_R_ARGMAX: case TP_R_ARGMIN: dt = TP_DTYPE_I64; break;
    case TP_R_ANY: case TP_R_ALL: dt = in == TP_DTYPE_U8 ? TP_DTYPE_U8 : TP_DTYPE_BOOL; break;
    case TP_R_VAR: case TP_R_STD:
      if (!tp_dtype_is_float(in))
        return tp_make_status(TP_INVALID_ARGUMENT,
                              "std and var only support floating point and complex dtypes");
      break;
    case TP_R_LOGSUMEXP: if (!tp_dtype_is_float(in)) dt = TP_DTYPE_F32; break;
    case TP_R_NORM:
      dt = r->dtype != TP_DTYPE_INVALID ? r->dtype : in;
      /* norm(): CPU words its own error for integer inputs. */
      if (!tp_dtype_is_float(dt) && strncmp(op->name, "norm.", 5) == 0)
        return tp_make_status(TP_UNIMPLEMENTED, "norm of %s", tp_dtype_name(dt));
      if (!tp_dtype_is_float(dt))
        return tp_make_status(TP_INVALID_ARGUMENT,
                              "linalg.vector_norm: Expected a floating point or complex tensor as "
                              "input. Got %s", tp_dtype_name(dt));
      break;
    default: break;
  }
  *out_dtype = dt;
  return NULL;
}

/* max/min/amax/amin/argmax/argmin of an empty input reduce only over named dims of non-zero size
 * (PyTorch's zero_numel_check_dims): then the result is empty too. Else CPU's error. */
static tp_status_t *check_empty_extreme(const tp_op_def_t *op, const tp_op_arg_t *args,
                                        int n_args) {
  const tp_meta_t *m = &args[0].meta;
  if ((op->code == TP_R_MAX || op->code == TP_R_MIN || op->code == TP_R_AMAX ||
       op->code == TP_R_AMIN || op->code == TP_R_ARGMAX || op->code == TP_R_ARGMIN) &&
      tp_meta_numel(m) == 0) {
    int base = (int)strcspn(op->name, ".");
    const tp_op_arg_t *d = arg_at(args, n_args, 1);
    int nd = !d ? 0 : d->kind == TP_ARG_INTS ? d->n : d->kind == TP_ARG_INT ? 1 : 0;
    bool arg = op->code == TP_R_ARGMAX || op->code == TP_R_ARGMIN;
    if (nd == 0 && arg)
      return tp_make_status(TP_OUT_OF_RANGE,
                            "%.*s(): Expected reduction dim to be specified for input.numel() == 0.",
                            base, op->name);
    if (nd == 0)
      return tp_make_status(TP_INVALID_ARGUMENT,
                            "%.*s(): Expected reduction dim to be specified for input.numel() == 0. "
                            "Specify the reduction dim with the 'dim' argument.", base, op->name);
    for (int k = 0; k < nd; k++) {
      int64_t v = d->kind == TP_ARG_INTS ? d->ints[k] : d->i;
      if (m->sizes[tp_norm_dim(v, m->ndim)] == 0)
        return tp_make_status(TP_OUT_OF_RANGE, "%.*s(): Expected reduction dim %lld to have non-zero size.",
                              base, op->name, (long long)v);
    }
  }
  return NULL;
}

tp_status_t *tp_infer_reduce(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                             int *n_out) {
  if (n_args < 1 || args[0].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: self must be a tensor", op->name);
  reduction_t r;
  TP_RETURN_IF_ERROR(parse_reduction(op, args, n_args, &r));
  const tp_meta_t *m = &args[0].meta;
  tp_dtype_t dt = m->dtype; /* result_dtype sets it */
  TP_RETURN_IF_ERROR(result_dtype(op, args, &r, &dt));
  TP_RETURN_IF_ERROR(check_empty_extreme(op, args, n_args));
  if (op->code == TP_R_NORM && args[1].kind == TP_ARG_SCALAR) {
    /* The order shapes the program: make it an attribute, part of the signature. */
    double ord = tp_dtype_is_float(args[1].meta.dtype) ? args[1].f : (double)args[1].i;
    args[1].kind = TP_ARG_FLOAT;
    args[1].f = ord;
  }
  for (int i = 1; i < n_args; i++)
    if (args[i].kind == TP_ARG_SCALAR) args[i].scalar_dtype = TP_DTYPE_F64;
  if (cumulative(op->code)) {
    out[0] = *m;
  } else {
    tp_meta_reduce(m, r.mask, r.keepdim, &out[0]);
  }
  out[0].dtype = dt;
  *n_out = 1;
  if (with_indices(op, n_args)) {
    out[1] = out[0];
    out[1].dtype = TP_DTYPE_I64;
    *n_out = 2;
  }
  if (two_outputs(op->code)) {
    out[1] = out[0];
    *n_out = 2;
    if (code_is_cumext(op->code)) { /* written into the values and indices arguments */
      out[0].writes_arg = 2;
      out[1].writes_arg = 3;
      out[1].dtype = TP_DTYPE_I64;
    }
  }
  return NULL;
}

/* Broadcasts a reduction result |r| (reduced dims dropped) back over |like|'s shape. */
static tp_hlo_value_t expand_back(tp_hlo_builder_t *b, tp_hlo_value_t r, const tp_hlo_value_t *like,
                                  const bool *mask) {
  int64_t bd[TP_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < like->ndim; i++)
    if (!mask[i]) bd[n++] = i;
  return tp_hlo_broadcast_in_dim(b, r, like->ndim, like->dims, bd);
}

static tp_hlo_value_t reduce_with(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_binary_t op,
                                  tp_hlo_value_t init, const bool *mask) {
  int64_t dims[TP_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < x.ndim; i++)
    if (mask[i]) dims[n++] = i;
  return tp_hlo_reduce(b, x, init, op, n, dims);
}

static tp_hlo_value_t reduce_dims(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_binary_t op,
                                  double init, const bool *mask) {
  return reduce_with(b, x, op, tp_hlo_constant(b, x.dtype, init), mask);
}

static int64_t reduced_count(const tp_hlo_value_t *x, const bool *mask) {
  int64_t n = 1;
  for (int i = 0; i < x->ndim; i++)
    if (mask[i]) n *= x->dims[i];
  return n;
}

/* The identity of max (the type's lowest value) or of min (its highest), as a scalar constant. */
static tp_hlo_value_t limit(tp_hlo_builder_t *b, tp_dtype_t t, bool lowest) {
  switch (t) {
    case TP_DTYPE_BOOL: return tp_hlo_constant_i(b, t, lowest ? 0 : 1);
    case TP_DTYPE_U8: return tp_hlo_constant_i(b, t, lowest ? 0 : 255);
    case TP_DTYPE_I8: return tp_hlo_constant_i(b, t, lowest ? INT8_MIN : INT8_MAX);
    case TP_DTYPE_I16: return tp_hlo_constant_i(b, t, lowest ? INT16_MIN : INT16_MAX);
    case TP_DTYPE_I32: return tp_hlo_constant_i(b, t, lowest ? INT32_MIN : INT32_MAX);
    case TP_DTYPE_I64: return tp_hlo_constant_i(b, t, lowest ? INT64_MIN : INT64_MAX);
    default: return tp_hlo_constant(b, t, lowest ? -INFINITY : INFINITY);
  }
}

static tp_hlo_value_t nan_like(tp_hlo_builder_t *b, const tp_hlo_value_t *x) {
  return tp_k(b, NAN, *x);
}

/* max/min over |mask| that propagates NaN, as PyTorch does. */
static tp_hlo_value_t extreme(tp_hlo_builder_t *b, tp_hlo_value_t x, bool is_max, const bool *mask) {
  tp_hlo_binary_t op = x.dtype == TP_DTYPE_BOOL ? (is_max ? TP_HLO_OR : TP_HLO_AND)
                                               : (is_max ? TP_HLO_MAX : TP_HLO_MIN);
  tp_hlo_value_t r = reduce_with(b, x, op, limit(b, x.dtype, is_max), mask);
  if (!tp_dtype_is_float(x.dtype)) return r;
  tp_hlo_value_t any_nan = reduce_dims(b, tp_hlo_compare(b, TP_CMP_NE, x, x), TP_HLO_OR, 0, mask);
  return tp_hlo_select(b, any_nan, nan_like(b, &r), r);
}

/* The sum of float |x| over |mask| (every masked dim non-empty), and in *out_inf_before_last
 * whether an infinity lies before the last element of the reduced dims in row-major order.
 * CPU's var_mean takes the mean by Welford's update in that order, and an infinity there is
 * followed by inf - inf: its mean is NaN, unless a single infinity is the last element (then
 * +-inf, as the plain sum gives). The sum leaves the last element out, and adds it after, so
 * its infinity is told from the others' without another pass. */
static tp_hlo_value_t sum_welford_order(tp_hlo_builder_t *b, tp_hlo_value_t x, const bool *mask,
                                        tp_hlo_value_t *out_inf_before_last) {
  tp_hlo_value_t rest = tp_k(b, 0, x); /* no reduced dim: every element is last */
  int64_t start[TP_MAX_DIMS], limit_[TP_MAX_DIMS], stride[TP_MAX_DIMS];
  for (int i = 0; i < x.ndim; i++) {
    start[i] = mask[i] ? x.dims[i] - 1 : 0;
    limit_[i] = x.dims[i];
    stride[i] = 1;
    if (!mask[i]) continue;
    tp_hlo_value_t io = tp_hlo_iota(b, TP_DTYPE_I64, x.ndim, x.dims, i);
    tp_hlo_value_t not_last = tp_hlo_compare(b, TP_CMP_NE, io, tp_k(b, (double)(x.dims[i] - 1), io));
    rest = tp_hlo_select(b, not_last, x, rest);
  }
  tp_hlo_value_t sum = reduce_dims(b, rest, TP_HLO_ADD, 0, mask);
  *out_inf_before_last = tp_hlo_unary(b, TP_HLO_IS_INF, sum);
  int64_t kept[TP_MAX_DIMS];
  int nk = 0;
  for (int i = 0; i < x.ndim; i++)
    if (!mask[i]) kept[nk++] = x.dims[i];
  tp_hlo_value_t tail = tp_hlo_reshape(b, tp_hlo_slice(b, x, start, limit_, stride), nk, kept);
  return tp_hlo_binary(b, TP_HLO_ADD, sum, tail);
}

/* Index of the first extreme element along the (single or flattened) masked dims. */
static tp_hlo_value_t arg_extreme(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t ext,
                                  const bool *mask) {
  tp_hlo_value_t e = expand_back(b, ext, &x, mask);
  tp_hlo_value_t hit = tp_hlo_compare(b, TP_CMP_EQ, x, e);
  if (tp_dtype_is_float(x.dtype))
    hit = tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_NE, e, e), tp_hlo_compare(b, TP_CMP_NE, x, x),
                        hit);
  /* Linear index over the reduced dims, in row-major order. */
  tp_hlo_value_t idx = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, 0), x.ndim, x.dims);
  int64_t stride = 1;
  for (int i = x.ndim - 1; i >= 0; i--) {
    if (!mask[i]) continue;
    tp_hlo_value_t io = tp_hlo_iota(b, TP_DTYPE_I64, x.ndim, x.dims, i);
    idx = tp_hlo_binary(b, TP_HLO_ADD, idx,
                        tp_hlo_binary(b, TP_HLO_MUL, io, tp_k(b, (double)stride, io)));
    stride *= x.dims[i];
  }
  tp_hlo_value_t big = tp_k(b, (double)stride, idx);
  return reduce_with(b, tp_hlo_select(b, hit, idx, big), TP_HLO_MIN, limit(b, TP_DTYPE_I64, false),
                     mask);
}

/* nansum: the sum with NaNs counted as zeros. */
static tp_hlo_value_t emit_nansum(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_dtype_t acc,
                                  const bool *mask) {
  tp_hlo_value_t xs = tp_hlo_convert(b, x, acc == TP_DTYPE_BOOL ? TP_DTYPE_I64 : acc);
  if (tp_dtype_is_float(xs.dtype))
    xs = tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_NE, xs, xs), tp_k(b, 0, xs), xs);
  return reduce_dims(b, xs, TP_HLO_ADD, 0, mask);
}

/* trace: the sum of the matrix with its off-diagonal elements zeroed. */
static tp_hlo_value_t emit_trace(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_dtype_t acc,
                                 const bool *mask) {
  tp_hlo_value_t xs = tp_hlo_convert(b, x, acc);
  tp_hlo_value_t diag = tp_hlo_compare(b, TP_CMP_EQ, tp_hlo_iota(b, TP_DTYPE_I64, 2, xs.dims, 0),
                                       tp_hlo_iota(b, TP_DTYPE_I64, 2, xs.dims, 1));
  return reduce_dims(b, tp_hlo_select(b, diag, xs, tp_k(b, 0, xs)), TP_HLO_ADD, 0, mask);
}

/* var/std (and their _mean forms, whose mean goes to out[1]) of |x| over r's dims, in |acc|. */
static tp_hlo_value_t emit_var_std(const tp_op_def_t *op, tp_hlo_builder_t *b,
                                   const tp_op_arg_t *args, int n_args, const tp_hlo_value_t *in,
                                   const reduction_t *r, const tp_meta_t *out_meta,
                                   tp_hlo_value_t *out) {
  tp_hlo_value_t x = in[0];
  tp_dtype_t od = out_meta[0].dtype;
  tp_dtype_t acc = tp_math_dtype(od);
  tp_hlo_value_t xs = tp_hlo_convert(b, x, acc);
  int64_t n = reduced_count(&xs, r->mask);
  bool with_mean = op->code == TP_R_VAR_MEAN || op->code == TP_R_STD_MEAN;
  tp_hlo_value_t mean, inf_before_last;
  bool welford = with_mean && tp_dtype_is_float(acc) && n > 0;
  if (welford)
    mean = sum_welford_order(b, xs, r->mask, &inf_before_last);
  else
    mean = reduce_dims(b, xs, TP_HLO_ADD, 0, r->mask);
  mean = tp_hlo_binary(b, TP_HLO_DIV, mean, tp_k(b, (double)n, mean));
  tp_hlo_value_t d = tp_hlo_binary(b, TP_HLO_SUB, xs, expand_back(b, mean, &xs, r->mask));
  tp_hlo_value_t v = reduce_dims(b, tp_hlo_binary(b, TP_HLO_MUL, d, d), TP_HLO_ADD, 0, r->mask);
  tp_hlo_value_t corr = r->correction_arg < n_args && args[r->correction_arg].kind == TP_ARG_SCALAR
                            ? tp_hlo_convert(b, in[r->correction_arg], acc)
                            : tp_hlo_constant(b, acc, 1);
  tp_hlo_value_t denom = tp_hlo_binary(b, TP_HLO_SUB, tp_hlo_constant(b, acc, (double)n), corr);
  denom = tp_hlo_binary(b, TP_HLO_MAX, denom, tp_hlo_constant(b, acc, 0));
  v = tp_hlo_binary(b, TP_HLO_DIV, v, tp_hlo_broadcast_to(b, denom, v.ndim, v.dims));
  if (op->code == TP_R_STD || op->code == TP_R_STD_MEAN) v = tp_hlo_unary(b, TP_HLO_SQRT, v);
  if (with_mean) {
    if (welford) mean = tp_hlo_select(b, inf_before_last, nan_like(b, &mean), mean);
    out[1] = tp_hlo_convert(b, tp_hlo_reshape(b, mean, out_meta[1].ndim, out_meta[1].sizes), od);
  }
  return v;
}

/* cummax/cummin along |dim|: the values, and their indices into *out_indices. */
static tp_hlo_value_t emit_cum_extreme(tp_hlo_builder_t *b, tp_hlo_value_t x, bool is_max, int dim,
                                       tp_hlo_value_t *out_indices) {
  /* Running extreme by reduce_window; its index is the last position j so far where x_j
   * reached the running extreme (or is NaN, which then stays), itself a running max. */
  if (x.ndim == 0 || x.dims[dim] == 0) {
    *out_indices = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, 0), x.ndim, x.dims);
    return x;
  }
  int64_t win[TP_MAX_DIMS], lo[TP_MAX_DIMS] = {0}, hi[TP_MAX_DIMS] = {0};
  for (int i = 0; i < x.ndim; i++) win[i] = 1;
  int64_t n = x.dims[dim];
  win[dim] = n;
  lo[dim] = n - 1;
  bool bl = x.dtype == TP_DTYPE_BOOL;
  tp_hlo_binary_t hop = bl ? (is_max ? TP_HLO_OR : TP_HLO_AND) : (is_max ? TP_HLO_MAX : TP_HLO_MIN);
  tp_hlo_value_t v = tp_hlo_reduce_window(b, x, limit(b, x.dtype, is_max), hop, win, lo, hi);
  if (tp_dtype_is_float(x.dtype)) { /* reduce_window's max drops NaN; CPU's keeps it */
    tp_hlo_value_t seen = tp_hlo_reduce_window(b, tp_hlo_compare(b, TP_CMP_NE, x, x),
                                               tp_hlo_constant_i(b, TP_DTYPE_BOOL, 0), TP_HLO_OR,
                                               win, lo, hi);
    v = tp_hlo_select(b, seen, nan_like(b, &v), v);
  }
  tp_hlo_value_t at = tp_hlo_compare(b, is_max ? TP_CMP_GE : TP_CMP_LE, x, v);
  if (tp_dtype_is_float(x.dtype))
    at = tp_hlo_binary(b, TP_HLO_OR, tp_hlo_compare(b, TP_CMP_NE, x, x),
                       tp_hlo_binary(b, TP_HLO_AND, at, tp_hlo_compare(b, TP_CMP_EQ, v, v)));
  tp_hlo_value_t io = tp_hlo_iota(b, TP_DTYPE_I64, x.ndim, x.dims, dim);
  tp_hlo_value_t j = tp_hlo_select(b, at, io, tp_k(b, -1, io));
  *out_indices = tp_hlo_reduce_window(b, j, tp_hlo_constant_i(b, TP_DTYPE_I64, -1), TP_HLO_MAX, win, lo, hi);
  return v;
}

static tp_hlo_value_t emit_logsumexp(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_dtype_t acc,
                                     const bool *mask) {
  tp_hlo_value_t xs = tp_hlo_convert(b, x, acc);
  tp_hlo_value_t m = reduce_dims(b, xs, TP_HLO_MAX, -INFINITY, mask);
  /* An infinite max would make x - m NaN: shift by 0 there instead. */
  tp_hlo_value_t finite = tp_hlo_unary(b, TP_HLO_IS_FINITE, m);
  m = tp_hlo_select(b, finite, m, tp_k(b, 0, m));
  tp_hlo_value_t e = tp_hlo_unary(b, TP_HLO_EXP,
                                  tp_hlo_binary(b, TP_HLO_SUB, xs, expand_back(b, m, &xs, mask)));
  return tp_hlo_binary(b, TP_HLO_ADD,
                       tp_hlo_unary(b, TP_HLO_LOG, reduce_dims(b, e, TP_HLO_ADD, 0, mask)), m);
}

/* The vector norm of order |ord| (0, 1, 2, +-inf by their own forms, else (sum |x|^p)^(1/p)). */
static tp_hlo_value_t emit_norm(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_dtype_t acc, double ord,
                                const bool *mask) {
  tp_hlo_value_t a = tp_hlo_unary(b, TP_HLO_ABS, tp_hlo_convert(b, x, acc));
  tp_hlo_value_t v;
  if (isinf(ord)) {
    v = extreme(b, a, ord > 0, mask);
  } else if (ord == 0) {
    v = reduce_dims(b, tp_hlo_convert(b, tp_hlo_compare(b, TP_CMP_NE, a, tp_k(b, 0, a)), acc),
                    TP_HLO_ADD, 0, mask);
  } else if (ord == 1) {
    v = reduce_dims(b, a, TP_HLO_ADD, 0, mask);
  } else if (ord == 2) {
    v = tp_hlo_unary(b, TP_HLO_SQRT, reduce_dims(b, tp_hlo_binary(b, TP_HLO_MUL, a, a), TP_HLO_ADD, 0, mask));
  } else {
    tp_hlo_value_t p = tp_hlo_binary(b, TP_HLO_POW, a, tp_k(b, ord, a));
    v = reduce_dims(b, p, TP_HLO_ADD, 0, mask);
    v = tp_hlo_binary(b, TP_HLO_POW, v, tp_k(b, 1.0 / ord, v));
  }
  return v;
}

/* cumsum/cumprod along |dim| by a reduce_window over all the elements before. */
static tp_hlo_value_t emit_cum_sum_prod(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_dtype_t acc,
                                        bool sum, int dim) {
  tp_hlo_value_t xs = tp_hlo_convert(b, x, acc == TP_DTYPE_BOOL ? TP_DTYPE_I64 : acc);
  if (xs.ndim == 0) return xs;
  int64_t win[TP_MAX_DIMS], lo[TP_MAX_DIMS] = {0}, hi[TP_MAX_DIMS] = {0};
  for (int i = 0; i < xs.ndim; i++) win[i] = 1;
  int64_t n = xs.dims[dim];
  win[dim] = n > 0 ? n : 1;
  lo[dim] = n > 0 ? n - 1 : 0;
  return n == 0 ? xs
                : tp_hlo_reduce_window(b, xs, tp_hlo_constant(b, xs.dtype, sum ? 0 : 1),
                                       sum ? TP_HLO_ADD : TP_HLO_MUL, win, lo, hi);
}

tp_hlo_value_t tp_emit_mean_live(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                                 int n_args, const tp_hlo_value_t *in, tp_hlo_value_t live_count,
                                 const tp_meta_t *out_meta) {
  reduction_t r;
  if (!tp_emit_ok(b, parse_reduction(op, args, n_args, &r))) return in[0];
  tp_dtype_t od = out_meta[0].dtype, acc = tp_math_dtype(od);
  tp_hlo_value_t xs = tp_hlo_convert(b, in[0], acc);
  tp_hlo_value_t v = reduce_dims(b, xs, TP_HLO_ADD, 0, r.mask);
  tp_hlo_value_t n = tp_hlo_convert(b, live_count, acc);
  v = tp_hlo_binary(b, TP_HLO_DIV, v, tp_hlo_broadcast_to(b, n, v.ndim, v.dims));
  return tp_hlo_convert(b, tp_hlo_reshape(b, v, out_meta[0].ndim, out_meta[0].sizes), od);
}

void tp_emit_reduce(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                    int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                    tp_hlo_value_t *out) {
  reduction_t r;
  if (!tp_emit_ok(b, parse_reduction(op, args, n_args, &r))) return;
  tp_hlo_value_t x = in[0];
  tp_dtype_t od = out_meta[0].dtype;
  tp_dtype_t acc = tp_math_dtype(od);
  tp_hlo_value_t v;
  switch ((tp_reduce_t)op->code) {
    case TP_R_SUM:
      v = reduce_dims(b, tp_hlo_convert(b, x, acc == TP_DTYPE_BOOL ? TP_DTYPE_I64 : acc), TP_HLO_ADD, 0, r.mask);
      break;
    case TP_R_PROD:
      v = reduce_dims(b, tp_hlo_convert(b, x, acc == TP_DTYPE_BOOL ? TP_DTYPE_I64 : acc), TP_HLO_MUL, 1, r.mask);
      break;
    case TP_R_MEAN: {
      tp_hlo_value_t xs = tp_hlo_convert(b, x, acc);
      v = reduce_dims(b, xs, TP_HLO_ADD, 0, r.mask);
      v = tp_hlo_binary(b, TP_HLO_DIV, v, tp_k(b, (double)reduced_count(&xs, r.mask), v));
      break;
    }
    case TP_R_AMAX: case TP_R_MAX: case TP_R_AMIN: case TP_R_MIN: {
      bool is_max = op->code == TP_R_AMAX || op->code == TP_R_MAX;
      v = extreme(b, x, is_max, r.mask);
      if (with_indices(op, n_args)) {
        out[1] = tp_hlo_reshape(b, arg_extreme(b, x, v, r.mask), out_meta[1].ndim, out_meta[1].sizes);
      }
      break;
    }
    case TP_R_ARGMAX: case TP_R_ARGMIN: {
      tp_hlo_value_t e = extreme(b, x, op->code == TP_R_ARGMAX, r.mask);
      v = arg_extreme(b, x, e, r.mask);
      break;
    }
    case TP_R_ANY: case TP_R_ALL:
      v = reduce_dims(b, tp_hlo_convert(b, x, TP_DTYPE_BOOL),
                      op->code == TP_R_ANY ? TP_HLO_OR : TP_HLO_AND, op->code == TP_R_ALL, r.mask);
      break;
    case TP_R_VAR: case TP_R_STD: case TP_R_VAR_MEAN: case TP_R_STD_MEAN:
      v = emit_var_std(op, b, args, n_args, in, &r, out_meta, out);
      break;
    case TP_R_AMINMAX:
      v = extreme(b, x, false, r.mask);
      out[1] = tp_hlo_convert(b, tp_hlo_reshape(b, extreme(b, x, true, r.mask), out_meta[1].ndim,
                                                out_meta[1].sizes), od);
      break;
    case TP_R_NANSUM:
      v = emit_nansum(b, x, acc, r.mask);
      break;
    case TP_R_COUNT_NONZERO: {
      tp_hlo_value_t nz = tp_hlo_compare(b, TP_CMP_NE, x, tp_k(b, 0, x));
      v = reduce_dims(b, tp_hlo_convert(b, nz, TP_DTYPE_I64), TP_HLO_ADD, 0, r.mask);
      break;
    }
    case TP_R_TRACE:
      v = emit_trace(b, x, acc, r.mask);
      break;
    case TP_R_CUMMAX: case TP_R_CUMMIN:
      v = emit_cum_extreme(b, x, op->code == TP_R_CUMMAX, r.dim, &out[1]);
      break;
    case TP_R_LOGSUMEXP:
      v = emit_logsumexp(b, x, acc, r.mask);
      break;
    case TP_R_NORM: {
      double ord = args[r.ord_arg].kind == TP_ARG_FLOAT ? args[r.ord_arg].f : 2;
      v = emit_norm(b, x, acc, ord, r.mask);
      break;
    }
    case TP_R_CUMSUM: case TP_R_CUMPROD:
      v = emit_cum_sum_prod(b, x, acc, op->code == TP_R_CUMSUM, r.dim);
      break;
    default:
      v = x;
  }
  out[0] = tp_hlo_convert(b, tp_hlo_reshape(b, v, out_meta[0].ndim, out_meta[0].sizes), od);
}

tp_status_t *tp_infer_equal(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                            int *n_out) {
  TP_RETURN_IF_ERROR(tp_infer_like_self(op, args, n_args, out, n_out));
  const tp_meta_t *x = &args[0].meta;
  /* CPU raises on differing dtypes. */
  if (!tp_arg_is_tensor(args, n_args, 1) || args[1].meta.dtype != x->dtype)
    return tp_make_status(TP_UNIMPLEMENTED, "equal: dtypes");
  out[0].dtype = TP_DTYPE_BOOL;
  out[0].ndim = 0;
  return NULL;
}

void tp_emit_equal(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                   const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  tp_hlo_value_t x = in[0], y = in[1];
  if (x.ndim != y.ndim || memcmp(x.dims, y.dims, sizeof(int64_t) * (size_t)x.ndim) != 0) {
    out[0] = tp_hlo_constant_i(b, TP_DTYPE_BOOL, 0);
    return;
  }
  int64_t dims[TP_MAX_DIMS];
  for (int i = 0; i < x.ndim; i++) dims[i] = i;
  tp_hlo_value_t eq = tp_hlo_compare(b, TP_CMP_EQ, x, y);
  out[0] = x.ndim ? tp_hlo_reduce(b, eq, tp_hlo_constant_i(b, TP_DTYPE_BOOL, 1), TP_HLO_AND, x.ndim, dims) : eq;
}

/* CPU's log_add_exp of two floats: max + log1p(exp(min - max)), except that equal infinities
 * give themselves. */
static tp_hlo_value_t log_add_exp(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t y) {
  tp_hlo_value_t mn = tp_bin(b, TP_HLO_MIN, x, y), mx = tp_bin(b, TP_HLO_MAX, x, y);
  tp_hlo_value_t r = tp_bin(b, TP_HLO_ADD, mx, tp_hlo_unary(b, TP_HLO_LOG1P, tp_hlo_unary(b, TP_HLO_EXP, tp_bin(b, TP_HLO_SUB, mn, mx))));
  tp_hlo_value_t keep = tp_bin(b, TP_HLO_AND, tp_hlo_compare(b, TP_CMP_EQ, mn, mx),
                            tp_hlo_unary(b, TP_HLO_NOT, tp_hlo_unary(b, TP_HLO_IS_FINITE, mn)));
  /* A NaN on either side propagates (XLA's min/max need not). */
  tp_hlo_value_t nan = tp_bin(b, TP_HLO_OR, tp_hlo_compare(b, TP_CMP_NE, x, x), tp_hlo_compare(b, TP_CMP_NE, y, y));
  return tp_hlo_select(b, nan, tp_bin(b, TP_HLO_ADD, x, y), tp_hlo_select(b, keep, x, r));
}

tp_status_t *tp_infer_logcumsumexp(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                                   int *n_out) {
  TP_RETURN_IF_ERROR(tp_infer_like_self(op, args, n_args, out, n_out));
  const tp_meta_t *x = &args[0].meta;
  bool fl = tp_dtype_is_float(x->dtype);
  if (n_args < 2 || args[1].kind != TP_ARG_INT || !fl || tp_norm_dim(args[1].i, x->ndim) < 0)
    return tp_make_status(TP_UNIMPLEMENTED, "logcumsumexp: arguments");
  return NULL;
}

void tp_emit_logcumsumexp(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                          const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  const tp_meta_t *om = &out_meta[0];
  tp_dtype_t md = tp_math_dtype(om->dtype);
  /* CPU accumulates in its accumulation type: double for float, float for 16-bit types. */
  if (om->dtype == TP_DTYPE_F32) md = TP_DTYPE_F64;
  tp_hlo_value_t x = tp_hlo_convert(b, in[0], md);
  if (x.ndim == 0 || x.dims[tp_norm_dim(args[1].i, x.ndim)] <= 1) {
    out[0] = tp_hlo_convert(b, x, om->dtype);
    return;
  }
  int d = tp_norm_dim(args[1].i, x.ndim);
  int64_t n = x.dims[d];
  if (n <= 128) { /* CPU's sequential order, so large inputs round as they do there */
    tp_hlo_value_t parts[128], acc = {0};
    int64_t st[TP_MAX_DIMS] = {0}, lim[TP_MAX_DIMS], step[TP_MAX_DIMS];
    for (int i = 0; i < x.ndim; i++) {
      lim[i] = x.dims[i];
      step[i] = 1;
    }
    for (int64_t i = 0; i < n; i++) {
      st[d] = i;
      lim[d] = i + 1;
      tp_hlo_value_t xi = tp_hlo_slice(b, x, st, lim, step);
      acc = i == 0 ? xi : log_add_exp(b, xi, acc);
      parts[i] = acc;
    }
    out[0] = tp_hlo_convert(b, tp_hlo_concatenate(b, parts, (int)n, d), om->dtype);
    return;
  }
  /* Longer: an inclusive scan by doubling, y_i = lae(y_i, y_{i-s}) for s = 1, 2, 4, ... */
  tp_hlo_value_t ninf = tp_hlo_constant(b, md, -INFINITY);
  for (int64_t s = 1; s < n; s *= 2) {
    int64_t lo[TP_MAX_DIMS] = {0}, hi[TP_MAX_DIMS] = {0};
    lo[d] = s;
    hi[d] = -s;
    tp_hlo_value_t sh = tp_hlo_pad(b, x, ninf, lo, hi);
    x = log_add_exp(b, x, sh);
  }
  out[0] = tp_hlo_convert(b, x, om->dtype);
}
