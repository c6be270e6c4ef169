/* Triangular matrices: the band family's tril and triu (at the end of the file: the elements on
 * one side of a diagonal kept, the others zero), and the triangular family: Cholesky
 * factorization and triangular solves, on StableHLO's own cholesky
 * and triangular_solve (float32/float64; other dtypes go to CPU, which raises its own error).
 * linalg_cholesky_ex's |info| is nonzero exactly when the factorization fails, as LAPACK's; its
 * value is 1 + the first diagonal position of the factor that is not positive, and XLA's CPU
 * cholesky turns a failed factor into NaN throughout, so it reads 1 where LAPACK names the order
 * of the failing leading minor (linalg.cholesky's error then cites order 1). */
#include <string.h>

#include "ops/families.h"

static bool linalg_dtype(tp_dtype_t t) { return t == TP_DTYPE_F32 || t == TP_DTYPE_F64; }

static int64_t flag(const tp_op_arg_t *args, int n_args, int i, int64_t dflt) {
  return i < n_args && args[i].kind == TP_ARG_INT ? args[i].i : dflt;
}

/* Broadcast batch dims of two [..., r, c] metas; |out| gets the batch shape (ndim - 2 dims). */
static tp_status_t *batch_shape(const tp_op_def_t *op, const tp_meta_t *a, const tp_meta_t *b,
                                tp_meta_t *out) {
  tp_meta_t ba = *a, bb = *b;
  ba.ndim -= 2, bb.ndim -= 2;
  tp_status_t *st = tp_broadcast_shapes(&ba, &bb, out);
  if (st) {
    tp_status_free(st);
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: batch dimensions of the inputs do not "
                          "broadcast", op->name);
  }
  return NULL;
}

tp_status_t *tp_infer_triangular(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                 tp_meta_t *out, int *n_out) {
  if (n_args < 1 || args[0].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected a tensor", op->name);
  const tp_meta_t *x = &args[0].meta;
  if (op->code == TP_TRI_CHOLESKY_EX) {
    if (x->ndim < 2 || x->sizes[x->ndim - 1] != x->sizes[x->ndim - 2])
      return tp_make_status(TP_INVALID_ARGUMENT, "%s: A must be batches of square matrices, "
                            "but they are %d by %d matrices", op->name,
                            x->ndim >= 2 ? (int)x->sizes[x->ndim - 2] : 0,
                            x->ndim >= 1 ? (int)x->sizes[x->ndim - 1] : 0);
    if (!linalg_dtype(x->dtype)) return tp_make_status(TP_UNIMPLEMENTED, "%s dtype", op->name);
    out[0] = *x;
    out[1] = *x;
    out[1].dtype = TP_DTYPE_I32;
    out[1].ndim = x->ndim - 2;
    *n_out = 2;
    return NULL;
  }
  if (n_args < 2 || args[1].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected two tensors", op->name);
  /* The coefficient matrix and the right-hand side, by schema. */
  bool legacy = op->code == TP_TRI_LEGACY || op->code == TP_TRI_CHOLESKY_SOLVE;
  const tp_meta_t *a = legacy ? &args[1].meta : &args[0].meta;
  const tp_meta_t *r = legacy ? &args[0].meta : &args[1].meta;
  if (!linalg_dtype(a->dtype) || a->dtype != r->dtype)
    return tp_make_status(TP_UNIMPLEMENTED, "%s dtype", op->name);
  if (a->ndim < 2 || r->ndim < 2 || a->sizes[a->ndim - 1] != a->sizes[a->ndim - 2])
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: A must be batches of square matrices",
                          op->name);
  bool left = op->code != TP_TRI_SOLVE || flag(args, n_args, 3, 1);
  int64_t n = a->sizes[a->ndim - 1];
  if ((left ? r->sizes[r->ndim - 2] : r->sizes[r->ndim - 1]) != n)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: Incompatible shapes of A and B for the "
                          "equation", op->name);
  tp_meta_t batch;
  TP_RETURN_IF_ERROR(batch_shape(op, a, r, &batch));
  if (batch.ndim + 2 > TP_MAX_DIMS) return tp_make_status(TP_UNIMPLEMENTED, "too many dims");
  out[0] = batch;
  out[0].dtype = r->dtype;
  out[0].ndim = batch.ndim + 2;
  out[0].sizes[batch.ndim] = r->sizes[r->ndim - 2];
  out[0].sizes[batch.ndim + 1] = r->sizes[r->ndim - 1];
  *n_out = 1;
  if (op->code == TP_TRI_LEGACY) { /* (solution, cloned coefficient), both batch-broadcast */
    out[1] = out[0];
    out[1].sizes[batch.ndim] = out[1].sizes[batch.ndim + 1] = n;
    *n_out = 2;
  }
  return NULL;
}

/* |v| ([..., r, c]) broadcast to |batch| + its own last two dims. */
static tp_hlo_value_t to_batch(tp_hlo_builder_t *b, tp_hlo_value_t v, const tp_meta_t *batch) {
  int64_t dims[TP_MAX_DIMS], map[TP_MAX_DIMS];
  int nd = batch->ndim + 2, lead = nd - v.ndim;
  memcpy(dims, batch->sizes, sizeof(int64_t) * (size_t)batch->ndim);
  dims[nd - 2] = v.dims[v.ndim - 2];
  dims[nd - 1] = v.dims[v.ndim - 1];
  for (int i = 0; i < v.ndim; i++) map[i] = i + lead;
  return tp_hlo_broadcast_in_dim(b, v, nd, dims, map);
}

/* Keeps the lower (or upper) triangle of the matrices in |x|, zeros elsewhere. */
static tp_hlo_value_t triangle(tp_hlo_builder_t *b, tp_hlo_value_t x, bool lower) {
  tp_hlo_value_t row = tp_hlo_iota(b, TP_DTYPE_I64, x.ndim, x.dims, x.ndim - 2);
  tp_hlo_value_t col = tp_hlo_iota(b, TP_DTYPE_I64, x.ndim, x.dims, x.ndim - 1);
  tp_hlo_value_t keep = tp_hlo_compare(b, lower ? TP_CMP_GE : TP_CMP_LE, row, col);
  return tp_hlo_select(b, keep, x, tp_k(b, 0, x));
}

void tp_emit_triangular(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                        int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                        tp_hlo_value_t *out) {
  if (op->code == TP_TRI_CHOLESKY_EX) {
    bool upper = flag(args, n_args, 1, 0);
    tp_hlo_value_t l = triangle(b, tp_hlo_cholesky(b, in[0], !upper), !upper);
    out[0] = l;
    /* info: 1 + the first diagonal position that is not positive (NaN after a failed minor). */
    tp_hlo_value_t x = l;
    tp_hlo_value_t row = tp_hlo_iota(b, TP_DTYPE_I32, x.ndim, x.dims, x.ndim - 2);
    tp_hlo_value_t col = tp_hlo_iota(b, TP_DTYPE_I32, x.ndim, x.dims, x.ndim - 1);
    tp_hlo_value_t zero = tp_hlo_constant(b, x.dtype, 0);
    tp_hlo_value_t on_diag = tp_hlo_compare(b, TP_CMP_EQ, row, col);
    int64_t last = x.ndim - 1;
    tp_hlo_value_t diag = tp_hlo_reduce(b, tp_hlo_select(b, on_diag, x, tp_k(b, 0, x)),
                                        zero, TP_HLO_ADD, 1, &last);
    tp_hlo_value_t bad = tp_hlo_unary(b, TP_HLO_NOT, tp_hlo_compare(b, TP_CMP_GT, diag, tp_k(b, 0, diag)));
    int64_t n = x.dims[x.ndim - 1];
    tp_hlo_value_t pos = tp_hlo_iota(b, TP_DTYPE_I32, diag.ndim, diag.dims, diag.ndim - 1);
    pos = tp_hlo_binary(b, TP_HLO_ADD, pos, tp_k(b, 1, pos));
    tp_hlo_value_t none = tp_k(b, (double)(n + 1), pos);
    int64_t dl = diag.ndim - 1;
    tp_hlo_value_t first = tp_hlo_reduce(b, tp_hlo_select(b, bad, pos, none),
                                         tp_hlo_constant_i(b, TP_DTYPE_I32, n + 1), TP_HLO_MIN, 1, &dl);
    out[1] = tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_EQ, first, tp_k(b, (double)(n + 1), first)),
                           tp_k(b, 0, first), first);
    return;
  }
  bool legacy = op->code == TP_TRI_LEGACY || op->code == TP_TRI_CHOLESKY_SOLVE;
  tp_meta_t batch = out_meta[0];
  batch.ndim -= 2;
  tp_hlo_value_t a = to_batch(b, legacy ? in[1] : in[0], &batch);
  tp_hlo_value_t r = to_batch(b, legacy ? in[0] : in[1], &batch);
  switch (op->code) {
    case TP_TRI_SOLVE: { /* linalg_solve_triangular(A, B, *, upper, left=True, unitriangular) */
      bool upper = flag(args, n_args, 2, 0), left = flag(args, n_args, 3, 1);
      bool unit = flag(args, n_args, 4, 0);
      out[0] = tp_hlo_triangular_solve(b, a, r, left, !upper, unit, false);
      return;
    }
    case TP_TRI_LEGACY: { /* triangular_solve(B, A, upper=True, transpose=False, unitriangular) */
      bool upper = flag(args, n_args, 2, 1), trans = flag(args, n_args, 3, 0);
      bool unit = flag(args, n_args, 4, 0);
      out[0] = tp_hlo_triangular_solve(b, a, r, true, !upper, unit, trans);
      out[1] = a;
      return;
    }
    default: { /* _cholesky_solve_helper(B, A = the factor, upper): A = L L^T or U^T U */
      bool upper = flag(args, n_args, 2, 0);
      tp_hlo_value_t y = tp_hlo_triangular_solve(b, a, r, true, !upper, false, upper);
      out[0] = tp_hlo_triangular_solve(b, a, y, true, !upper, false, !upper);
      return;
    }
  }
}

/* tril/triu(self, diagonal=0): |code| a tp_band_t. */
tp_status_t *tp_infer_band(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                           int *n_out) {
  if (n_args < 1 || args[0].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: self must be a tensor", op->name);
  if (args[0].meta.ndim < 2)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: input tensor must have at least 2 dimensions",
                          op->name);
  *n_out = 1;
  out[0] = args[0].meta;
  return NULL;
}

void tp_emit_band(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                  const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  const tp_meta_t *self = &args[0].meta;
  int nd = self->ndim;
  int64_t k = flag(args, n_args, 1, 0);
  tp_hlo_value_t x = tp_hlo_convert(b, in[0], out_meta->dtype);
  tp_hlo_value_t row = tp_hlo_iota(b, TP_DTYPE_I64, nd, self->sizes, nd - 2);
  tp_hlo_value_t col = tp_hlo_iota(b, TP_DTYPE_I64, nd, self->sizes, nd - 1);
  tp_hlo_value_t diff = tp_sub(b, col, row);
  tp_hlo_value_t keep = tp_cmpk(b, op->code == TP_BAND_TRIL ? TP_CMP_LE : TP_CMP_GE, diff, (double)k);
  out[0] = tp_sel(b, keep, x, tp_k(b, 0, x));
}
