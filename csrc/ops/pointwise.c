/* Pointwise ops whose arguments do not fit the unary/binary families: polygamma (an int order
 * before the tensor), round with decimals, nan_to_num, and the activations that take scalars
 * (softplus, softshrink, hardshrink, threshold, logit, log_sigmoid) with their backwards.
 * Half types compute in f32 and round once. Depends on ops/ helpers and hlo/ only. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "ops/families.h"

/* Where each code finds its tensors: the value (self) and, for backwards, the gradient. */
static int self_index(const tp_op_def_t *op, const tp_op_arg_t *args) {
  switch ((tp_pointwise_t)op->code) {
    case TP_P_POLYGAMMA: return args[0].kind == TP_ARG_TENSOR ? 0 : 1; /* polygamma_(self, n) */
    case TP_P_SOFTPLUS_BACKWARD: case TP_P_SOFTSHRINK_BACKWARD: case TP_P_HARDSHRINK_BACKWARD:
    case TP_P_LOGIT_BACKWARD: case TP_P_LOG_SIGMOID_BACKWARD:
      return 1;
    default: return 0;
  }
}

static bool has_grad(tp_pointwise_t code) {
  return code == TP_P_SOFTPLUS_BACKWARD || code == TP_P_SOFTSHRINK_BACKWARD ||
         code == TP_P_HARDSHRINK_BACKWARD || code == TP_P_LOGIT_BACKWARD ||
         code == TP_P_LOG_SIGMOID_BACKWARD;
}

static double scalar_value(const tp_op_arg_t *a) {
  return tp_dtype_is_float(a->meta.dtype) ? a->f : (double)a->i;
}

tp_status_t *tp_infer_pointwise(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                tp_meta_t *out, int *n_out) {
  tp_pointwise_t code = (tp_pointwise_t)op->code;
  int si = n_args > 0 ? self_index(op, args) : 0;
  if (si >= n_args || args[si].kind != TP_ARG_TENSOR ||
      (has_grad(code) && args[0].kind != TP_ARG_TENSOR))
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected tensor arguments", op->name);
  tp_meta_t m = args[si].meta;
  bool fl = tp_dtype_is_float(m.dtype);
  if (has_grad(code)) {
    TP_RETURN_IF_ERROR(tp_broadcast_shapes(&args[0].meta, &m, &m));
    m.dtype = tp_result_type(args, 2);
    fl = tp_dtype_is_float(m.dtype);
  }
  *n_out = 1;
  switch (code) {
    case TP_P_POLYGAMMA: {
      int ni = si == 0 ? 1 : 0;
      if (ni >= n_args || args[ni].kind != TP_ARG_INT)
        return tp_make_status(TP_INVALID_ARGUMENT, "polygamma: expected an integer order");
      if (args[ni].i < 0)
        return tp_make_status(TP_INVALID_ARGUMENT,
                              "polygamma(n, x) does not support negative n.");
      if (!fl) m.dtype = TP_DTYPE_F32;
      break;
    }
    case TP_P_ROUND_DECIMALS:
      if (!fl)
        return tp_make_status(TP_INVALID_ARGUMENT, "\"round_cpu\" not implemented for '%s'",
                              tp_dtype_name(m.dtype));
      if (n_args < 2 || args[1].kind != TP_ARG_INT || args[1].i > 300 || args[1].i < -300)
        return tp_make_status(TP_UNIMPLEMENTED, "round: decimals out of the supported range");
      break;
    case TP_P_NAN_TO_NUM: break;
    case TP_P_THRESHOLD:
      if (n_args < 3 || args[1].kind != TP_ARG_SCALAR || args[2].kind != TP_ARG_SCALAR)
        return tp_make_status(TP_INVALID_ARGUMENT, "threshold: expected threshold and value");
      if (m.dtype == TP_DTYPE_BOOL)
        return tp_make_status(TP_UNIMPLEMENTED, "threshold of a bool tensor");
      break;
    case TP_P_LOGIT: case TP_P_LOGIT_BACKWARD:
      if (!fl) {
        if (code == TP_P_LOGIT_BACKWARD)
          return tp_make_status(TP_UNIMPLEMENTED, "logit_backward of integer tensors");
        m.dtype = TP_DTYPE_F32;
      }
      break;
    case TP_P_SOFTSHRINK: case TP_P_SOFTSHRINK_BACKWARD: {
      int li = code == TP_P_SOFTSHRINK ? 1 : 2;
      if (li < n_args && args[li].kind == TP_ARG_SCALAR && scalar_value(&args[li]) < 0)
        return tp_make_status(TP_INVALID_ARGUMENT,
                              "lambda must be greater or equal to 0, but found to be %g.",
                              scalar_value(&args[li]));
    }
      /* fall through */
    default:
      /* The CPU kernels exist for floating types only: let CPU raise its own error. */
      if (!fl) return tp_make_status(TP_UNIMPLEMENTED, "%s of a non-float tensor", op->name);
      break;
  }
  for (int i = 0; i < n_args; i++)
    if (args[i].kind == TP_ARG_SCALAR) args[i].scalar_dtype = tp_math_dtype(m.dtype);
  out[0] = m;
  if (code == TP_P_LOG_SIGMOID) { /* (output, buffer): the buffer holds exp(-|x|) as on CPU */
    out[1] = m;
    *n_out = 2;
  }
  return NULL;
}

/* The largest finite value of a float type (lowest = its negation). */
static double float_max(tp_dtype_t t) {
  switch (t) {
    case TP_DTYPE_F16: return 65504.0;
    case TP_DTYPE_BF16: return 3.3895313892515355e38;
    case TP_DTYPE_F32: return FLT_MAX;
    default: return DBL_MAX;
  }
}

/* A constant of |like|'s shape and type, rounded from f64 as a C cast would. */
static tp_hlo_value_t const_as(tp_hlo_builder_t *b, double v, tp_hlo_value_t like) {
  tp_hlo_value_t c = like.dtype == TP_DTYPE_F64 ? tp_hlo_constant(b, TP_DTYPE_F64, v)
                                                : tp_hlo_convert(b, tp_hlo_constant(b, TP_DTYPE_F64, v),
                                                                 like.dtype);
  return tp_hlo_broadcast_to(b, c, like.ndim, like.dims);
}

void tp_emit_pointwise(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                       int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                       tp_hlo_value_t *out) {
  tp_pointwise_t code = (tp_pointwise_t)op->code;
  int si = self_index(op, args);
  tp_dtype_t od = out_meta[0].dtype, md = tp_math_dtype(od);
  if (code == TP_P_NAN_TO_NUM) {
    tp_hlo_value_t x = in[0];
    if (!tp_dtype_is_float(x.dtype)) {
      out[0] = x;
      return;
    }
    double fm = float_max(x.dtype);
    double nan_v = n_args > 1 && args[1].kind == TP_ARG_FLOAT ? args[1].f : 0;
    double pos_v = n_args > 2 && args[2].kind == TP_ARG_FLOAT ? args[2].f : fm;
    double neg_v = n_args > 3 && args[3].kind == TP_ARG_FLOAT ? args[3].f : -fm;
    tp_hlo_value_t r = tp_hlo_select(b, tp_is_nan(b, x), const_as(b, nan_v, x), x);
    r = tp_hlo_select(b, tp_hlo_unary(b, TP_HLO_IS_POS_INF, x), const_as(b, pos_v, x), r);
    out[0] = tp_hlo_select(b, tp_hlo_unary(b, TP_HLO_IS_NEG_INF, x), const_as(b, neg_v, x), r);
    return;
  }
  tp_hlo_value_t x = tp_emit_cast_shape(b, in[si], md, &out_meta[0]);
  tp_hlo_value_t g = has_grad(code) ? tp_emit_cast_shape(b, in[0], md, &out_meta[0]) : x;
  tp_hlo_value_t zero = tp_k(b, 0, x), one = tp_k(b, 1, x);
  tp_hlo_value_t r = x;
  switch (code) {
    case TP_P_POLYGAMMA:
      r = tp_emit_polygamma(b, args[si == 0 ? 1 : 0].i, x);
      break;
    case TP_P_ROUND_DECIMALS: {
      /* As CPU: a * 10^d (or a / 10^-d) rounded to the type, to nearest even, then back. */
      int64_t d = args[1].i;
      tp_hlo_value_t p = tp_hlo_convert(b, tp_hlo_convert(b, tp_k(b, pow(10.0, (double)(d < 0 ? -d : d)), x), od), md);
      tp_hlo_value_t s = tp_bin(b, d < 0 ? TP_HLO_DIV : TP_HLO_MUL, x, p);
      s = tp_hlo_convert(b, tp_hlo_convert(b, s, od), md);
      s = tp_hlo_unary(b, TP_HLO_ROUND_EVEN, s);
      r = d == 0 ? tp_hlo_unary(b, TP_HLO_ROUND_EVEN, x) : tp_bin(b, d < 0 ? TP_HLO_MUL : TP_HLO_DIV, s, p);
      break;
    }
    case TP_P_SOFTPLUS: case TP_P_SOFTPLUS_BACKWARD: {
      int bi = code == TP_P_SOFTPLUS ? 1 : 2;
      tp_hlo_value_t beta = bi < n_args && args[bi].kind == TP_ARG_SCALAR
                                ? tp_emit_cast_shape(b, in[bi], md, &out_meta[0]) : one;
      tp_hlo_value_t th = bi + 1 < n_args && args[bi + 1].kind == TP_ARG_SCALAR
                              ? tp_emit_cast_shape(b, in[bi + 1], md, &out_meta[0]) : tp_k(b, 20, x);
      tp_hlo_value_t xb = tp_bin(b, TP_HLO_MUL, x, beta);
      tp_hlo_value_t lin = tp_cmp(b, TP_CMP_GT, xb, th);
      tp_hlo_value_t z = tp_hlo_unary(b, TP_HLO_EXP, xb);
      if (code == TP_P_SOFTPLUS)
        r = tp_hlo_select(b, lin, x, tp_bin(b, TP_HLO_DIV, tp_hlo_unary(b, TP_HLO_LOG1P, z), beta));
      else
        r = tp_hlo_select(b, lin, g, tp_bin(b, TP_HLO_DIV, tp_bin(b, TP_HLO_MUL, g, z), tp_bin(b, TP_HLO_ADD, z, one)));
      break;
    }
    case TP_P_SOFTSHRINK: case TP_P_SOFTSHRINK_BACKWARD:
    case TP_P_HARDSHRINK: case TP_P_HARDSHRINK_BACKWARD: {
      int li = code == TP_P_SOFTSHRINK || code == TP_P_HARDSHRINK ? 1 : 2;
      tp_hlo_value_t l = li < n_args && args[li].kind == TP_ARG_SCALAR
                             ? tp_emit_cast_shape(b, in[li], md, &out_meta[0]) : tp_k(b, 0.5, x);
      tp_hlo_value_t nl = tp_hlo_unary(b, TP_HLO_NEG, l);
      tp_hlo_value_t inside = tp_bin(b, TP_HLO_AND, tp_cmp(b, TP_CMP_GE, x, nl), tp_cmp(b, TP_CMP_LE, x, l));
      if (code == TP_P_SOFTSHRINK) {
        r = tp_hlo_select(b, tp_cmp(b, TP_CMP_GT, x, l), tp_bin(b, TP_HLO_SUB, x, l),
                          tp_hlo_select(b, tp_cmp(b, TP_CMP_LT, x, nl), tp_bin(b, TP_HLO_ADD, x, l),
                                        tp_bin(b, TP_HLO_MUL, x, zero)));
      } else if (code == TP_P_HARDSHRINK) {
        r = tp_hlo_select(b, inside, zero, x);
      } else {
        r = tp_hlo_select(b, inside, zero, g);
      }
      break;
    }
    case TP_P_THRESHOLD: {
      tp_hlo_value_t th = tp_emit_cast_shape(b, in[1], md, &out_meta[0]);
      tp_hlo_value_t v = tp_emit_cast_shape(b, in[2], md, &out_meta[0]);
      r = tp_hlo_select(b, tp_cmp(b, TP_CMP_LE, x, th), v, x);
      break;
    }
    case TP_P_LOGIT: case TP_P_LOGIT_BACKWARD: {
      int ei = code == TP_P_LOGIT ? 1 : 2;
      bool has_eps = ei < n_args && args[ei].kind == TP_ARG_FLOAT;
      /* CPU rounds eps to the tensor's type first, then takes 1 - eps in the math type. */
      tp_hlo_value_t lo = tp_hlo_convert(b, tp_hlo_convert(b, const_as(b, has_eps ? args[ei].f : 0, x), od), md);
      /* The CPU kernel computes in the tensor's own type, rounding after each step. */
#define RND(v) tp_hlo_convert(b, tp_hlo_convert(b, (v), od), md)
      tp_hlo_value_t hi = RND(tp_hlo_binary(b, TP_HLO_SUB, one, lo));
      if (code == TP_P_LOGIT) {
        tp_hlo_value_t z = x;
        if (has_eps) {
          z = tp_hlo_select(b, tp_cmp(b, TP_CMP_LT, z, lo), lo, tp_hlo_select(b, tp_cmp(b, TP_CMP_GT, z, hi), hi, z));
        }
        r = tp_hlo_unary(b, TP_HLO_LOG, RND(tp_bin(b, TP_HLO_DIV, z, RND(tp_bin(b, TP_HLO_SUB, one, z)))));
      } else {
        tp_hlo_value_t outside = tp_bin(b, TP_HLO_OR, tp_cmp(b, TP_CMP_LT, x, lo), tp_cmp(b, TP_CMP_GT, x, hi));
        tp_hlo_value_t d = tp_bin(b, TP_HLO_DIV, g, RND(tp_bin(b, TP_HLO_MUL, x, RND(tp_bin(b, TP_HLO_SUB, one, x)))));
        r = tp_hlo_select(b, outside, tp_k(b, has_eps ? 0 : NAN, x), d);
      }
#undef RND
      break;
    }
    case TP_P_LOG_SIGMOID: case TP_P_LOG_SIGMOID_BACKWARD: {
      tp_hlo_value_t z = tp_hlo_unary(b, TP_HLO_EXP, tp_hlo_unary(b, TP_HLO_NEG, tp_hlo_unary(b, TP_HLO_ABS, x)));
      tp_hlo_value_t neg = tp_cmp(b, TP_CMP_LT, x, zero);
      if (code == TP_P_LOG_SIGMOID) {
        tp_hlo_value_t m = tp_hlo_select(b, neg, x, zero);
        r = tp_bin(b, TP_HLO_SUB, m, tp_hlo_unary(b, TP_HLO_LOG1P, z));
        out[1] = tp_hlo_convert(b, z, out_meta[1].dtype);
      } else {
        /* grad * (max_deriv - sign * z / (1 + z)), max_deriv = x < 0, sign = x < 0 ? 1 : -1 */
        tp_hlo_value_t q = tp_bin(b, TP_HLO_DIV, z, tp_bin(b, TP_HLO_ADD, one, z));
        r = tp_bin(b, TP_HLO_MUL, g, tp_hlo_select(b, neg, tp_bin(b, TP_HLO_SUB, one, q), q));
      }
      break;
    }
    default: break;
  }
  out[0] = tp_hlo_convert(b, r, od);
}
