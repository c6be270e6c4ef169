/* Sorting family: sort (stable or not: always stable here), topk and kthvalue, each returning
 * values and int64 indices. One stable stablehlo.sort of (x, iota) along the dim, NaN ordered
 * as the largest value as on CPU; topk and kthvalue slice the sorted result. Ties come out in
 * index order, as CPU's stable sort gives them; its unstable sort, topk and kthvalue order ties
 * their own way, so for types where ties are common those calls fall back.
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
   * topk and kthvalue order ties in a way of their own; ties are common in integer, bool and
   * 16-bit float data, so those run on CPU to give its exact indices. */
  bool stable = op->code == TP_SORT_STABLE && args[1].kind == TP_ARG_INT && args[1].i;
  bool is_sort = op->code == TP_SORT_SORT || op->code == TP_SORT_STABLE;
  if (!stable && m->dtype != TP_DTYPE_F32 && m->dtype != TP_DTYPE_F64 && n > (is_sort ? 16 : 1))
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
  tp_status_t *st = parse(op, args, n_args, &s);
  if (st) {
    tp_hlo_fail(b, st);
    return;
  }
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
