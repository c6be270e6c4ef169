/* Results whose size depends on the values: nonzero and masked_select (TP_OPF_COUNTED rows, run
 * as a count pass and a compaction pass, see op.h), nonzero_static (a size the caller gives), and
 * the compaction they and boolean-mask indexing (index.c) share: the positions of the true
 * elements of a predicate, in row-major order, found by one sort of (true ? position : n) keys.
 * A sort rather than a cumulative sum: XLA lowers a cumsum as a window as long as the array, which
 * costs n^2 on some backends; the sort is n log n everywhere. */
#include <string.h>

#include "ops/families.h"

int64_t tp_op_count_capacity(int64_t count) {
  int64_t c = 1;
  while (c < count) c <<= 1;
  return count <= 0 ? 0 : c;
}

tp_hlo_value_t tp_emit_count_true(tp_hlo_builder_t *b, tp_hlo_value_t pred) {
  int64_t n = tp_hlo_numel(&pred);
  tp_hlo_value_t ones = tp_hlo_convert(b, tp_hlo_reshape(b, pred, 1, &n), TP_DTYPE_I64);
  int64_t d0 = 0;
  return tp_hlo_reduce(b, ones, tp_hlo_constant_i(b, TP_DTYPE_I64, 0), TP_HLO_ADD, 1, &d0);
}

tp_hlo_value_t tp_emit_true_positions(tp_hlo_builder_t *b, tp_hlo_value_t pred, int64_t count) {
  int64_t n = tp_hlo_numel(&pred);
  tp_dtype_t it = n < ((int64_t)1 << 31) - 1 ? TP_DTYPE_I32 : TP_DTYPE_I64;
  if (n == 0 || count == 0)
    return tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, n), 1, &count);
  tp_hlo_value_t flat = tp_hlo_reshape(b, pred, 1, &n);
  tp_hlo_value_t iota = tp_hlo_iota(b, it, 1, &n, 0);
  tp_hlo_value_t none = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, it, n), 1, &n);
  tp_hlo_value_t key = tp_hlo_select(b, flat, iota, none), sorted;
  tp_hlo_sort(b, &key, 1, 0, false, &sorted);
  int64_t lo = 0, hi = count < n ? count : n, one = 1;
  tp_hlo_value_t head = tp_hlo_convert(b, tp_hlo_slice(b, sorted, &lo, &hi, &one), TP_DTYPE_I64);
  if (count <= n) return head;
  int64_t pad = count - n;
  tp_hlo_value_t parts[2] = {head, tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, n), 1, &pad)};
  return tp_hlo_concatenate(b, parts, 2, 0);
}

tp_hlo_value_t tp_emit_unravel(tp_hlo_builder_t *b, tp_hlo_value_t pos, const int64_t *sizes, int d,
                               int ndim) {
  int64_t stride = 1;
  for (int i = ndim - 1; i > d; i--) stride *= sizes[i] > 0 ? sizes[i] : 1;
  tp_hlo_value_t c = tp_hlo_binary(b, TP_HLO_DIV, pos, tp_k(b, (double)stride, pos));
  return tp_hlo_binary(b, TP_HLO_REM, c, tp_k(b, (double)(sizes[d] > 0 ? sizes[d] : 1), c));
}

/* The coordinates of flat positions |pos| ([m] i64) in |shape|: [m, ndim] i64; rows whose
 * position is past the end (|fill| given) hold *fill. */
static tp_hlo_value_t coordinates(tp_hlo_builder_t *b, tp_hlo_value_t pos, const tp_meta_t *shape,
                                  const int64_t *fill) {
  int64_t m = pos.dims[0], col[2] = {m, 1}, rows[2] = {m, shape->ndim};
  if (shape->ndim == 0 || m == 0) return tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, 0), 2, rows);
  tp_hlo_value_t past = tp_hlo_compare(b, TP_CMP_GE, pos, tp_k(b, (double)tp_meta_numel(shape), pos));
  tp_hlo_value_t parts[TP_MAX_DIMS];
  for (int d = 0; d < shape->ndim; d++) {
    tp_hlo_value_t c = tp_emit_unravel(b, pos, shape->sizes, d, shape->ndim);
    if (fill) c = tp_hlo_select(b, past, tp_k(b, (double)*fill, c), c);
    parts[d] = tp_hlo_reshape(b, c, 2, col);
  }
  return shape->ndim == 1 ? parts[0] : tp_hlo_concatenate(b, parts, shape->ndim, 1);
}

static tp_hlo_value_t nonzero_pred(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  if (x.dtype == TP_DTYPE_BOOL) return x;
  return tp_hlo_compare(b, TP_CMP_NE, x, tp_k(b, 0, x));
}

/* The count argument of a TP_OPF_COUNTED call: args[at] when the caller appended one, else NULL
 * (a whole graph, whose nodes cannot wait for a count). */
static tp_op_arg_t *count_arg(tp_op_arg_t *args, int n_args, int at) {
  return at < n_args && args[at].kind == TP_ARG_INT ? &args[at] : NULL;
}

bool tp_count_pass(const tp_op_arg_t *count) {
  return count && count->kind == TP_ARG_INT &&
         (count->i == TP_COUNT_PASS || count->i == TP_COUNT_PASS_EXACT);
}

tp_status_t *tp_infer_count(const tp_op_def_t *op, tp_op_arg_t *count, int64_t bound, bool exact,
                            tp_meta_t *out, int *n_out, int64_t *out_rows) {
  if (!count)
    return tp_make_status(TP_UNIMPLEMENTED, "%s: its result size depends on the values", op->name);
  if (count->i == TP_COUNT_UNKNOWN || tp_count_pass(count)) {
    count->i = exact ? TP_COUNT_PASS_EXACT : TP_COUNT_PASS;
    memset(&out[0], 0, sizeof(out[0]));
    out[0].dtype = TP_DTYPE_I64;
    *n_out = 1;
    *out_rows = -1;
    return NULL;
  }
  if (count->i < 0) return tp_make_status(TP_INVALID_ARGUMENT, "%s: bad count %lld", op->name, (long long)count->i);
  *out_rows = count->i < bound ? count->i : bound;
  return NULL;
}

tp_status_t *tp_infer_compact(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                              int *n_out) {
  if (n_args < 1 || args[0].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  const tp_meta_t *x = &args[0].meta;
  *n_out = 1;
  switch ((tp_compact_t)op->code) {
    case TP_CP_NONZERO: {
      /* nonzero(self, count) */
      int64_t rows;
      TP_RETURN_IF_ERROR(tp_infer_count(op, count_arg(args, n_args, 1), tp_meta_numel(x), false, out, n_out, &rows));
      if (rows < 0) return NULL;
      out[0] = (tp_meta_t){.dtype = TP_DTYPE_I64, .ndim = 2, .sizes = {rows, x->ndim}};
      return NULL;
    }
    case TP_CP_MASKED_SELECT: {
      /* masked_select(self, mask, count) */
      if (n_args < 2 || args[1].kind != TP_ARG_TENSOR)
        return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
      if (args[1].meta.dtype != TP_DTYPE_BOOL)
        return tp_make_status(TP_INVALID_ARGUMENT, "masked_select: expected BoolTensor for mask");
      tp_meta_t shape;
      TP_RETURN_IF_ERROR(tp_broadcast_shapes(&args[1].meta, x, &shape));
      int64_t rows;
      TP_RETURN_IF_ERROR(tp_infer_count(op, count_arg(args, n_args, 2), tp_meta_numel(&shape), false, out, n_out, &rows));
      if (rows < 0) return NULL;
      out[0] = (tp_meta_t){.dtype = x->dtype, .ndim = 1, .sizes = {rows}};
      return NULL;
    }
    case TP_CP_NONZERO_STATIC: {
      /* nonzero_static(self, size, fill_value) */
      if (n_args < 3 || args[1].kind != TP_ARG_INT || args[2].kind != TP_ARG_INT)
        return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
      if (args[1].i < 0)
        return tp_make_status(TP_INVALID_ARGUMENT, "nonzero_static: 'size' must be an non-negative integer");
      out[0] = (tp_meta_t){.dtype = TP_DTYPE_I64, .ndim = 2, .sizes = {args[1].i, x->ndim}};
      return NULL;
    }
  }
  return tp_make_status(TP_INVALID_ARGUMENT, "%s: unknown compaction", op->name);
}

void tp_emit_compact(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                     int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                     tp_hlo_value_t *out) {
  const tp_meta_t *x = &args[0].meta;
  switch ((tp_compact_t)op->code) {
    case TP_CP_NONZERO: {
      tp_hlo_value_t pred = nonzero_pred(b, in[0]);
      if (tp_count_pass(&args[1])) {
        out[0] = tp_emit_count_true(b, pred);
        return;
      }
      out[0] = coordinates(b, tp_emit_true_positions(b, pred, out_meta[0].sizes[0]), x, NULL);
      return;
    }
    case TP_CP_MASKED_SELECT: {
      tp_meta_t shape;
      if (!tp_emit_ok(b, tp_broadcast_shapes(&args[1].meta, x, &shape))) return;
      tp_hlo_value_t mask = tp_hlo_broadcast_to(b, in[1], shape.ndim, shape.sizes);
      if (tp_count_pass(&args[2])) {
        out[0] = tp_emit_count_true(b, mask);
        return;
      }
      int64_t n = tp_meta_numel(&shape);
      tp_hlo_value_t vals = tp_hlo_reshape(b, tp_hlo_broadcast_to(b, in[0], shape.ndim, shape.sizes), 1, &n);
      tp_hlo_value_t pos = tp_emit_true_positions(b, mask, out_meta[0].sizes[0]);
      if (n == 0) {
        out[0] = tp_hlo_broadcast_to(b, tp_hlo_constant(b, x->dtype, 0), 1, out_meta[0].sizes);
        return;
      }
      /* Padding rows (past the count) read the last element: the caller drops them. */
      pos = tp_hlo_binary(b, TP_HLO_MIN, pos, tp_k(b, (double)(n - 1), pos));
      out[0] = tp_hlo_gather_1d(b, vals, pos);
      return;
    }
    case TP_CP_NONZERO_STATIC: {
      tp_hlo_value_t pred = nonzero_pred(b, in[0]);
      out[0] = coordinates(b, tp_emit_true_positions(b, pred, out_meta[0].sizes[0]), x, &args[2].i);
      return;
    }
  }
}
