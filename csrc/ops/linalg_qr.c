/* Householder QR for the factorization family (linalg_lu.c holds its rows): geqrf, whose
 * reflector follows LAPACK (beta = -sign(alpha) * norm, tau = (beta - alpha) / beta) so results
 * match CPU, the reflectors applied to a matrix (ormqr, householder_product) and Q itself (orgqr).
 * Each is a stablehlo.while over the columns, vectorised over the batch. Depends on hlo/ only. */
#include <float.h>
#include <string.h>

#include "ops/linalg_factor.h"

/* ---- QR ---- */

/* geqrf of |a| [bt, m, n]: reflectors below the diagonal, R on and above it, tau [bt, k]. */
void tp_factor_geqrf(tp_hlo_builder_t *b, tp_hlo_value_t a, tp_hlo_value_t *out_qr,
                     tp_hlo_value_t *out_tau) {
  int64_t bt = a.dims[0], m = a.dims[1], n = a.dims[2], k = m < n ? m : n;
  int64_t d2[2] = {bt, m}, dt2[2] = {bt, k}, d3[3] = {bt, m, n};
  const int64_t m01[2] = {0, 1}, m02[2] = {0, 2}, m0 = 0;
  tp_dtype_t dt = a.dtype;
  tp_hlo_value_t tau = fill(b, dt, 0, 2, dt2);
  if (k == 0 || bt == 0) {
    *out_qr = a, *out_tau = tau;
    return;
  }
  tp_hlo_value_t rows2 = tp_hlo_iota(b, TP_DTYPE_I32, 2, d2, 1);
  tp_hlo_value_t rows3 = tp_hlo_iota(b, TP_DTYPE_I32, 3, d3, 1);
  tp_hlo_value_t cols3 = tp_hlo_iota(b, TP_DTYPE_I32, 3, d3, 2);
  tp_hlo_value_t init[3] = {ci(b, 0), a, tau}, s[3], res[3];
  tp_hlo_while_begin(b, init, 3, s);
  tp_hlo_while_body(b, tp_cmp(b, TP_CMP_LT, s[0], ci(b, k)), s);
  tp_hlo_value_t kk = s[0], A = s[1];
  tp_hlo_value_t k2 = tp_hlo_broadcast_to(b, kk, 2, d2), k3 = tp_hlo_broadcast_to(b, kk, 3, d3);
  tp_hlo_value_t col = column(b, A, kk);
  tp_hlo_value_t zero2 = fill(b, dt, 0, 2, d2), zero1 = fill(b, dt, 0, 1, &bt);
  tp_hlo_value_t below2 = tp_cmp(b, TP_CMP_GT, rows2, k2);
  tp_hlo_value_t x = tp_sel(b, below2, col, zero2);
  tp_hlo_value_t xnorm = tp_hlo_unary(b, TP_HLO_SQRT, reduce1(b, tp_bin(b, TP_HLO_MUL, x, x), TP_HLO_ADD, 0, 1));
  tp_hlo_value_t alpha = entry(b, col, kk);
  /* beta = -sign(alpha) * hypot(alpha, xnorm), the hypot as lapy2 forms it. */
  tp_hlo_value_t aa = tp_hlo_unary(b, TP_HLO_ABS, alpha);
  tp_hlo_value_t w = tp_bin(b, TP_HLO_MAX, aa, xnorm), z = tp_bin(b, TP_HLO_MIN, aa, xnorm);
  tp_hlo_value_t q = tp_bin(b, TP_HLO_DIV, z, w);
  tp_hlo_value_t one1 = fill(b, dt, 1, 1, &bt);
  tp_hlo_value_t hyp = tp_bin(b, TP_HLO_MUL, w, tp_hlo_unary(b, TP_HLO_SQRT, tp_bin(b, TP_HLO_ADD, one1, tp_bin(b, TP_HLO_MUL, q, q))));
  hyp = tp_sel(b, tp_cmp(b, TP_CMP_EQ, z, zero1), w, hyp);
  tp_hlo_value_t beta = tp_sel(b, tp_cmp(b, TP_CMP_GE, alpha, zero1), tp_hlo_unary(b, TP_HLO_NEG, hyp), hyp);
  tp_hlo_value_t trivial = tp_cmp(b, TP_CMP_EQ, xnorm, zero1);
  tp_hlo_value_t t = tp_sel(b, trivial, zero1, tp_bin(b, TP_HLO_DIV, tp_bin(b, TP_HLO_SUB, beta, alpha), beta));
  beta = tp_sel(b, trivial, alpha, beta);
  tp_hlo_value_t scale = tp_bin(b, TP_HLO_DIV, one1, tp_bin(b, TP_HLO_SUB, alpha, beta));
  tp_hlo_value_t vlow = tp_sel(b, spread(b, trivial, 2, d2, &m0), x,
                            tp_bin(b, TP_HLO_MUL, x, spread(b, scale, 2, d2, &m0)));
  tp_hlo_value_t is_k2 = tp_cmp(b, TP_CMP_EQ, rows2, k2);
  tp_hlo_value_t v = tp_sel(b, is_k2, fill(b, dt, 1, 2, d2), vlow); /* zero above k */
  /* Apply H = I - tau v v^T to the columns right of k: A -= v (tau v^T A). */
  const int64_t bd = 0, vc = 1, ac = 1;
  tp_hlo_value_t wv = tp_hlo_dot_general(b, v, A, 1, &bd, &bd, 1, &vc, &ac, dt); /* [bt, n] */
  tp_hlo_value_t tw = tp_bin(b, TP_HLO_MUL, spread(b, tp_hlo_unary(b, TP_HLO_NEG, t), 2, (int64_t[]){bt, n}, &m0), wv);
  tp_hlo_value_t upd = tp_bin(b, TP_HLO_ADD, A, tp_bin(b, TP_HLO_MUL, spread(b, v, 3, d3, m01), spread(b, tw, 3, d3, m02)));
  tp_hlo_value_t right = tp_cmp(b, TP_CMP_GT, cols3, k3), on = tp_cmp(b, TP_CMP_EQ, cols3, k3);
  tp_hlo_value_t lower = tp_cmp(b, TP_CMP_GE, rows3, k3);
  tp_hlo_value_t newcol = tp_sel(b, is_k2, spread(b, beta, 2, d2, &m0), tp_sel(b, below2, vlow, col));
  A = tp_sel(b, tp_hlo_binary(b, TP_HLO_AND, lower, right), upd,
          tp_sel(b, on, spread(b, newcol, 3, d3, m01), A));
  tp_hlo_value_t tst[2] = {ci(b, 0), kk};
  int64_t d1[2] = {bt, 1};
  tp_hlo_value_t ntau = tp_hlo_dynamic_update_slice(b, s[2], tp_hlo_reshape(b, t, 2, d1), tst);
  tp_hlo_value_t next[3] = {tp_bin(b, TP_HLO_ADD, kk, ci(b, 1)), A, ntau};
  tp_hlo_while_end(b, next, res);
  *out_qr = res[1], *out_tau = res[2];
}

/* Applies the reflectors H_i = I - tau_i v_i v_i^T (v_i from column i of |refl| [bt, r, kr],
 * unit at i, zero above) to |c| [bt, r, cc] from the left (or [bt, cc, r] from the right), for
 * i in 0..k-1 ascending or descending. */
tp_hlo_value_t tp_factor_apply_reflectors(tp_hlo_builder_t *b, tp_hlo_value_t refl,
                                          tp_hlo_value_t tau, tp_hlo_value_t c, bool left,
                                          bool ascending) {
  int64_t bt = refl.dims[0], r = refl.dims[1], k = tau.dims[1];
  if (k == 0 || bt == 0 || tp_hlo_numel(&c) == 0) return c;
  tp_dtype_t dt = c.dtype;
  int64_t d2[2] = {bt, r};
  const int64_t m0 = 0, m01[2] = {0, 1}, m02[2] = {0, 2};
  tp_hlo_value_t rows2 = tp_hlo_iota(b, TP_DTYPE_I32, 2, d2, 1);
  tp_hlo_value_t init[2] = {ci(b, 0), c}, s[2], res[2];
  tp_hlo_while_begin(b, init, 2, s);
  tp_hlo_while_body(b, tp_cmp(b, TP_CMP_LT, s[0], ci(b, k)), s);
  tp_hlo_value_t i = ascending ? s[0] : tp_bin(b, TP_HLO_SUB, ci(b, k - 1), s[0]);
  tp_hlo_value_t C = s[1];
  tp_hlo_value_t i2 = tp_hlo_broadcast_to(b, i, 2, d2);
  tp_hlo_value_t col = column(b, refl, i);
  tp_hlo_value_t v = tp_sel(b, tp_cmp(b, TP_CMP_EQ, rows2, i2), fill(b, dt, 1, 2, d2),
                         tp_sel(b, tp_cmp(b, TP_CMP_GT, rows2, i2), col, fill(b, dt, 0, 2, d2)));
  tp_hlo_value_t ti = tp_hlo_unary(b, TP_HLO_NEG, entry(b, tau, i));
  const int64_t bd = 0, vc = 1, cl = 1, cr = 2;
  if (left) { /* C -= v (tau v^T C) */
    tp_hlo_value_t w = tp_hlo_dot_general(b, v, C, 1, &bd, &bd, 1, &vc, &cl, dt); /* [bt, cc] */
    w = tp_bin(b, TP_HLO_MUL, spread(b, ti, 2, w.dims, &m0), w);
    C = tp_bin(b, TP_HLO_ADD, C, tp_bin(b, TP_HLO_MUL, spread(b, v, 3, C.dims, m01), spread(b, w, 3, C.dims, m02)));
  } else { /* C -= (C v tau) v^T */
    tp_hlo_value_t w = tp_hlo_dot_general(b, C, v, 1, &bd, &bd, 1, &cr, &vc, dt); /* [bt, cc] */
    w = tp_bin(b, TP_HLO_MUL, spread(b, ti, 2, w.dims, &m0), w);
    C = tp_bin(b, TP_HLO_ADD, C, tp_bin(b, TP_HLO_MUL, spread(b, w, 3, C.dims, m01), spread(b, v, 3, C.dims, m02)));
  }
  tp_hlo_value_t next[2] = {tp_bin(b, TP_HLO_ADD, s[0], ci(b, 1)), C};
  tp_hlo_while_end(b, next, res);
  return res[1];
}

/* orgqr: the first |cols| columns of H_0 ... H_{k-1} for reflectors in |refl| [bt, m, *]. */
tp_hlo_value_t tp_factor_orgqr(tp_hlo_builder_t *b, tp_hlo_value_t refl, tp_hlo_value_t tau,
                               int64_t cols) {
  int64_t d3[3] = {refl.dims[0], refl.dims[1], cols};
  tp_hlo_value_t eye = tp_hlo_convert(b, tp_cmp(b, TP_CMP_EQ, tp_hlo_iota(b, TP_DTYPE_I32, 3, d3, 1),
                                             tp_hlo_iota(b, TP_DTYPE_I32, 3, d3, 2)),
                                      refl.dtype);
  return tp_factor_apply_reflectors(b, refl, tau, eye, true, false);
}
