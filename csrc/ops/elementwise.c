/* Elementwise families: unary, binary and ternary math, comparisons, copy, fill, relu's backward,
 * and the bit shifts. Half types compute in f32 and round once, as PyTorch's CPU kernels do.
 * Broadcasting and type promotion are common.c's; the special functions special.c's. */
#include <stdio.h>
#include <string.h>

#include "ops/families.h"

static tp_status_t *need_tensor(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                                int i) {
  if (i >= n_args || args[i].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: argument %d must be a tensor", op->name, i);
  return NULL;
}

static bool is_value(const tp_op_arg_t *a) {
  return a->kind == TP_ARG_TENSOR || a->kind == TP_ARG_SCALAR;
}

/* Checks the dtype restrictions a row's flags state; |dt| is the computation dtype. */
static tp_status_t *check_dtype_flags(const tp_op_def_t *op, tp_dtype_t dt) {
  if ((op->flags & TP_OPF_INT_ONLY) && tp_dtype_is_float(dt))
    return tp_make_status(TP_INVALID_ARGUMENT, "\"%s\" not implemented for '%s'", op->name,
                          tp_dtype_name(dt));
  if ((op->flags & TP_OPF_FLOAT_ONLY) && !tp_dtype_is_float(dt))
    return tp_make_status(TP_INVALID_ARGUMENT, "\"%s\" not implemented for '%s'", op->name,
                          tp_dtype_name(dt));
  /* CPU raises NotImplementedError, in its words ("Negation, the `-` operator, on a bool tensor
   * is not supported...") */
  if ((op->flags & TP_OPF_NO_BOOL) && dt == TP_DTYPE_BOOL)
    return tp_make_status(TP_UNIMPLEMENTED, "Boolean inputs not supported for %s", op->name);
  return NULL;
}

/* ---- unary ---- */

/* Ops whose CPU kernels have no 16-bit float version: such calls fall back, and CPU raises. */
static bool no_half_on_cpu(const tp_op_def_t *op, tp_dtype_t t) {
  if (t != TP_DTYPE_BF16 && t != TP_DTYPE_F16) return false;
  if (op->infer == tp_infer_unary)
    return op->code == TP_U_ERFCX || op->code == TP_U_LOG_NDTR || op->code == TP_U_NDTRI;
  return op->code == TP_B_ZETA;
}

tp_status_t *tp_infer_unary(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                            int *n_out) {
  TP_RETURN_IF_ERROR(need_tensor(op, args, n_args, 0));
  if (no_half_on_cpu(op, args[0].meta.dtype))
    return tp_make_status(TP_UNIMPLEMENTED, "%s of a 16-bit float", op->name);
  /* CPU has no abs kernel for bool: its own error, through the fallback. */
  if (op->code == TP_U_ABS && args[0].meta.dtype == TP_DTYPE_BOOL)
    return tp_make_status(TP_UNIMPLEMENTED, "abs of bool");
  TP_RETURN_IF_ERROR(check_dtype_flags(op, args[0].meta.dtype));
  out[0] = args[0].meta;
  if ((op->flags & TP_OPF_FLOAT_RESULT) && !tp_dtype_is_float(out[0].dtype))
    out[0].dtype = TP_DTYPE_F32;
  if (op->flags & TP_OPF_BOOL_RESULT) out[0].dtype = TP_DTYPE_BOOL;
  if (op->code == TP_U_ABS) out[0].dtype = tp_dtype_real_part(out[0].dtype); /* |complex| is real */
  *n_out = 1;
  return NULL;
}

static tp_hlo_value_t trunc_value(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  tp_hlo_value_t neg = tp_hlo_compare(b, TP_CMP_LT, x, tp_k(b, 0, x));
  return tp_hlo_select(b, neg, tp_hlo_unary(b, TP_HLO_CEIL, x), tp_hlo_unary(b, TP_HLO_FLOOR, x));
}

/* min(max(x + 3, 0), 6) / 6 */
static tp_hlo_value_t hardsigmoid(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  tp_hlo_value_t r = tp_hlo_binary(b, TP_HLO_MAX, tp_add(b, x, tp_k(b, 3, x)), tp_k(b, 0, x));
  r = tp_hlo_binary(b, TP_HLO_MIN, r, tp_k(b, 6, x));
  r = tp_hlo_binary(b, TP_HLO_DIV, r, tp_k(b, 6, x));
  /* max/min drop NaN on some backends: keep it, as CPU does. */
  return tp_hlo_select(b, tp_is_nan(b, x), x, r);
}

static const tp_hlo_unary_t kDirectUnary[] = {
    [TP_U_ABS] = TP_HLO_ABS,       [TP_U_NEG] = TP_HLO_NEG,       [TP_U_EXP] = TP_HLO_EXP,
    [TP_U_EXPM1] = TP_HLO_EXPM1,   [TP_U_LOG] = TP_HLO_LOG,       [TP_U_LOG1P] = TP_HLO_LOG1P,
    [TP_U_SQRT] = TP_HLO_SQRT,     [TP_U_RSQRT] = TP_HLO_RSQRT,   [TP_U_SIN] = TP_HLO_SIN,
    [TP_U_COS] = TP_HLO_COS,       [TP_U_TAN] = TP_HLO_TAN,       [TP_U_ASIN] = TP_HLO_ASIN,
    [TP_U_ACOS] = TP_HLO_ACOS,     [TP_U_ATAN] = TP_HLO_ATAN,     [TP_U_SINH] = TP_HLO_SINH,
    [TP_U_COSH] = TP_HLO_COSH,     [TP_U_TANH] = TP_HLO_TANH,     [TP_U_ASINH] = TP_HLO_ASINH,
    [TP_U_ACOSH] = TP_HLO_ACOSH,   [TP_U_ATANH] = TP_HLO_ATANH,   [TP_U_SIGMOID] = TP_HLO_LOGISTIC,
    [TP_U_ERF] = TP_HLO_ERF,       [TP_U_ERFC] = TP_HLO_ERFC,     [TP_U_ERFINV] = TP_HLO_ERF_INV,
    [TP_U_LGAMMA] = TP_HLO_LGAMMA, [TP_U_DIGAMMA] = TP_HLO_DIGAMMA, [TP_U_FLOOR] = TP_HLO_FLOOR,
    [TP_U_CEIL] = TP_HLO_CEIL,     [TP_U_ROUND] = TP_HLO_ROUND_EVEN, [TP_U_SIGN] = TP_HLO_SIGN,
    [TP_U_ISINF] = TP_HLO_IS_INF,  [TP_U_ISFINITE] = TP_HLO_IS_FINITE,
    [TP_U_ISPOSINF] = TP_HLO_IS_POS_INF, [TP_U_ISNEGINF] = TP_HLO_IS_NEG_INF,
    [TP_U_CBRT] = TP_HLO_CBRT,
};

static tp_hlo_value_t emit_unary_value(tp_hlo_builder_t *b, tp_unary_t code, tp_hlo_value_t x) {
  bool fl = tp_dtype_is_float(x.dtype);
  switch (code) {
    case TP_U_EXP2:
      return tp_hlo_binary(b, TP_HLO_POW, tp_k(b, 2, x), x);
    case TP_U_LOG2:
      return tp_hlo_binary(b, TP_HLO_MUL, tp_hlo_unary(b, TP_HLO_LOG, x),
                           tp_k(b, 1.4426950408889634, x));
    case TP_U_LOG10:
      return tp_hlo_binary(b, TP_HLO_MUL, tp_hlo_unary(b, TP_HLO_LOG, x),
                           tp_k(b, 0.43429448190325176, x));
    case TP_U_RECIPROCAL:
      return tp_hlo_binary(b, TP_HLO_DIV, tp_k(b, 1, x), x);
    case TP_U_TRUNC:
      return fl ? trunc_value(b, x) : x;
    case TP_U_FLOOR: case TP_U_CEIL: case TP_U_ROUND:
      return fl ? tp_hlo_unary(b, kDirectUnary[code], x) : x;
    case TP_U_FRAC:
      return tp_hlo_binary(b, TP_HLO_SUB, x, trunc_value(b, x));
    case TP_U_SIGN:
      if (x.dtype == TP_DTYPE_BOOL) return x;
      if (tp_dtype_is_unsigned(x.dtype))
        return tp_hlo_convert(b, tp_hlo_compare(b, TP_CMP_NE, x, tp_k(b, 0, x)),
                              x.dtype);
      if (fl) { /* CPU's (0 < x) - (x < 0): 0 for NaN (and +0 for -0), where HLO's sign is NaN */
        tp_hlo_value_t zero = tp_k(b, 0, x);
        return tp_hlo_binary(b, TP_HLO_SUB,
                             tp_hlo_convert(b, tp_hlo_compare(b, TP_CMP_GT, x, zero), x.dtype),
                             tp_hlo_convert(b, tp_hlo_compare(b, TP_CMP_LT, x, zero), x.dtype));
      }
      return tp_hlo_unary(b, TP_HLO_SIGN, x);
    case TP_U_ABS:
      return tp_dtype_is_unsigned(x.dtype) ? x : tp_hlo_unary(b, TP_HLO_ABS, x);
    case TP_U_BITWISE_NOT:
      return tp_hlo_unary(b, TP_HLO_NOT, x);
    case TP_U_LOGICAL_NOT:
      return tp_hlo_compare(b, TP_CMP_EQ, x, tp_k(b, 0, x));
    case TP_U_ISNAN:
      return fl ? tp_is_nan(b, x) : tp_hlo_convert(b, tp_k(b, 0, x), TP_DTYPE_BOOL);
    case TP_U_ISINF: case TP_U_ISPOSINF: case TP_U_ISNEGINF:
      return fl ? tp_hlo_unary(b, kDirectUnary[code], x)
                : tp_hlo_convert(b, tp_k(b, 0, x), TP_DTYPE_BOOL);
    case TP_U_ISFINITE:
      return fl ? tp_hlo_unary(b, TP_HLO_IS_FINITE, x)
                : tp_hlo_convert(b, tp_k(b, 1, x), TP_DTYPE_BOOL);
    case TP_U_SIGNBIT:
      return tp_emit_signbit(b, x);
    case TP_U_RELU: {
      /* x > 0 ? x : 0, keeping NaN as PyTorch does. */
      tp_hlo_value_t zero = tp_k(b, 0, x);
      tp_hlo_value_t keep = tp_hlo_compare(b, TP_CMP_GT, x, zero);
      if (fl) keep = tp_hlo_binary(b, TP_HLO_OR, keep, tp_is_nan(b, x));
      return tp_hlo_select(b, keep, x, zero);
    }
    case TP_U_ZERO:
      return tp_k(b, 0, x);
    case TP_U_SILU:
      return tp_hlo_binary(b, TP_HLO_MUL, x, tp_hlo_unary(b, TP_HLO_LOGISTIC, x));
    case TP_U_DIGAMMA: return tp_emit_digamma(b, x);
    case TP_U_SINC: {
      tp_hlo_value_t px = tp_mul(b, x, tp_k(b, 3.14159265358979323846, x));
      return tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_EQ, x, tp_k(b, 0, x)), tp_k(b, 1, x),
                           tp_hlo_binary(b, TP_HLO_DIV, tp_hlo_unary(b, TP_HLO_SIN, px), px));
    }
    case TP_U_ENTR: {
      tp_hlo_value_t zero = tp_k(b, 0, x);
      tp_hlo_value_t r = tp_hlo_unary(b, TP_HLO_NEG, tp_mul(b, x, tp_hlo_unary(b, TP_HLO_LOG, x)));
      r = tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_EQ, x, zero), zero, r);
      r = tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_LT, x, zero), tp_k(b, -__builtin_inf(), x), r);
      return tp_hlo_select(b, tp_is_nan(b, x), x, r);
    }
    case TP_U_I0E: return tp_emit_i0e(b, x);
    case TP_U_I0: {
      /* exp(|x|) applied in halves, so I0 stays finite as long as it fits the type. */
      tp_hlo_value_t h = tp_hlo_unary(b, TP_HLO_EXP, tp_mul(b, tp_hlo_unary(b, TP_HLO_ABS, x), tp_k(b, 0.5, x)));
      return tp_mul(b, tp_mul(b, tp_emit_i0e(b, x), h), h);
    }
    case TP_U_I1E: return tp_hlo_unary(b, TP_HLO_BESSEL_I1E, x);
    case TP_U_I1: {
      tp_hlo_value_t h = tp_hlo_unary(b, TP_HLO_EXP, tp_mul(b, tp_hlo_unary(b, TP_HLO_ABS, x), tp_k(b, 0.5, x)));
      return tp_mul(b, tp_mul(b, tp_hlo_unary(b, TP_HLO_BESSEL_I1E, x), h), h);
    }
    case TP_U_NDTRI:
      return tp_mul(b, tp_hlo_unary(b, TP_HLO_ERF_INV,
                                 tp_hlo_binary(b, TP_HLO_SUB, tp_mul(b, x, tp_k(b, 2, x)), tp_k(b, 1, x))),
                 tp_k(b, 1.4142135623730951, x));
    case TP_U_LOG_NDTR: return tp_emit_log_ndtr(b, x);
    case TP_U_ERFCX: return tp_emit_erfcx(b, x);
    case TP_U_HARDSIGMOID: return hardsigmoid(b, x);
    case TP_U_HARDSWISH: return tp_mul(b, x, hardsigmoid(b, x));
    case TP_U_MISH: {
      /* x * tanh(softplus(x)), softplus(x) = max(x, 0) + log1p(exp(-|x|)) */
      tp_hlo_value_t sp = tp_add(b, tp_hlo_binary(b, TP_HLO_MAX, x, tp_k(b, 0, x)),
                              tp_hlo_unary(b, TP_HLO_LOG1P, tp_hlo_unary(b, TP_HLO_EXP,
                                  tp_hlo_unary(b, TP_HLO_NEG, tp_hlo_unary(b, TP_HLO_ABS, x)))));
      return tp_mul(b, x, tp_hlo_unary(b, TP_HLO_TANH, sp));
    }
    default:
      return tp_hlo_unary(b, kDirectUnary[code], x);
  }
}

void tp_emit_unary(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                   int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                   tp_hlo_value_t *out) {
  (void)args, (void)n_args;
  tp_dtype_t dt = (op->flags & TP_OPF_BOOL_RESULT) || tp_dtype_is_complex(in[0].dtype)
                      ? in[0].dtype : out_meta->dtype;
  tp_hlo_value_t x = tp_hlo_convert(b, in[0], tp_math_dtype(dt));
  out[0] = tp_hlo_convert(b, emit_unary_value(b, (tp_unary_t)op->code, x), out_meta->dtype);
}

/* ---- binary ---- */

/* The dtype the binary op computes in (before any bool result). */
static tp_dtype_t binary_compute_dtype(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args) {
  tp_dtype_t rt = tp_result_type(args, 2);
  bool has_mode = n_args > 2 && args[2].kind == TP_ARG_STR;
  if ((op->flags & TP_OPF_FLOAT_RESULT) && !tp_dtype_is_float(rt) && !tp_dtype_is_complex(rt) &&
      !has_mode)
    rt = TP_DTYPE_F32;
  return rt;
}

tp_status_t *tp_infer_binary(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                             int *n_out) {
  if (n_args < 2 || !is_value(&args[0]) || !is_value(&args[1]) ||
      (args[0].kind != TP_ARG_TENSOR && args[1].kind != TP_ARG_TENSOR))
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected a tensor and a tensor or number",
                          op->name);
  tp_meta_t shape = args[0].kind == TP_ARG_TENSOR ? args[0].meta : args[1].meta;
  if (args[0].kind == TP_ARG_TENSOR && args[1].kind == TP_ARG_TENSOR)
    TP_RETURN_IF_ERROR(tp_broadcast_shapes(&args[0].meta, &args[1].meta, &shape));
  tp_dtype_t rt = binary_compute_dtype(op, args, n_args);
  if (tp_dtype_is_complex(rt) && n_args > 2 && args[2].kind == TP_ARG_STR)
    return tp_make_status(TP_UNIMPLEMENTED, "%s: rounding a complex quotient", op->name);
  if (no_half_on_cpu(op, rt))
    return tp_make_status(TP_UNIMPLEMENTED, "%s of a 16-bit float", op->name);
  bool sub = op->code == TP_B_SUB || op->code == TP_B_RSUB;
  if (op->code == TP_B_HEAVISIDE && args[0].meta.dtype != args[1].meta.dtype)
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "heaviside is not yet implemented for tensors with different dtypes.");
  /* CPU raises NotImplementedError, in its words ("Subtraction, the `-` operator, with a bool
   * tensor is not supported...") */
  if (sub && (args[0].meta.dtype == TP_DTYPE_BOOL || args[1].meta.dtype == TP_DTYPE_BOOL))
    return tp_make_status(TP_UNIMPLEMENTED, "%s of a bool", op->name);
  if (!sub) TP_RETURN_IF_ERROR(check_dtype_flags(op, rt));
  if (n_args > 2 && args[2].kind == TP_ARG_STR) {
    if (strcmp(args[2].s, "trunc") != 0 && strcmp(args[2].s, "floor") != 0)
      return tp_make_status(TP_INVALID_ARGUMENT,
                            "div expected rounding_mode to be one of None, 'trunc', or 'floor' but "
                            "found '%s'", args[2].s);
  }
  if ((op->flags & TP_OPF_ALPHA) && n_args > 2 && args[2].kind == TP_ARG_SCALAR) {
    if (!tp_dtype_is_float(rt) && tp_dtype_is_float(args[2].meta.dtype))
      return tp_make_status(TP_INVALID_ARGUMENT,
                            "For integral input tensors, argument alpha must not be a floating "
                            "point number.");
    args[2].scalar_dtype = tp_math_dtype(rt);
  }
  for (int i = 0; i < 2; i++)
    if (args[i].kind == TP_ARG_SCALAR) args[i].scalar_dtype = tp_math_dtype(rt);
  shape.dtype = (op->flags & TP_OPF_BOOL_RESULT) ? TP_DTYPE_BOOL : rt;
  out[0] = shape;
  *n_out = 1;
  return NULL;
}

/* Python-style remainder: the result takes the divisor's sign. */
static tp_hlo_value_t py_remainder(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t y) {
  tp_hlo_value_t r = tp_hlo_binary(b, TP_HLO_REM, x, y);
  if (tp_dtype_is_unsigned(x.dtype)) return r;
  tp_hlo_value_t zero = tp_k(b, 0, r);
  tp_hlo_value_t fix = tp_hlo_binary(
      b, TP_HLO_AND, tp_hlo_compare(b, TP_CMP_NE, r, zero),
      tp_hlo_compare(b, TP_CMP_NE, tp_hlo_compare(b, TP_CMP_LT, r, zero),
                     tp_hlo_compare(b, TP_CMP_LT, y, zero)));
  return tp_hlo_select(b, fix, tp_hlo_binary(b, TP_HLO_ADD, r, y), r);
}

/* Floor division of floats as CPU computes it (Python's algorithm): from the remainder,
 * div = (x - fmod(x, y)) / y, less one where the remainder's sign is not y's, then rounded to the
 * nearest integer; a zero quotient takes the sign of x / y, and y == 0 gives x / y. So an
 * infinite x is NaN (fmod is), and x finite over y infinite is 0 or -1, never -0 for -1 // inf;
 * and a quotient that rounds up to an integer (1 // 0.1) is not floored one too high. */
static tp_hlo_value_t floor_div_float(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t y) {
  tp_hlo_value_t zero = tp_k(b, 0, x), one = tp_k(b, 1, x);
  tp_hlo_value_t q = tp_hlo_binary(b, TP_HLO_DIV, x, y);
  tp_hlo_value_t mod = tp_hlo_binary(b, TP_HLO_REM, x, y);
  tp_hlo_value_t div = tp_hlo_binary(b, TP_HLO_DIV, tp_hlo_binary(b, TP_HLO_SUB, x, mod), y);
  tp_hlo_value_t fix = tp_hlo_binary(
      b, TP_HLO_AND, tp_hlo_compare(b, TP_CMP_NE, mod, zero),
      tp_hlo_compare(b, TP_CMP_NE, tp_hlo_compare(b, TP_CMP_LT, y, zero),
                     tp_hlo_compare(b, TP_CMP_LT, mod, zero)));
  div = tp_hlo_select(b, fix, tp_hlo_binary(b, TP_HLO_SUB, div, one), div);
  tp_hlo_value_t fl = tp_hlo_unary(b, TP_HLO_FLOOR, div);
  fl = tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_GT, tp_hlo_binary(b, TP_HLO_SUB, div, fl),
                                       tp_k(b, 0.5, x)),
                     tp_hlo_binary(b, TP_HLO_ADD, fl, one), fl);
  tp_hlo_value_t signed_zero = tp_hlo_select(b, tp_emit_signbit(b, q), tp_k(b, -0.0, x), zero);
  fl = tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_EQ, div, zero), signed_zero, fl);
  return tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_EQ, y, zero), q, fl);
}

/* Floor division: floats as floor_div_float; for integers the truncated quotient, minus one when
 * the remainder is non-zero and the signs differ. */
static tp_hlo_value_t floor_div(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t y) {
  if (tp_dtype_is_float(x.dtype)) return floor_div_float(b, x, y);
  tp_hlo_value_t q = tp_hlo_binary(b, TP_HLO_DIV, x, y);
  if (tp_dtype_is_unsigned(x.dtype)) return q;
  tp_hlo_value_t zero = tp_k(b, 0, q);
  tp_hlo_value_t r = tp_hlo_binary(b, TP_HLO_REM, x, y);
  tp_hlo_value_t fix = tp_hlo_binary(
      b, TP_HLO_AND, tp_hlo_compare(b, TP_CMP_NE, r, zero),
      tp_hlo_compare(b, TP_CMP_NE, tp_hlo_compare(b, TP_CMP_LT, x, zero),
                     tp_hlo_compare(b, TP_CMP_LT, y, zero)));
  return tp_hlo_select(b, fix, tp_hlo_binary(b, TP_HLO_SUB, q, tp_k(b, 1, q)), q);
}

/* hypot as C's: +inf when either operand is infinite, even against NaN; scaled by the larger
 * magnitude, so it neither overflows nor underflows where the result does not. */
static tp_hlo_value_t hypot_value(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t y) {
  tp_hlo_value_t ax = tp_hlo_unary(b, TP_HLO_ABS, x), ay = tp_hlo_unary(b, TP_HLO_ABS, y);
  tp_hlo_value_t hi = tp_hlo_binary(b, TP_HLO_MAX, ax, ay), lo = tp_hlo_binary(b, TP_HLO_MIN, ax, ay);
  tp_hlo_value_t zero = tp_k(b, 0, x), inf = tp_k(b, __builtin_inf(), x);
  tp_hlo_value_t t = tp_hlo_binary(b, TP_HLO_DIV, lo, hi);
  tp_hlo_value_t r = tp_hlo_binary(
      b, TP_HLO_MUL, hi,
      tp_hlo_unary(b, TP_HLO_SQRT, tp_hlo_binary(b, TP_HLO_ADD, tp_k(b, 1, x),
                                                 tp_hlo_binary(b, TP_HLO_MUL, t, t))));
  r = tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_EQ, hi, zero), zero, r);
  r = tp_hlo_select(b, tp_hlo_binary(b, TP_HLO_OR, tp_is_nan(b, x), tp_is_nan(b, y)), tp_hlo_binary(b, TP_HLO_ADD, x, y), r);
  return tp_hlo_select(b, tp_hlo_binary(b, TP_HLO_OR, tp_hlo_compare(b, TP_CMP_EQ, ax, inf),
                                        tp_hlo_compare(b, TP_CMP_EQ, ay, inf)),
                       inf, r);
}

static tp_hlo_value_t emit_binary_value(tp_hlo_builder_t *b, tp_binary_t code, tp_hlo_value_t x,
                                        tp_hlo_value_t y, const char *mode) {
  bool bl = x.dtype == TP_DTYPE_BOOL, fl = tp_dtype_is_float(x.dtype);
  switch (code) {
    case TP_B_ADD: return tp_hlo_binary(b, bl ? TP_HLO_OR : TP_HLO_ADD, x, y);
    case TP_B_SUB: return tp_hlo_binary(b, TP_HLO_SUB, x, y);
    case TP_B_MUL: return tp_hlo_binary(b, bl ? TP_HLO_AND : TP_HLO_MUL, x, y);
    case TP_B_DIV:
      if (mode && strcmp(mode, "floor") == 0) return floor_div(b, x, y);
      if (mode && fl) return trunc_value(b, tp_hlo_binary(b, TP_HLO_DIV, x, y));
      return tp_hlo_binary(b, TP_HLO_DIV, x, y);
    case TP_B_FLOOR_DIVIDE: return floor_div(b, x, y);
    case TP_B_REMAINDER: return py_remainder(b, x, y);
    case TP_B_FMOD: return tp_hlo_binary(b, TP_HLO_REM, x, y);
    case TP_B_POW: return tp_hlo_binary(b, TP_HLO_POW, x, y);
    case TP_B_ATAN2: return tp_hlo_binary(b, TP_HLO_ATAN2, x, y);
    case TP_B_MAXIMUM: case TP_B_MINIMUM: {
      tp_hlo_value_t m = tp_hlo_binary(b, code == TP_B_MAXIMUM ? (bl ? TP_HLO_OR : TP_HLO_MAX)
                                                               : (bl ? TP_HLO_AND : TP_HLO_MIN),
                                       x, y);
      /* NaN in either operand wins, as on CPU. */
      return fl ? tp_hlo_select(b, tp_is_nan(b, x), x, tp_hlo_select(b, tp_is_nan(b, y), y, m)) : m;
    }
    case TP_B_FMAX: case TP_B_FMIN: {
      tp_hlo_value_t m = tp_hlo_binary(b, code == TP_B_FMAX ? (bl ? TP_HLO_OR : TP_HLO_MAX)
                                                            : (bl ? TP_HLO_AND : TP_HLO_MIN),
                                       x, y);
      if (!fl) return m;
      return tp_hlo_select(b, tp_is_nan(b, x), y, tp_hlo_select(b, tp_is_nan(b, y), x, m));
    }
    case TP_B_HYPOT: return hypot_value(b, x, y);
    case TP_B_COPYSIGN: {
      tp_hlo_value_t a = tp_hlo_unary(b, TP_HLO_ABS, x);
      return tp_hlo_select(b, tp_emit_signbit(b, y), tp_hlo_unary(b, TP_HLO_NEG, a), a);
    }
    case TP_B_BITAND: return tp_hlo_binary(b, TP_HLO_AND, x, y);
    case TP_B_BITOR: return tp_hlo_binary(b, TP_HLO_OR, x, y);
    case TP_B_BITXOR: return tp_hlo_binary(b, TP_HLO_XOR, x, y);
    case TP_B_LOGICAL_AND: case TP_B_LOGICAL_OR: case TP_B_LOGICAL_XOR: {
      tp_hlo_value_t bx = tp_hlo_convert(b, x, TP_DTYPE_BOOL), by = tp_hlo_convert(b, y, TP_DTYPE_BOOL);
      tp_hlo_binary_t h = code == TP_B_LOGICAL_AND ? TP_HLO_AND
                          : code == TP_B_LOGICAL_OR ? TP_HLO_OR : TP_HLO_XOR;
      return tp_hlo_binary(b, h, bx, by);
    }
    case TP_B_EQ: return tp_hlo_compare(b, TP_CMP_EQ, x, y);
    case TP_B_NE: return tp_hlo_compare(b, TP_CMP_NE, x, y);
    case TP_B_LT: return tp_hlo_compare(b, TP_CMP_LT, x, y);
    case TP_B_LE: return tp_hlo_compare(b, TP_CMP_LE, x, y);
    case TP_B_GT: return tp_hlo_compare(b, TP_CMP_GT, x, y);
    case TP_B_GE: return tp_hlo_compare(b, TP_CMP_GE, x, y);
    case TP_B_XLOGY: {
      tp_hlo_value_t r = tp_hlo_binary(b, TP_HLO_MUL, x, tp_hlo_unary(b, TP_HLO_LOG, y));
      tp_hlo_value_t zero = tp_k(b, 0, x);
      tp_hlo_value_t xz = tp_hlo_binary(b, TP_HLO_AND, tp_hlo_compare(b, TP_CMP_EQ, x, zero),
                                        tp_hlo_unary(b, TP_HLO_NOT, tp_is_nan(b, y)));
      return tp_hlo_select(b, xz, zero, r);
    }
    case TP_B_NEXTAFTER: return tp_hlo_binary(b, TP_HLO_NEXT_AFTER, x, y);
    case TP_B_RSUB: return tp_hlo_binary(b, TP_HLO_SUB, x, y); /* operands swapped by the caller */
    case TP_B_LOGADDEXP: case TP_B_LOGADDEXP2: {
      /* max + log(1 + e^-|x-y|), in base e or 2; equal infinities give themselves. */
      bool two = code == TP_B_LOGADDEXP2;
      tp_hlo_value_t m = tp_hlo_binary(b, TP_HLO_MAX, x, y);
      tp_hlo_value_t d = tp_hlo_unary(b, TP_HLO_NEG, tp_hlo_unary(b, TP_HLO_ABS, tp_hlo_binary(b, TP_HLO_SUB, x, y)));
      if (two) d = tp_mul(b, d, tp_k(b, 0.69314718055994531, d));
      tp_hlo_value_t l = tp_hlo_unary(b, TP_HLO_LOG1P, tp_hlo_unary(b, TP_HLO_EXP, d));
      if (two) l = tp_mul(b, l, tp_k(b, 1.4426950408889634, l));
      tp_hlo_value_t same_inf = tp_hlo_binary(b, TP_HLO_AND, tp_hlo_compare(b, TP_CMP_EQ, x, y),
                                              tp_hlo_unary(b, TP_HLO_IS_INF, x));
      tp_hlo_value_t r = tp_hlo_select(b, same_inf, x, tp_add(b, m, l));
      return tp_hlo_select(b, tp_is_nan(b, x), x, tp_hlo_select(b, tp_is_nan(b, y), y, r));
    }
    case TP_B_XLOG1PY: {
      tp_hlo_value_t r = tp_mul(b, x, tp_hlo_unary(b, TP_HLO_LOG1P, y));
      tp_hlo_value_t zero = tp_k(b, 0, x);
      tp_hlo_value_t xz = tp_hlo_binary(b, TP_HLO_AND, tp_hlo_compare(b, TP_CMP_EQ, x, zero),
                                        tp_hlo_unary(b, TP_HLO_NOT, tp_is_nan(b, y)));
      return tp_hlo_select(b, xz, zero, r);
    }
    case TP_B_ZETA: return tp_emit_zeta(b, x, y, -1);
    case TP_B_HEAVISIDE: {
      tp_hlo_value_t zero = tp_k(b, 0, x);
      tp_hlo_value_t pos = tp_hlo_convert(b, tp_hlo_compare(b, TP_CMP_GT, x, zero), x.dtype);
      return tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_EQ, x, zero), y, pos);
    }
    case TP_B_HARDSIGMOID_BACKWARD: {
      /* x = grad, y = self: grad / 6 strictly inside (-3, 3), else 0 */
      tp_hlo_value_t in = tp_hlo_binary(b, TP_HLO_AND, tp_hlo_compare(b, TP_CMP_GT, y, tp_k(b, -3, y)),
                                        tp_hlo_compare(b, TP_CMP_LT, y, tp_k(b, 3, y)));
      return tp_hlo_select(b, in, tp_hlo_binary(b, TP_HLO_DIV, x, tp_k(b, 6, x)), tp_k(b, 0, x));
    }
    case TP_B_MISH_BACKWARD: {
      /* grad * (tanh(softplus(x)) + x * sigmoid(x) * (1 - tanh(softplus(x))^2)) */
      tp_hlo_value_t one = tp_k(b, 1, y);
      tp_hlo_value_t t = tp_hlo_unary(b, TP_HLO_TANH, tp_hlo_unary(b, TP_HLO_LOG1P, tp_hlo_unary(b, TP_HLO_EXP, y)));
      tp_hlo_value_t d = tp_mul(b, tp_mul(b, y, tp_hlo_unary(b, TP_HLO_LOGISTIC, y)),
                             tp_hlo_binary(b, TP_HLO_SUB, one, tp_mul(b, t, t)));
      return tp_mul(b, x, tp_add(b, t, d));
    }
    case TP_B_HARDSWISH_BACKWARD: {
      tp_hlo_value_t mid = tp_mul(b, x, tp_add(b, tp_hlo_binary(b, TP_HLO_DIV, y, tp_k(b, 3, y)), tp_k(b, 0.5, y)));
      tp_hlo_value_t r = tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_LE, y, tp_k(b, 3, y)), mid, x);
      return tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_LT, y, tp_k(b, -3, y)), tp_k(b, 0, x), r);
    }
  }
  return x;
}

void tp_emit_binary(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                    int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                    tp_hlo_value_t *out) {
  tp_dtype_t ct = binary_compute_dtype(op, args, n_args);
  /* Comparisons and exact integer ops compute in the promoted type itself; float math in f32
   * for half types. nextafter must stay in its own type. */
  tp_dtype_t md = (op->flags & TP_OPF_BOOL_RESULT) || op->code == TP_B_NEXTAFTER
                      ? ct : tp_math_dtype(ct);
  tp_hlo_value_t x = tp_emit_cast_shape(b, in[0], md, out_meta);
  tp_hlo_value_t y = tp_emit_cast_shape(b, in[1], md, out_meta);
  if (op->code == TP_B_RSUB) { /* rsub(self, other, alpha) = other - alpha * self */
    tp_hlo_value_t t = x;
    x = y;
    y = t;
  }
  if ((op->flags & TP_OPF_ALPHA) && n_args > 2 && args[2].kind == TP_ARG_SCALAR)
    y = tp_hlo_binary(b, md == TP_DTYPE_BOOL ? TP_HLO_AND : TP_HLO_MUL, y,
                      tp_emit_cast_shape(b, in[2], md, out_meta));
  const char *mode = n_args > 2 && args[2].kind == TP_ARG_STR ? args[2].s : NULL;
  out[0] = tp_hlo_convert(b, emit_binary_value(b, (tp_binary_t)op->code, x, y, mode),
                          out_meta->dtype);
}

/* ---- ternary: where, clamp, addcmul, addcdiv, lerp ---- */

tp_status_t *tp_infer_ternary(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                              tp_meta_t *out, int *n_out) {
  int n = n_args < 3 ? n_args : 3;
  bool where = op->code == TP_T_WHERE;
  if (where && (args[0].kind != TP_ARG_TENSOR || args[0].meta.dtype != TP_DTYPE_BOOL))
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "where expected condition to be a boolean tensor, but got a tensor "
                          "with dtype %s", tp_dtype_name(args[0].meta.dtype));
  tp_meta_t shape = {0};
  bool any = false;
  for (int i = 0; i < n; i++) {
    if (args[i].kind != TP_ARG_TENSOR) continue;
    if (!any) shape = args[i].meta;
    else TP_RETURN_IF_ERROR(tp_broadcast_shapes(&shape, &args[i].meta, &shape));
    any = true;
  }
  if (!any) return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected a tensor", op->name);
  if ((op->code == TP_T_CLAMP) && args[1].kind == TP_ARG_NONE && args[2].kind == TP_ARG_NONE)
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "torch.clamp: At least one of 'min' or 'max' must not be None");
  /* The result type: over the value operands (not where's condition, not lerp's weight). */
  int first = where ? 1 : 0, last = op->code == TP_T_LERP ? 2 : n;
  tp_op_arg_t vals[3];
  int nv = 0;
  for (int i = first; i < last; i++)
    if (is_value(&args[i])) vals[nv++] = args[i];
  tp_dtype_t rt = tp_result_type(vals, nv);
  if (op->code == TP_T_ADDCDIV && !tp_dtype_is_float(rt))
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "Integer division with addcdiv is no longer supported, and in a future "
                          "release addcdiv will perform a true division of tensor1 and tensor2.");
  tp_dtype_t md = where ? rt : tp_math_dtype(rt);
  for (int i = 0; i < n_args; i++)
    if (args[i].kind == TP_ARG_SCALAR) args[i].scalar_dtype = md;
  shape.dtype = rt;
  out[0] = shape;
  *n_out = 1;
  return NULL;
}

void tp_emit_ternary(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                     int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                     tp_hlo_value_t *out) {
  bool where = op->code == TP_T_WHERE;
  tp_dtype_t md = where ? out_meta->dtype : tp_math_dtype(out_meta->dtype);
  tp_hlo_value_t v[4];
  for (int i = 0; i < n_args && i < 4; i++)
    if (is_value(&args[i]))
      v[i] = tp_emit_cast_shape(b, in[i], (where && i == 0) ? TP_DTYPE_BOOL : md, out_meta);
  tp_hlo_value_t r;
  switch ((tp_ternary_t)op->code) {
    case TP_T_WHERE: r = tp_hlo_select(b, v[0], v[1], v[2]); break;
    case TP_T_CLAMP: case TP_T_CLAMP_MIN: case TP_T_CLAMP_MAX: {
      r = v[0];
      int lo = op->code == TP_T_CLAMP_MAX ? -1 : 1;
      int hi = op->code == TP_T_CLAMP ? 2 : op->code == TP_T_CLAMP_MAX ? 1 : -1;
      if (lo > 0 && is_value(&args[lo])) r = tp_hlo_binary(b, TP_HLO_MAX, r, v[lo]);
      if (hi > 0 && hi < n_args && is_value(&args[hi])) r = tp_hlo_binary(b, TP_HLO_MIN, r, v[hi]);
      if (md == TP_DTYPE_BOOL) break;
      /* A NaN bound makes the result NaN, as on CPU. */
      if (tp_dtype_is_float(md)) {
        if (lo > 0 && is_value(&args[lo])) r = tp_hlo_select(b, tp_is_nan(b, v[lo]), v[lo], r);
        if (hi > 0 && hi < n_args && is_value(&args[hi]))
          r = tp_hlo_select(b, tp_is_nan(b, v[hi]), v[hi], r);
      }
      break;
    }
    case TP_T_ADDCMUL: case TP_T_ADDCDIV: {
      tp_hlo_value_t t = tp_hlo_binary(b, op->code == TP_T_ADDCMUL ? TP_HLO_MUL : TP_HLO_DIV, v[1],
                                       v[2]);
      if (n_args > 3 && args[3].kind == TP_ARG_SCALAR)
        t = tp_hlo_binary(b, TP_HLO_MUL, t, tp_emit_cast_shape(b, in[3], md, out_meta));
      r = tp_hlo_binary(b, TP_HLO_ADD, v[0], t);
      break;
    }
    case TP_T_LERP: {
      /* weight < 0.5 ? self + w * (end - self) : end - (end - self) * (1 - w) */
      tp_hlo_value_t d = tp_hlo_binary(b, TP_HLO_SUB, v[1], v[0]);
      tp_hlo_value_t w = v[2];
      tp_hlo_value_t one = tp_k(b, 1, w);
      tp_hlo_value_t small = tp_hlo_compare(b, TP_CMP_LT, tp_hlo_unary(b, TP_HLO_ABS, w),
                                            tp_k(b, 0.5, w));
      r = tp_hlo_select(b, small, tp_hlo_binary(b, TP_HLO_ADD, v[0], tp_hlo_binary(b, TP_HLO_MUL, w, d)),
                        tp_hlo_binary(b, TP_HLO_SUB, v[1],
                                      tp_hlo_binary(b, TP_HLO_MUL, d,
                                                    tp_hlo_binary(b, TP_HLO_SUB, one, w))));
      break;
    }
    default: r = v[0];
  }
  out[0] = tp_hlo_convert(b, r, out_meta->dtype);
}

/* ---- copy, fill, relu's backward ---- */

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
  (void)op;
  /* Optional attributes 3 and 4 (the executor's, past ATen's non_blocking): conjugate, negate. */
  bool conj = n_args > 3 && args[3].kind == TP_ARG_INT && args[3].i;
  bool neg = n_args > 4 && args[4].kind == TP_ARG_INT && args[4].i;
  tp_hlo_value_t v = in[1];
  if (conj && tp_dtype_is_complex(v.dtype))
    v = tp_hlo_complex(b, tp_hlo_real(b, v), tp_hlo_unary(b, TP_HLO_NEG, tp_hlo_imag(b, v)));
  v = tp_emit_cast_to(b, v, out_meta);
  if (neg && v.dtype != TP_DTYPE_BOOL) v = tp_hlo_unary(b, TP_HLO_NEG, v);
  out[0] = v;
}

tp_status_t *tp_infer_fill(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                           int *n_out) {
  TP_RETURN_IF_ERROR(need_tensor(op, args, n_args, 0));
  if (n_args < 2 || !(args[1].kind == TP_ARG_SCALAR ||
                      (args[1].kind == TP_ARG_TENSOR && args[1].meta.ndim == 0)))
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "fill_ only supports 0-dimension value tensor but got tensor with %d "
                          "dimensions.", args[1].meta.ndim);
  if (tp_dtype_is_complex(args[1].meta.dtype) && !tp_dtype_is_complex(args[0].meta.dtype))
    return tp_make_status(TP_UNIMPLEMENTED, "fill_: a complex value into a real tensor"); /* CPU's error */
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

tp_status_t *tp_infer_threshold_backward(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                         tp_meta_t *out, int *n_out) {
  TP_RETURN_IF_ERROR(need_tensor(op, args, n_args, 0));
  TP_RETURN_IF_ERROR(need_tensor(op, args, n_args, 1));
  if (n_args < 3 || args[2].kind != TP_ARG_SCALAR)
    return tp_make_status(TP_INVALID_ARGUMENT, "threshold_backward: threshold must be a number");
  tp_meta_t shape;
  TP_RETURN_IF_ERROR(tp_broadcast_shapes(&args[0].meta, &args[1].meta, &shape));
  shape.dtype = tp_result_type(args, 2);
  args[2].scalar_dtype = tp_math_dtype(shape.dtype);
  out[0] = shape;
  *n_out = 1;
  return NULL;
}

void tp_emit_threshold_backward(const tp_op_def_t *op, tp_hlo_builder_t *b,
                                const tp_op_arg_t *args, int n_args, const tp_hlo_value_t *in,
                                const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  (void)op, (void)args, (void)n_args;
  tp_dtype_t md = tp_math_dtype(out_meta->dtype);
  tp_hlo_value_t g = tp_emit_cast_shape(b, in[0], md, out_meta);
  tp_hlo_value_t x = tp_emit_cast_shape(b, in[1], md, out_meta);
  tp_hlo_value_t t = tp_emit_cast_shape(b, in[2], md, out_meta);
  tp_hlo_value_t keep = tp_hlo_compare(b, TP_CMP_GT, x, t);
  out[0] = tp_hlo_convert(b, tp_hlo_select(b, keep, g, tp_k(b, 0, g)),
                          out_meta->dtype);
}

tp_status_t *tp_infer_shift(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                            int *n_out) {
  /* Either operand may be a number (x >> 2, and the Scalar_Tensor forms: 64 >> t), not both. */
  if (n_args < 2 || (!tp_arg_is_tensor(args, n_args, 0) && !tp_arg_is_tensor(args, n_args, 1)))
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected a tensor and a tensor or number",
                          op->name);
  for (int i = 0; i < 2; i++)
    if (!tp_arg_is_tensor(args, n_args, i) && args[i].kind != TP_ARG_SCALAR)
      return tp_make_status(TP_UNIMPLEMENTED, "%s: arguments", op->name);
  tp_dtype_t dt = tp_result_type(args, 2);
  if (!tp_dtype_is_int(dt)) return tp_make_status(TP_UNIMPLEMENTED, "%s: dtype", op->name);
  *n_out = 1;
  if (args[0].kind == TP_ARG_SCALAR || args[1].kind == TP_ARG_SCALAR) {
    int t = args[0].kind == TP_ARG_SCALAR;
    args[1 - t].scalar_dtype = dt;
    out[0] = args[t].meta;
  } else {
    TP_RETURN_IF_ERROR(tp_broadcast_shapes(&args[0].meta, &args[1].meta, &out[0]));
  }
  out[0].dtype = dt;
  out[0].writes_arg = 0;
  return NULL;
}

void tp_emit_shift(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                   const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  const tp_meta_t *om = &out_meta[0];
  /* CPU: a count outside [0, bits) shifts everything out (left: 0; right: the sign). */
  tp_dtype_t dt = om->dtype;
  tp_hlo_value_t a = tp_emit_cast_shape(b, in[0], dt, om), s = tp_emit_cast_shape(b, in[1], dt, om);
  int bits = 8 * (int)tp_dtype_size(dt);
  bool uns = tp_dtype_is_unsigned(dt);
  tp_hlo_value_t bad = tp_hlo_compare(b, TP_CMP_GE, s, tp_k(b, bits, s));
  if (!uns) bad = tp_bin(b, TP_HLO_OR, bad, tp_hlo_compare(b, TP_CMP_LT, s, tp_k(b, 0, s)));
  tp_hlo_value_t safe = tp_hlo_select(b, bad, tp_k(b, 0, s), s);
  tp_hlo_value_t r;
  if (op->code == TP_SHIFT_LEFT) {
    r = tp_hlo_select(b, bad, tp_k(b, 0, a), tp_bin(b, TP_HLO_SHL, a, safe));
  } else {
    tp_hlo_value_t all = uns ? tp_k(b, 0, a) : tp_bin(b, TP_HLO_SHR_A, a, tp_k(b, bits - 1, a));
    r = tp_hlo_select(b, bad, all, tp_bin(b, uns ? TP_HLO_SHR_L : TP_HLO_SHR_A, a, safe));
  }
  out[0] = r;
}
