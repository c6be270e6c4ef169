/* Activations with their own argument lists: the activation family (gelu, leaky_relu, hardtanh,
 * elu, and the backwards of those and of sigmoid, tanh, silu and dropout), glu and its backward,
 * prelu's kernels and elu_backward. The activations of one tensor and scalars are the pointwise
 * family's (pointwise.c), those of one tensor alone the unary family's (elementwise.c). Half types
 * compute in f32. Depends on ops/ helpers and hlo/ only. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/families.h"

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
      /* gelu(+inf) is +inf, as PyTorch's own CPU kernel gives. (CPU hands a contiguous float
       * input of more than one element to oneDNN, whose answer there depends on the machine:
       * NaN with its AVX-512 kernels, +inf without; copying one machine's was wrong on another.) */
      r = tp_hlo_binary(b, TP_HLO_MUL, x, gelu_cdf_parts(b, x, tanh_approx, NULL));
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

tp_status_t *tp_infer_glu(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                          int *n_out) {
  TP_RETURN_IF_ERROR(tp_infer_like_self(op, args, n_args, out, n_out));
  const tp_meta_t *x = &args[0].meta;
  int t = op->code == TP_DIR_FORWARD ? 0 : 1;
  if (!tp_arg_is_tensor(args, n_args, t) || n_args < t + 2 || args[t + 1].kind != TP_ARG_INT)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  x = &args[t].meta;
  int d = tp_norm_dim(args[t + 1].i, x->ndim);
  /* CPU words its errors (0-d input, odd size, integer types). */
  if (x->ndim == 0 || d < 0 || x->sizes[d] % 2 || !tp_dtype_is_float(x->dtype))
    return tp_make_status(TP_UNIMPLEMENTED, "%s: arguments", op->name);
  out[0] = *x;
  if (t) {
    const tp_meta_t *g = &args[0].meta;
    if (g->dtype != x->dtype || g->ndim != x->ndim) return tp_make_status(TP_UNIMPLEMENTED, "%s: grad", op->name);
    for (int i = 0; i < x->ndim; i++)
      if (g->sizes[i] != (i == d ? x->sizes[i] / 2 : x->sizes[i]))
        return tp_make_status(TP_UNIMPLEMENTED, "%s: grad shape", op->name);
  } else {
    out[0].sizes[d] /= 2;
  }
  return NULL;
}

void tp_emit_glu(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                 const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  const tp_meta_t *om = &out_meta[0];
  tp_dtype_t md = tp_math_dtype(om->dtype);
  int t = op->code == TP_DIR_FORWARD ? 0 : 1;
  tp_hlo_value_t x = tp_hlo_convert(b, in[t], md);
  int d = tp_norm_dim(args[t + 1].i, x.ndim);
  int64_t h = x.dims[d] / 2, st[TP_MAX_DIMS] = {0}, lim[TP_MAX_DIMS], step[TP_MAX_DIMS];
  for (int i = 0; i < x.ndim; i++) {
    lim[i] = x.dims[i];
    step[i] = 1;
  }
  lim[d] = h;
  tp_hlo_value_t a = tp_hlo_slice(b, x, st, lim, step);
  st[d] = h;
  lim[d] = 2 * h;
  tp_hlo_value_t s = tp_hlo_unary(b, TP_HLO_LOGISTIC, tp_hlo_slice(b, x, st, lim, step));
  if (!t) {
    out[0] = tp_hlo_convert(b, tp_bin(b, TP_HLO_MUL, a, s), om->dtype);
    return;
  }
  /* CPU stores the sigmoid in the gradient's type before using it. */
  s = tp_hlo_convert(b, tp_hlo_convert(b, s, om->dtype), md);
  tp_hlo_value_t g = tp_hlo_convert(b, in[0], md);
  tp_hlo_value_t ga = tp_bin(b, TP_HLO_MUL, s, g);
  tp_hlo_value_t gb = tp_bin(b, TP_HLO_MUL, tp_bin(b, TP_HLO_MUL, tp_bin(b, TP_HLO_MUL, tp_bin(b, TP_HLO_SUB, tp_k(b, 1, s), s), s), a), g);
  tp_hlo_value_t parts[2] = {ga, gb};
  out[0] = tp_hlo_convert(b, tp_hlo_concatenate(b, parts, 2, d), om->dtype);
}

tp_status_t *tp_infer_prelu(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                            int *n_out) {
  TP_RETURN_IF_ERROR(tp_infer_like_self(op, args, n_args, out, n_out));
  int t = op->code == TP_DIR_FORWARD ? 0 : 1;
  if (!tp_arg_is_tensor(args, n_args, t) || !tp_arg_is_tensor(args, n_args, t + 1))
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  tp_meta_t s;
  TP_RETURN_IF_ERROR(tp_broadcast_shapes(&args[t].meta, &args[t + 1].meta, &s));
  if (t) TP_RETURN_IF_ERROR(tp_broadcast_shapes(&s, &args[0].meta, &s));
  s.dtype = args[t].meta.dtype;
  if (!tp_dtype_is_float(s.dtype) || args[t + 1].meta.dtype != s.dtype || (t && args[0].meta.dtype != s.dtype))
    return tp_make_status(TP_UNIMPLEMENTED, "%s: dtypes", op->name);
  s.writes_arg = 0;
  out[0] = s;
  if (t) {
    out[1] = s;
    *n_out = 2;
  }
  return NULL;
}

void tp_emit_prelu(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                   const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  const tp_meta_t *om = &out_meta[0];
  tp_dtype_t md = tp_math_dtype(om->dtype);
  int t = op->code == TP_DIR_FORWARD ? 0 : 1;
  tp_hlo_value_t x = tp_emit_cast_shape(b, in[t], md, om), w = tp_emit_cast_shape(b, in[t + 1], md, om);
  tp_hlo_value_t pos = tp_hlo_compare(b, TP_CMP_GT, x, tp_k(b, 0, x));
  if (!t) {
    out[0] = tp_hlo_convert(b, tp_hlo_select(b, pos, x, tp_bin(b, TP_HLO_MUL, w, x)), om->dtype);
    return;
  }
  tp_hlo_value_t g = tp_emit_cast_shape(b, in[0], md, om);
  out[0] = tp_hlo_convert(b, tp_hlo_select(b, pos, g, tp_bin(b, TP_HLO_MUL, w, g)), om->dtype);
  out[1] = tp_hlo_convert(b, tp_hlo_select(b, pos, tp_k(b, 0, x), tp_bin(b, TP_HLO_MUL, x, g)), om->dtype);
}

tp_status_t *tp_infer_elu_backward(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                                   int *n_out) {
  TP_RETURN_IF_ERROR(tp_infer_like_self(op, args, n_args, out, n_out));
  const tp_meta_t *x = &args[0].meta;
  bool fl = tp_dtype_is_float(x->dtype);
  /* (grad_output, alpha, scale, input_scale, is_result, self_or_result) */
  if (n_args < 6 || !tp_arg_is_tensor(args, n_args, 5) || args[4].kind != TP_ARG_INT ||
      !fl || args[5].meta.dtype != x->dtype)
    return tp_make_status(TP_UNIMPLEMENTED, "elu_backward: arguments");
  TP_RETURN_IF_ERROR(tp_broadcast_shapes(x, &args[5].meta, &out[0]));
  out[0].dtype = x->dtype;
  for (int i = 1; i < 4; i++)
    if (args[i].kind == TP_ARG_SCALAR) args[i].scalar_dtype = TP_DTYPE_F64;
  return NULL;
}

void tp_emit_elu_backward(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                          const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  const tp_meta_t *om = &out_meta[0];
  tp_dtype_t md = tp_math_dtype(om->dtype);
  tp_hlo_value_t g = tp_emit_cast_shape(b, in[0], md, om), x = tp_emit_cast_shape(b, in[5], md, om);
  tp_hlo_value_t c[3];
  for (int i = 0; i < 3; i++)
    c[i] = args[1 + i].kind == TP_ARG_SCALAR ? tp_emit_cast_shape(b, in[1 + i], md, om) : tp_k(b, 1, x);
  tp_hlo_value_t negcoef = tp_bin(b, TP_HLO_MUL, c[0], c[1]), poscoef = c[1], negip = c[2];
  tp_hlo_value_t neg;
  if (args[4].i) /* x holds the result */
    neg = tp_bin(b, TP_HLO_MUL, tp_bin(b, TP_HLO_MUL, g, negip), tp_bin(b, TP_HLO_ADD, x, negcoef));
  else
    neg = tp_bin(b, TP_HLO_MUL, tp_bin(b, TP_HLO_MUL, tp_bin(b, TP_HLO_MUL, g, negip), negcoef),
              tp_hlo_unary(b, TP_HLO_EXP, tp_bin(b, TP_HLO_MUL, x, negip)));
  tp_hlo_value_t r = tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_LE, x, tp_k(b, 0, x)), neg,
                                   tp_bin(b, TP_HLO_MUL, g, poscoef));
  out[0] = tp_hlo_convert(b, r, om->dtype);
}
