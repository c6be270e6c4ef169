/* Factorization family: its rows' infer and emit, and LU with partial pivoting and what PyTorch builds on it (unpacking, LU
 * solves, solve, inverse, det, slogdet), and Householder QR with its Q products (geqrf,
 * householder_product, ormqr, linalg_qr; linalg_qr.c), symmetric eigenvalues and singular values
 * (linalg_eigh.c). Results are unique given LAPACK's conventions, which
 * these follow so that they match CPU: getrf takes as pivot the first row of largest magnitude in
 * the column and scales the column by the pivot's reciprocal; geqrf's reflector has
 * beta = -sign(alpha) * norm and tau = (beta - alpha) / beta. Each factorization is one
 * stablehlo.while over the columns, vectorised over the flattened batch, so a program does not
 * grow with the matrix. float32/float64 only: CPU refuses other dtypes, and so the call goes there
 * to raise. Depends on hlo/ only. */
#include <float.h>
#include <string.h>

#include "ops/linalg_factor.h"

/* ---- LU ---- */

/* getrf of |a| [bt, m, n]: the packed factors, 1-based i32 pivots [bt, min(m, n)] and info [bt]
 * (1 + the first zero pivot, else 0). Right-looking: per column, pick the pivot, swap rows,
 * scale the column below by the pivot's reciprocal and update the trailing matrix. */
static void emit_getrf(tp_hlo_builder_t *b, tp_hlo_value_t a, tp_hlo_value_t *out_lu,
                       tp_hlo_value_t *out_piv, tp_hlo_value_t *out_info) {
  int64_t bt = a.dims[0], m = a.dims[1], n = a.dims[2], k = m < n ? m : n;
  int64_t d2[2] = {bt, m}, dp[2] = {bt, k}, d3[3] = {bt, m, n};
  const int64_t m01[2] = {0, 1}, m02[2] = {0, 2}, m0 = 0;
  tp_dtype_t dt = a.dtype;
  tp_hlo_value_t piv = fill(b, TP_DTYPE_I32, 0, 2, dp), info = fill(b, TP_DTYPE_I32, 0, 1, &bt);
  if (k == 0 || bt == 0) {
    *out_lu = a, *out_piv = piv, *out_info = info;
    return;
  }
  double sfmin = dt == TP_DTYPE_F64 ? DBL_MIN : FLT_MIN;
  tp_hlo_value_t rows2 = tp_hlo_iota(b, TP_DTYPE_I32, 2, d2, 1);
  tp_hlo_value_t rows3 = tp_hlo_iota(b, TP_DTYPE_I32, 3, d3, 1);
  tp_hlo_value_t cols3 = tp_hlo_iota(b, TP_DTYPE_I32, 3, d3, 2);
  tp_hlo_value_t init[4] = {ci(b, 0), a, piv, info}, s[4], res[4];
  tp_hlo_while_begin(b, init, 4, s);
  tp_hlo_while_body(b, tp_cmp(b, TP_CMP_LT, s[0], ci(b, k)), s);
  tp_hlo_value_t kk = s[0], A = s[1];
  tp_hlo_value_t k2 = tp_hlo_broadcast_to(b, kk, 2, d2), k3 = tp_hlo_broadcast_to(b, kk, 3, d3);
  /* Pivot: the first row >= k of largest magnitude (NaN never wins, as in isamax after the
   * first entry; a column of NaN keeps row k). */
  tp_hlo_value_t cand = tp_sel(b, tp_cmp(b, TP_CMP_GE, rows2, k2), tp_hlo_unary(b, TP_HLO_ABS, column(b, A, kk)),
                            fill(b, dt, -1, 2, d2));
  tp_hlo_value_t maxv = reduce1(b, cand, TP_HLO_MAX, -1, 1);
  tp_hlo_value_t hit = tp_cmp(b, TP_CMP_EQ, cand, spread(b, maxv, 2, d2, &m0));
  tp_hlo_value_t p = tp_hlo_reduce(b, tp_sel(b, hit, rows2, fill(b, TP_DTYPE_I32, (double)m, 2, d2)),
                                   ci(b, m), TP_HLO_MIN, 1, (const int64_t[]){1});
  tp_hlo_value_t kb = tp_hlo_broadcast_to(b, kk, 1, &bt);
  p = tp_sel(b, tp_cmp(b, TP_CMP_EQ, p, fill(b, TP_DTYPE_I32, (double)m, 1, &bt)), kb, p);
  /* Swap rows k and p. */
  tp_hlo_value_t is_p = tp_cmp(b, TP_CMP_EQ, rows3, spread(b, p, 3, d3, &m0));
  tp_hlo_value_t is_k = tp_cmp(b, TP_CMP_EQ, rows3, k3);
  tp_hlo_value_t rowp = reduce1(b, tp_sel(b, is_p, A, fill(b, dt, 0, 3, d3)), TP_HLO_ADD, 0, 1);
  tp_hlo_value_t rowk = row(b, A, kk);
  A = tp_sel(b, is_k, spread(b, rowp, 3, d3, m02), tp_sel(b, is_p, spread(b, rowk, 3, d3, m02), A));
  tp_hlo_value_t one_i = tp_hlo_broadcast_to(b, ci(b, 1), 1, &bt);
  int64_t d1[2] = {bt, 1};
  tp_hlo_value_t pst[2] = {ci(b, 0), kk};
  tp_hlo_value_t npiv = tp_hlo_dynamic_update_slice(
      b, s[2], tp_hlo_reshape(b, tp_bin(b, TP_HLO_ADD, p, one_i), 2, d1), pst);
  /* info: the first zero pivot. */
  tp_hlo_value_t urow = row(b, A, kk);
  tp_hlo_value_t d = entry(b, urow, kk);
  tp_hlo_value_t dz = tp_cmp(b, TP_CMP_EQ, d, fill(b, dt, 0, 1, &bt));
  tp_hlo_value_t first = tp_hlo_binary(b, TP_HLO_AND, dz,
                                       tp_cmp(b, TP_CMP_EQ, s[3], fill(b, TP_DTYPE_I32, 0, 1, &bt)));
  tp_hlo_value_t ninfo = tp_sel(b, first, tp_bin(b, TP_HLO_ADD, kb, one_i), s[3]);
  /* Multipliers: times the reciprocal, or divided when it would overflow; none for a zero pivot
   * (the column below is zero then). */
  tp_hlo_value_t col = column(b, A, kk);
  tp_hlo_value_t dd = spread(b, d, 2, d2, &m0);
  tp_hlo_value_t l = tp_bin(b, TP_HLO_MUL, col, tp_bin(b, TP_HLO_DIV, fill(b, dt, 1, 2, d2), dd));
  tp_hlo_value_t small = tp_cmp(b, TP_CMP_LT, tp_hlo_unary(b, TP_HLO_ABS, dd), fill(b, dt, sfmin, 2, d2));
  l = tp_sel(b, small, tp_bin(b, TP_HLO_DIV, col, dd), l);
  l = tp_sel(b, tp_cmp(b, TP_CMP_EQ, dd, fill(b, dt, 0, 2, d2)), col, l);
  tp_hlo_value_t L3 = spread(b, l, 3, d3, m01), U3 = spread(b, urow, 3, d3, m02);
  tp_hlo_value_t below = tp_cmp(b, TP_CMP_GT, rows3, k3);
  tp_hlo_value_t right = tp_cmp(b, TP_CMP_GT, cols3, k3), on = tp_cmp(b, TP_CMP_EQ, cols3, k3);
  tp_hlo_value_t upd = tp_bin(b, TP_HLO_SUB, A, tp_bin(b, TP_HLO_MUL, L3, U3));
  A = tp_sel(b, tp_hlo_binary(b, TP_HLO_AND, below, right), upd,
          tp_sel(b, tp_hlo_binary(b, TP_HLO_AND, below, on), L3, A));
  tp_hlo_value_t next[4] = {tp_bin(b, TP_HLO_ADD, kk, ci(b, 1)), A, npiv, ninfo};
  tp_hlo_while_end(b, next, res);
  *out_lu = res[1], *out_piv = res[2], *out_info = res[3];
}

/* The row order the pivots' interchanges give: [bt, m] i32 with (P^T A)[i] = A[perm[i]]. */
static tp_hlo_value_t emit_perm(tp_hlo_builder_t *b, tp_hlo_value_t piv, int64_t m) {
  int64_t bt = piv.dims[0], k = piv.dims[1], d2[2] = {bt, m};
  const int64_t m0 = 0;
  tp_hlo_value_t rows2 = tp_hlo_iota(b, TP_DTYPE_I32, 2, d2, 1);
  if (k == 0 || bt == 0 || m == 0) return rows2;
  tp_hlo_value_t init[2] = {ci(b, 0), rows2}, s[2], res[2];
  tp_hlo_while_begin(b, init, 2, s);
  tp_hlo_while_body(b, tp_cmp(b, TP_CMP_LT, s[0], ci(b, k)), s);
  tp_hlo_value_t j = s[0], perm = s[1];
  tp_hlo_value_t p = tp_bin(b, TP_HLO_SUB, entry(b, piv, j), tp_hlo_broadcast_to(b, ci(b, 1), 1, &bt));
  tp_hlo_value_t at_j = entry(b, perm, j);
  tp_hlo_value_t is_p = tp_cmp(b, TP_CMP_EQ, rows2, spread(b, p, 2, d2, &m0));
  tp_hlo_value_t at_p = tp_hlo_reduce(b, tp_sel(b, is_p, perm, fill(b, TP_DTYPE_I32, 0, 2, d2)),
                                      ci(b, 0), TP_HLO_ADD, 1, (const int64_t[]){1});
  tp_hlo_value_t is_j = tp_cmp(b, TP_CMP_EQ, rows2, tp_hlo_broadcast_to(b, j, 2, d2));
  perm = tp_sel(b, is_j, spread(b, at_p, 2, d2, &m0), tp_sel(b, is_p, spread(b, at_j, 2, d2, &m0), perm));
  tp_hlo_value_t next[2] = {tp_bin(b, TP_HLO_ADD, j, ci(b, 1)), perm};
  tp_hlo_while_end(b, next, res);
  return res[1];
}

/* Inverse of a permutation [bt, m]. */
static tp_hlo_value_t invert_perm(tp_hlo_builder_t *b, tp_hlo_value_t perm) {
  int64_t d3[3] = {perm.dims[0], perm.dims[1], perm.dims[1]};
  const int64_t m01[2] = {0, 1};
  tp_hlo_value_t hit = tp_cmp(b, TP_CMP_EQ, spread(b, perm, 3, d3, m01),
                           tp_hlo_iota(b, TP_DTYPE_I32, 3, d3, 2));
  tp_hlo_value_t i = tp_hlo_iota(b, TP_DTYPE_I32, 3, d3, 1);
  return tp_hlo_reduce(b, tp_sel(b, hit, i, fill(b, TP_DTYPE_I32, 0, 3, d3)), ci(b, 0), TP_HLO_ADD, 1,
                       (const int64_t[]){1});
}

/* Rows of |x| [bt, n, c] in the order |perm| [bt, n]: out[i] = x[perm[i]] (a gather: exact). */
static tp_hlo_value_t gather_rows(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t perm) {
  int64_t bt = x.dims[0], n = x.dims[1], c = x.dims[2], total = bt * n * c;
  const int64_t m01[2] = {0, 1};
  tp_hlo_value_t bi = tp_hlo_iota(b, TP_DTYPE_I64, 3, x.dims, 0);
  tp_hlo_value_t ji = tp_hlo_iota(b, TP_DTYPE_I64, 3, x.dims, 2);
  tp_hlo_value_t pi = tp_hlo_convert(b, spread(b, perm, 3, x.dims, m01), TP_DTYPE_I64);
  tp_hlo_value_t idx = tp_bin(b, TP_HLO_ADD, tp_bin(b, TP_HLO_MUL, bi, fill(b, TP_DTYPE_I64, (double)n, 3, x.dims)), pi);
  idx = tp_bin(b, TP_HLO_ADD, tp_bin(b, TP_HLO_MUL, idx, fill(b, TP_DTYPE_I64, (double)c, 3, x.dims)), ji);
  return tp_hlo_gather_1d(b, tp_hlo_reshape(b, x, 1, &total), idx);
}

/* getrs: solves A X = B (or A^T X = B when |adjoint|) for |lu| [bt, n, n] with |piv| [bt, n] and
 * |rhs| [bt, n, c]. */
static tp_hlo_value_t emit_getrs(tp_hlo_builder_t *b, tp_hlo_value_t lu, tp_hlo_value_t piv,
                                 tp_hlo_value_t rhs, bool adjoint) {
  if (tp_hlo_numel(&rhs) == 0) return rhs;
  tp_hlo_value_t perm = emit_perm(b, piv, lu.dims[1]);
  if (!adjoint) {
    tp_hlo_value_t y = gather_rows(b, rhs, perm);
    y = tp_hlo_triangular_solve(b, lu, y, true, true, true, false);
    return tp_hlo_triangular_solve(b, lu, y, true, false, false, false);
  }
  tp_hlo_value_t y = tp_hlo_triangular_solve(b, lu, rhs, true, false, false, true);
  y = tp_hlo_triangular_solve(b, lu, y, true, true, true, true);
  return gather_rows(b, y, invert_perm(b, perm));
}

/* |x| [batch..., r, c] broadcast to |batch| (ndim - 2 dims of |like|) and flattened. */
static tp_hlo_value_t batch_flat(tp_hlo_builder_t *b, tp_hlo_value_t x, const tp_meta_t *batch,
                                 int tail) {
  int64_t d[TP_MAX_DIMS];
  memcpy(d, batch->sizes, sizeof(int64_t) * (size_t)batch->ndim);
  for (int i = 0; i < tail; i++) d[batch->ndim + i] = x.dims[x.ndim - tail + i];
  return flat(b, tp_hlo_broadcast_to(b, x, batch->ndim + tail, d), tail);
}

/* Solves with the factors: left, A X = B; right, X A = B as A^T X^T = B^T. |lu| [bt, n, n]. */
static tp_hlo_value_t solve_side(tp_hlo_builder_t *b, tp_hlo_value_t lu, tp_hlo_value_t piv,
                                 tp_hlo_value_t rhs, bool left, bool adjoint) {
  if (left) return emit_getrs(b, lu, piv, rhs, adjoint);
  return mt(b, emit_getrs(b, lu, piv, mt(b, rhs), !adjoint));
}

/* det's sign from pivots [bt, k]: (-1)^(number of interchanges), in |dt|. */
static tp_hlo_value_t pivots_sign(tp_hlo_builder_t *b, tp_hlo_value_t piv, tp_dtype_t dt) {
  tp_hlo_value_t pos = tp_bin(b, TP_HLO_ADD, tp_hlo_iota(b, TP_DTYPE_I32, 2, piv.dims, 1),
                           fill(b, TP_DTYPE_I32, 1, 2, piv.dims));
  tp_hlo_value_t swaps = tp_hlo_reduce(
      b, tp_sel(b, tp_cmp(b, TP_CMP_NE, pos, piv), fill(b, TP_DTYPE_I32, 1, 2, piv.dims),
             fill(b, TP_DTYPE_I32, 0, 2, piv.dims)),
      ci(b, 0), TP_HLO_ADD, 1, (const int64_t[]){1});
  tp_hlo_value_t odd = tp_bin(b, TP_HLO_REM, swaps, fill(b, TP_DTYPE_I32, 2, 1, swaps.dims));
  tp_hlo_value_t s = tp_bin(b, TP_HLO_SUB, fill(b, TP_DTYPE_I32, 1, 1, odd.dims),
                         tp_bin(b, TP_HLO_MUL, odd, fill(b, TP_DTYPE_I32, 2, 1, odd.dims)));
  return tp_hlo_convert(b, s, dt);
}

/* Keeps the entries of [bt, r, c] with col - row >= lo (upper) or <= hi (lower); others 0. */
static tp_hlo_value_t band(tp_hlo_builder_t *b, tp_hlo_value_t x, bool upper, int64_t off) {
  tp_hlo_value_t r = tp_hlo_iota(b, TP_DTYPE_I64, x.ndim, x.dims, x.ndim - 2);
  tp_hlo_value_t c = tp_hlo_iota(b, TP_DTYPE_I64, x.ndim, x.dims, x.ndim - 1);
  tp_hlo_value_t diff = tp_bin(b, TP_HLO_SUB, c, r);
  tp_hlo_value_t keep = tp_cmp(b, upper ? TP_CMP_GE : TP_CMP_LE, diff,
                            fill(b, TP_DTYPE_I64, (double)off, x.ndim, x.dims));
  return tp_sel(b, keep, x, fill(b, x.dtype, 0, x.ndim, x.dims));
}

/* ---- the ops ---- */

static bool lapack_dtype(tp_dtype_t t) { return t == TP_DTYPE_F32 || t == TP_DTYPE_F64; }

/* Jacobi sweeps cost O(n^4) steps of loop overhead: past this order CPU's LAPACK is far faster,
 * so larger eigenvalue and singular value problems run there. */
#define JACOBI_MAX_ORDER 32

static int64_t flag(const tp_op_arg_t *args, int n_args, int i, int64_t dflt) {
  return i < n_args && args[i].kind == TP_ARG_INT ? args[i].i : dflt;
}

static tp_status_t *unimpl(const tp_op_def_t *op, const char *why) {
  return tp_make_status(TP_UNIMPLEMENTED, "%s: %s", op->name, why);
}

static tp_meta_t shaped(tp_dtype_t dt, const tp_meta_t *batch, int extra, int64_t r, int64_t c) {
  tp_meta_t m = *batch;
  m.dtype = dt;
  m.writes_arg = 0;
  if (extra >= 1) m.sizes[m.ndim++] = r;
  if (extra >= 2) m.sizes[m.ndim++] = c;
  return m;
}

static tp_meta_t batch_of(const tp_meta_t *x) {
  tp_meta_t m = *x;
  m.ndim -= 2;
  return m;
}

static tp_meta_t empty_meta(tp_dtype_t dt) {
  tp_meta_t m = {.dtype = dt, .ndim = 1, .sizes = {0}};
  return m;
}

static bool is_vector_rhs(const tp_meta_t *a, const tp_meta_t *bm) {
  if (bm->ndim == 1) return true;
  if (a->ndim - 1 != bm->ndim) return false;
  for (int i = 0; i < bm->ndim; i++)
    if (bm->sizes[i] != a->sizes[i]) return false;
  return true;
}

/* Broadcast of the batch dims (all but the last two) of |x| and |y|. */
static tp_status_t *batch_bcast(const tp_op_def_t *op, const tp_meta_t *x, const tp_meta_t *y,
                                tp_meta_t *out) {
  tp_meta_t bx = batch_of(x), by = batch_of(y);
  tp_status_t *st = tp_broadcast_shapes(&bx, &by, out);
  if (st) {
    tp_status_free(st);
    return unimpl(op, "batch dims do not broadcast"); /* CPU raises its own error */
  }
  return NULL;
}

static bool square(const tp_meta_t *x) {
  return x->ndim >= 2 && x->sizes[x->ndim - 1] == x->sizes[x->ndim - 2];
}

/* lu_unpack(LU, pivots, unpack_data, unpack_pivots): P, L and U, or empty ones left unpacked. */
static tp_status_t *infer_lu_unpack(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                                    tp_meta_t *out, int *n_out) {
  const tp_meta_t *a = &args[0].meta;
  int64_t m = a->sizes[a->ndim - 2], n = a->sizes[a->ndim - 1], k = m < n ? m : n;
  tp_meta_t batch = batch_of(a);
  bool data = flag(args, n_args, 2, 1), pivots = flag(args, n_args, 3, 1);
  if (pivots) {
    if (n_args < 2 || args[1].kind != TP_ARG_TENSOR || args[1].meta.dtype != TP_DTYPE_I32)
      return unimpl(op, "pivots must be int32");
    const tp_meta_t *p = &args[1].meta;
    if (p->ndim != a->ndim - 1 || p->sizes[p->ndim - 1] != k)
      return unimpl(op, "pivots shape");
    for (int i = 0; i < batch.ndim; i++)
      if (p->sizes[i] != batch.sizes[i]) return unimpl(op, "pivots batch");
  }
  out[0] = pivots ? shaped(a->dtype, &batch, 2, m, m) : empty_meta(a->dtype);
  out[1] = data ? shaped(a->dtype, &batch, 2, m, k) : empty_meta(a->dtype);
  out[2] = data ? shaped(a->dtype, &batch, 2, k, n) : empty_meta(a->dtype);
  *n_out = 3;
  return NULL;
}

/* lu_solve(LU, pivots, B, left, adjoint): X of B's shape over the broadcast batch. */
static tp_status_t *infer_lu_solve(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                                   tp_meta_t *out, int *n_out) {
  const tp_meta_t *a = &args[0].meta;
  int64_t n = a->sizes[a->ndim - 1];
  if (n_args < 3 || args[1].kind != TP_ARG_TENSOR || args[2].kind != TP_ARG_TENSOR)
    return unimpl(op, "expected tensors");
  const tp_meta_t *p = &args[1].meta, *bm = &args[2].meta;
  bool left = flag(args, n_args, 3, 1);
  if (!square(a) || p->dtype != TP_DTYPE_I32 || bm->dtype != a->dtype || bm->ndim < 2 ||
      p->ndim != a->ndim - 1)
    return unimpl(op, "arguments");
  for (int i = 0; i < p->ndim; i++)
    if (p->sizes[i] != a->sizes[i]) return unimpl(op, "pivots shape");
  if ((left ? bm->sizes[bm->ndim - 2] : bm->sizes[bm->ndim - 1]) != n)
    return unimpl(op, "shapes of A and B");
  tp_meta_t bb;
  TP_RETURN_IF_ERROR(batch_bcast(op, bm, a, &bb));
  if (bb.ndim + 2 > TP_MAX_DIMS) return unimpl(op, "too many dims");
  out[0] = shaped(a->dtype, &bb, 2, bm->sizes[bm->ndim - 2], bm->sizes[bm->ndim - 1]);
  *n_out = 1;
  return NULL;
}

/* _linalg_solve_ex(A, B, left, check_errors): X, then A's LU, pivots and info. A vector B (one
 * dim fewer than A) solves as a one-column matrix. */
static tp_status_t *infer_solve_ex(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                                   tp_meta_t *out, int *n_out) {
  const tp_meta_t *a = &args[0].meta;
  int64_t n = a->sizes[a->ndim - 1];
  tp_meta_t batch = batch_of(a);
  if (n_args < 2 || args[1].kind != TP_ARG_TENSOR) return unimpl(op, "expected tensors");
  const tp_meta_t *bm = &args[1].meta;
  bool left = flag(args, n_args, 2, 1);
  if (flag(args, n_args, 3, 0)) return unimpl(op, "check_errors");
  if (!square(a) || bm->dtype != a->dtype) return unimpl(op, "arguments");
  bool vec = is_vector_rhs(a, bm);
  if (vec && !left) return unimpl(op, "vector rhs with left=False");
  tp_meta_t b2 = *bm;
  if (vec) b2.sizes[b2.ndim++] = 1;
  if (b2.ndim < 2 || b2.ndim > TP_MAX_DIMS ||
      (left ? b2.sizes[b2.ndim - 2] : b2.sizes[b2.ndim - 1]) != n)
    return unimpl(op, "shapes of A and B");
  tp_meta_t bb;
  TP_RETURN_IF_ERROR(batch_bcast(op, &b2, a, &bb));
  if (bb.ndim + 2 > TP_MAX_DIMS) return unimpl(op, "too many dims");
  out[0] = shaped(a->dtype, &bb, vec ? 1 : 2, b2.sizes[b2.ndim - 2], b2.sizes[b2.ndim - 1]);
  out[1] = *a;
  out[2] = shaped(TP_DTYPE_I32, &batch, 1, n, 0);
  out[3] = shaped(TP_DTYPE_I32, &batch, 0, 0, 0);
  *n_out = 4;
  return NULL;
}

/* det: det, LU, pivots; slogdet: sign, logabsdet, LU, pivots. */
static tp_status_t *infer_det(const tp_op_def_t *op, const tp_op_arg_t *args, tp_meta_t *out,
                              int *n_out) {
  const tp_meta_t *a = &args[0].meta;
  int64_t n = a->sizes[a->ndim - 1];
  tp_meta_t batch = batch_of(a);
  if (!square(a)) return unimpl(op, "not square");
  int i = 0;
  out[i++] = shaped(a->dtype, &batch, 0, 0, 0);
  if (op->code == TP_FAC_SLOGDET) out[i++] = shaped(a->dtype, &batch, 0, 0, 0);
  out[i++] = *a;
  out[i++] = shaped(TP_DTYPE_I32, &batch, 1, n, 0);
  *n_out = i;
  return NULL;
}

/* householder_product(A, tau): Q, A's shape, from A's first tau.size(-1) reflectors. */
static tp_status_t *infer_householder(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                                      tp_meta_t *out, int *n_out) {
  const tp_meta_t *a = &args[0].meta;
  int64_t m = a->sizes[a->ndim - 2], n = a->sizes[a->ndim - 1];
  tp_meta_t batch = batch_of(a);
  if (n_args < 2 || args[1].kind != TP_ARG_TENSOR) return unimpl(op, "expected tensors");
  const tp_meta_t *t = &args[1].meta;
  if (t->dtype != a->dtype || t->ndim != a->ndim - 1 || m < n || t->sizes[t->ndim - 1] > n)
    return unimpl(op, "arguments");
  for (int i = 0; i < batch.ndim; i++)
    if (t->sizes[i] != batch.sizes[i]) return unimpl(op, "tau batch");
  out[0] = *a;
  *n_out = 1;
  return NULL;
}

/* ormqr(A, tau, C, left, transpose): Q C or C Q (Q^T with transpose), C's shape. */
static tp_status_t *infer_ormqr(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                                tp_meta_t *out, int *n_out) {
  const tp_meta_t *a = &args[0].meta;
  int64_t m = a->sizes[a->ndim - 2], n = a->sizes[a->ndim - 1];
  tp_meta_t batch = batch_of(a);
  if (n_args < 3 || args[1].kind != TP_ARG_TENSOR || args[2].kind != TP_ARG_TENSOR)
    return unimpl(op, "expected tensors");
  const tp_meta_t *t = &args[1].meta, *c = &args[2].meta;
  bool left = flag(args, n_args, 3, 1);
  if (t->dtype != a->dtype || c->dtype != a->dtype || c->ndim != a->ndim ||
      t->ndim != a->ndim - 1)
    return unimpl(op, "arguments");
  for (int i = 0; i < batch.ndim; i++)
    if (t->sizes[i] != batch.sizes[i] || c->sizes[i] != batch.sizes[i])
      return unimpl(op, "batch");
  int64_t kt = t->sizes[t->ndim - 1];
  int64_t mn = left ? c->sizes[c->ndim - 2] : c->sizes[c->ndim - 1];
  if (m != mn || kt > mn || kt > n) return unimpl(op, "shapes");
  out[0] = *c;
  *n_out = 1;
  return NULL;
}

/* linalg_qr(A, mode): Q and R for "reduced" and "complete"; an empty Q for "r". */
static tp_status_t *infer_qr(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                             tp_meta_t *out, int *n_out) {
  const tp_meta_t *a = &args[0].meta;
  int64_t m = a->sizes[a->ndim - 2], n = a->sizes[a->ndim - 1], k = m < n ? m : n;
  tp_meta_t batch = batch_of(a);
  const char *mode = n_args > 1 && args[1].kind == TP_ARG_STR ? args[1].s : "reduced";
  bool complete = !strcmp(mode, "complete"), r_only = !strcmp(mode, "r");
  if (!complete && !r_only && strcmp(mode, "reduced")) return unimpl(op, "mode");
  out[0] = r_only ? empty_meta(a->dtype) : shaped(a->dtype, &batch, 2, m, complete ? m : k);
  out[1] = shaped(a->dtype, &batch, 2, complete ? m : k, n);
  *n_out = 2;
  return NULL;
}

/* _linalg_eigh without eigenvectors: the eigenvalues and an empty vectors result. */
static tp_status_t *infer_eigvalsh(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                                   tp_meta_t *out, int *n_out) {
  const tp_meta_t *a = &args[0].meta;
  int64_t n = a->sizes[a->ndim - 1];
  tp_meta_t batch = batch_of(a);
  const char *uplo = n_args > 1 && args[1].kind == TP_ARG_STR ? args[1].s : "L";
  if (!square(a) || flag(args, n_args, 2, 1) || (strcmp(uplo, "L") && strcmp(uplo, "U")))
    return unimpl(op, "eigenvectors (not unique) or arguments");
  if (n > JACOBI_MAX_ORDER) return unimpl(op, "order above the Jacobi limit");
  out[0] = shaped(a->dtype, &batch, 1, n, 0);
  out[1] = empty_meta(a->dtype);
  *n_out = 2;
  return NULL;
}

/* _linalg_svd without U and Vh: empty ones beside the singular values. */
static tp_status_t *infer_svdvals(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                                  tp_meta_t *out, int *n_out) {
  const tp_meta_t *a = &args[0].meta;
  int64_t m = a->sizes[a->ndim - 2], n = a->sizes[a->ndim - 1], k = m < n ? m : n;
  tp_meta_t batch = batch_of(a);
  /* Singular vectors are not unique (signs), so only the values are lowered. */
  if (flag(args, n_args, 2, 1) ||
      (n_args > 3 && args[3].kind != TP_ARG_NONE))
    return unimpl(op, "singular vectors or a driver");
  if (k > JACOBI_MAX_ORDER) return unimpl(op, "order above the Jacobi limit");
  out[0] = empty_meta(a->dtype);
  out[1] = shaped(a->dtype, &batch, 1, k, 0);
  out[2] = empty_meta(a->dtype);
  *n_out = 3;
  return NULL;
}

tp_status_t *tp_infer_factor(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                             int *n_out) {
  for (int i = 0; i < n_args && i < 3; i++)
    if (args[i].kind == TP_ARG_TENSOR && args[i].meta.dtype != TP_DTYPE_I32 &&
        !lapack_dtype(args[i].meta.dtype))
      return unimpl(op, "dtype");
  if (n_args < 1 || args[0].kind != TP_ARG_TENSOR) return unimpl(op, "expected a tensor");
  const tp_meta_t *a = &args[0].meta;
  if (a->ndim < 2 || !lapack_dtype(a->dtype)) return unimpl(op, "expected a float matrix");
  int64_t m = a->sizes[a->ndim - 2], n = a->sizes[a->ndim - 1], k = m < n ? m : n;
  tp_meta_t batch = batch_of(a);
  switch (op->code) {
    case TP_FAC_LU_FACTOR_EX:
      if (!flag(args, n_args, 1, 1) || flag(args, n_args, 2, 0))
        return unimpl(op, "no pivoting or check_errors");
      out[0] = *a;
      out[1] = shaped(TP_DTYPE_I32, &batch, 1, k, 0);
      out[2] = shaped(TP_DTYPE_I32, &batch, 0, 0, 0);
      *n_out = 3;
      return NULL;
    case TP_FAC_LU:
      if (!flag(args, n_args, 1, 1)) return unimpl(op, "no pivoting");
      out[0] = shaped(a->dtype, &batch, 2, m, m);
      out[1] = shaped(a->dtype, &batch, 2, m, k);
      out[2] = shaped(a->dtype, &batch, 2, k, n);
      *n_out = 3;
      return NULL;
    case TP_FAC_LU_UNPACK: return infer_lu_unpack(op, args, n_args, out, n_out);
    case TP_FAC_LU_SOLVE: return infer_lu_solve(op, args, n_args, out, n_out);
    case TP_FAC_SOLVE_EX: return infer_solve_ex(op, args, n_args, out, n_out);
    case TP_FAC_INV_EX:
      if (flag(args, n_args, 1, 0)) return unimpl(op, "check_errors");
      if (!square(a)) return unimpl(op, "not square");
      out[0] = *a;
      out[1] = shaped(TP_DTYPE_I32, &batch, 0, 0, 0);
      *n_out = 2;
      return NULL;
    case TP_FAC_DET:
    case TP_FAC_SLOGDET: return infer_det(op, args, out, n_out);
    case TP_FAC_GEQRF:
      out[0] = *a;
      out[1] = shaped(a->dtype, &batch, 1, k, 0);
      *n_out = 2;
      return NULL;
    case TP_FAC_HOUSEHOLDER: return infer_householder(op, args, n_args, out, n_out);
    case TP_FAC_ORMQR: return infer_ormqr(op, args, n_args, out, n_out);
    case TP_FAC_QR: return infer_qr(op, args, n_args, out, n_out);
    case TP_FAC_CHOLESKY_INVERSE:
      if (!square(a)) return unimpl(op, "not square");
      out[0] = *a;
      *n_out = 1;
      return NULL;
    case TP_FAC_EIGVALSH: return infer_eigvalsh(op, args, n_args, out, n_out);
    case TP_FAC_SVDVALS: return infer_svdvals(op, args, n_args, out, n_out);
    default:
      return unimpl(op, "unknown code");
  }
}

/* A as PyTorch factors it for det and slogdet: A^T when A is contiguous (real dtypes), so that
 * the returned LU and pivots are the ones their backward formulas expect. */
static bool use_transpose(const tp_op_arg_t *a) { return a->contiguous; }

/* lu (factoring A) and lu_unpack (of given LU and pivots): P from the pivots, unit-lower L and
 * upper U from the packed factors; zeros of out_meta's size for what is not unpacked. */
static void emit_lu_unpack(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                           int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                           tp_hlo_value_t *out) {
  tp_hlo_value_t a = in[0];
  int64_t m = a.dims[a.ndim - 2], n = a.dims[a.ndim - 1], k = m < n ? m : n;
  tp_hlo_value_t lu = flat(b, a, 2), piv = lu;
  bool data = true, pivots = true;
  if (op->code == TP_FAC_LU) {
    tp_hlo_value_t info;
    emit_getrf(b, lu, &lu, &piv, &info);
  } else {
    data = flag(args, n_args, 2, 1), pivots = flag(args, n_args, 3, 1);
    if (pivots) piv = flat(b, in[1], 1);
  }
  int64_t bt = lu.dims[0];
  if (pivots) {
    tp_hlo_value_t perm = emit_perm(b, piv, m);
    int64_t d3[3] = {bt, m, m};
    const int64_t m02[2] = {0, 2};
    tp_hlo_value_t p = tp_cmp(b, TP_CMP_EQ, tp_hlo_iota(b, TP_DTYPE_I32, 3, d3, 1),
                           spread(b, perm, 3, d3, m02));
    out[0] = unflat(b, tp_hlo_convert(b, p, a.dtype), &out_meta[0]);
  } else {
    out[0] = fill(b, a.dtype, 0, 1, out_meta[0].sizes);
  }
  if (data) {
    const int64_t st[3] = {0, 0, 0}, one[3] = {1, 1, 1};
    int64_t ll[3] = {bt, m, k}, ul[3] = {bt, k, n};
    tp_hlo_value_t l = band(b, tp_hlo_slice(b, lu, st, ll, one), false, -1);
    int64_t d3[3] = {bt, m, k};
    tp_hlo_value_t eye = tp_cmp(b, TP_CMP_EQ, tp_hlo_iota(b, TP_DTYPE_I32, 3, d3, 1),
                             tp_hlo_iota(b, TP_DTYPE_I32, 3, d3, 2));
    l = tp_sel(b, eye, fill(b, a.dtype, 1, 3, d3), l);
    out[1] = unflat(b, l, &out_meta[1]);
    out[2] = unflat(b, band(b, tp_hlo_slice(b, lu, st, ul, one), true, 0), &out_meta[2]);
  } else {
    out[1] = fill(b, a.dtype, 0, 1, out_meta[1].sizes);
    out[2] = fill(b, a.dtype, 0, 1, out_meta[2].sizes);
  }
}

/* _linalg_solve_ex (X, LU, pivots, info) and linalg_inv_ex (the solve against I, info), both
 * through one getrf of A. */
static void emit_solve_or_inv(const tp_op_def_t *op, tp_hlo_builder_t *b,
                              const tp_op_arg_t *args, int n_args, const tp_hlo_value_t *in,
                              const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  tp_hlo_value_t a = in[0];
  int64_t n = a.dims[a.ndim - 1];
  /* CPU factors A itself here, whatever its layout (only det and slogdet take A^T). */
  bool at = false;
  tp_hlo_value_t lu, piv, info;
  emit_getrf(b, flat(b, at ? mt(b, a) : a, 2), &lu, &piv, &info);
  tp_hlo_value_t x;
  tp_meta_t xm;
  if (op->code == TP_FAC_INV_EX) {
    int64_t d3[3] = {lu.dims[0], n, n};
    tp_hlo_value_t eye = tp_hlo_convert(b, tp_cmp(b, TP_CMP_EQ, tp_hlo_iota(b, TP_DTYPE_I32, 3, d3, 1),
                                               tp_hlo_iota(b, TP_DTYPE_I32, 3, d3, 2)),
                                        a.dtype);
    x = emit_getrs(b, lu, piv, eye, at);
    out[0] = unflat(b, x, &out_meta[0]);
    out[1] = unflat(b, info, &out_meta[1]);
    return;
  }
  bool left = flag(args, n_args, 2, 1);
  bool vec = is_vector_rhs(&args[0].meta, &args[1].meta);
  xm = out_meta[0];
  if (vec) xm.sizes[xm.ndim++] = 1;
  tp_meta_t bb = batch_of(&xm);
  tp_hlo_value_t rhs = in[1];
  if (vec) {
    int64_t d[TP_MAX_DIMS];
    memcpy(d, rhs.dims, sizeof(int64_t) * (size_t)rhs.ndim);
    d[rhs.ndim] = 1;
    rhs = tp_hlo_reshape(b, rhs, rhs.ndim + 1, d);
  }
  tp_meta_t lum = args[0].meta;
  tp_hlo_value_t luf = batch_flat(b, unflat(b, lu, &lum), &bb, 2);
  tp_meta_t pm = out_meta[2];
  tp_hlo_value_t pivf = batch_flat(b, unflat(b, piv, &pm), &bb, 1);
  x = solve_side(b, luf, pivf, batch_flat(b, rhs, &bb, 2), left, at);
  out[0] = unflat(b, x, &out_meta[0]);
  out[1] = unflat(b, lu, &out_meta[1]);
  out[2] = unflat(b, piv, &out_meta[2]);
  out[3] = unflat(b, info, &out_meta[3]);
}

/* det (or slogdet's sign and log|det|) from the LU diagonal and the pivots' parity, then the
 * LU and pivots their backward reads. */
static void emit_det(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                     const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  tp_hlo_value_t a = in[0];
  bool at = use_transpose(&args[0]);
  tp_hlo_value_t lu, piv, info;
  emit_getrf(b, flat(b, at ? mt(b, a) : a, 2), &lu, &piv, &info);
  tp_hlo_value_t sgn = pivots_sign(b, piv, a.dtype), diag = diagonal(b, lu);
  int i = 0;
  if (op->code == TP_FAC_DET) {
    out[i] = unflat(b, tp_bin(b, TP_HLO_MUL, sgn, reduce1(b, diag, TP_HLO_MUL, 1, 1)), &out_meta[i]);
    i++;
  } else {
    tp_hlo_value_t s = reduce1(b, tp_hlo_unary(b, TP_HLO_SIGN, diag), TP_HLO_MUL, 1, 1);
    out[i] = unflat(b, tp_bin(b, TP_HLO_MUL, s, sgn), &out_meta[i]);
    i++;
    tp_hlo_value_t la = tp_hlo_unary(b, TP_HLO_LOG, tp_hlo_unary(b, TP_HLO_ABS, diag));
    out[i] = unflat(b, reduce1(b, la, TP_HLO_ADD, 0, 1), &out_meta[i]);
    i++;
  }
  out[i] = unflat(b, lu, &out_meta[i]);
  out[i + 1] = unflat(b, piv, &out_meta[i + 1]);
}

/* linalg_qr: R from geqrf's upper triangle, Q from its reflectors unless mode is "r". */
static void emit_qr(tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                    const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  tp_hlo_value_t a = in[0];
  int64_t m = a.dims[a.ndim - 2], n = a.dims[a.ndim - 1], k = m < n ? m : n;
  const char *mode = n_args > 1 && args[1].kind == TP_ARG_STR ? args[1].s : "reduced";
  bool complete = !strcmp(mode, "complete"), r_only = !strcmp(mode, "r");
  tp_hlo_value_t qr, tau;
  tp_factor_geqrf(b, flat(b, a, 2), &qr, &tau);
  int64_t bt = qr.dims[0], rr = complete ? m : k;
  const int64_t st[3] = {0, 0, 0}, one[3] = {1, 1, 1};
  int64_t rl[3] = {bt, rr, n};
  tp_hlo_value_t r = band(b, tp_hlo_slice(b, qr, st, rl, one), true, 0);
  out[1] = unflat(b, r, &out_meta[1]);
  if (r_only) {
    out[0] = fill(b, a.dtype, 0, 1, out_meta[0].sizes);
    return;
  }
  out[0] = unflat(b, tp_factor_orgqr(b, qr, tau, complete ? m : k), &out_meta[0]);
}

/* (L L^T)^-1 = L^-T L^-1, or U^-1 U^-T, as potri */
static void emit_cholesky_inverse(tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                                  const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                                  tp_hlo_value_t *out) {
  tp_hlo_value_t a = in[0];
  bool upper = flag(args, n_args, 1, 0);
  tp_hlo_value_t x = flat(b, a, 2);
  if (tp_hlo_numel(&x) == 0) {
    out[0] = unflat(b, x, &out_meta[0]);
    return;
  }
  tp_hlo_value_t eye = tp_hlo_convert(b, tp_cmp(b, TP_CMP_EQ, tp_hlo_iota(b, TP_DTYPE_I32, 3, x.dims, 1),
                                             tp_hlo_iota(b, TP_DTYPE_I32, 3, x.dims, 2)),
                                      a.dtype);
  tp_hlo_value_t inv = tp_hlo_triangular_solve(b, x, eye, true, !upper, false, false);
  const int64_t bd = 0, c1 = upper ? 2 : 1;
  tp_hlo_value_t r = tp_hlo_dot_general(b, inv, inv, 1, &bd, &bd, 1, &c1, &c1, a.dtype);
  out[0] = unflat(b, r, &out_meta[0]);
}

/* Eigenvalues of the symmetric matrix the chosen triangle defines, ascending, in float64. */
static void emit_eigvalsh(tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                          const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                          tp_hlo_value_t *out) {
  tp_hlo_value_t a = in[0];
  const char *uplo = n_args > 1 && args[1].kind == TP_ARG_STR ? args[1].s : "L";
  bool lower = strcmp(uplo, "U") != 0;
  tp_hlo_value_t x = tp_hlo_convert(b, flat(b, a, 2), TP_DTYPE_F64);
  /* The chosen triangle mirrored: the other one is never read. */
  tp_hlo_value_t t = band(b, x, !lower, 0), strict = band(b, x, !lower, lower ? -1 : 1);
  tp_hlo_value_t sym = tp_bin(b, TP_HLO_ADD, t, mt(b, strict));
  tp_hlo_value_t w = tp_factor_sort_last(b, tp_factor_sym_eigvals(b, sym), false);
  out[0] = unflat(b, tp_hlo_convert(b, w, a.dtype), &out_meta[0]);
  out[1] = fill(b, a.dtype, 0, 1, out_meta[1].sizes);
}

/* Singular values, descending, in float64; empty U and Vh beside them. */
static void emit_svdvals(tp_hlo_builder_t *b, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                         tp_hlo_value_t *out) {
  tp_hlo_value_t a = in[0];
  int64_t m = a.dims[a.ndim - 2], n = a.dims[a.ndim - 1];
  tp_hlo_value_t x = tp_hlo_convert(b, flat(b, a, 2), TP_DTYPE_F64);
  if (m < n) x = mt(b, x); /* the same values; columns the shorter side */
  tp_hlo_value_t w = tp_factor_sort_last(b, tp_factor_svals(b, x), true);
  out[0] = fill(b, a.dtype, 0, 1, out_meta[0].sizes);
  out[1] = unflat(b, tp_hlo_convert(b, w, a.dtype), &out_meta[1]);
  out[2] = fill(b, a.dtype, 0, 1, out_meta[2].sizes);
}

void tp_emit_factor(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                    const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  tp_hlo_value_t a = in[0];
  int64_t n = a.dims[a.ndim - 1];
  switch (op->code) {
    case TP_FAC_LU_FACTOR_EX: {
      tp_hlo_value_t lu, piv, info;
      emit_getrf(b, flat(b, a, 2), &lu, &piv, &info);
      out[0] = unflat(b, lu, &out_meta[0]);
      out[1] = unflat(b, piv, &out_meta[1]);
      out[2] = unflat(b, info, &out_meta[2]);
      return;
    }
    case TP_FAC_LU:
    case TP_FAC_LU_UNPACK:
      emit_lu_unpack(op, b, args, n_args, in, out_meta, out);
      return;
    case TP_FAC_LU_SOLVE: {
      bool left = flag(args, n_args, 3, 1), adjoint = flag(args, n_args, 4, 0);
      tp_meta_t bb = batch_of(&out_meta[0]);
      tp_hlo_value_t lu = batch_flat(b, a, &bb, 2), piv = batch_flat(b, in[1], &bb, 1);
      tp_hlo_value_t x = solve_side(b, lu, piv, batch_flat(b, in[2], &bb, 2), left, adjoint);
      out[0] = unflat(b, x, &out_meta[0]);
      return;
    }
    case TP_FAC_SOLVE_EX:
    case TP_FAC_INV_EX:
      emit_solve_or_inv(op, b, args, n_args, in, out_meta, out);
      return;
    case TP_FAC_DET:
    case TP_FAC_SLOGDET:
      emit_det(op, b, args, in, out_meta, out);
      return;
    case TP_FAC_GEQRF: {
      tp_hlo_value_t qr, tau;
      tp_factor_geqrf(b, flat(b, a, 2), &qr, &tau);
      out[0] = unflat(b, qr, &out_meta[0]);
      out[1] = unflat(b, tau, &out_meta[1]);
      return;
    }
    case TP_FAC_HOUSEHOLDER: {
      tp_hlo_value_t q = tp_factor_orgqr(b, flat(b, a, 2), flat(b, in[1], 1), n);
      out[0] = unflat(b, q, &out_meta[0]);
      return;
    }
    case TP_FAC_ORMQR: {
      bool left = flag(args, n_args, 3, 1), trans = flag(args, n_args, 4, 0);
      /* Q = H_0 ... H_{k-1}: Q C applies the last first, Q^T C the first first; on the right,
       * C Q the first first. */
      bool ascending = left ? trans : !trans;
      tp_hlo_value_t c = tp_factor_apply_reflectors(b, flat(b, a, 2), flat(b, in[1], 1), flat(b, in[2], 2),
                                          left, ascending);
      out[0] = unflat(b, c, &out_meta[0]);
      return;
    }
    case TP_FAC_QR:
      emit_qr(b, args, n_args, in, out_meta, out);
      return;
    case TP_FAC_CHOLESKY_INVERSE:
      emit_cholesky_inverse(b, args, n_args, in, out_meta, out);
      return;
    case TP_FAC_EIGVALSH:
      emit_eigvalsh(b, args, n_args, in, out_meta, out);
      return;
    case TP_FAC_SVDVALS:
      emit_svdvals(b, in, out_meta, out);
      return;
    default:
      return;
  }
}
