/* The factorization family's shared pieces: the small emission helpers of linalg_lu.c (the
 * family's infer and emit, LU and what is built on it), linalg_qr.c (Householder QR and its Q
 * products) and linalg_eigh.c (Jacobi eigenvalues and singular values), and the functions the
 * latter two export to the first. Matrices arrive flattened to [bt, r, c] (bt the batch).
 * Private to those three files. */
#ifndef TP_OPS_LINALG_FACTOR_H_
#define TP_OPS_LINALG_FACTOR_H_

#include "ops/families.h"

/* ---- small helpers ---- */

static inline tp_hlo_value_t ci(tp_hlo_builder_t *b, int64_t v) {
  return tp_hlo_constant_i(b, TP_DTYPE_I32, v);
}

static inline tp_hlo_value_t fill(tp_hlo_builder_t *b, tp_dtype_t dt, double v, int ndim,
                                  const int64_t *dims) {
  return tp_hlo_broadcast_to(b, tp_hlo_constant(b, dt, v), ndim, dims);
}

/* |x| placed into a value of shape |dims| along the dims |map|. */
static inline tp_hlo_value_t spread(tp_hlo_builder_t *b, tp_hlo_value_t x, int ndim,
                                    const int64_t *dims, const int64_t *map) {
  return tp_hlo_broadcast_in_dim(b, x, ndim, dims, map);
}

static inline tp_hlo_value_t reduce1(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_binary_t op,
                                     double init, int64_t dim) {
  return tp_hlo_reduce(b, x, tp_hlo_constant(b, x.dtype, init), op, 1, &dim);
}

/* Swaps the last two dims. */
static inline tp_hlo_value_t mt(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  int64_t perm[TP_MAX_DIMS];
  for (int i = 0; i < x.ndim; i++) perm[i] = i;
  perm[x.ndim - 2] = x.ndim - 1;
  perm[x.ndim - 1] = x.ndim - 2;
  return tp_hlo_transpose(b, x, perm);
}

/* [batch..., r, c] -> [prod(batch), r, c] (|tail| trailing dims kept). */
static inline tp_hlo_value_t flat(tp_hlo_builder_t *b, tp_hlo_value_t x, int tail) {
  int64_t d[3], bt = 1;
  for (int i = 0; i < x.ndim - tail; i++) bt *= x.dims[i];
  d[0] = bt;
  for (int i = 0; i < tail; i++) d[1 + i] = x.dims[x.ndim - tail + i];
  return tp_hlo_reshape(b, x, 1 + tail, d);
}

static inline tp_hlo_value_t unflat(tp_hlo_builder_t *b, tp_hlo_value_t x, const tp_meta_t *m) {
  return tp_hlo_reshape(b, x, m->ndim, m->sizes);
}

/* Column |k| (scalar i32) of [bt, m, n] as [bt, m]; row |k| as [bt, n]. */
static inline tp_hlo_value_t column(tp_hlo_builder_t *b, tp_hlo_value_t a, tp_hlo_value_t k) {
  tp_hlo_value_t z = ci(b, 0), st[3] = {z, z, k};
  int64_t sz[3] = {a.dims[0], a.dims[1], 1};
  return tp_hlo_reshape(b, tp_hlo_dynamic_slice(b, a, st, sz), 2, a.dims);
}

static inline tp_hlo_value_t row(tp_hlo_builder_t *b, tp_hlo_value_t a, tp_hlo_value_t k) {
  tp_hlo_value_t z = ci(b, 0), st[3] = {z, k, z};
  int64_t sz[3] = {a.dims[0], 1, a.dims[2]}, d2[2] = {a.dims[0], a.dims[2]};
  return tp_hlo_reshape(b, tp_hlo_dynamic_slice(b, a, st, sz), 2, d2);
}

/* Entry |k| of the last dim of [bt, n] as [bt]. */
static inline tp_hlo_value_t entry(tp_hlo_builder_t *b, tp_hlo_value_t v, tp_hlo_value_t k) {
  tp_hlo_value_t st[2] = {ci(b, 0), k};
  int64_t sz[2] = {v.dims[0], 1};
  return tp_hlo_reshape(b, tp_hlo_dynamic_slice(b, v, st, sz), 1, v.dims);
}

/* Diagonal of [bt, n, n] as [bt, n]. */
static inline tp_hlo_value_t diagonal(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  tp_hlo_value_t r = tp_hlo_iota(b, TP_DTYPE_I32, 3, x.dims, 1);
  tp_hlo_value_t c = tp_hlo_iota(b, TP_DTYPE_I32, 3, x.dims, 2);
  return reduce1(b, tp_sel(b, tp_cmp(b, TP_CMP_EQ, r, c), x, fill(b, x.dtype, 0, 3, x.dims)), TP_HLO_ADD,
                 0, 2);
}

/* linalg_qr.c */
/* geqrf of |a| [bt, m, n]: reflectors below the diagonal, R on and above it, tau [bt, k]. */
void tp_factor_geqrf(tp_hlo_builder_t *b, tp_hlo_value_t a, tp_hlo_value_t *out_qr,
                     tp_hlo_value_t *out_tau);
/* Applies the reflectors H_i = I - tau_i v_i v_i^T (v_i from column i of |refl| [bt, r, kr],
 * unit at i, zero above) to |c| [bt, r, cc] from the left (or [bt, cc, r] from the right), for
 * i in 0..k-1 ascending or descending. */
tp_hlo_value_t tp_factor_apply_reflectors(tp_hlo_builder_t *b, tp_hlo_value_t refl,
                                          tp_hlo_value_t tau, tp_hlo_value_t c, bool left,
                                          bool ascending);
/* orgqr: the first |cols| columns of H_0 ... H_{k-1} for reflectors in |refl| [bt, m, *]. */
tp_hlo_value_t tp_factor_orgqr(tp_hlo_builder_t *b, tp_hlo_value_t refl, tp_hlo_value_t tau,
                               int64_t cols);

/* linalg_eigh.c */
/* Eigenvalues of the symmetric [bt, n, n] |s| (float64), unsorted: cyclic Jacobi rotations until
 * the off-diagonal part is negligible. Eigenvalues are unique, so any accurate method matches
 * LAPACK's within its own error; working in float64 keeps ours well inside it for float32. */
tp_hlo_value_t tp_factor_sym_eigvals(tp_hlo_builder_t *b, tp_hlo_value_t s);
/* Singular values of [bt, m, n] |x| (float64, m >= n), unsorted: one-sided Jacobi rotations of
 * column pairs until the columns are orthogonal, then the column norms. Accurate to a few ulps
 * relative to each value (no Gram matrix is formed), so float64 matches LAPACK too. */
tp_hlo_value_t tp_factor_svals(tp_hlo_builder_t *b, tp_hlo_value_t x);
/* |x| sorted along its last dim. */
tp_hlo_value_t tp_factor_sort_last(tp_hlo_builder_t *b, tp_hlo_value_t x, bool descending);

#endif  /* TP_OPS_LINALG_FACTOR_H_ */
