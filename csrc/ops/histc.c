/* histc(self, bins, min, max): counts of self's elements in |bins| equal bins over [min, max]
 * (min == max: the data's own range, widened by 1 each way when that is a point). Elements
 * outside the range are ignored; one equal to max lands in the last bin. Integer inputs count
 * as CUDA does (CPU has no integer kernel). The result has self's dtype. CPU's error for a
 * non-finite range depends on the data and is not raised here. */
#include "ops/families.h"

tp_status_t *tp_infer_histc(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                            int *n_out) {
  if (n_args < 4 || args[0].kind != TP_ARG_TENSOR || args[1].kind != TP_ARG_INT ||
      args[2].kind != TP_ARG_SCALAR || args[3].kind != TP_ARG_SCALAR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected (self, bins, min, max)", op->name);
  const tp_meta_t *x = &args[0].meta;
  if (args[1].i <= 0)
    return tp_make_status(TP_INVALID_ARGUMENT, "torch.histc(): bins must be > 0, but got %lld "
                          "for dimension 0", (long long)args[1].i);
  /* 16-bit floats: CPU bins in the 16-bit type itself; its rounding is left to it. */
  if (x->dtype == TP_DTYPE_BOOL || x->dtype == TP_DTYPE_BF16 || x->dtype == TP_DTYPE_F16 ||
      tp_meta_numel(x) == 0)
    return tp_make_status(TP_UNIMPLEMENTED, "%s of bool, 16-bit or empty input", op->name);
  tp_dtype_t cd = tp_dtype_is_float(x->dtype) ? x->dtype : TP_DTYPE_F64;
  args[2].scalar_dtype = args[3].scalar_dtype = cd;
  tp_meta_t m = {x->dtype, 1, {args[1].i}, 0};
  out[0] = m;
  *n_out = 1;
  return NULL;
}

void tp_emit_histc(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                   int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                   tp_hlo_value_t *out) {
  int64_t bins = args[1].i, n = tp_hlo_numel(&in[0]), zero_dim = 0;
  tp_dtype_t cd = args[2].scalar_dtype;
  tp_hlo_value_t x = tp_hlo_reshape(b, tp_hlo_convert(b, in[0], cd), 1, &n);
  tp_hlo_value_t lo = in[2], hi = in[3];
  tp_hlo_value_t dmin = tp_hlo_reduce(b, x, tp_hlo_constant(b, cd, __builtin_inf()), TP_HLO_MIN, 1, &zero_dim);
  tp_hlo_value_t dmax = tp_hlo_reduce(b, x, tp_hlo_constant(b, cd, -__builtin_inf()), TP_HLO_MAX, 1, &zero_dim);
  tp_hlo_value_t same = tp_hlo_compare(b, TP_CMP_EQ, lo, hi);
  lo = tp_hlo_select(b, same, dmin, lo);
  hi = tp_hlo_select(b, same, dmax, hi);
  same = tp_hlo_compare(b, TP_CMP_EQ, lo, hi);
  tp_hlo_value_t one = tp_hlo_constant(b, cd, 1);
  lo = tp_hlo_select(b, same, tp_hlo_binary(b, TP_HLO_SUB, lo, one), lo);
  hi = tp_hlo_select(b, same, tp_hlo_binary(b, TP_HLO_ADD, hi, one), hi);
  tp_hlo_value_t lo_n = tp_hlo_broadcast_to(b, lo, 1, &n), hi_n = tp_hlo_broadcast_to(b, hi, 1, &n);
  tp_hlo_value_t inside = tp_hlo_binary(b, TP_HLO_AND, tp_hlo_compare(b, TP_CMP_GE, x, lo_n),
                                        tp_hlo_compare(b, TP_CMP_LE, x, hi_n));
  /* (x - lo) * bins / (hi - lo), truncated; x == hi goes to the last bin. */
  tp_hlo_value_t pos = tp_hlo_binary(
      b, TP_HLO_DIV,
      tp_hlo_binary(b, TP_HLO_MUL, tp_hlo_binary(b, TP_HLO_SUB, x, lo_n), tp_k(b, (double)bins, x)),
      tp_hlo_binary(b, TP_HLO_SUB, hi_n, lo_n));
  tp_hlo_value_t idx = tp_hlo_convert(b, pos, TP_DTYPE_I64);
  idx = tp_hlo_binary(b, TP_HLO_MIN, idx, tp_k(b, (double)(bins - 1), idx));
  idx = tp_hlo_select(b, inside, idx, tp_k(b, (double)bins, idx)); /* dropped */
  tp_hlo_value_t counts = tp_hlo_broadcast_to(b, tp_hlo_constant(b, out_meta[0].dtype, 0), 1, &bins);
  tp_hlo_value_t ones = tp_hlo_broadcast_to(b, tp_hlo_constant(b, out_meta[0].dtype, 1), 1, &n);
  out[0] = tp_hlo_scatter_1d_op(b, counts, idx, ones, TP_HLO_ADD);
}
