/* Neural-network family: softmax/log_softmax and their backwards, activation backwards, gelu,
 * leaky_relu/hardtanh/elu, layer and batch norm (forward and backward), mse and nll losses. Half
 * types compute in f32. */
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

/* Activations with their own parameters. code: an activation of tp_activation_t. The forward
 * form is (self, params...); the backward form is (grad_output, self_or_result, params...). */
tp_status_t *tp_infer_activation(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                 tp_meta_t *out, int *n_out) {
  bool backward = op->code >= TP_A_BACKWARD;
  int n_tensors = backward ? 2 : 1;
  for (int i = 0; i < n_tensors; i++)
    if (i >= n_args || args[i].kind != TP_ARG_TENSOR)
      return tp_make_status(TP_INVALID_ARGUMENT, "%s: argument %d must be a tensor", op->name, i);
  if (op->code == TP_A_GELU || op->code == TP_A_GELU_BACKWARD) {
    const tp_op_arg_t *a = n_tensors < n_args ? &args[n_tensors] : NULL;
    if (a && a->kind == TP_ARG_STR && strcmp(a->s, "none") != 0 && strcmp(a->s, "tanh") != 0)
      return tp_make_status(TP_INVALID_ARGUMENT, "approximate argument must be either none or tanh.");
  }
  tp_meta_t shape = args[0].meta;
  if (backward) TP_RETURN_IF_ERROR(tp_broadcast_shapes(&args[0].meta, &args[1].meta, &shape));
  shape.dtype = tp_result_type(args, n_tensors);
  if (op->code == TP_A_DROPOUT_BACKWARD) /* mask is bool; CPU computes grad * mask * scale, so an
                                            * integer or bool grad promotes to the default float */
    shape.dtype = tp_dtype_is_float(args[0].meta.dtype) ? args[0].meta.dtype : TP_DTYPE_F32;
  if (!tp_dtype_is_float(shape.dtype) && op->code != TP_A_LEAKY_RELU && op->code != TP_A_HARDTANH)
    return tp_make_status(TP_INVALID_ARGUMENT, "\"%s\" not implemented for '%s'", op->name,
                          tp_dtype_name(shape.dtype));
  for (int i = n_tensors; i < n_args; i++)
    if (args[i].kind == TP_ARG_SCALAR) args[i].scalar_dtype = tp_math_dtype(shape.dtype);
  out[0] = shape;
  *n_out = 1;
  return NULL;
}

static tp_hlo_value_t scalar_arg(tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                                 const tp_hlo_value_t *in, int i, double dflt,
                                 const tp_hlo_value_t *like) {
  if (i < n_args && args[i].kind == TP_ARG_SCALAR)
    return tp_hlo_broadcast_to(b, tp_hlo_convert(b, in[i], like->dtype), like->ndim, like->dims);
  return tp_k(b, dflt, *like);
}

static tp_hlo_value_t gelu_cdf_parts(tp_hlo_builder_t *b, tp_hlo_value_t x, bool tanh_approx,
                                     tp_hlo_value_t *out_pdf_term) {
  /* Returns Phi(x) and, in *out_pdf_term, d/dx [x * Phi(x)] - Phi(x) = x * phi(x). */
  if (tanh_approx) {
    const double k = 0.7978845608028654, c = 0.044715;
    tp_hlo_value_t x2 = tp_hlo_binary(b, TP_HLO_MUL, x, x);
    tp_hlo_value_t inner = tp_hlo_binary(b, TP_HLO_MUL, tp_k(b, k, x),
                                         tp_hlo_binary(b, TP_HLO_ADD, x,
                                                       tp_hlo_binary(b, TP_HLO_MUL, tp_k(b, c, x),
                                                                     tp_hlo_binary(b, TP_HLO_MUL, x2, x))));
    tp_hlo_value_t t = tp_hlo_unary(b, TP_HLO_TANH, inner);
    tp_hlo_value_t half = tp_k(b, 0.5, x), one = tp_k(b, 1, x);
    tp_hlo_value_t cdf = tp_hlo_binary(b, TP_HLO_MUL, half, tp_hlo_binary(b, TP_HLO_ADD, one, t));
    if (out_pdf_term) {
      tp_hlo_value_t dinner = tp_hlo_binary(b, TP_HLO_MUL, tp_k(b, k, x),
                                            tp_hlo_binary(b, TP_HLO_ADD, one,
                                                          tp_hlo_binary(b, TP_HLO_MUL, tp_k(b, 3 * c, x), x2)));
      tp_hlo_value_t sech2 = tp_hlo_binary(b, TP_HLO_SUB, one, tp_hlo_binary(b, TP_HLO_MUL, t, t));
      *out_pdf_term = tp_hlo_binary(b, TP_HLO_MUL, tp_hlo_binary(b, TP_HLO_MUL, half, x),
                                    tp_hlo_binary(b, TP_HLO_MUL, sech2, dinner));
    }
    return cdf;
  }
  /* Phi(x) = erfc(-x / sqrt 2) / 2: exactly 0 far left, where 1 + erf(x) is not with XLA's
   * float erf (gelu(-inf) must be -inf * 0 = NaN, gelu(-1e30) -0, as on CPU). */
  tp_hlo_value_t cdf = tp_hlo_binary(
      b, TP_HLO_MUL, tp_k(b, 0.5, x),
      tp_hlo_unary(b, TP_HLO_ERFC, tp_hlo_binary(b, TP_HLO_MUL, x, tp_k(b, -M_SQRT1_2, x))));
  if (out_pdf_term) {
    tp_hlo_value_t pdf = tp_hlo_binary(
        b, TP_HLO_MUL, tp_k(b, 0.3989422804014327, x),
        tp_hlo_unary(b, TP_HLO_EXP, tp_hlo_binary(b, TP_HLO_MUL, tp_k(b, -0.5, x),
                                                  tp_hlo_binary(b, TP_HLO_MUL, x, x))));
    *out_pdf_term = tp_hlo_binary(b, TP_HLO_MUL, x, pdf);
  }
  return cdf;
}

static bool approx_tanh(const tp_op_arg_t *args, int n_args, int i) {
  return i < n_args && args[i].kind == TP_ARG_STR && strcmp(args[i].s, "tanh") == 0;
}

void tp_emit_activation(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                        int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                        tp_hlo_value_t *out) {
  tp_dtype_t md = tp_math_dtype(out_meta->dtype);
  bool backward = op->code >= TP_A_BACKWARD;
  tp_hlo_value_t g = backward ? tp_emit_cast_shape(b, in[0], md, out_meta) : (tp_hlo_value_t){0};
  tp_hlo_value_t x = tp_emit_cast_shape(b, in[backward ? 1 : 0], md, out_meta);
  int p = backward ? 2 : 1; /* first parameter */
  tp_hlo_value_t zero = tp_k(b, 0, x), one = tp_k(b, 1, x), r;
  switch ((tp_activation_t)op->code) {
    case TP_A_GELU: {
      bool tanh_approx = approx_tanh(args, n_args, 1);
      r = tp_hlo_binary(b, TP_HLO_MUL, x, gelu_cdf_parts(b, x, tanh_approx, NULL));
      /* CPU hands a contiguous float/bfloat16/half input of more than one element to oneDNN,
       * whose erf form yields NaN for +inf; its own kernel (double, strided, one element)
       * yields +inf. */
      if (!tanh_approx && out_meta->dtype != TP_DTYPE_F64 && args[0].contiguous &&
          tp_meta_numel(&args[0].meta) > 1)
        r = tp_hlo_select(b, tp_hlo_unary(b, TP_HLO_IS_POS_INF, x), tp_k(b, NAN, x), r);
      break;
    }
    case TP_A_GELU_BACKWARD: {
      tp_hlo_value_t term;
      tp_hlo_value_t cdf = gelu_cdf_parts(b, x, approx_tanh(args, n_args, 2), &term);
      r = tp_hlo_binary(b, TP_HLO_MUL, g, tp_hlo_binary(b, TP_HLO_ADD, cdf, term));
      break;
    }
    case TP_A_LEAKY_RELU: {
      tp_hlo_value_t s = scalar_arg(b, args, n_args, in, p, 0.01, &x);
      r = tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_GT, x, zero), x, tp_hlo_binary(b, TP_HLO_MUL, x, s));
      break;
    }
    case TP_A_LEAKY_RELU_BACKWARD: {
      tp_hlo_value_t s = scalar_arg(b, args, n_args, in, p, 0.01, &x);
      r = tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_GT, x, zero), g, tp_hlo_binary(b, TP_HLO_MUL, g, s));
      break;
    }
    case TP_A_HARDTANH: {
      tp_hlo_value_t lo = scalar_arg(b, args, n_args, in, p, -1, &x);
      tp_hlo_value_t hi = scalar_arg(b, args, n_args, in, p + 1, 1, &x);
      r = tp_hlo_binary(b, TP_HLO_MIN, tp_hlo_binary(b, TP_HLO_MAX, x, lo), hi);
      break;
    }
    case TP_A_HARDTANH_BACKWARD: {
      tp_hlo_value_t lo = scalar_arg(b, args, n_args, in, p, -1, &x);
      tp_hlo_value_t hi = scalar_arg(b, args, n_args, in, p + 1, 1, &x);
      tp_hlo_value_t inside = tp_hlo_binary(b, TP_HLO_AND, tp_hlo_compare(b, TP_CMP_GT, x, lo),
                                            tp_hlo_compare(b, TP_CMP_LT, x, hi));
      r = tp_hlo_select(b, inside, g, zero);
      break;
    }
    case TP_A_ELU: {
      /* elu(x; alpha, scale, input_scale) = x > 0 ? scale*x : scale*alpha*(exp(x*input_scale)-1) */
      tp_hlo_value_t alpha = scalar_arg(b, args, n_args, in, 1, 1, &x);
      tp_hlo_value_t scale = scalar_arg(b, args, n_args, in, 2, 1, &x);
      tp_hlo_value_t iscale = scalar_arg(b, args, n_args, in, 3, 1, &x);
      tp_hlo_value_t neg = tp_hlo_binary(b, TP_HLO_MUL, alpha,
                                         tp_hlo_unary(b, TP_HLO_EXPM1, tp_hlo_binary(b, TP_HLO_MUL, x, iscale)));
      r = tp_hlo_binary(b, TP_HLO_MUL, scale,
                        tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_GT, x, zero), x, neg));
      break;
    }
    case TP_A_SIGMOID_BACKWARD: /* g * y * (1 - y), x holds the output y */
      r = tp_hlo_binary(b, TP_HLO_MUL, g, tp_hlo_binary(b, TP_HLO_MUL, x, tp_hlo_binary(b, TP_HLO_SUB, one, x)));
      break;
    case TP_A_TANH_BACKWARD: /* g * (1 - y^2) */
      r = tp_hlo_binary(b, TP_HLO_MUL, g, tp_hlo_binary(b, TP_HLO_SUB, one, tp_hlo_binary(b, TP_HLO_MUL, x, x)));
      break;
    case TP_A_DROPOUT_BACKWARD: { /* native_dropout_backward(grad, mask, scale): g * mask * scale */
      double scale = args[2].kind == TP_ARG_FLOAT ? args[2].f : 1;
      tp_hlo_value_t s = tp_k(b, scale, x);
      if (in[1].dtype == TP_DTYPE_BOOL) {
        /* Dropped elements are g * 0 * scale (NaN for NaN/inf, -0 for negatives), as on CPU.
         * Written as a select: XLA rewrites g * convert(mask) (the product once scale 1 folds)
         * into select(mask, g, 0), which loses them. */
        tp_hlo_value_t mask = tp_hlo_broadcast_to(b, in[1], x.ndim, x.dims);
        r = tp_hlo_select(b, mask, tp_hlo_binary(b, TP_HLO_MUL, g, s),
                          tp_hlo_binary(b, TP_HLO_MUL, g, tp_k(b, 0.0 * scale, x)));
      } else {
        r = tp_hlo_binary(b, TP_HLO_MUL, tp_hlo_binary(b, TP_HLO_MUL, g, x), s);
      }
      break;
    }
    case TP_A_SILU_BACKWARD: { /* g * s * (1 + x * (1 - s)) */
      tp_hlo_value_t s = tp_hlo_unary(b, TP_HLO_LOGISTIC, x);
      r = tp_hlo_binary(b, TP_HLO_MUL, g,
                        tp_hlo_binary(b, TP_HLO_MUL, s,
                                      tp_hlo_binary(b, TP_HLO_ADD, one,
                                                    tp_hlo_binary(b, TP_HLO_MUL, x, tp_hlo_binary(b, TP_HLO_SUB, one, s)))));
      break;
    }
    default: r = x;
  }
  out[0] = tp_hlo_convert(b, r, out_meta->dtype);
}

/* native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd).
 * PyTorch's checks of the shapes, in its order and words; |weight|, |bias| may be NONE. */
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
  if (n_args < 5 || args[0].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected (input, shape, weight, bias, eps)",
                          op->name);
  int axis;
  TP_RETURN_IF_ERROR(layer_norm_axis(op, &args[0], &args[1], &args[2], &args[3], &axis));
  out[0] = args[0].meta;
  out[1] = args[0].meta; /* mean and rstd: the input's dtype, computed in f32 for half types */
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
  int axis = args[0].meta.ndim - (args[1].kind == TP_ARG_INTS ? args[1].n : 0);
  tp_dtype_t md = tp_math_dtype(out_meta[1].dtype);
  tp_hlo_value_t x = tp_hlo_convert(b, in[0], md);
  tp_hlo_value_t eps = tp_hlo_constant(b, md, args[4].kind == TP_ARG_FLOAT ? args[4].f : 1e-5);
  tp_hlo_value_t mean, rstd, y;
  normalize(b, x, axis, eps, moments_lanes(args[0].meta.dtype), &mean, &rstd, &y);
  int64_t bd[TP_MAX_DIMS];
  for (int i = axis; i < x.ndim; i++) bd[i - axis] = i;
  if (args[2].kind == TP_ARG_TENSOR)
    y = tp_hlo_binary(b, TP_HLO_MUL, y, tp_hlo_broadcast_in_dim(b, tp_hlo_convert(b, in[2], md), x.ndim, x.dims, bd));
  if (args[3].kind == TP_ARG_TENSOR)
    y = tp_hlo_binary(b, TP_HLO_ADD, y, tp_hlo_broadcast_in_dim(b, tp_hlo_convert(b, in[3], md), x.ndim, x.dims, bd));
  out[0] = tp_hlo_convert(b, y, out_meta[0].dtype);
  out[1] = tp_hlo_convert(b, mean, out_meta[1].dtype);
  out[2] = tp_hlo_convert(b, rstd, out_meta[2].dtype);
}

/* native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight?, bias?,
 * output_mask) -> (grad_input, grad_weight, grad_bias); all three are computed. */
tp_status_t *tp_infer_layer_norm_backward(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                          tp_meta_t *out, int *n_out) {
  if (n_args < 7 || args[0].kind != TP_ARG_TENSOR || args[1].kind != TP_ARG_TENSOR ||
      args[3].kind != TP_ARG_TENSOR || args[4].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  int axis;
  TP_RETURN_IF_ERROR(layer_norm_axis(op, &args[1], &args[2], &args[5], &args[6], &axis));
  out[0] = args[1].meta;
  tp_meta_t w = {.dtype = args[1].meta.dtype, .ndim = args[2].n};
  for (int i = 0; i < args[2].n; i++) w.sizes[i] = args[2].ints[i];
  if (args[5].kind == TP_ARG_TENSOR) w.dtype = args[5].meta.dtype;
  out[1] = w;
  out[2] = w;
  if (args[6].kind == TP_ARG_TENSOR) out[2].dtype = args[6].meta.dtype;
  *n_out = 3;
  return NULL;
}

void tp_emit_layer_norm_backward(const tp_op_def_t *op, tp_hlo_builder_t *b,
                                 const tp_op_arg_t *args, int n_args, const tp_hlo_value_t *in,
                                 const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  int axis = args[1].meta.ndim - args[2].n;
  tp_dtype_t md = tp_math_dtype(in[3].dtype);
  tp_hlo_value_t g = tp_hlo_convert(b, in[0], md), x = tp_hlo_convert(b, in[1], md);
  tp_hlo_value_t mean = tp_hlo_broadcast_to(b, tp_hlo_convert(b, in[3], md), x.ndim, x.dims);
  tp_hlo_value_t rstd = tp_hlo_broadcast_to(b, tp_hlo_convert(b, in[4], md), x.ndim, x.dims);
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
  if (args[5].kind == TP_ARG_TENSOR)
    gw = tp_hlo_binary(b, TP_HLO_MUL, g, tp_hlo_broadcast_in_dim(b, tp_hlo_convert(b, in[5], md), x.ndim, x.dims, bd));
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

/* Loss reduction: 0 none, 1 mean, 2 sum (at::Reduction). */
static tp_hlo_value_t reduce_loss(tp_hlo_builder_t *b, tp_hlo_value_t l, int64_t reduction) {
  if (reduction == 0) return l;
  int64_t dims[TP_MAX_DIMS];
  for (int i = 0; i < l.ndim; i++) dims[i] = i;
  tp_hlo_value_t s = tp_hlo_reduce(b, l, tp_hlo_constant(b, l.dtype, 0), TP_HLO_ADD, l.ndim, dims);
  if (reduction == 1)
    s = tp_hlo_binary(b, TP_HLO_DIV, s, tp_hlo_constant(b, l.dtype, (double)tp_hlo_numel(&l)));
  return s;
}

/* mse_loss(self, target, reduction) and mse_loss_backward(grad, self, target, reduction). */
tp_status_t *tp_infer_mse(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                          int *n_out) {
  int t0 = op->code == TP_DIR_BACKWARD ? 1 : 0; /* backward: grad first */
  if (n_args < t0 + 3 || args[t0].kind != TP_ARG_TENSOR || args[t0 + 1].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  tp_meta_t shape;
  TP_RETURN_IF_ERROR(tp_broadcast_shapes(&args[t0].meta, &args[t0 + 1].meta, &shape));
  shape.dtype = tp_result_type(&args[t0], 2);
  out[0] = shape;
  if (op->code == TP_DIR_FORWARD && args[2].i != 0) out[0].ndim = 0;
  *n_out = 1;
  return NULL;
}

void tp_emit_mse(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                 const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  int t0 = op->code == TP_DIR_BACKWARD ? 1 : 0;
  tp_meta_t shape = args[t0].meta;
  tp_broadcast_shapes(&args[t0].meta, &args[t0 + 1].meta, &shape);
  tp_dtype_t md = tp_math_dtype(out_meta->dtype);
  tp_hlo_value_t x = tp_emit_cast_shape(b, in[t0], md, &shape);
  tp_hlo_value_t y = tp_emit_cast_shape(b, in[t0 + 1], md, &shape);
  tp_hlo_value_t d = tp_hlo_binary(b, TP_HLO_SUB, x, y);
  int64_t reduction = args[t0 + 2].i;
  if (op->code == TP_DIR_FORWARD) {
    out[0] = tp_hlo_convert(b, reduce_loss(b, tp_hlo_binary(b, TP_HLO_MUL, d, d), reduction), out_meta->dtype);
    return;
  }
  double scale = reduction == 1 ? 2.0 / (double)tp_hlo_numel(&d) : 2.0;
  tp_hlo_value_t g = tp_emit_cast_shape(b, in[0], md, &shape);
  out[0] = tp_hlo_convert(b, tp_hlo_binary(b, TP_HLO_MUL, tp_hlo_binary(b, TP_HLO_MUL, d, g),
                                           tp_k(b, scale, d)), out_meta->dtype);
}

/* nll_loss_forward(self, target, weight?, reduction, ignore_index) -> (output, total_weight);
 * nll_loss_backward(grad, self, target, weight?, reduction, ignore_index, total_weight).
 * The class is picked with a one-hot mask over the class dim (dim 1, or 0 for 1-D input). */
tp_status_t *tp_infer_nll(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                          int *n_out) {
  int s = op->code == TP_DIR_BACKWARD ? 1 : 0;
  if (n_args < s + 5 || args[s].kind != TP_ARG_TENSOR || args[s + 1].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  const tp_meta_t *x = &args[s].meta;
  if (x->ndim < 1 || x->ndim > 2 || !tp_dtype_is_float(x->dtype))
    return tp_make_status(TP_UNIMPLEMENTED, "%s: native only for 1-D/2-D float input", op->name);
  if (!tp_dtype_is_int(args[s + 1].meta.dtype))
    return tp_make_status(TP_INVALID_ARGUMENT, "expected scalar type Long but found %s",
                          tp_dtype_name(args[s + 1].meta.dtype));
  if (op->code == TP_DIR_BACKWARD) {
    out[0] = *x;
    *n_out = 1;
    return NULL;
  }
  int64_t reduction = args[3].i;
  out[0] = *x;
  out[0].ndim = reduction == 0 && x->ndim == 2 ? 1 : 0;
  out[1] = *x;
  out[1].ndim = 0;
  *n_out = 2;
  return NULL;
}

void tp_emit_nll(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                 const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  int s = op->code == TP_DIR_BACKWARD ? 1 : 0;
  tp_dtype_t md = tp_math_dtype(args[s].meta.dtype);
  tp_hlo_value_t x = tp_hlo_convert(b, in[s], md);
  int cdim = x.ndim == 2 ? 1 : 0;
  tp_hlo_value_t t = tp_hlo_convert(b, in[s + 1], TP_DTYPE_I64);
  int64_t bd[1] = {0};
  tp_hlo_value_t tb = x.ndim == 2 ? tp_hlo_broadcast_in_dim(b, t, 2, x.dims, bd)
                                  : tp_hlo_broadcast_to(b, t, 1, x.dims);
  tp_hlo_value_t cls = tp_hlo_iota(b, TP_DTYPE_I64, x.ndim, x.dims, cdim);
  tp_hlo_value_t onehot = tp_hlo_compare(b, TP_CMP_EQ, cls, tb);
  int64_t ignore = args[s + 4].i;
  tp_hlo_value_t valid = tp_hlo_compare(b, TP_CMP_NE, t, tp_k(b, (double)ignore, t));
  /* Targets other than ignore_index must name a class. */
  tp_emit_checked_index(b, tp_hlo_select(b, valid, t, tp_k(b, 0, t)), x.dims[cdim], false);
  /* Per-sample weight: weight[target] (1 without weights), 0 where ignored. */
  tp_hlo_value_t zero = tp_k(b, 0, x);
  tp_hlo_value_t wfull = args[s + 2].kind == TP_ARG_TENSOR
                             ? tp_hlo_broadcast_in_dim(b, tp_hlo_convert(b, in[s + 2], md), x.ndim, x.dims,
                                                       (int64_t[]){cdim})
                             : tp_k(b, 1, x);
  tp_hlo_value_t wsel = tp_hlo_select(b, onehot, wfull, zero);
  int64_t cd = cdim;
  tp_hlo_value_t w = tp_hlo_reduce(b, wsel, tp_hlo_constant(b, md, 0), TP_HLO_ADD, 1, &cd);
  w = tp_hlo_select(b, valid, w, tp_k(b, 0, w));
  int64_t reduction = args[s + 3].i;
  int64_t all[1] = {0};
  tp_hlo_value_t total = w.ndim ? tp_hlo_reduce(b, w, tp_hlo_constant(b, md, 0), TP_HLO_ADD, 1, all) : w;
  if (op->code == TP_DIR_FORWARD) {
    tp_hlo_value_t picked = tp_hlo_reduce(b, tp_hlo_select(b, onehot, x, zero), tp_hlo_constant(b, md, 0),
                                          TP_HLO_ADD, 1, &cd);
    tp_hlo_value_t l = tp_hlo_unary(b, TP_HLO_NEG, tp_hlo_binary(b, TP_HLO_MUL, picked, w));
    /* CPU skips an ignored sample: its loss is 0 even where its input is NaN or inf. */
    l = tp_hlo_select(b, valid, l, tp_k(b, 0, l));
    if (reduction != 0) {
      l = l.ndim ? tp_hlo_reduce(b, l, tp_hlo_constant(b, md, 0), TP_HLO_ADD, 1, all) : l;
      if (reduction == 1) l = tp_hlo_binary(b, TP_HLO_DIV, l, total);
    }
    out[0] = tp_hlo_convert(b, tp_hlo_reshape(b, l, out_meta[0].ndim, out_meta[0].sizes), out_meta[0].dtype);
    out[1] = tp_hlo_convert(b, total, out_meta[1].dtype);
    return;
  }
  /* grad_input = -onehot * w * grad (/ total for mean). */
  tp_hlo_value_t g = tp_hlo_convert(b, in[0], md);
  if (reduction == 1) g = tp_hlo_binary(b, TP_HLO_DIV, g, tp_hlo_broadcast_to(b, tp_hlo_convert(b, in[s + 5], md), g.ndim, g.dims));
  tp_hlo_value_t gw = reduction == 0 && w.ndim ? tp_hlo_binary(b, TP_HLO_MUL, w, g)
                                                : tp_hlo_binary(b, TP_HLO_MUL, w, tp_hlo_broadcast_to(b, g, w.ndim, w.dims));
  gw = tp_hlo_select(b, valid, gw, tp_k(b, 0, gw)); /* ignored: 0 even for NaN grads */
  tp_hlo_value_t gx = x.ndim == 2 ? tp_hlo_broadcast_in_dim(b, gw, 2, x.dims, bd) : tp_hlo_broadcast_to(b, gw, 1, x.dims);
  out[0] = tp_hlo_convert(b, tp_hlo_select(b, onehot, tp_hlo_unary(b, TP_HLO_NEG, gx), zero), out_meta[0].dtype);
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
  if (n_args < 10 || args[0].kind != TP_ARG_TENSOR || args[1].kind != TP_ARG_TENSOR ||
      args[1].meta.ndim < 2)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  bool train = args[7].i != 0;
  if (train ? (args[5].kind != TP_ARG_TENSOR || args[6].kind != TP_ARG_TENSOR)
            : (args[3].kind != TP_ARG_TENSOR || args[4].kind != TP_ARG_TENSOR))
    return tp_make_status(TP_INVALID_ARGUMENT, train ? "%s: save_mean and save_invstd must be "
                          "defined in training mode" : "%s: running_mean and running_var must be "
                          "defined in evaluation mode", op->name);
  if (args[0].meta.ndim != args[1].meta.ndim ||
      memcmp(args[0].meta.sizes, args[1].meta.sizes, sizeof(int64_t) * (size_t)args[1].meta.ndim))
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: grad_out and input must have the same shape",
                          op->name);
  /* The vectors this mode reads: weight, and the saved (training) or running statistics; the
   * others may be empty (an eval-mode forward saves no statistics). */
  int64_t c = args[1].meta.sizes[1];
  TP_RETURN_IF_ERROR(check_per_channel(op, args, 2, c));
  for (int i = train ? 5 : 3; i <= (train ? 6 : 4); i++)
    TP_RETURN_IF_ERROR(check_per_channel(op, args, i, c));
  out[0] = args[1].meta;
  tp_meta_t w = {args[2].kind == TP_ARG_TENSOR ? args[2].meta.dtype : args[1].meta.dtype, 1,
                 {args[1].meta.sizes[1]}, 0};
  out[1] = out[2] = w;
  *n_out = 3;
  return NULL;
}

void tp_emit_batch_norm_backward(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                                 int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                                 tp_hlo_value_t *out) {
  bool train = args[7].i != 0;
  tp_dtype_t md = tp_math_dtype(args[1].meta.dtype);
  tp_hlo_value_t g = tp_hlo_convert(b, in[0], md), x = tp_hlo_convert(b, in[1], md);
  int64_t c = x.dims[1], count = tp_hlo_numel(&x) / (c ? c : 1);
  tp_hlo_value_t mean, invstd;
  if (train) {
    mean = tp_hlo_convert(b, in[5], md);
    invstd = tp_hlo_convert(b, in[6], md);
  } else {
    mean = tp_hlo_convert(b, in[3], md);
    tp_hlo_value_t var = tp_hlo_convert(b, in[4], md);
    double eps = args[8].kind == TP_ARG_FLOAT ? args[8].f : 1e-5;
    invstd = tp_hlo_unary(b, TP_HLO_RSQRT, tp_hlo_binary(b, TP_HLO_ADD, var, tp_k(b, eps, var)));
  }
  tp_hlo_value_t w = args[2].kind == TP_ARG_TENSOR ? tp_hlo_convert(b, in[2], md) : tp_k(b, 1, mean);
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
