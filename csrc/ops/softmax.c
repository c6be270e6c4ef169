/* Softmax family: _softmax and _log_softmax over one dim, and their backwards. Half types compute
 * in f32 (or return it, with half_to_float). Depends on ops/ helpers and hlo/ only. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/families.h"

static tp_status_t *dim_arg(const tp_op_def_t *op, const tp_op_arg_t *a, int nd, int *out) {
  *out = a->kind == TP_ARG_INT ? tp_norm_dim(a->i, nd) : -1;
  if (*out < 0)
    return tp_make_status(TP_OUT_OF_RANGE, "%s: Dimension out of range (got %lld for %d dims)",
                          op->name, (long long)a->i, nd);
  return NULL;
}

/* Sum over |dim| keeping it (size 1), optionally its reciprocal, broadcast back to |x|'s shape. */
static tp_hlo_value_t sum_keep(tp_hlo_builder_t *b, tp_hlo_value_t x, int dim, bool reciprocal) {
  int64_t d = dim;
  tp_hlo_value_t s = tp_hlo_reduce(b, x, tp_hlo_constant(b, x.dtype, 0), TP_HLO_ADD, x.ndim ? 1 : 0, &d);
  if (reciprocal) s = tp_hlo_binary(b, TP_HLO_DIV, tp_k(b, 1, s), s);
  int64_t bd[TP_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < x.ndim; i++)
    if (i != dim) bd[n++] = i;
  return x.ndim ? tp_hlo_broadcast_in_dim(b, s, x.ndim, x.dims, bd) : s;
}

/* The max over |dim| as it is, infinities included, broadcast back: CPU subtracts it unguarded,
 * so a row holding +inf (inf - inf) or only -inf (-inf - -inf) is NaN throughout, as there. */
static tp_hlo_value_t max_keep(tp_hlo_builder_t *b, tp_hlo_value_t x, int dim) {
  if (x.ndim == 0) return x;
  int64_t d = dim;
  tp_hlo_value_t m = tp_hlo_reduce(b, x, tp_hlo_constant(b, x.dtype, -INFINITY), TP_HLO_MAX, 1, &d);
  int64_t bd[TP_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < x.ndim; i++)
    if (i != dim) bd[n++] = i;
  return tp_hlo_broadcast_in_dim(b, m, x.ndim, x.dims, bd);
}

/* _softmax(self, dim, half_to_float) and _log_softmax. */
tp_status_t *tp_infer_softmax(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                              int *n_out) {
  if (n_args < 2 || args[0].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected (self, dim)", op->name);
  int dim;
  TP_RETURN_IF_ERROR(dim_arg(op, &args[1], args[0].meta.ndim, &dim));
  if (!tp_dtype_is_float(args[0].meta.dtype))
    return tp_make_status(TP_INVALID_ARGUMENT, "\"%s\" not implemented for '%s'", op->name,
                          tp_dtype_name(args[0].meta.dtype));
  out[0] = args[0].meta;
  if (n_args > 2 && args[2].kind == TP_ARG_INT && args[2].i) out[0].dtype = TP_DTYPE_F32;
  *n_out = 1;
  return NULL;
}

void tp_emit_softmax(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                     int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                     tp_hlo_value_t *out) {
  int dim = tp_norm_dim(args[1].i, args[0].meta.ndim);
  tp_hlo_value_t x = tp_hlo_convert(b, in[0], tp_math_dtype(out_meta->dtype));
  tp_hlo_value_t z = tp_hlo_binary(b, TP_HLO_SUB, x, max_keep(b, x, dim));
  tp_hlo_value_t e = tp_hlo_unary(b, TP_HLO_EXP, z);
  /* Over the last dim, softmax scales by the sum's reciprocal, as PyTorch's CPU kernel does
   * there (and divides over other dims, as it does there too): bit-closer to CPU, and cheaper. */
  bool recip = op->code == TP_SM_SOFTMAX && dim == x.ndim - 1;
  tp_hlo_value_t s = sum_keep(b, e, dim, recip);
  tp_hlo_value_t r = op->code == TP_SM_LOG_SOFTMAX ? tp_hlo_binary(b, TP_HLO_SUB, z, tp_hlo_unary(b, TP_HLO_LOG, s))
                              : tp_hlo_binary(b, recip ? TP_HLO_MUL : TP_HLO_DIV, e, s);
  out[0] = tp_hlo_convert(b, r, out_meta->dtype);
}

/* _softmax_backward_data(grad_output, output, dim, input_dtype) and the log variant. */
tp_status_t *tp_infer_softmax_backward(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                       tp_meta_t *out, int *n_out) {
  if (n_args < 4 || args[0].kind != TP_ARG_TENSOR || args[1].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected (grad, output, dim, dtype)", op->name);
  int dim;
  TP_RETURN_IF_ERROR(dim_arg(op, &args[2], args[0].meta.ndim, &dim));
  out[0] = args[0].meta;
  if (args[3].kind == TP_ARG_INT) out[0].dtype = (tp_dtype_t)args[3].i;
  *n_out = 1;
  return NULL;
}

void tp_emit_softmax_backward(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                              int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                              tp_hlo_value_t *out) {
  int dim = tp_norm_dim(args[2].i, args[0].meta.ndim);
  tp_dtype_t md = tp_math_dtype(out_meta->dtype);
  tp_hlo_value_t g = tp_hlo_convert(b, in[0], md), y = tp_hlo_convert(b, in[1], md);
  tp_hlo_value_t r;
  if (op->code == TP_SM_LOG_SOFTMAX) /* log_softmax: g - exp(y) * sum(g) */
    r = tp_hlo_binary(b, TP_HLO_SUB, g,
                      tp_hlo_binary(b, TP_HLO_MUL, tp_hlo_unary(b, TP_HLO_EXP, y), sum_keep(b, g, dim, false)));
  else /* softmax: y * (g - sum(g * y)) */
    r = tp_hlo_binary(b, TP_HLO_MUL, y,
                      tp_hlo_binary(b, TP_HLO_SUB, g, sum_keep(b, tp_hlo_binary(b, TP_HLO_MUL, g, y), dim, false)));
  out[0] = tp_hlo_convert(b, r, out_meta->dtype);
}
