/* Sorting family: sort (stable or not: always stable here), topk and kthvalue, each returning
 * values and int64 indices. One stable stablehlo.sort of (x, iota) along the dim, NaN ordered
 * as the largest value as on CPU; topk and kthvalue slice the sorted result. Ties come out in
 * index order, as CPU's stable sort gives them. An unstable sort's order of ties is unspecified
 * (CUDA's differs from CPU's), and integer and bool sorts (MoE routing sorts expert ids) run
 * natively with the stable order. 16-bit floats, whose ties also reach a gradient, and topk and
 * kthvalue of non-float32/64 types keep CPU's own tie order by falling back. Beside it the order
 * statistics and searches built on the same sort: mode, median and nanmedian, searchsorted and
 * bucketize.
 * Depends on ops/ helpers and hlo/ only. */
#include <string.h>

#include "ops/families.h"


typedef struct {
  int dim;
  bool descending;
  int64_t k;      /* topk: count; kthvalue: 1-based rank */
  bool keepdim;   /* kthvalue */
} sort_args_t;

static int64_t int_at(const tp_op_arg_t *args, int n_args, int i, int64_t dflt) {
  return i < n_args && args[i].kind == TP_ARG_INT ? args[i].i : dflt;
}

static tp_status_t *parse(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                          sort_args_t *s) {
  memset(s, 0, sizeof(*s));
  int nd = args[0].meta.ndim;
  int64_t d = -1;
  switch ((tp_sort_t)op->code) {
    case TP_SORT_SORT:
      d = int_at(args, n_args, 1, -1);
      s->descending = int_at(args, n_args, 2, 0) != 0;
      break;
    case TP_SORT_STABLE:
      d = int_at(args, n_args, 2, -1);
      s->descending = int_at(args, n_args, 3, 0) != 0;
      break;
    case TP_SORT_TOPK:
      s->k = int_at(args, n_args, 1, 1);
      d = int_at(args, n_args, 2, -1);
      s->descending = int_at(args, n_args, 3, 1) != 0;
      break;
    case TP_SORT_KTHVALUE:
      s->k = int_at(args, n_args, 1, 1);
      d = int_at(args, n_args, 2, -1);
      s->keepdim = int_at(args, n_args, 3, 0) != 0;
      break;
  }
  s->dim = tp_norm_dim(d, nd);
  if (s->dim < 0)
    return tp_make_status(TP_OUT_OF_RANGE,
                          "Dimension out of range (expected to be in range of [%d, %d], but got "
                          "%lld)", -(nd ? nd : 1), (nd ? nd : 1) - 1, (long long)d);
  return NULL;
}

tp_status_t *tp_infer_sort(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                           int *n_out) {
  if (n_args < 1 || args[0].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: self must be a tensor", op->name);
  sort_args_t s;
  TP_RETURN_IF_ERROR(parse(op, args, n_args, &s));
  const tp_meta_t *m = &args[0].meta;
  int64_t n = m->ndim ? m->sizes[s.dim] : 1;
  /* CPU's unstable sort (above 16 elements, where its introsort stops being an insertion sort),
   * topk and kthvalue order ties in a way of their own. Ties are common in 16-bit float data,
   * where the indices route a gradient: those run on CPU to give its exact indices. An integer
   * or bool sort's indices are any valid order (COMPAT.md's oracle checks them as such). */
  bool stable = op->code == TP_SORT_STABLE && args[1].kind == TP_ARG_INT && args[1].i;
  bool is_sort = op->code == TP_SORT_SORT || op->code == TP_SORT_STABLE;
  bool exact_ties = tp_dtype_is_float(m->dtype) || !is_sort;
  if (!stable && exact_ties && m->dtype != TP_DTYPE_F32 && m->dtype != TP_DTYPE_F64 &&
      n > (is_sort ? 16 : 1))
    return tp_make_status(TP_UNIMPLEMENTED, "%s: CPU's order of ties in %s", op->name,
                          tp_dtype_name(m->dtype));
  out[0] = *m;
  if (op->code == TP_SORT_TOPK) {
    if (s.k < 0 || s.k > n)
      return tp_make_status(TP_INVALID_ARGUMENT, "selected index k out of range");
    if (m->ndim) out[0].sizes[s.dim] = s.k;
  } else if (op->code == TP_SORT_KTHVALUE) {
    if (s.k < 1 || s.k > n) /* CPU words its own error */
      return tp_make_status(TP_UNIMPLEMENTED, "kthvalue: k out of range");
    if (m->ndim) {
      if (s.keepdim) {
        out[0].sizes[s.dim] = 1;
      } else {
        for (int i = s.dim; i + 1 < m->ndim; i++) out[0].sizes[i] = m->sizes[i + 1];
        out[0].ndim--;
      }
    }
  }
  out[1] = out[0];
  out[1].dtype = TP_DTYPE_I64;
  *n_out = 2;
  return NULL;
}

void tp_emit_sort(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                  const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  sort_args_t s;
  if (!tp_emit_ok(b, parse(op, args, n_args, &s))) return;
  tp_hlo_value_t x = in[0];
  if (x.ndim == 0) { /* a 0-dim tensor sorts as one element */
    int64_t one = 1;
    x = tp_hlo_reshape(b, x, 1, &one);
  }
  int64_t n = x.dims[s.dim];
  tp_hlo_value_t ops[2] = {x, tp_hlo_iota(b, TP_DTYPE_I64, x.ndim, x.dims, s.dim)}, res[2];
  if (n > 1) {
    tp_hlo_sort(b, ops, 2, s.dim, s.descending, res);
  } else {
    res[0] = ops[0];
    res[1] = ops[1];
  }
  if (op->code == TP_SORT_TOPK || op->code == TP_SORT_KTHVALUE) {
    int64_t start[TP_MAX_DIMS] = {0}, limit[TP_MAX_DIMS], step[TP_MAX_DIMS];
    for (int i = 0; i < x.ndim; i++) {
      limit[i] = x.dims[i];
      step[i] = 1;
    }
    if (op->code == TP_SORT_TOPK) {
      limit[s.dim] = s.k;
    } else {
      start[s.dim] = s.k - 1;
      limit[s.dim] = s.k;
    }
    for (int j = 0; j < 2; j++) res[j] = tp_hlo_slice(b, res[j], start, limit, step);
  }
  for (int j = 0; j < 2; j++) out[j] = tp_hlo_reshape(b, res[j], out_meta[j].ndim, out_meta[j].sizes);
}

/* Moves |dim| of |x| last. */
static tp_hlo_value_t dim_last(tp_hlo_builder_t *b, tp_hlo_value_t x, int dim) {
  int64_t perm[TP_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < x.ndim; i++)
    if (i != dim) perm[k++] = i;
  perm[k] = dim;
  return tp_hlo_transpose(b, x, perm);
}

/* (values, indices) of a reduction of |x| over dim |d|. */
static tp_status_t *values_indices(const tp_meta_t *x, int d, bool keep, tp_meta_t *out, int *n_out) {
  bool mask[TP_MAX_DIMS] = {false};
  if (x->ndim) mask[d] = true;
  tp_meta_reduce(x, mask, keep, &out[0]);
  out[1] = out[0];
  out[1].dtype = TP_DTYPE_I64;
  *n_out = 2;
  return NULL;
}

static void emit_mode(tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args, tp_hlo_value_t x,
                      const tp_meta_t *om, tp_hlo_value_t *out) {
  if (x.ndim == 0) {
    out[0] = x;
    out[1] = tp_hlo_constant_i(b, TP_DTYPE_I64, 0);
    return;
  }
  int d = tp_norm_dim(n_args > 1 && args[1].kind == TP_ARG_INT ? args[1].i : -1, x.ndim);
  tp_hlo_value_t v = dim_last(b, x, d);
  int nd = v.ndim, last = nd - 1;
  int64_t n = v.dims[last], rows = tp_hlo_numel(&v) / n;
  int64_t sh[2] = {rows, n};
  v = tp_hlo_reshape(b, v, 2, sh);
  tp_hlo_value_t sorted[2], ops[2] = {v, tp_hlo_iota(b, TP_DTYPE_I64, 2, sh, 1)};
  tp_hlo_sort(b, ops, 2, 1, false, sorted);
  tp_hlo_value_t s = sorted[0], j = tp_hlo_iota(b, TP_DTYPE_I64, 2, sh, 1);
  /* Runs of equal values in sorted order: where each starts, and its length at its last element. */
  int64_t z[2] = {0, 0}, one_lo[2] = {0, 1}, one_hi[2] = {0, 1};
  int64_t st0[2] = {0, 0}, lim0[2] = {rows, n - 1}, st1[2] = {0, 1}, lim1[2] = {rows, n}, step[2] = {1, 1};
  tp_hlo_value_t prev = tp_hlo_slice(b, s, st0, lim0, step), next = tp_hlo_slice(b, s, st1, lim1, step);
  tp_hlo_value_t diff = tp_hlo_compare(b, TP_CMP_NE, prev, next); /* [rows, n-1] */
  tp_hlo_value_t t = tp_hlo_constant_i(b, TP_DTYPE_BOOL, 1);
  tp_hlo_value_t starts = tp_hlo_pad(b, diff, t, one_lo, z);  /* start_j: j == 0 or s_j != s_{j-1} */
  tp_hlo_value_t ends = tp_hlo_pad(b, diff, t, z, one_hi);    /* end_j: j == n-1 or s_j != s_{j+1} */
  tp_hlo_value_t start_at = tp_hlo_select(b, starts, j, tp_k(b, 0, j));
  int64_t win[2] = {1, n}, plo[2] = {0, n - 1}, phi[2] = {0, 0};
  start_at = tp_hlo_reduce_window(b, start_at, tp_hlo_constant_i(b, TP_DTYPE_I64, 0), TP_HLO_MAX, win, plo, phi);
  tp_hlo_value_t count = tp_bin(b, TP_HLO_ADD, tp_bin(b, TP_HLO_SUB, j, start_at), tp_k(b, 1, j));
  count = tp_hlo_select(b, ends, count, tp_k(b, 0, count));
  int64_t rd = 1;
  tp_hlo_value_t maxc = tp_hlo_reduce(b, count, tp_hlo_constant_i(b, TP_DTYPE_I64, 0), TP_HLO_MAX, 1, &rd);
  int64_t bd[1] = {0};
  tp_hlo_value_t best = tp_hlo_compare(b, TP_CMP_EQ, count, tp_hlo_broadcast_in_dim(b, maxc, 2, sh, bd));
  /* The smallest value among the most frequent: the first such run. */
  tp_hlo_value_t pick = tp_hlo_reduce(b, tp_hlo_select(b, best, j, tp_k(b, (double)n, j)),
                                      tp_hlo_constant_i(b, TP_DTYPE_I64, n), TP_HLO_MIN, 1, &rd);
  tp_hlo_value_t lin = tp_bin(b, TP_HLO_ADD, pick, tp_bin(b, TP_HLO_MUL, tp_hlo_iota(b, TP_DTYPE_I64, 1, &rows, 0),
                                                    tp_k(b, (double)n, pick)));
  int64_t total = rows * n;
  tp_hlo_value_t val = tp_hlo_gather_1d(b, tp_hlo_reshape(b, s, 1, &total), lin);
  tp_hlo_value_t idx = tp_hlo_gather_1d(b, tp_hlo_reshape(b, sorted[1], 1, &total), lin);
  out[0] = tp_hlo_reshape(b, val, om[0].ndim, om[0].sizes);
  out[1] = tp_hlo_reshape(b, idx, om[1].ndim, om[1].sizes);
}

tp_status_t *tp_infer_mode(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                           int *n_out) {
  TP_RETURN_IF_ERROR(tp_infer_like_self(op, args, n_args, out, n_out));
  const tp_meta_t *x = &args[0].meta;
  /* (self, dim=-1, keepdim=False) -> (values, indices) */
  int nd = x->ndim;
  int d = tp_norm_dim(n_args > 1 && args[1].kind == TP_ARG_INT ? args[1].i : -1, nd);
  bool keep = n_args > 2 && args[2].kind == TP_ARG_INT && args[2].i;
  if (d < 0 || (nd && x->sizes[d] == 0) || tp_meta_numel(x) == 0)
    return tp_make_status(TP_UNIMPLEMENTED, "mode: arguments");
  return values_indices(x, d, keep, out, n_out);
}

void tp_emit_mode(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                  const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  emit_mode(b, args, n_args, in[0], out_meta, out);
}

/* median / nanmedian: the lower median of each slice along |d| (NaN sorted last). median: a NaN
 * in the slice gives NaN and its first index; nanmedian: the median of the others. */
static void emit_median(tp_hlo_builder_t *b, bool nan_skip, tp_hlo_value_t x, int d,
                        const tp_meta_t *om, int n_out, tp_hlo_value_t *out) {
  tp_hlo_value_t v = d >= 0 ? dim_last(b, x, d) : x;
  int64_t total = tp_hlo_numel(&v);
  int64_t n = d >= 0 ? v.dims[v.ndim - 1] : total, rows = total / n, sh[2] = {rows, n};
  v = tp_hlo_reshape(b, v, 2, sh);
  tp_hlo_value_t sorted[2], ops[2] = {v, tp_hlo_iota(b, TP_DTYPE_I64, 2, sh, 1)};
  tp_hlo_sort(b, ops, 2, 1, false, sorted);
  int64_t one = 1;
  tp_hlo_value_t nans = tp_hlo_convert(b, tp_hlo_compare(b, TP_CMP_NE, v, v), TP_DTYPE_I64);
  nans = tp_hlo_reduce(b, nans, tp_hlo_constant_i(b, TP_DTYPE_I64, 0), TP_HLO_ADD, 1, &one);
  tp_hlo_value_t k;
  if (nan_skip) { /* (count - 1) / 2 of the non-NaN ones; all NaN: the first */
    tp_hlo_value_t cnt = tp_bin(b, TP_HLO_SUB, tp_k(b, (double)n, nans), nans);
    k = tp_bin(b, TP_HLO_DIV, tp_bin(b, TP_HLO_MAX, tp_bin(b, TP_HLO_SUB, cnt, tp_k(b, 1, cnt)), tp_k(b, 0, cnt)), tp_k(b, 2, cnt));
  } else { /* the first NaN when there is one */
    tp_hlo_value_t has = tp_hlo_compare(b, TP_CMP_GT, nans, tp_k(b, 0, nans));
    k = tp_hlo_select(b, has, tp_bin(b, TP_HLO_SUB, tp_k(b, (double)n, nans), nans), tp_k(b, (double)((n - 1) / 2), nans));
  }
  tp_hlo_value_t lin = tp_bin(b, TP_HLO_ADD, k, tp_bin(b, TP_HLO_MUL, tp_hlo_iota(b, TP_DTYPE_I64, 1, &rows, 0), tp_k(b, (double)n, k)));
  out[0] = tp_hlo_reshape(b, tp_hlo_gather_1d(b, tp_hlo_reshape(b, sorted[0], 1, &total), lin), om[0].ndim, om[0].sizes);
  if (n_out > 1)
    out[1] = tp_hlo_reshape(b, tp_hlo_gather_1d(b, tp_hlo_reshape(b, sorted[1], 1, &total), lin), om[1].ndim, om[1].sizes);
}

tp_status_t *tp_infer_median(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                             int *n_out) {
  TP_RETURN_IF_ERROR(tp_infer_like_self(op, args, n_args, out, n_out));
  const tp_meta_t *x = &args[0].meta;
  /* (self) -> value, or (self, dim, keepdim) -> (values, indices) */
  bool with_dim = n_args > 1 && args[1].kind == TP_ARG_INT;
  int nd = x->ndim;
  if (tp_meta_numel(x) == 0 || x->dtype == TP_DTYPE_BOOL)
    return tp_make_status(TP_UNIMPLEMENTED, "%s: arguments", op->name);
  if (!with_dim) {
    out[0].ndim = 0;
    return NULL;
  }
  /* Of equal values CPU returns the one a stable sort puts at the median's place (observed
   * over thousands of tied inputs), which is what the sort below gives. */
  int d = tp_norm_dim(args[1].i, nd);
  bool keep = n_args > 2 && args[2].kind == TP_ARG_INT && args[2].i;
  if (d < 0) return tp_make_status(TP_UNIMPLEMENTED, "%s: dim", op->name);
  return values_indices(x, d, keep, out, n_out);
}

void tp_emit_median(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                    const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  bool with_dim = n_args > 1 && args[1].kind == TP_ARG_INT;
  tp_hlo_value_t x = in[0];
  if (x.ndim == 0) {
    int64_t one = 1;
    x = tp_hlo_reshape(b, x, 1, &one);
  }
  int d = with_dim ? tp_norm_dim(args[1].i, x.ndim) : -1;
  if (!with_dim) {
    int64_t total = tp_hlo_numel(&x);
    x = tp_hlo_reshape(b, x, 1, &total);
    d = 0;
  }
  emit_median(b, op->code == TP_MED_NANMEDIAN, x, d, out_meta, with_dim ? 2 : 1, out);
}

/* sorted_sequence [.., n] against values: how many elements each value passes ((s < v) or
 * unordered, as CPU's binary search counts; right: s <= v or unordered). */
static tp_hlo_value_t emit_search(tp_hlo_builder_t *b, tp_hlo_value_t seq, tp_hlo_value_t v,
                                  const tp_hlo_value_t *sorter, bool right, tp_dtype_t out_dt) {
  int64_t n = seq.dims[seq.ndim - 1];
  if (sorter) { /* seq in sorter's order, row by row */
    int64_t total = tp_hlo_numel(&seq);
    tp_hlo_value_t row = tp_hlo_iota(b, TP_DTYPE_I64, sorter->ndim, sorter->dims, 0);
    tp_hlo_value_t lin = *sorter;
    if (seq.ndim > 1) {
      int64_t rows = total / n, sh[2] = {rows, n};
      row = tp_hlo_iota(b, TP_DTYPE_I64, 2, sh, 0);
      lin = tp_bin(b, TP_HLO_ADD, tp_hlo_reshape(b, *sorter, 2, sh), tp_bin(b, TP_HLO_MUL, row, tp_k(b, (double)n, row)));
    }
    int64_t fl = total;
    seq = tp_hlo_reshape(b, tp_hlo_gather_1d(b, tp_hlo_reshape(b, seq, 1, &fl), tp_hlo_reshape(b, lin, 1, &fl)),
                         seq.ndim, seq.dims);
  }
  int64_t dims[TP_MAX_DIMS], bs[TP_MAX_DIMS], bv[TP_MAX_DIMS];
  int nd = v.ndim + 1;
  for (int i = 0; i < v.ndim; i++) {
    dims[i] = v.dims[i];
    bv[i] = i;
  }
  dims[v.ndim] = n;
  if (seq.ndim == 1) {
    bs[0] = v.ndim;
  } else { /* leading dims shared, the values' last dim against the sequence's */
    for (int i = 0; i < seq.ndim - 1; i++) bs[i] = i;
    bs[seq.ndim - 1] = v.ndim;
  }
  tp_hlo_value_t S = tp_hlo_broadcast_in_dim(b, seq, nd, dims, bs);
  tp_hlo_value_t V = tp_hlo_broadcast_in_dim(b, v, nd, dims, bv);
  tp_hlo_value_t past = tp_hlo_unary(b, TP_HLO_NOT, tp_hlo_compare(b, right ? TP_CMP_GT : TP_CMP_GE, S, V));
  tp_hlo_value_t c = tp_hlo_convert(b, past, out_dt);
  int64_t last = v.ndim;
  return tp_hlo_reduce(b, c, tp_hlo_constant_i(b, out_dt, 0), TP_HLO_ADD, 1, &last);
}

tp_status_t *tp_infer_search(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                             int *n_out) {
  TP_RETURN_IF_ERROR(tp_infer_like_self(op, args, n_args, out, n_out));
  /* searchsorted(sorted_sequence, self, out_int32, right, side, sorter);
   * bucketize(self, boundaries, out_int32, right) */
  bool bk = op->code == TP_SEARCH_BUCKETIZE;
  const tp_meta_t *seq = &args[bk ? 1 : 0].meta, *v = &args[bk ? 0 : 1].meta;
  if (!tp_arg_is_tensor(args, n_args, 1) || n_args < 4 || seq->ndim < 1 || seq->dtype != v->dtype ||
      v->dtype == TP_DTYPE_BOOL)
    return tp_make_status(TP_UNIMPLEMENTED, "%s: arguments", op->name);
  if (bk && seq->ndim != 1) return tp_make_status(TP_UNIMPLEMENTED, "bucketize: boundaries");
  if (seq->ndim > 1) { /* leading dims must match the values' */
    if (v->ndim != seq->ndim) return tp_make_status(TP_UNIMPLEMENTED, "searchsorted: shapes");
    for (int i = 0; i < seq->ndim - 1; i++)
      if (v->sizes[i] != seq->sizes[i]) return tp_make_status(TP_UNIMPLEMENTED, "searchsorted: shapes");
  }
  if (!bk) {
    bool right = args[3].kind == TP_ARG_INT && args[3].i;
    if (n_args > 4 && args[4].kind == TP_ARG_STR) {
      bool sr = strcmp(args[4].s, "right") == 0;
      if ((!sr && strcmp(args[4].s, "left") != 0) || (right && !sr))
        return tp_make_status(TP_UNIMPLEMENTED, "searchsorted: side");
    }
    if (n_args > 5 && args[5].kind == TP_ARG_TENSOR &&
        (args[5].meta.dtype != TP_DTYPE_I64 || args[5].meta.ndim != seq->ndim ||
         memcmp(args[5].meta.sizes, seq->sizes, sizeof(int64_t) * (size_t)seq->ndim) != 0))
      return tp_make_status(TP_UNIMPLEMENTED, "searchsorted: sorter");
  }
  out[0] = *v;
  out[0].writes_arg = 0;
  out[0].dtype = args[2].kind == TP_ARG_INT && args[2].i ? TP_DTYPE_I32 : TP_DTYPE_I64;
  return NULL;
}

void tp_emit_search(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                    const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  const tp_meta_t *om = &out_meta[0];
  bool bk = op->code == TP_SEARCH_BUCKETIZE;
  bool right = args[3].kind == TP_ARG_INT && args[3].i;
  if (!bk && n_args > 4 && args[4].kind == TP_ARG_STR) right = strcmp(args[4].s, "right") == 0;
  const tp_hlo_value_t *sorter = !bk && n_args > 5 && args[5].kind == TP_ARG_TENSOR ? &in[5] : NULL;
  if (tp_meta_numel(om) == 0 || in[bk ? 1 : 0].dims[in[bk ? 1 : 0].ndim - 1] == 0) { /* nothing to pass */
    out[0] = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, om->dtype, 0), om->ndim, om->sizes);
    return;
  }
  out[0] = emit_search(b, in[bk ? 1 : 0], in[bk ? 0 : 1], sorter, right, om->dtype);
  if (out[0].ndim != om->ndim) out[0] = tp_hlo_reshape(b, out[0], om->ndim, om->sizes);
}
