/* The arithmetic emitters are written in: one-line wrappers over hlo/'s builder calls, so that a
 * formula reads as a formula (tp_add(b, x, tp_mul(b, y, tp_k(b, 2, y))) rather than nested
 * tp_hlo_binary calls). Each emits exactly the op its hlo/ counterpart emits. Private to ops/;
 * depends on hlo/ only. */
#ifndef TP_OPS_EMIT_H_
#define TP_OPS_EMIT_H_

#include "hlo/builder.h"

/* |v| in |like|'s element type, broadcast to |like|'s shape. */
static inline tp_hlo_value_t tp_k(tp_hlo_builder_t *b, double v, tp_hlo_value_t like) {
  return tp_hlo_broadcast_to(b, tp_hlo_constant(b, like.dtype, v), like.ndim, like.dims);
}

static inline tp_hlo_value_t tp_bin(tp_hlo_builder_t *b, tp_hlo_binary_t op, tp_hlo_value_t x,
                                    tp_hlo_value_t y) {
  return tp_hlo_binary(b, op, x, y);
}
static inline tp_hlo_value_t tp_add(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t y) {
  return tp_hlo_binary(b, TP_HLO_ADD, x, y);
}
static inline tp_hlo_value_t tp_sub(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t y) {
  return tp_hlo_binary(b, TP_HLO_SUB, x, y);
}
static inline tp_hlo_value_t tp_mul(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t y) {
  return tp_hlo_binary(b, TP_HLO_MUL, x, y);
}
static inline tp_hlo_value_t tp_div(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t y) {
  return tp_hlo_binary(b, TP_HLO_DIV, x, y);
}
static inline tp_hlo_value_t tp_and(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t y) {
  return tp_hlo_binary(b, TP_HLO_AND, x, y);
}
static inline tp_hlo_value_t tp_or(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t y) {
  return tp_hlo_binary(b, TP_HLO_OR, x, y);
}
static inline tp_hlo_value_t tp_un(tp_hlo_builder_t *b, tp_hlo_unary_t op, tp_hlo_value_t x) {
  return tp_hlo_unary(b, op, x);
}
static inline tp_hlo_value_t tp_not(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  return tp_hlo_unary(b, TP_HLO_NOT, x);
}

static inline tp_hlo_value_t tp_cmp(tp_hlo_builder_t *b, tp_hlo_cmp_t dir, tp_hlo_value_t x,
                                    tp_hlo_value_t y) {
  return tp_hlo_compare(b, dir, x, y);
}
/* x <dir> k, the constant |k| shaped like |x|. */
static inline tp_hlo_value_t tp_cmpk(tp_hlo_builder_t *b, tp_hlo_cmp_t dir, tp_hlo_value_t x,
                                     double k) {
  return tp_hlo_compare(b, dir, x, tp_k(b, k, x));
}
static inline tp_hlo_value_t tp_is_nan(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  return tp_hlo_compare(b, TP_CMP_NE, x, x);
}
static inline tp_hlo_value_t tp_sel(tp_hlo_builder_t *b, tp_hlo_value_t pred, tp_hlo_value_t t,
                                    tp_hlo_value_t f) {
  return tp_hlo_select(b, pred, t, f);
}

#endif  /* TP_OPS_EMIT_H_ */
