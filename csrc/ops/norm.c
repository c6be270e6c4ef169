/* Normalization: layer norm, batch norm and group norm (forward and backward), and renorm. Half
 * types compute in f32. Depends on ops/ helpers and hlo/ only. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/families.h"

/* Argument positions: native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out,
 * mean, rstd); native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight?,
 * bias?, output_mask); native_batch_norm_backward(grad_out, input, weight?, running_mean?,
 * running_var?, save_mean?, save_invstd?, train, eps, output_mask). */
enum { LN_INPUT, LN_SHAPE, LN_WEIGHT, LN_BIAS, LN_EPS };
enum { LNB_GRAD, LNB_INPUT, LNB_SHAPE, LNB_MEAN, LNB_RSTD, LNB_WEIGHT, LNB_BIAS };
enum {
  BNB_GRAD, BNB_INPUT, BNB_WEIGHT, BNB_RUNNING_MEAN, BNB_RUNNING_VAR, BNB_SAVE_MEAN,
  BNB_SAVE_INVSTD, BNB_TRAIN, BNB_EPS
};

/* native_layer_norm's checks of the shapes, PyTorch's in its order and words; |weight|, |bias|
 * may be NONE. */
static tp_status_t *layer_norm_axis(const tp_op_def_t *op, const tp_op_arg_t *in,
                                    const tp_op_arg_t *shape, const tp_op_arg_t *weight,
                                    const tp_op_arg_t *bias, int *axis) {
  int k = shape->kind == TP_ARG_INTS ? shape->n : 0;
  char want[160], got[160];
  tp_format_ints(want, sizeof(want), shape->ints, k);
  if (k < 1)
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "Expected normalized_shape to be at least 1-dimensional, i.e., containing "
                          "at least one element, but got normalized_shape = %s", want);
  const tp_op_arg_t *params[2] = {weight, bias};
  for (int j = 0; j < 2; j++) {
    const tp_meta_t *m = &params[j]->meta;
    if (params[j]->kind == TP_ARG_TENSOR &&
        (m->ndim != k || memcmp(m->sizes, shape->ints, sizeof(int64_t) * (size_t)k) != 0)) {
      tp_format_ints(got, sizeof(got), m->sizes, m->ndim);
      return tp_make_status(TP_INVALID_ARGUMENT,
                            "Expected %s to be of same shape as normalized_shape, but got %s of "
                            "shape %s and normalized_shape = %s", j ? "bias" : "weight",
                            j ? "bias" : "weight", got, want);
    }
  }
  *axis = in->meta.ndim - k;
  if (*axis < 0 || memcmp(in->meta.sizes + *axis, shape->ints, sizeof(int64_t) * (size_t)k) != 0) {
    char dims[160] = "";
    for (int i = 0, off = 0; i < k && off < (int)sizeof(dims); i++)
      off += snprintf(dims + off, sizeof(dims) - (size_t)off, ", %lld", (long long)shape->ints[i]);
    tp_format_ints(got, sizeof(got), in->meta.sizes, in->meta.ndim);
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "Given normalized_shape=%s, expected input with shape [*%s], but got "
                          "input of size%s", want, dims, got);
  }
  return NULL;
}

tp_status_t *tp_infer_layer_norm(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                 tp_meta_t *out, int *n_out) {
  if (n_args < 5 || args[LN_INPUT].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected (input, shape, weight, bias, eps)",
                          op->name);
  int axis;
  TP_RETURN_IF_ERROR(layer_norm_axis(op, &args[LN_INPUT], &args[LN_SHAPE], &args[LN_WEIGHT], &args[LN_BIAS], &axis));
  out[0] = args[LN_INPUT].meta;
  out[1] = args[LN_INPUT].meta; /* mean and rstd: the input's dtype, computed in f32 for half types */
  for (int i = axis; i < out[1].ndim; i++) out[1].sizes[i] = 1;
  out[2] = out[1];
  *n_out = 3;
  return NULL;
}

/* The vector width, in elements of |dtype|, of CPU's layer and group norm kernels (256-bit
 * vectors: PyTorch builds no AVX-512 variant of them; half types widen to two float vectors). */
static int64_t moments_lanes(tp_dtype_t dtype) {
  return dtype == TP_DTYPE_F64 ? 4 : dtype == TP_DTYPE_F32 ? 8 : 16;
}

/* The sum of |x| over dims [axis, ndim) (none empty), NaN where CPU's row moments make the mean
 * NaN. CPU takes the mean by Welford's update, a vector of |lanes| at a time and the remainder
 * after: an infinity is followed by inf - inf (NaN), except a single one in the last element of
 * the last whole vector, the only one whose mean stays +-inf. That element is left out of the
 * sum and added after, so the other infinities show in the partial sum without another pass. */
static tp_hlo_value_t moments_sum(tp_hlo_builder_t *b, tp_hlo_value_t x, int axis, int64_t lanes) {
  int n = 0;
  int64_t dims[TP_MAX_DIMS], count = 1;
  for (int i = axis; i < x.ndim; i++) {
    dims[n++] = i;
    count *= x.dims[i];
  }
  tp_hlo_value_t zero = tp_hlo_constant(b, x.dtype, 0);
  int64_t at = count >= lanes ? count / lanes * lanes - 1 : -1;
  if (at < 0) {
    tp_hlo_value_t sum = tp_hlo_reduce(b, x, zero, TP_HLO_ADD, n, dims);
    return tp_hlo_select(b, tp_hlo_unary(b, TP_HLO_IS_INF, sum), tp_k(b, NAN, sum), sum);
  }
  /* |at| as an index per normalized dim, and each element's row-major index within its row. */
  int64_t start[TP_MAX_DIMS], limit[TP_MAX_DIMS], stride[TP_MAX_DIMS], kept[TP_MAX_DIMS], rem = at;
  for (int i = x.ndim - 1; i >= 0; i--) {
    start[i] = i < axis ? 0 : rem % x.dims[i];
    if (i >= axis) rem /= x.dims[i];
    limit[i] = i < axis ? x.dims[i] : start[i] + 1;
    stride[i] = 1;
    kept[i] = x.dims[i];
  }
  tp_hlo_value_t idx = {0};
  int64_t step = 1;
  for (int i = x.ndim - 1; i >= axis; i--) {
    tp_hlo_value_t io = tp_hlo_iota(b, TP_DTYPE_I64, x.ndim, x.dims, i);
    if (step != 1) io = tp_hlo_binary(b, TP_HLO_MUL, io, tp_k(b, (double)step, io));
    idx = i == x.ndim - 1 ? io : tp_hlo_binary(b, TP_HLO_ADD, idx, io);
    step *= x.dims[i];
  }
  tp_hlo_value_t is_at = tp_hlo_compare(b, TP_CMP_EQ, idx, tp_k(b, (double)at, idx));
  tp_hlo_value_t rest = tp_hlo_select(b, is_at, tp_k(b, 0, x), x);
  tp_hlo_value_t sum = tp_hlo_reduce(b, rest, zero, TP_HLO_ADD, n, dims);
  tp_hlo_value_t bad = tp_hlo_unary(b, TP_HLO_IS_INF, sum);
  sum = tp_hlo_binary(b, TP_HLO_ADD, sum, tp_hlo_reshape(b, tp_hlo_slice(b, x, start, limit, stride), axis, kept));
  return tp_hlo_select(b, bad, tp_k(b, NAN, sum), sum);
}

/* x normalized over dims [axis, ndim): mean and rstd keep those dims at size 1. |lanes|: see
 * moments_sum. */
static void normalize(tp_hlo_builder_t *b, tp_hlo_value_t x, int axis, tp_hlo_value_t eps,
                      int64_t lanes, tp_hlo_value_t *out_mean, tp_hlo_value_t *out_rstd,
                      tp_hlo_value_t *out_xhat) {
  int64_t dims[TP_MAX_DIMS], bd[TP_MAX_DIMS], kept[TP_MAX_DIMS];
  int n = 0;
  int64_t count = 1;
  for (int i = axis; i < x.ndim; i++) {
    dims[n++] = i;
    count *= x.dims[i];
  }
  for (int i = 0; i < x.ndim; i++) kept[i] = i < axis ? x.dims[i] : 1;
  for (int i = 0; i < axis; i++) bd[i] = i;
  tp_hlo_value_t zero = tp_hlo_constant(b, x.dtype, 0);
  tp_hlo_value_t mean = count > 0 ? moments_sum(b, x, axis, lanes) : tp_hlo_reduce(b, x, zero, TP_HLO_ADD, n, dims);
  mean = tp_hlo_binary(b, TP_HLO_DIV, mean, tp_k(b, (double)count, mean));
  tp_hlo_value_t mean_b = tp_hlo_broadcast_in_dim(b, mean, x.ndim, x.dims, bd);
  tp_hlo_value_t d = tp_hlo_binary(b, TP_HLO_SUB, x, mean_b);
  tp_hlo_value_t var = tp_hlo_reduce(b, tp_hlo_binary(b, TP_HLO_MUL, d, d), zero, TP_HLO_ADD, n, dims);
  var = tp_hlo_binary(b, TP_HLO_DIV, var, tp_k(b, (double)count, var));
  tp_hlo_value_t rstd = tp_hlo_unary(
      b, TP_HLO_RSQRT, tp_hlo_binary(b, TP_HLO_ADD, var, tp_hlo_broadcast_to(b, eps, var.ndim, var.dims)));
  *out_xhat = tp_hlo_binary(b, TP_HLO_MUL, d, tp_hlo_broadcast_in_dim(b, rstd, x.ndim, x.dims, bd));
  *out_mean = tp_hlo_reshape(b, mean, x.ndim, kept);
  *out_rstd = tp_hlo_reshape(b, rstd, x.ndim, kept);
}

void tp_emit_layer_norm(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                        int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                        tp_hlo_value_t *out) {
  int axis = args[LN_INPUT].meta.ndim - (args[LN_SHAPE].kind == TP_ARG_INTS ? args[LN_SHAPE].n : 0);
  tp_dtype_t md = tp_math_dtype(out_meta[1].dtype);
  tp_hlo_value_t x = tp_hlo_convert(b, in[LN_INPUT], md);
  tp_hlo_value_t eps = tp_hlo_constant(b, md, args[LN_EPS].kind == TP_ARG_FLOAT ? args[LN_EPS].f : 1e-5);
  tp_hlo_value_t mean, rstd, y;
  normalize(b, x, axis, eps, moments_lanes(args[LN_INPUT].meta.dtype), &mean, &rstd, &y);
  int64_t bd[TP_MAX_DIMS];
  for (int i = axis; i < x.ndim; i++) bd[i - axis] = i;
  if (args[LN_WEIGHT].kind == TP_ARG_TENSOR)
    y = tp_hlo_binary(b, TP_HLO_MUL, y, tp_hlo_broadcast_in_dim(b, tp_hlo_convert(b, in[LN_WEIGHT], md), x.ndim, x.dims, bd));
  if (args[LN_BIAS].kind == TP_ARG_TENSOR)
    y = tp_hlo_binary(b, TP_HLO_ADD, y, tp_hlo_broadcast_in_dim(b, tp_hlo_convert(b, in[LN_BIAS], md), x.ndim, x.dims, bd));
  out[0] = tp_hlo_convert(b, y, out_meta[0].dtype);
  out[1] = tp_hlo_convert(b, mean, out_meta[1].dtype);
  out[2] = tp_hlo_convert(b, rstd, out_meta[2].dtype);
}

/* native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight?, bias?,
 * output_mask) -> (grad_input, grad_weight, grad_bias); all three are computed. */
tp_status_t *tp_infer_layer_norm_backward(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                          tp_meta_t *out, int *n_out) {
  if (n_args < 7 || args[LNB_GRAD].kind != TP_ARG_TENSOR || args[LNB_INPUT].kind != TP_ARG_TENSOR ||
      args[LNB_MEAN].kind != TP_ARG_TENSOR || args[LNB_RSTD].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  int axis;
  TP_RETURN_IF_ERROR(layer_norm_axis(op, &args[LNB_INPUT], &args[LNB_SHAPE], &args[LNB_WEIGHT], &args[LNB_BIAS], &axis));
  out[0] = args[LNB_INPUT].meta;
  tp_meta_t w = {.dtype = args[LNB_INPUT].meta.dtype, .ndim = args[LNB_SHAPE].n};
  for (int i = 0; i < args[LNB_SHAPE].n; i++) w.sizes[i] = args[LNB_SHAPE].ints[i];
  if (args[LNB_WEIGHT].kind == TP_ARG_TENSOR) w.dtype = args[LNB_WEIGHT].meta.dtype;
  out[1] = w;
  out[2] = w;
  if (args[LNB_BIAS].kind == TP_ARG_TENSOR) out[2].dtype = args[LNB_BIAS].meta.dtype;
  *n_out = 3;
  return NULL;
}

void tp_emit_layer_norm_backward(const tp_op_def_t *op, tp_hlo_builder_t *b,
                                 const tp_op_arg_t *args, int n_args, const tp_hlo_value_t *in,
                                 const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  int axis = args[LNB_INPUT].meta.ndim - args[LNB_SHAPE].n;
  tp_dtype_t md = tp_math_dtype(in[LNB_MEAN].dtype);
  tp_hlo_value_t g = tp_hlo_convert(b, in[LNB_GRAD], md), x = tp_hlo_convert(b, in[LNB_INPUT], md);
  tp_hlo_value_t mean = tp_hlo_broadcast_to(b, tp_hlo_convert(b, in[LNB_MEAN], md), x.ndim, x.dims);
  tp_hlo_value_t rstd = tp_hlo_broadcast_to(b, tp_hlo_convert(b, in[LNB_RSTD], md), x.ndim, x.dims);
  tp_hlo_value_t xhat = tp_hlo_binary(b, TP_HLO_MUL, tp_hlo_binary(b, TP_HLO_SUB, x, mean), rstd);
  int64_t inner[TP_MAX_DIMS], outer[TP_MAX_DIMS], bd[TP_MAX_DIMS];
  int ni = 0, no = 0;
  int64_t count = 1;
  for (int i = 0; i < x.ndim; i++) {
    if (i >= axis) {
      inner[ni++] = i;
      count *= x.dims[i];
    } else {
      outer[no++] = i;
    }
  }
  for (int i = axis; i < x.ndim; i++) bd[i - axis] = i;
  tp_hlo_value_t zero = tp_hlo_constant(b, md, 0);
  tp_hlo_value_t gw = g; /* g * weight */
  if (args[LNB_WEIGHT].kind == TP_ARG_TENSOR)
    gw = tp_hlo_binary(b, TP_HLO_MUL, g, tp_hlo_broadcast_in_dim(b, tp_hlo_convert(b, in[LNB_WEIGHT], md), x.ndim, x.dims, bd));
  /* dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) over the normalized dims */
  tp_hlo_value_t keep_shape_sum1 = tp_hlo_reduce(b, gw, zero, TP_HLO_ADD, ni, inner);
  tp_hlo_value_t keep_shape_sum2 = tp_hlo_reduce(b, tp_hlo_binary(b, TP_HLO_MUL, gw, xhat), zero, TP_HLO_ADD, ni, inner);
  int64_t obd[TP_MAX_DIMS];
  for (int i = 0; i < no; i++) obd[i] = outer[i];
  tp_hlo_value_t s1 = tp_hlo_broadcast_in_dim(b, keep_shape_sum1, x.ndim, x.dims, obd);
  tp_hlo_value_t s2 = tp_hlo_broadcast_in_dim(b, keep_shape_sum2, x.ndim, x.dims, obd);
  tp_hlo_value_t inv_n = tp_k(b, 1.0 / (double)(count ? count : 1), x);
  tp_hlo_value_t dx = tp_hlo_binary(
      b, TP_HLO_MUL, rstd,
      tp_hlo_binary(b, TP_HLO_SUB,
                    tp_hlo_binary(b, TP_HLO_SUB, gw, tp_hlo_binary(b, TP_HLO_MUL, s1, inv_n)),
                    tp_hlo_binary(b, TP_HLO_MUL, xhat, tp_hlo_binary(b, TP_HLO_MUL, s2, inv_n))));
  out[0] = tp_hlo_convert(b, dx, out_meta[0].dtype);
  tp_hlo_value_t dw = tp_hlo_reduce(b, tp_hlo_binary(b, TP_HLO_MUL, g, xhat), zero, TP_HLO_ADD, no, outer);
  tp_hlo_value_t db = tp_hlo_reduce(b, g, zero, TP_HLO_ADD, no, outer);
  out[1] = tp_hlo_convert(b, tp_hlo_reshape(b, dw, out_meta[1].ndim, out_meta[1].sizes), out_meta[1].dtype);
  out[2] = tp_hlo_convert(b, tp_hlo_reshape(b, db, out_meta[2].ndim, out_meta[2].sizes), out_meta[2].dtype);
}

/* native_batch_norm(input, weight?, bias?, running_mean?, running_var?, training, momentum, eps)
 * -> (out, save_mean, save_invstd), and in training the running stats updated in place (two
 * more outputs written into arguments 3 and 4). Statistics are per channel (dim 1).
 * TP_BN_FUNCTIONAL: the functional form a captured graph holds, returning the updated stats;
 * TP_BN_NO_TRAINING: _native_batch_norm_legit_no_training(input, weight?, bias?, running_mean,
 * running_var, momentum, eps), evaluation mode (graphs: eager mode reaches native_batch_norm). */
typedef struct {
  int input, weight, bias, running_mean, running_var; /* argument positions */
  bool training;
  double momentum, eps;
} batch_norm_args_t;

static batch_norm_args_t parse_batch_norm(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args) {
  batch_norm_args_t p = {0, 1, 2, 3, 4, false, 0.1, 1e-5};
  int momentum = 6, eps = 7;
  if (op->code == TP_BN_NO_TRAINING) {
    momentum = 5;
    eps = 6;
  } else {
    p.training = n_args > 5 && args[5].kind == TP_ARG_INT && args[5].i;
  }
  if (momentum < n_args && args[momentum].kind == TP_ARG_FLOAT) p.momentum = args[momentum].f;
  if (eps < n_args && args[eps].kind == TP_ARG_FLOAT) p.eps = args[eps].f;
  return p;
}

/* INVALID_ARGUMENT unless argument |i| is absent or a vector of |c| elements (a per-channel
 * weight, bias or statistic): CPU's kernels read such vectors unchecked. */
static tp_status_t *check_per_channel(const tp_op_def_t *op, const tp_op_arg_t *args, int i, int64_t c) {
  if (args[i].kind != TP_ARG_TENSOR || tp_meta_numel(&args[i].meta) == c) return NULL;
  return tp_make_status(TP_INVALID_ARGUMENT, "%s: argument %d has %lld elements, expected %lld "
                        "(one per channel)", op->name, i, (long long)tp_meta_numel(&args[i].meta),
                        (long long)c);
}

tp_status_t *tp_infer_batch_norm(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                 tp_meta_t *out, int *n_out) {
  if (n_args < (op->code == TP_BN_NO_TRAINING ? 7 : 8) || args[0].kind != TP_ARG_TENSOR ||
      args[0].meta.ndim < 2)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected input with at least 2 dims", op->name);
  batch_norm_args_t p = parse_batch_norm(op, args, n_args);
  for (int i = p.weight; i <= p.running_var; i++)
    TP_RETURN_IF_ERROR(check_per_channel(op, args, i, args[p.input].meta.sizes[1]));
  bool training = p.training;
  bool stats = args[p.running_mean].kind == TP_ARG_TENSOR && args[p.running_var].kind == TP_ARG_TENSOR;
  if (!training && !stats)
    return tp_make_status(TP_INVALID_ARGUMENT, "running_mean and running_var must be defined in evaluation mode");
  int64_t c = args[0].meta.sizes[1];
  tp_dtype_t sd = tp_math_dtype(args[0].meta.dtype) == TP_DTYPE_F64 ? TP_DTYPE_F64 : TP_DTYPE_F32;
  if (!tp_dtype_is_float(args[0].meta.dtype))
    return tp_make_status(TP_INVALID_ARGUMENT, "batch_norm: expected a floating point input");
  out[0] = args[0].meta;
  out[0].writes_arg = 0;
  tp_meta_t v = {args[0].meta.dtype == TP_DTYPE_F64 ? TP_DTYPE_F64 : sd, 1, {training ? c : 0}, 0};
  bool mixed = false; /* half input with float parameters: CPU then keeps float statistics */
  for (int i = 1; i <= 4; i++) mixed |= args[i].kind == TP_ARG_TENSOR && args[i].meta.dtype != args[0].meta.dtype;
  if (args[0].meta.dtype != TP_DTYPE_F64 && args[0].meta.dtype != TP_DTYPE_F32 && !mixed)
    v.dtype = args[0].meta.dtype; /* CPU keeps half types for the saved statistics */
  if (op->code == TP_BN_NO_TRAINING) /* as the meta kernel (CUDA's): the stats it used, in float */
    v = (tp_meta_t){sd, 1, {c}, 0};
  out[1] = out[2] = v;
  *n_out = 3;
  if (training && stats) {
    /* Updated running statistics: written into the arguments, or (the functional form a
     * captured graph holds) returned. */
    bool functional = op->code == TP_BN_FUNCTIONAL;
    out[3] = args[p.running_mean].meta;
    out[3].writes_arg = functional ? 0 : p.running_mean + 1;
    out[4] = args[p.running_var].meta;
    out[4].writes_arg = functional ? 0 : p.running_var + 1;
    *n_out = 5;
  } else if (op->code == TP_BN_FUNCTIONAL) {
    return tp_make_status(TP_UNIMPLEMENTED, "%s: evaluation mode", op->name);
  }
  return NULL;
}

/* Per-channel statistics of |x| (channel dim 1): broadcasting a [C] vector back over |x|. */
static tp_hlo_value_t per_channel(tp_hlo_builder_t *b, tp_hlo_value_t v, const tp_hlo_value_t *x) {
  int64_t one = 1;
  return tp_hlo_broadcast_in_dim(b, v, x->ndim, x->dims, &one);
}

static tp_hlo_value_t channel_sum(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  int64_t dims[TP_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < x.ndim; i++)
    if (i != 1) dims[n++] = i;
  return tp_hlo_reduce(b, x, tp_hlo_constant(b, x.dtype, 0), TP_HLO_ADD, n, dims);
}

void tp_emit_batch_norm(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                        int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                        tp_hlo_value_t *out) {
  batch_norm_args_t p = parse_batch_norm(op, args, n_args);
  bool training = p.training;
  tp_dtype_t md = tp_math_dtype(args[0].meta.dtype);
  tp_hlo_value_t x = tp_hlo_convert(b, in[0], md);
  int64_t c = x.dims[1], count = tp_hlo_numel(&x) / (c ? c : 1);
  double eps = p.eps, momentum = p.momentum;
  tp_hlo_value_t mean, var, var_sum = {0};
  if (training) {
    /* The per-channel sum of squares rounded to the statistics' dtype before it is divided: half
     * types then land much nearer CPU's statistics (not bit-exact: its reduction order differs). */
    mean = tp_hlo_binary(b, TP_HLO_DIV, channel_sum(b, x), tp_hlo_broadcast_to(b, tp_hlo_constant(b, md, (double)count), 1, &c));
    tp_hlo_value_t d = tp_hlo_binary(b, TP_HLO_SUB, x, per_channel(b, mean, &x));
    var_sum = tp_hlo_convert(b, tp_hlo_convert(b, channel_sum(b, tp_hlo_binary(b, TP_HLO_MUL, d, d)), out_meta[1].dtype), md);
    var = tp_hlo_binary(b, TP_HLO_DIV, var_sum, tp_hlo_broadcast_to(b, tp_hlo_constant(b, md, (double)count), 1, &c));
  } else {
    mean = tp_hlo_convert(b, in[3], md);
    var = tp_hlo_convert(b, in[4], md);
  }
  tp_hlo_value_t invstd = tp_hlo_binary(b, TP_HLO_DIV, tp_k(b, 1, var),
                                        tp_hlo_unary(b, TP_HLO_SQRT, tp_hlo_binary(b, TP_HLO_ADD, var, tp_k(b, eps, var))));
  /* CPU's order (its contiguous kernel): in training the statistics are first stored in their
   * saved dtype (half types for half inputs), then y = x * alpha + beta per channel with
   * alpha = invstd * weight and beta = bias - mean * alpha, in float, rounded once. */
  tp_hlo_value_t m = mean, is = invstd;
  if (training) {
    m = tp_hlo_convert(b, tp_hlo_convert(b, mean, out_meta[1].dtype), md);
    is = tp_hlo_convert(b, tp_hlo_convert(b, invstd, out_meta[2].dtype), md);
  }
  tp_hlo_value_t alpha = args[1].kind == TP_ARG_TENSOR ? tp_hlo_binary(b, TP_HLO_MUL, is, tp_hlo_convert(b, in[1], md)) : is;
  tp_hlo_value_t beta = tp_hlo_binary(b, TP_HLO_MUL, m, alpha);
  beta = args[2].kind == TP_ARG_TENSOR ? tp_hlo_binary(b, TP_HLO_SUB, tp_hlo_convert(b, in[2], md), beta)
                                       : tp_hlo_unary(b, TP_HLO_NEG, beta);
  tp_hlo_value_t y = tp_hlo_binary(b, TP_HLO_ADD, tp_hlo_binary(b, TP_HLO_MUL, x, per_channel(b, alpha, &x)),
                                   per_channel(b, beta, &x));
  out[0] = tp_hlo_convert(b, y, out_meta[0].dtype);
  if (training) {
    out[1] = tp_hlo_convert(b, mean, out_meta[1].dtype);
    out[2] = tp_hlo_convert(b, invstd, out_meta[2].dtype);
  } else if (op->code == TP_BN_NO_TRAINING) {
    out[1] = tp_hlo_convert(b, mean, out_meta[1].dtype);
    out[2] = tp_hlo_convert(b, invstd, out_meta[2].dtype);
  } else {
    int64_t zero = 0;
    out[1] = tp_hlo_broadcast_to(b, tp_hlo_constant(b, out_meta[1].dtype, 0), 1, &zero);
    out[2] = tp_hlo_broadcast_to(b, tp_hlo_constant(b, out_meta[2].dtype, 0), 1, &zero);
  }
  if ((out_meta[3].writes_arg || op->code == TP_BN_FUNCTIONAL) && training) {
    double n1 = count > 1 ? (double)(count - 1) : 1.0;
    for (int k = 0; k < 2; k++) {
      tp_dtype_t rd = out_meta[3 + k].dtype;
      tp_hlo_value_t old = tp_hlo_convert(b, in[3 + k], md);
      tp_hlo_value_t cur = k == 0 ? m : tp_hlo_binary(b, TP_HLO_DIV, var_sum, tp_k(b, n1, var_sum));
      tp_hlo_value_t upd = tp_hlo_binary(b, TP_HLO_ADD, tp_hlo_binary(b, TP_HLO_MUL, old, tp_k(b, 1 - momentum, old)),
                                         tp_hlo_binary(b, TP_HLO_MUL, cur, tp_k(b, momentum, cur)));
      out[3 + k] = tp_hlo_convert(b, upd, rd);
    }
  }
}

/* native_batch_norm_backward(grad_out, input, weight?, running_mean?, running_var?, save_mean?,
 * save_invstd?, train, eps, output_mask) -> (grad_input, grad_weight, grad_bias). */
tp_status_t *tp_infer_batch_norm_backward(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                          tp_meta_t *out, int *n_out) {
  if (n_args < 10 || args[BNB_GRAD].kind != TP_ARG_TENSOR || args[BNB_INPUT].kind != TP_ARG_TENSOR ||
      args[BNB_INPUT].meta.ndim < 2)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  bool train = args[BNB_TRAIN].i != 0;
  if (train ? (args[BNB_SAVE_MEAN].kind != TP_ARG_TENSOR || args[BNB_SAVE_INVSTD].kind != TP_ARG_TENSOR)
            : (args[BNB_RUNNING_MEAN].kind != TP_ARG_TENSOR || args[BNB_RUNNING_VAR].kind != TP_ARG_TENSOR))
    return tp_make_status(TP_INVALID_ARGUMENT, train ? "%s: save_mean and save_invstd must be "
                          "defined in training mode" : "%s: running_mean and running_var must be "
                          "defined in evaluation mode", op->name);
  const tp_meta_t *g = &args[BNB_GRAD].meta, *in = &args[BNB_INPUT].meta;
  if (g->ndim != in->ndim || memcmp(g->sizes, in->sizes, sizeof(int64_t) * (size_t)in->ndim))
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: grad_out and input must have the same shape",
                          op->name);
  /* The vectors this mode reads: weight, and the saved (training) or running statistics; the
   * others may be empty (an eval-mode forward saves no statistics). */
  int64_t c = args[BNB_INPUT].meta.sizes[1];
  TP_RETURN_IF_ERROR(check_per_channel(op, args, BNB_WEIGHT, c));
  for (int i = train ? BNB_SAVE_MEAN : BNB_RUNNING_MEAN;
       i <= (train ? BNB_SAVE_INVSTD : BNB_RUNNING_VAR); i++)
    TP_RETURN_IF_ERROR(check_per_channel(op, args, i, c));
  out[0] = args[BNB_INPUT].meta;
  const tp_meta_t *x = &args[BNB_INPUT].meta;
  tp_meta_t w = {args[BNB_WEIGHT].kind == TP_ARG_TENSOR ? args[BNB_WEIGHT].meta.dtype : x->dtype, 1,
                 {x->sizes[1]}, 0};
  out[1] = out[2] = w;
  *n_out = 3;
  return NULL;
}

void tp_emit_batch_norm_backward(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                                 int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                                 tp_hlo_value_t *out) {
  bool train = args[BNB_TRAIN].i != 0;
  tp_dtype_t md = tp_math_dtype(args[BNB_INPUT].meta.dtype);
  tp_hlo_value_t g = tp_hlo_convert(b, in[BNB_GRAD], md), x = tp_hlo_convert(b, in[BNB_INPUT], md);
  int64_t c = x.dims[1], count = tp_hlo_numel(&x) / (c ? c : 1);
  tp_hlo_value_t mean, invstd;
  if (train) {
    mean = tp_hlo_convert(b, in[BNB_SAVE_MEAN], md);
    invstd = tp_hlo_convert(b, in[BNB_SAVE_INVSTD], md);
  } else {
    mean = tp_hlo_convert(b, in[BNB_RUNNING_MEAN], md);
    tp_hlo_value_t var = tp_hlo_convert(b, in[BNB_RUNNING_VAR], md);
    double eps = args[BNB_EPS].kind == TP_ARG_FLOAT ? args[BNB_EPS].f : 1e-5;
    invstd = tp_hlo_unary(b, TP_HLO_RSQRT, tp_hlo_binary(b, TP_HLO_ADD, var, tp_k(b, eps, var)));
  }
  tp_hlo_value_t w = args[BNB_WEIGHT].kind == TP_ARG_TENSOR ? tp_hlo_convert(b, in[BNB_WEIGHT], md) : tp_k(b, 1, mean);
  tp_hlo_value_t xhat = tp_hlo_binary(b, TP_HLO_MUL, tp_hlo_binary(b, TP_HLO_SUB, x, per_channel(b, mean, &x)),
                                      per_channel(b, invstd, &x));
  tp_hlo_value_t db = channel_sum(b, g);
  tp_hlo_value_t dw = channel_sum(b, tp_hlo_binary(b, TP_HLO_MUL, g, xhat));
  tp_hlo_value_t scale = per_channel(b, tp_hlo_binary(b, TP_HLO_MUL, w, invstd), &x);
  tp_hlo_value_t dx;
  if (train) {
    tp_hlo_value_t inv_n = tp_k(b, 1.0 / (double)(count ? count : 1), db);
    tp_hlo_value_t mg = per_channel(b, tp_hlo_binary(b, TP_HLO_MUL, db, inv_n), &x);
    tp_hlo_value_t mgx = per_channel(b, tp_hlo_binary(b, TP_HLO_MUL, dw, inv_n), &x);
    dx = tp_hlo_binary(b, TP_HLO_MUL, scale,
                       tp_hlo_binary(b, TP_HLO_SUB, tp_hlo_binary(b, TP_HLO_SUB, g, mg),
                                     tp_hlo_binary(b, TP_HLO_MUL, xhat, mgx)));
  } else {
    dx = tp_hlo_binary(b, TP_HLO_MUL, g, scale);
  }
  out[0] = tp_hlo_convert(b, dx, out_meta[0].dtype);
  out[1] = tp_hlo_convert(b, dw, out_meta[1].dtype);
  out[2] = tp_hlo_convert(b, db, out_meta[2].dtype);
}

/* native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean, rstd) and
 * (TP_DIR_BACKWARD) native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW, group,
 * output_mask) -> (grad_input, grad_weight, grad_bias). Statistics are [N, group], in the
 * input's dtype (the weight's when it differs, as CPU's mixed-type kernel keeps them). */
tp_status_t *tp_infer_group_norm(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                 tp_meta_t *out, int *n_out) {
  bool bwd = op->code == TP_DIR_BACKWARD;
  int x_at = bwd ? 1 : 0, w_at = bwd ? 4 : 1, n_at = bwd ? 5 : 3;
  if (n_args < n_at + 4 || args[x_at].kind != TP_ARG_TENSOR || (bwd && args[0].kind != TP_ARG_TENSOR))
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  const tp_meta_t *x = &args[x_at].meta;
  int64_t n = args[n_at].i, c = args[n_at + 1].i, hw = args[n_at + 2].i, g = args[n_at + 3].i;
  if (!tp_dtype_is_float(x->dtype))
    return tp_make_status(TP_UNIMPLEMENTED, "%s of a non-float input", op->name);
  if (x->ndim < 2 || g <= 0 || c % g != 0 || tp_meta_numel(x) != n * c * hw || x->sizes[0] != n ||
      x->sizes[1] != c)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: Expected number of channels in input to be "
                          "divisible by num_groups, and sizes N, C, HxW to match the input", op->name);
  tp_dtype_t sd = x->dtype;
  if (args[w_at].kind == TP_ARG_TENSOR) {
    if (args[w_at].meta.ndim != 1 || args[w_at].meta.sizes[0] != c)
      return tp_make_status(TP_INVALID_ARGUMENT, "%s: Expected weight to be a vector of size "
                            "equal to the number of channels in input", op->name);
    sd = args[w_at].meta.dtype;
  }
  out[0] = *x;
  out[0].writes_arg = 0;
  if (bwd) {
    tp_meta_t w = {sd, 1, {c}, 0};
    out[1] = out[2] = w;
  } else {
    tp_meta_t s = {sd, 2, {n, g}, 0};
    out[1] = out[2] = s;
  }
  *n_out = 3;
  return NULL;
}

void tp_emit_group_norm(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                        int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                        tp_hlo_value_t *out) {
  bool bwd = op->code == TP_DIR_BACKWARD;
  int x_at = bwd ? 1 : 0, w_at = bwd ? 4 : 1, n_at = bwd ? 5 : 3;
  int64_t n = args[n_at].i, c = args[n_at + 1].i, hw = args[n_at + 2].i, g = args[n_at + 3].i;
  int64_t d = c / g * hw, ngd[3] = {n, g, d}, nchw[3] = {n, c, hw}, ng1[3] = {n, g, 1};
  tp_dtype_t md = tp_math_dtype(args[x_at].meta.dtype);
  int64_t chan = 1;
  tp_hlo_value_t x = tp_hlo_reshape(b, tp_hlo_convert(b, in[x_at], md), 3, ngd);
  tp_hlo_value_t w = {0};
  if (args[w_at].kind == TP_ARG_TENSOR)
    w = tp_hlo_broadcast_in_dim(b, tp_hlo_convert(b, in[w_at], md), 3, nchw, &chan);
  if (!bwd) {
    tp_hlo_value_t eps = tp_hlo_constant(b, md, args[7].kind == TP_ARG_FLOAT ? args[7].f : 1e-5);
    tp_hlo_value_t mean, rstd, xhat;
    normalize(b, x, 2, eps, moments_lanes(args[x_at].meta.dtype), &mean, &rstd, &xhat);
    /* CPU's form, per channel: y = x * s + t, s = rstd * weight, t = bias - s * mean. An
     * infinite weight or bias is NaN there (inf - inf in t) where (x - mean) * rstd * w + b is
     * not; and it is one multiply-add per element. */
    int64_t ngc[3] = {n, g, c / g}, nc[2] = {n, c}, keep2[2] = {0, 1};
    tp_hlo_value_t sc = tp_hlo_reshape(b, tp_hlo_broadcast_in_dim(b, tp_hlo_reshape(b, rstd, 2, (int64_t[]){n, g}), 3, ngc, keep2), 2, nc);
    tp_hlo_value_t mc = tp_hlo_reshape(b, tp_hlo_broadcast_in_dim(b, tp_hlo_reshape(b, mean, 2, (int64_t[]){n, g}), 3, ngc, keep2), 2, nc);
    int64_t one = 1;
    if (args[1].kind == TP_ARG_TENSOR)
      sc = tp_hlo_binary(b, TP_HLO_MUL, sc, tp_hlo_broadcast_in_dim(b, tp_hlo_convert(b, in[1], md), 2, nc, &one));
    tp_hlo_value_t t = tp_hlo_unary(b, TP_HLO_NEG, tp_hlo_binary(b, TP_HLO_MUL, sc, mc));
    if (args[2].kind == TP_ARG_TENSOR)
      t = tp_hlo_binary(b, TP_HLO_ADD, t, tp_hlo_broadcast_in_dim(b, tp_hlo_convert(b, in[2], md), 2, nc, &one));
    tp_hlo_value_t y = tp_hlo_binary(b, TP_HLO_MUL, tp_hlo_reshape(b, x, 3, nchw),
                                     tp_hlo_broadcast_in_dim(b, sc, 3, nchw, keep2));
    y = tp_hlo_binary(b, TP_HLO_ADD, y, tp_hlo_broadcast_in_dim(b, t, 3, nchw, keep2));
    out[0] = tp_hlo_convert(b, tp_hlo_reshape(b, y, out_meta[0].ndim, out_meta[0].sizes), out_meta[0].dtype);
    int64_t ng[2] = {n, g};
    out[1] = tp_hlo_convert(b, tp_hlo_reshape(b, mean, 2, ng), out_meta[1].dtype);
    out[2] = tp_hlo_convert(b, tp_hlo_reshape(b, rstd, 2, ng), out_meta[2].dtype);
    return;
  }
  /* xhat = (x - mean) * rstd per group; with go = grad_out * weight:
   * dx = rstd * (go - mean_group(go) - xhat * mean_group(go * xhat)). */
  int64_t red = 2, red_c[2] = {0, 2};
  tp_hlo_value_t mean = tp_hlo_broadcast_in_dim(b, tp_hlo_reshape(b, tp_hlo_convert(b, in[2], md), 3, ng1), 3, ngd, (int64_t[]){0, 1, 2});
  tp_hlo_value_t rstd = tp_hlo_broadcast_in_dim(b, tp_hlo_reshape(b, tp_hlo_convert(b, in[3], md), 3, ng1), 3, ngd, (int64_t[]){0, 1, 2});
  tp_hlo_value_t xhat = tp_hlo_binary(b, TP_HLO_MUL, tp_hlo_binary(b, TP_HLO_SUB, x, mean), rstd);
  tp_hlo_value_t go_c = tp_hlo_reshape(b, tp_hlo_convert(b, in[0], md), 3, nchw);
  tp_hlo_value_t zero = tp_hlo_constant(b, md, 0);
  /* grad_weight / grad_bias: per channel over N and HxW. */
  tp_hlo_value_t xhat_c = tp_hlo_reshape(b, xhat, 3, nchw);
  out[1] = tp_hlo_convert(b, tp_hlo_reduce(b, tp_hlo_binary(b, TP_HLO_MUL, go_c, xhat_c), zero, TP_HLO_ADD, 2, red_c), out_meta[1].dtype);
  out[2] = tp_hlo_convert(b, tp_hlo_reduce(b, go_c, zero, TP_HLO_ADD, 2, red_c), out_meta[2].dtype);
  if (args[w_at].kind == TP_ARG_TENSOR) go_c = tp_hlo_binary(b, TP_HLO_MUL, go_c, w);
  tp_hlo_value_t go = tp_hlo_reshape(b, go_c, 3, ngd);
  tp_hlo_value_t inv_d = tp_hlo_constant(b, md, 1.0 / (double)d);
  tp_hlo_value_t m1 = tp_hlo_reduce(b, go, zero, TP_HLO_ADD, 1, &red);
  tp_hlo_value_t m2 = tp_hlo_reduce(b, tp_hlo_binary(b, TP_HLO_MUL, go, xhat), zero, TP_HLO_ADD, 1, &red);
  int64_t ngs[2] = {n, g};
  m1 = tp_hlo_broadcast_in_dim(b, tp_hlo_binary(b, TP_HLO_MUL, m1, tp_hlo_broadcast_to(b, inv_d, 2, ngs)), 3, ngd, (int64_t[]){0, 1});
  m2 = tp_hlo_broadcast_in_dim(b, tp_hlo_binary(b, TP_HLO_MUL, m2, tp_hlo_broadcast_to(b, inv_d, 2, ngs)), 3, ngd, (int64_t[]){0, 1});
  tp_hlo_value_t dx = tp_hlo_binary(b, TP_HLO_SUB, tp_hlo_binary(b, TP_HLO_SUB, go, m1), tp_hlo_binary(b, TP_HLO_MUL, xhat, m2));
  dx = tp_hlo_binary(b, TP_HLO_MUL, dx, rstd);
  out[0] = tp_hlo_convert(b, tp_hlo_reshape(b, dx, out_meta[0].ndim, out_meta[0].sizes), out_meta[0].dtype);
}

/* |p|-norm over the last dim of |x| (keeping it, size 1): p > 0. */
static tp_hlo_value_t norm_last(tp_hlo_builder_t *b, tp_hlo_value_t x, double p) {
  tp_hlo_value_t a = tp_hlo_unary(b, TP_HLO_ABS, x);
  int64_t last = x.ndim - 1, kd[TP_MAX_DIMS];
  memcpy(kd, x.dims, sizeof(kd));
  kd[last] = 1;
  tp_hlo_value_t r;
  if (isinf(p)) { /* XLA's max drops NaN; CPU's norm is NaN then */
    r = tp_hlo_reduce(b, a, tp_hlo_constant(b, x.dtype, 0), TP_HLO_MAX, 1, &last);
    tp_hlo_value_t nan = tp_hlo_reduce(b, tp_hlo_compare(b, TP_CMP_NE, x, x),
                                       tp_hlo_constant_i(b, TP_DTYPE_BOOL, 0), TP_HLO_OR, 1, &last);
    r = tp_hlo_select(b, nan, tp_k(b, NAN, r), r);
  } else if (p == 1) {
    r = tp_hlo_reduce(b, a, tp_hlo_constant(b, x.dtype, 0), TP_HLO_ADD, 1, &last);
  } else if (p == 2) {
    r = tp_hlo_unary(b, TP_HLO_SQRT, tp_hlo_reduce(b, tp_bin(b, TP_HLO_MUL, a, a), tp_hlo_constant(b, x.dtype, 0),
                                                   TP_HLO_ADD, 1, &last));
  } else {
    r = tp_hlo_reduce(b, tp_bin(b, TP_HLO_POW, a, tp_k(b, p, a)), tp_hlo_constant(b, x.dtype, 0), TP_HLO_ADD, 1, &last);
    r = tp_bin(b, TP_HLO_POW, r, tp_k(b, 1.0 / p, r));
  }
  return tp_hlo_reshape(b, r, x.ndim, kd);
}

tp_status_t *tp_infer_renorm(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                             int *n_out) {
  TP_RETURN_IF_ERROR(tp_infer_like_self(op, args, n_args, out, n_out));
  const tp_meta_t *x = &args[0].meta;
  bool fl = tp_dtype_is_float(x->dtype);
  /* (self, p, dim, maxnorm); p shapes the program. */
  if (n_args < 4 || args[1].kind != TP_ARG_SCALAR || args[2].kind != TP_ARG_INT ||
      args[3].kind != TP_ARG_SCALAR || !fl || x->ndim < 1 || tp_norm_dim(args[2].i, x->ndim) < 0)
    return tp_make_status(TP_UNIMPLEMENTED, "renorm: arguments");
  double p = tp_dtype_is_float(args[1].meta.dtype) ? args[1].f : (double)args[1].i;
  if (!(p > 0)) return tp_make_status(TP_UNIMPLEMENTED, "renorm: p");
  args[1].kind = TP_ARG_FLOAT;
  args[1].f = p;
  args[3].scalar_dtype = TP_DTYPE_F64;
  return NULL;
}

void tp_emit_renorm(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                    const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  const tp_meta_t *om = &out_meta[0];
  tp_dtype_t md = tp_math_dtype(om->dtype);
  /* CPU: the norm of each slice along dim, in float for 16-bit types, then (in the input's
   * type) factor = norm > maxnorm ? maxnorm / (norm + 1e-7) : 1, and self * factor. */
  tp_hlo_value_t x = in[0];
  int d = tp_norm_dim(args[2].i, x.ndim);
  tp_dtype_t dt = om->dtype;
  /* |d| first, the rest flattened: one row per slice. */
  int64_t perm[TP_MAX_DIMS];
  perm[0] = d;
  for (int i = 0, k = 1; i < x.ndim; i++)
    if (i != d) perm[k++] = i;
  tp_hlo_value_t v = tp_hlo_transpose(b, x, perm);
  int64_t n = x.dims[d], rest = tp_hlo_numel(&x) / (n ? n : 1), sh[2] = {n, rest};
  v = tp_hlo_convert(b, tp_hlo_reshape(b, v, 2, sh), md);
  tp_hlo_value_t nrm = norm_last(b, v, args[1].f); /* [n, 1] in md */
  tp_hlo_value_t maxn = tp_hlo_convert(b, in[3], TP_DTYPE_F64);
  int64_t one[2] = {n, 1};
  tp_hlo_value_t nd = tp_hlo_convert(b, nrm, dt); /* rounded to the input's type */
  tp_hlo_value_t big = tp_hlo_compare(b, TP_CMP_GT, tp_hlo_convert(b, nd, TP_DTYPE_F64), tp_hlo_broadcast_to(b, maxn, 2, one));
  tp_hlo_value_t mt = tp_hlo_broadcast_to(b, tp_hlo_convert(b, in[3], dt), 2, one);
  tp_hlo_value_t eps = tp_hlo_broadcast_to(b, tp_hlo_convert(b, tp_hlo_constant(b, TP_DTYPE_F64, 1e-7), dt), 2, one);
  tp_hlo_value_t den = tp_bin(b, TP_HLO_ADD, nd, eps);
  tp_hlo_value_t f = tp_hlo_select(b, big, tp_bin(b, TP_HLO_DIV, mt, den), tp_k(b, 1, nd));
  tp_hlo_value_t xs = tp_hlo_transpose(b, x, perm);
  int64_t tsh[TP_MAX_DIMS], bdim[1] = {0};
  memcpy(tsh, xs.dims, sizeof(tsh));
  tp_hlo_value_t fb = tp_hlo_broadcast_in_dim(b, tp_hlo_reshape(b, f, 1, &n), xs.ndim, tsh, bdim);
  tp_hlo_value_t r = tp_hlo_convert(b, tp_bin(b, TP_HLO_MUL, tp_hlo_convert(b, xs, md), tp_hlo_convert(b, fb, md)), dt);
  int64_t inv[TP_MAX_DIMS];
  for (int i = 0; i < x.ndim; i++) inv[perm[i]] = i;
  out[0] = tp_hlo_transpose(b, r, inv);
}
