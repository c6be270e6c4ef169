/* Eigenvalues of symmetric matrices (cyclic Jacobi rotations) and singular values (one-sided
 * Jacobi rotations of column pairs), each in a stablehlo.while, for the factorization family
 * (linalg_lu.c holds its rows). Depends on hlo/ only. */
#include <float.h>
#include <string.h>

#include "ops/linalg_factor.h"

/* ---- symmetric eigenvalues (Jacobi) ---- */

/* Rows |p|, |q| of [bt, r, c] rotated: row_p' = c row_p - s row_q, row_q' = s row_p + c row_q
 * (|c|, |s| [bt]); along dim 2 for columns when |cols|. */
static tp_hlo_value_t rotate(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t p,
                             tp_hlo_value_t q, tp_hlo_value_t c, tp_hlo_value_t s, bool cols) {
  int64_t bt = x.dims[0];
  tp_hlo_value_t z = ci(b, 0);
  tp_hlo_value_t sp[3] = {z, cols ? z : p, cols ? p : z}, sq[3] = {z, cols ? z : q, cols ? q : z};
  int64_t sz[3] = {bt, cols ? x.dims[1] : 1, cols ? 1 : x.dims[2]};
  const int64_t m0 = 0;
  tp_hlo_value_t xp = tp_hlo_dynamic_slice(b, x, sp, sz), xq = tp_hlo_dynamic_slice(b, x, sq, sz);
  tp_hlo_value_t cc = spread(b, c, 3, sz, &m0), ss = spread(b, s, 3, sz, &m0);
  tp_hlo_value_t np = tp_bin(b, TP_HLO_SUB, tp_bin(b, TP_HLO_MUL, cc, xp), tp_bin(b, TP_HLO_MUL, ss, xq));
  tp_hlo_value_t nq = tp_bin(b, TP_HLO_ADD, tp_bin(b, TP_HLO_MUL, ss, xp), tp_bin(b, TP_HLO_MUL, cc, xq));
  x = tp_hlo_dynamic_update_slice(b, x, np, sp);
  return tp_hlo_dynamic_update_slice(b, x, nq, sq);
}

/* Writes the [bt] values |v| at (i, j) of [bt, n, n]. */
static tp_hlo_value_t put(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t i, tp_hlo_value_t j,
                          tp_hlo_value_t v) {
  tp_hlo_value_t st[3] = {ci(b, 0), i, j};
  int64_t d[3] = {x.dims[0], 1, 1};
  return tp_hlo_dynamic_update_slice(b, x, tp_hlo_reshape(b, v, 3, d), st);
}

static tp_hlo_value_t at2(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t i, tp_hlo_value_t j) {
  tp_hlo_value_t st[3] = {ci(b, 0), i, j};
  int64_t d[3] = {x.dims[0], 1, 1};
  return tp_hlo_reshape(b, tp_hlo_dynamic_slice(b, x, st, d), 1, x.dims);
}

/* The pair loop of a Jacobi sweep: (p, q) run over p < q in row order, carried as loop state
 * next to the matrix (t counts pairs). */
static void pairs_begin(tp_hlo_builder_t *b, tp_hlo_value_t x, int64_t n, tp_hlo_value_t *t) {
  tp_hlo_value_t init[4] = {ci(b, 0), ci(b, 0), ci(b, 1), x};
  tp_hlo_while_begin(b, init, 4, t);
  tp_hlo_while_body(b, tp_cmp(b, TP_CMP_LT, t[0], ci(b, n * (n - 1) / 2)), t);
}

static tp_hlo_value_t pairs_end(tp_hlo_builder_t *b, const tp_hlo_value_t *t, int64_t n,
                                tp_hlo_value_t x) {
  tp_hlo_value_t q1 = tp_bin(b, TP_HLO_ADD, t[2], ci(b, 1)), p1 = tp_bin(b, TP_HLO_ADD, t[1], ci(b, 1));
  tp_hlo_value_t wrap = tp_cmp(b, TP_CMP_EQ, q1, ci(b, n));
  tp_hlo_value_t next[4] = {tp_bin(b, TP_HLO_ADD, t[0], ci(b, 1)), tp_sel(b, wrap, p1, t[1]),
                            tp_sel(b, wrap, tp_bin(b, TP_HLO_ADD, p1, ci(b, 1)), q1), x};
  tp_hlo_value_t res[4];
  tp_hlo_while_end(b, next, res);
  return res[3];
}

/* The Jacobi rotation (tangent |tan|, cosine |c|, sine |sn|, per batch [bt]) that zeroes the
 * off-diagonal |g| of the symmetric 2x2 [[a, g], [g, d]]: the smaller-angle root, identity where
 * g is 0. */
static void jacobi_rotation(tp_hlo_builder_t *b, tp_hlo_value_t a, tp_hlo_value_t d,
                            tp_hlo_value_t g, tp_hlo_value_t *tan, tp_hlo_value_t *c,
                            tp_hlo_value_t *sn) {
  tp_dtype_t dt = a.dtype;
  int64_t bt = a.dims[0];
  tp_hlo_value_t zero = fill(b, dt, 0, 1, &bt), one = fill(b, dt, 1, 1, &bt);
  tp_hlo_value_t nz = tp_cmp(b, TP_CMP_NE, g, zero);
  tp_hlo_value_t tau = tp_bin(b, TP_HLO_DIV, tp_bin(b, TP_HLO_SUB, d, a),
                           tp_bin(b, TP_HLO_MUL, fill(b, dt, 2, 1, &bt), tp_sel(b, nz, g, one)));
  tp_hlo_value_t root = tp_hlo_unary(b, TP_HLO_SQRT, tp_bin(b, TP_HLO_ADD, one, tp_bin(b, TP_HLO_MUL, tau, tau)));
  tp_hlo_value_t tt = tp_bin(b, TP_HLO_DIV, one, tp_bin(b, TP_HLO_ADD, tp_hlo_unary(b, TP_HLO_ABS, tau), root));
  tt = tp_sel(b, tp_cmp(b, TP_CMP_GE, tau, zero), tt, tp_hlo_unary(b, TP_HLO_NEG, tt));
  tt = tp_sel(b, nz, tt, zero);
  *c = tp_bin(b, TP_HLO_DIV, one, tp_hlo_unary(b, TP_HLO_SQRT, tp_bin(b, TP_HLO_ADD, one, tp_bin(b, TP_HLO_MUL, tt, tt))));
  *sn = tp_bin(b, TP_HLO_MUL, tt, *c);
  *tan = tt;
}

/* Jacobi sweeps of [bt, ...] |x|: each sweep applies |rotate_pair| to every pair p < q in row
 * order, while |unconverged| (a scalar bool) says some matrix of the batch still needs one, at
 * most 60 sweeps. */
static tp_hlo_value_t jacobi_sweeps(tp_hlo_builder_t *b, tp_hlo_value_t x, int64_t n,
                                    tp_hlo_value_t (*unconverged)(tp_hlo_builder_t *, tp_hlo_value_t),
                                    tp_hlo_value_t (*rotate_pair)(tp_hlo_builder_t *, tp_hlo_value_t,
                                                                  tp_hlo_value_t, tp_hlo_value_t)) {
  tp_hlo_value_t init[2] = {ci(b, 0), x}, o[2], res[2], t[4];
  tp_hlo_while_begin(b, init, 2, o);
  tp_hlo_while_body(b, tp_hlo_binary(b, TP_HLO_AND, unconverged(b, o[1]), tp_cmp(b, TP_CMP_LT, o[0], ci(b, 60))), o);
  pairs_begin(b, o[1], n, t);
  tp_hlo_value_t swept = pairs_end(b, t, n, rotate_pair(b, t[3], t[1], t[2]));
  tp_hlo_value_t onext[2] = {tp_bin(b, TP_HLO_ADD, o[0], ci(b, 1)), swept};
  tp_hlo_while_end(b, onext, res);
  return res[1];
}

/* Whether any element of |big| is true, as a scalar. */
static tp_hlo_value_t any_of(tp_hlo_builder_t *b, tp_hlo_value_t big) {
  const int64_t all[3] = {0, 1, 2};
  return tp_hlo_reduce(b, big, tp_hlo_constant_i(b, TP_DTYPE_BOOL, 0), TP_HLO_OR, big.ndim, all);
}

/* Some symmetric [bt, n, n] matrix's off-diagonal part is not yet negligible. */
static tp_hlo_value_t eig_unconverged(tp_hlo_builder_t *b, tp_hlo_value_t s) {
  int64_t bt = s.dims[0];
  tp_hlo_value_t r3 = tp_hlo_iota(b, TP_DTYPE_I32, 3, s.dims, 1), c3 = tp_hlo_iota(b, TP_DTYPE_I32, 3, s.dims, 2);
  tp_hlo_value_t sq = tp_bin(b, TP_HLO_MUL, s, s);
  tp_hlo_value_t off = reduce1(b, reduce1(b, tp_sel(b, tp_cmp(b, TP_CMP_NE, r3, c3), sq, fill(b, s.dtype, 0, 3, s.dims)),
                                          TP_HLO_ADD, 0, 2), TP_HLO_ADD, 0, 1);
  tp_hlo_value_t tot = reduce1(b, reduce1(b, sq, TP_HLO_ADD, 0, 2), TP_HLO_ADD, 0, 1);
  return any_of(b, tp_cmp(b, TP_CMP_GT, off, tp_bin(b, TP_HLO_MUL, tot, fill(b, s.dtype, 1e-30, 1, &bt))));
}

/* The two-sided rotation that zeroes x[p, q] and x[q, p]. */
static tp_hlo_value_t eig_rotate_pair(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t p, tp_hlo_value_t q) {
  int64_t bt = x.dims[0];
  tp_hlo_value_t app = at2(b, x, p, p), aqq = at2(b, x, q, q), apq = at2(b, x, p, q);
  tp_hlo_value_t tt, c, sn, zero = fill(b, x.dtype, 0, 1, &bt);
  jacobi_rotation(b, app, aqq, apq, &tt, &c, &sn);
  tp_hlo_value_t y = rotate(b, rotate(b, x, p, q, c, sn, false), p, q, c, sn, true);
  y = put(b, y, p, p, tp_bin(b, TP_HLO_SUB, app, tp_bin(b, TP_HLO_MUL, tt, apq)));
  y = put(b, y, q, q, tp_bin(b, TP_HLO_ADD, aqq, tp_bin(b, TP_HLO_MUL, tt, apq)));
  return put(b, put(b, y, p, q, zero), q, p, zero);
}

/* Eigenvalues of the symmetric [bt, n, n] |s| (float64), unsorted: cyclic Jacobi rotations until
 * the off-diagonal part is negligible. Eigenvalues are unique, so any accurate method matches
 * LAPACK's within its own error; working in float64 keeps ours well inside it for float32. */
tp_hlo_value_t tp_factor_sym_eigvals(tp_hlo_builder_t *b, tp_hlo_value_t s) {
  if (s.dims[1] > 1 && s.dims[0] > 0) s = jacobi_sweeps(b, s, s.dims[1], eig_unconverged, eig_rotate_pair);
  return diagonal(b, s);
}

/* Some [bt, m, n] matrix still has two columns that are not orthogonal to working precision. */
static tp_hlo_value_t svd_unconverged(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  int64_t bt = x.dims[0], n = x.dims[2];
  int64_t g3[3] = {bt, n, n};
  const int64_t bd = 0, c1 = 1, m01[2] = {0, 1}, m02[2] = {0, 2};
  tp_hlo_value_t r3 = tp_hlo_iota(b, TP_DTYPE_I32, 3, g3, 1), c3 = tp_hlo_iota(b, TP_DTYPE_I32, 3, g3, 2);
  tp_hlo_value_t g = tp_hlo_dot_general(b, x, x, 1, &bd, &bd, 1, &c1, &c1, x.dtype);
  tp_hlo_value_t d = diagonal(b, g);
  tp_hlo_value_t dd = tp_bin(b, TP_HLO_MUL, spread(b, d, 3, g3, m01), spread(b, d, 3, g3, m02));
  tp_hlo_value_t lim = tp_bin(b, TP_HLO_MUL, tp_hlo_unary(b, TP_HLO_SQRT, dd), fill(b, x.dtype, 1e-15, 3, g3));
  return any_of(b, tp_hlo_binary(b, TP_HLO_AND, tp_cmp(b, TP_CMP_NE, r3, c3),
                                 tp_cmp(b, TP_CMP_GT, tp_hlo_unary(b, TP_HLO_ABS, g), lim)));
}

/* The one-sided rotation that makes columns p and q orthogonal. */
static tp_hlo_value_t svd_rotate_pair(tp_hlo_builder_t *b, tp_hlo_value_t y, tp_hlo_value_t p, tp_hlo_value_t q) {
  tp_hlo_value_t cp = column(b, y, p), cq = column(b, y, q);
  tp_hlo_value_t alpha = reduce1(b, tp_bin(b, TP_HLO_MUL, cp, cp), TP_HLO_ADD, 0, 1);
  tp_hlo_value_t beta = reduce1(b, tp_bin(b, TP_HLO_MUL, cq, cq), TP_HLO_ADD, 0, 1);
  tp_hlo_value_t gamma = reduce1(b, tp_bin(b, TP_HLO_MUL, cp, cq), TP_HLO_ADD, 0, 1);
  tp_hlo_value_t tt, c, sn;
  jacobi_rotation(b, alpha, beta, gamma, &tt, &c, &sn);
  return rotate(b, y, p, q, c, sn, true);
}

/* Singular values of [bt, m, n] |x| (float64, m >= n), unsorted: one-sided Jacobi rotations of
 * column pairs until the columns are orthogonal, then the column norms. Accurate to a few ulps
 * relative to each value (no Gram matrix is formed), so float64 matches LAPACK too. */
tp_hlo_value_t tp_factor_svals(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  if (x.dims[2] > 1 && x.dims[0] > 0) x = jacobi_sweeps(b, x, x.dims[2], svd_unconverged, svd_rotate_pair);
  tp_hlo_value_t sq = reduce1(b, tp_bin(b, TP_HLO_MUL, x, x), TP_HLO_ADD, 0, 1);
  return tp_hlo_unary(b, TP_HLO_SQRT, sq);
}

tp_hlo_value_t tp_factor_sort_last(tp_hlo_builder_t *b, tp_hlo_value_t x, bool descending) {
  tp_hlo_value_t outs[1];
  if (x.dims[x.ndim - 1] <= 1) return x;
  return tp_hlo_sort(b, &x, 1, x.ndim - 1, descending, outs);
}
