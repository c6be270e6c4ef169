/* Reduction family: sum (full and over dims). Half types accumulate in f32. */
#include "ops/families.h"

static tp_status_t *reduce_dims(const tp_op_arg_t *self, const tp_op_arg_t *dim, bool *mask) {
  int nd = self->meta.ndim;
  for (int i = 0; i < TP_MAX_DIMS; i++) mask[i] = dim == NULL || dim->kind == TP_ARG_NONE;
  if (!dim || dim->kind == TP_ARG_NONE) return NULL;
  if (dim->kind == TP_ARG_INTS && dim->n == 0) {
    for (int i = 0; i < TP_MAX_DIMS; i++) mask[i] = true; /* dim=[] means all dims */
    return NULL;
  }
  int n = dim->kind == TP_ARG_INTS ? dim->n : 1;
  for (int k = 0; k < n; k++) {
    int64_t d = dim->kind == TP_ARG_INTS ? dim->ints[k] : dim->i;
    int64_t lim = nd ? nd : 1;
    if (d < -lim || d >= lim)
      return tp_make_status(TP_OUT_OF_RANGE,
                            "Dimension out of range (expected to be in range of [%lld, %lld], "
                            "but got %lld)", (long long)-lim, (long long)lim - 1, (long long)d);
    if (d < 0) d += lim;
    if (mask[d] && nd)
      return tp_make_status(TP_INVALID_ARGUMENT,
                            "dim %lld appears multiple times in the list of dims", (long long)d);
    mask[d] = true;
  }
  return NULL;
}

/* sum(self, *, dtype) and sum.dim_IntList(self, dim, keepdim, *, dtype). */
tp_status_t *tp_infer_sum(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                          int *n_out) {
  if (n_args < 1 || args[0].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: self must be a tensor", op->name);
  bool full = n_args <= 2;  /* sum(self, dtype) */
  const tp_op_arg_t *dtype_arg = full ? (n_args > 1 ? &args[1] : NULL) : &args[3];
  bool keepdim = !full && args[2].kind == TP_ARG_INT && args[2].i;
  bool mask[TP_MAX_DIMS];
  TP_RETURN_IF_ERROR(reduce_dims(&args[0], full ? NULL : &args[1], mask));
  tp_meta_t m = args[0].meta;
  tp_dtype_t dt = m.dtype;
  if (dtype_arg && dtype_arg->kind == TP_ARG_INT) dt = (tp_dtype_t)dtype_arg->i;
  else if (!tp_dtype_is_float(dt)) dt = TP_DTYPE_I64;
  out[0].dtype = dt;
  out[0].ndim = 0;
  for (int i = 0; i < m.ndim; i++) {
    if (!mask[i]) out[0].sizes[out[0].ndim++] = m.sizes[i];
    else if (keepdim) out[0].sizes[out[0].ndim++] = 1;
  }
  *n_out = 1;
  return NULL;
}

void tp_emit_sum(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                 const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  (void)op;
  bool full = n_args <= 2;
  bool mask[TP_MAX_DIMS];
  tp_status_t *st = reduce_dims(&args[0], full ? NULL : &args[1], mask);
  if (st) {
    tp_hlo_fail(b, st);
    return;
  }
  tp_dtype_t acc = out_meta->dtype;
  if (acc == TP_DTYPE_BF16 || acc == TP_DTYPE_F16) acc = TP_DTYPE_F32;
  if (acc == TP_DTYPE_BOOL) acc = TP_DTYPE_I64;
  tp_hlo_value_t x = tp_hlo_convert(b, in[0], acc);
  int64_t dims[TP_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < x.ndim; i++)
    if (mask[i]) dims[n++] = i;
  tp_hlo_value_t r = tp_hlo_reduce(b, x, tp_hlo_constant(b, acc, 0), TP_HLO_ADD, n, dims);
  r = tp_hlo_reshape(b, r, out_meta->ndim, out_meta->sizes);
  out[0] = tp_hlo_convert(b, r, out_meta->dtype);
}
