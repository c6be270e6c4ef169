/* Results whose size depends on the values: nonzero, masked_select, _unique2 (torch.unique) and
 * unique_consecutive (TP_OPF_COUNTED rows, run as a count pass and a compaction pass, see op.h),
 * nonzero_static (a size the caller gives), and
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
    case TP_CP_UNIQUE: case TP_CP_UNIQUE_CONSECUTIVE: {
      /* _unique2(self, sorted, return_inverse, return_counts, count);
       * unique_consecutive(self, return_inverse, return_counts, dim, count) */
      const bool sorted = op->code == TP_CP_UNIQUE;
      const int flags = sorted ? 2 : 1, at = 4;
      if (n_args < at || args[flags].kind != TP_ARG_INT || args[flags + 1].kind != TP_ARG_INT)
        return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
      /* A dim (unique over slices), bool and complex values: CPU (sort has no such order here). */
      if ((!sorted && args[3].kind != TP_ARG_NONE) || x->dtype == TP_DTYPE_BOOL ||
          tp_dtype_is_complex(x->dtype))
        return tp_make_status(TP_UNIMPLEMENTED, "%s: a dim, bool or complex values", op->name);
      int64_t rows;
      TP_RETURN_IF_ERROR(tp_infer_count(op, count_arg(args, n_args, at), tp_meta_numel(x), true, out, n_out, &rows));
      if (rows < 0) return NULL;
      /* The inverse has self's shape, the counts the values' length; each is empty when not asked. */
      out[0] = (tp_meta_t){.dtype = x->dtype, .ndim = 1, .sizes = {rows}};
      out[1] = args[flags].i ? (tp_meta_t){.dtype = TP_DTYPE_I64, .ndim = x->ndim} : (tp_meta_t){.dtype = TP_DTYPE_I64, .ndim = 1};
      if (args[flags].i) memcpy(out[1].sizes, x->sizes, sizeof(x->sizes));
      out[2] = (tp_meta_t){.dtype = TP_DTYPE_I64, .ndim = 1, .sizes = {args[flags + 1].i ? rows : 0}};
      *n_out = 3;
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

/* The distinct values of |x| (in sorted order, or runs in place for unique_consecutive), as
 * CPU's kernels give them: values equal by ==, so each NaN is its own value, sorted last in the
 * order they come. The count pass counts where a new value starts; the compaction pass takes the
 * values at those starts, the inverse as the running count of starts (scattered back through the
 * sort), and each count as the distance to the next start. */
static void emit_unique(tp_hlo_builder_t *b, bool sorted, bool counting, bool inverse,
                        bool counts, tp_hlo_value_t x, const tp_meta_t *out_meta,
                        tp_hlo_value_t *out) {
  int64_t n = tp_hlo_numel(&x), rows = counting ? 0 : out_meta[0].sizes[0], zero = 0, one = 1;
  if (n == 0) {
    if (counting) {
      out[0] = tp_hlo_constant_i(b, TP_DTYPE_I64, 0);
      return;
    }
    for (int k = 0; k < 3; k++)
      out[k] = tp_hlo_broadcast_to(b, tp_hlo_constant(b, out_meta[k].dtype, 0), out_meta[k].ndim,
                                   out_meta[k].sizes);
    return;
  }
  tp_hlo_value_t flat = tp_hlo_reshape(b, x, 1, &n), iota = tp_hlo_iota(b, TP_DTYPE_I64, 1, &n, 0);
  tp_hlo_value_t v = flat, perm = iota;
  if (sorted) {
    tp_hlo_value_t keys[2] = {flat, iota}, s[2];
    tp_hlo_sort(b, keys, 2, 0, false, s);
    v = s[0], perm = s[1];
  }
  int64_t last = n - 1;
  tp_hlo_value_t prev = tp_hlo_concatenate(
      b, (tp_hlo_value_t[2]){tp_hlo_slice(b, v, &zero, &one, &one), tp_hlo_slice(b, v, &zero, &last, &one)}, 2, 0);
  tp_hlo_value_t first = tp_hlo_compare(b, TP_CMP_EQ, iota, tp_k(b, 0, iota));
  tp_hlo_value_t fresh = tp_or(b, first, tp_hlo_compare(b, TP_CMP_NE, v, prev));
  if (counting) {
    out[0] = tp_emit_count_true(b, fresh);
    return;
  }
  tp_hlo_value_t starts = tp_emit_true_positions(b, fresh, rows);
  out[0] = tp_hlo_gather_1d(b, v, starts);
  if (inverse) {
    int64_t win = n, lo = n - 1, hi = 0;
    tp_hlo_value_t group = tp_hlo_reduce_window(b, tp_hlo_convert(b, fresh, TP_DTYPE_I64),
                                                tp_hlo_constant_i(b, TP_DTYPE_I64, 0), TP_HLO_ADD,
                                                &win, &lo, &hi);
    group = tp_sub(b, group, tp_k(b, 1, group));
    if (sorted) group = tp_hlo_scatter_1d(b, tp_k(b, 0, iota), perm, group);
    out[1] = tp_hlo_reshape(b, group, out_meta[1].ndim, out_meta[1].sizes);
  } else {
    out[1] = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, 0), 1, out_meta[1].sizes);
  }
  if (counts) {
    int64_t from = 1, to = rows;
    tp_hlo_value_t ends = tp_hlo_concatenate(
        b, (tp_hlo_value_t[2]){tp_hlo_slice(b, starts, &from, &to, &one),
                               tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, n), 1, &one)},
        2, 0);
    out[2] = tp_sub(b, ends, starts);
  } else {
    out[2] = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, 0), 1, out_meta[2].sizes);
  }
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
    case TP_CP_UNIQUE: case TP_CP_UNIQUE_CONSECUTIVE: {
      const int flags = op->code == TP_CP_UNIQUE ? 2 : 1;
      emit_unique(b, op->code == TP_CP_UNIQUE, tp_count_pass(&args[4]), args[flags].i != 0,
                  args[flags + 1].i != 0, in[0], out_meta, out);
      return;
    }
    case TP_CP_NONZERO_STATIC: {
      tp_hlo_value_t pred = nonzero_pred(b, in[0]);
      out[0] = coordinates(b, tp_emit_true_positions(b, pred, out_meta[0].sizes[0]), x, &args[2].i);
      return;
    }
  }
}
