/* frexp: x = mantissa * 2^exponent with |mantissa| in [0.5, 1), exponent int32, as std::frexp
 * (zero, inf and NaN keep x as the mantissa with exponent 0). Read off the float's bits with
 * integer ops only. 16-bit floats work in float32, as CPU
 * converts them. Depends on ops/ helpers and hlo/ only. */
#include <stdint.h>

#include "ops/families.h"

tp_status_t *tp_infer_frexp(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                            int *n_out) {
  if (n_args < 1 || args[0].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected a tensor", op->name);
  /* CPU raises for integer inputs in its own words. */
  if (!tp_dtype_is_float(args[0].meta.dtype)) return tp_make_status(TP_UNIMPLEMENTED, "frexp of non-float");
  out[0] = args[0].meta;
  out[1] = args[0].meta;
  out[1].dtype = TP_DTYPE_I32;
  *n_out = 2;
  return NULL;
}

void tp_emit_frexp(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                   int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                   tp_hlo_value_t *out) {
  (void)op;
  (void)args;
  (void)n_args;
  bool dbl = in[0].dtype == TP_DTYPE_F64;
  tp_dtype_t md = dbl ? TP_DTYPE_F64 : TP_DTYPE_F32, it = dbl ? TP_DTYPE_I64 : TP_DTYPE_I32;
  int mbits = dbl ? 52 : 23, bias = dbl ? 1023 : 127;
  int64_t emask = dbl ? 0x7ff : 0xff;
  int64_t fmask = dbl ? (int64_t)0x000fffffffffffffLL : 0x007fffff;
  int64_t smask = dbl ? INT64_MIN : (int64_t)INT32_MIN;
  tp_hlo_value_t x = tp_hlo_convert(b, in[0], md);
#define TP_I(v) tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, it, (v)), x.ndim, x.dims)
  tp_hlo_value_t bits = tp_hlo_bitcast(b, x, it, x.ndim, x.dims);
  tp_hlo_value_t expf = tp_hlo_binary(b, TP_HLO_AND, tp_hlo_binary(b, TP_HLO_SHR_L, bits, TP_I(mbits)), TP_I(emask));
  tp_hlo_value_t frac = tp_hlo_binary(b, TP_HLO_AND, bits, TP_I(fmask));
  /* Bits only: the device may flush subnormals to zero in float arithmetic. A subnormal is
   * frac * 2^(1 - bias - mbits); frac converts exactly to a normal float, whose bits serve. */
  tp_hlo_value_t zero_exp = tp_hlo_compare(b, TP_CMP_EQ, expf, TP_I(0));
  tp_hlo_value_t sub = tp_hlo_binary(b, TP_HLO_AND, zero_exp, tp_hlo_compare(b, TP_CMP_NE, frac, TP_I(0)));
  tp_hlo_value_t fb = tp_hlo_bitcast(b, tp_hlo_convert(b, frac, md), it, x.ndim, x.dims);
  tp_hlo_value_t use = tp_hlo_select(b, sub, fb, bits);
  tp_hlo_value_t e = tp_hlo_binary(b, TP_HLO_AND, tp_hlo_binary(b, TP_HLO_SHR_L, use, TP_I(mbits)), TP_I(emask));
  e = tp_hlo_binary(b, TP_HLO_SUB, e, TP_I(bias - 1));
  e = tp_hlo_binary(b, TP_HLO_ADD, e, tp_hlo_select(b, sub, TP_I(1 - bias - mbits), TP_I(0)));
  /* The same sign and fraction with the exponent field of bias - 1: a value in [0.5, 1). */
  tp_hlo_value_t mb = tp_hlo_binary(b, TP_HLO_AND, use, TP_I(fmask));
  mb = tp_hlo_binary(b, TP_HLO_OR, mb, TP_I((int64_t)(bias - 1) << mbits));
  mb = tp_hlo_binary(b, TP_HLO_OR, mb, tp_hlo_binary(b, TP_HLO_AND, bits, TP_I(smask)));
  tp_hlo_value_t m = tp_hlo_bitcast(b, mb, md, x.ndim, x.dims);
  /* Zero (either sign), inf and NaN: x itself and exponent 0. */
  tp_hlo_value_t special = tp_hlo_binary(b, TP_HLO_OR, tp_hlo_binary(b, TP_HLO_AND, zero_exp, tp_hlo_unary(b, TP_HLO_NOT, sub)),
                                         tp_hlo_compare(b, TP_CMP_EQ, expf, TP_I(emask)));
  m = tp_hlo_select(b, special, x, m);
  e = tp_hlo_select(b, special, TP_I(0), e);
#undef TP_I
  out[0] = tp_hlo_convert(b, m, out_meta[0].dtype);
  out[1] = tp_hlo_convert(b, e, TP_DTYPE_I32);
}
