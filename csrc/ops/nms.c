/* torchvision::nms(dets, scores, iou_threshold): greedy non-maximum suppression, as
 * torchvision's CPU kernel: boxes in stable descending score order; a box not yet suppressed is
 * kept and suppresses every later box whose intersection over union with it exceeds the
 * threshold (compared in double, as the kernel's float-to-double comparison). One loop over the
 * boxes in order carries the kept flags, each step a vector operation over all boxes, so the
 * program holds no N x N matrix. The result, the kept indices in score order, has a size only
 * the values decide: a TP_OPF_COUNTED row (a count pass, then the compaction). Float and double
 * boxes, as the CPU kernel; other dtypes are UNIMPLEMENTED (CPU raises its own error). Depends on
 * hlo/ and the compaction helpers of compact.c. */
#include "ops/families.h"

tp_status_t *tp_infer_nms(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                          int *n_out) {
  if (n_args < 3 || args[0].kind != TP_ARG_TENSOR || args[1].kind != TP_ARG_TENSOR ||
      args[2].kind != TP_ARG_FLOAT)
    return tp_make_status(TP_UNIMPLEMENTED, "%s: arguments", op->name);
  const tp_meta_t *d = &args[0].meta, *s = &args[1].meta;
  /* Shapes and dtypes CPU rejects: its own message, through the fallback. */
  if (d->ndim != 2 || d->sizes[1] != 4 || s->ndim != 1 || s->sizes[0] != d->sizes[0] ||
      d->dtype != s->dtype || (d->dtype != TP_DTYPE_F32 && d->dtype != TP_DTYPE_F64))
    return tp_make_status(TP_UNIMPLEMENTED, "%s: boxes [N, 4] and scores [N] of one float type",
                          op->name);
  tp_op_arg_t *count = n_args > 3 && args[3].kind == TP_ARG_INT ? &args[3] : NULL;
  int64_t rows;
  TP_RETURN_IF_ERROR(tp_infer_count(op, count, d->sizes[0], false, out, n_out, &rows));
  *n_out = 1;
  if (rows < 0) return NULL;
  out[0] = (tp_meta_t){.dtype = TP_DTYPE_I64, .ndim = 1, .sizes = {rows}};
  return NULL;
}

/* Column |c| of the [n, 4] boxes, in the order |idx|. */
static tp_hlo_value_t column(tp_hlo_builder_t *b, tp_hlo_value_t dets, int c, tp_hlo_value_t idx) {
  int64_t n = dets.dims[0], lo[2] = {0, c}, hi[2] = {n, c + 1}, one[2] = {1, 1};
  tp_hlo_value_t col = tp_hlo_reshape(b, tp_hlo_slice(b, dets, lo, hi, one), 1, &n);
  return tp_hlo_gather_1d(b, col, idx);
}

/* Element |i| (a 0-d i64 value) of the [n] vector |v|, broadcast to [n]. */
static tp_hlo_value_t at(tp_hlo_builder_t *b, tp_hlo_value_t v, tp_hlo_value_t i) {
  int64_t one = 1;
  return tp_hlo_broadcast_to(b, tp_hlo_reshape(b, tp_hlo_dynamic_slice(b, v, &i, &one), 0, NULL),
                             v.ndim, v.dims);
}

void tp_emit_nms(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                 const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  const bool counting = n_args > 3 && tp_count_pass(&args[3]);
  int64_t n = args[0].meta.sizes[0];
  if (n == 0) {
    out[0] = counting ? tp_hlo_constant_i(b, TP_DTYPE_I64, 0)
                      : tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, 0), 1, out_meta[0].sizes);
    return;
  }
  tp_hlo_value_t iota = tp_hlo_iota(b, TP_DTYPE_I64, 1, &n, 0), sorted[2];
  tp_hlo_value_t keys[2] = {in[1], iota};
  tp_hlo_sort(b, keys, 2, 0, true, sorted);
  tp_hlo_value_t idx = sorted[1];
  tp_hlo_value_t x1 = column(b, in[0], 0, idx), y1 = column(b, in[0], 1, idx);
  tp_hlo_value_t x2 = column(b, in[0], 2, idx), y2 = column(b, in[0], 3, idx);
  tp_hlo_value_t area = tp_mul(b, tp_sub(b, x2, x1), tp_sub(b, y2, y1));
  tp_hlo_value_t zero = tp_k(b, 0, x1);
  tp_hlo_value_t thr = tp_hlo_broadcast_to(b, tp_hlo_constant(b, TP_DTYPE_F64, args[2].f), 1, &n);
  tp_hlo_value_t init[2] = {tp_hlo_constant_i(b, TP_DTYPE_I64, 0),
                            tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_BOOL, 1), 1, &n)};
  tp_hlo_value_t s[2], res[2];
  tp_hlo_while_begin(b, init, 2, s);
  tp_hlo_while_body(b, tp_hlo_compare(b, TP_CMP_LT, s[0], tp_hlo_constant_i(b, TP_DTYPE_I64, n)), s);
  tp_hlo_value_t i = s[0], keep = s[1];
  tp_hlo_value_t xx1 = tp_bin(b, TP_HLO_MAX, at(b, x1, i), x1);
  tp_hlo_value_t yy1 = tp_bin(b, TP_HLO_MAX, at(b, y1, i), y1);
  tp_hlo_value_t xx2 = tp_bin(b, TP_HLO_MIN, at(b, x2, i), x2);
  tp_hlo_value_t yy2 = tp_bin(b, TP_HLO_MIN, at(b, y2, i), y2);
  tp_hlo_value_t inter = tp_mul(b, tp_bin(b, TP_HLO_MAX, zero, tp_sub(b, xx2, xx1)),
                                tp_bin(b, TP_HLO_MAX, zero, tp_sub(b, yy2, yy1)));
  tp_hlo_value_t ovr = tp_div(b, inter, tp_sub(b, tp_add(b, at(b, area, i), area), inter));
  tp_hlo_value_t over = tp_hlo_compare(b, TP_CMP_GT, tp_hlo_convert(b, ovr, TP_DTYPE_F64), thr);
  tp_hlo_value_t later = tp_hlo_compare(b, TP_CMP_GT, iota, tp_hlo_broadcast_to(b, i, 1, &n));
  tp_hlo_value_t gone = tp_and(b, tp_and(b, over, later), at(b, keep, i));
  tp_hlo_value_t next[2] = {tp_add(b, i, tp_hlo_constant_i(b, TP_DTYPE_I64, 1)),
                            tp_and(b, keep, tp_not(b, gone))};
  tp_hlo_while_end(b, next, res);
  if (counting) {
    out[0] = tp_emit_count_true(b, res[1]);
    return;
  }
  /* The kept positions in score order; rows past the count (a capacity's padding) read the last
   * index, and the caller drops them. */
  tp_hlo_value_t pos = tp_emit_true_positions(b, res[1], out_meta[0].sizes[0]);
  pos = tp_bin(b, TP_HLO_MIN, pos, tp_k(b, (double)(n - 1), pos));
  out[0] = tp_hlo_gather_1d(b, idx, pos);
}
