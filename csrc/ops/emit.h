/* The arithmetic emitters are written in: one-line wrappers over hlo/'s builder calls, so that a
 * formula reads as a formula (tp_add(b, x, tp_mul(b, y, tp_k(b, 2, y))) rather than nested
 * tp_hlo_binary calls). Each emits exactly the op its hlo/ counterpart emits. Private to ops/;
 * depends on hlo/ only. */
#ifndef TP_OPS_EMIT_H_
#define TP_OPS_EMIT_H_

#include "hlo/builder.h"

/* Whether |st| is no error. An error becomes |b|'s sticky failure, and the emitter returns:
 * `if (!tp_emit_ok(b, parse(...))) return;`. */
static inline bool tp_emit_ok(tp_hlo_builder_t *b, tp_status_t *st) {
  if (!st) return true;
  tp_hlo_fail(b, st);
  return false;
}

/* |v| in |like|'s element type, broadcast to |like|'s shape. */
static inline tp_hlo_value_t tp_k(tp_hlo_builder_t *b, double v, tp_hlo_value_t like) {
  return tp_hlo_broadcast_to(b, tp_hlo_constant(b, like.dtype, v), like.ndim, like.dims);
}

static inline tp_hlo_value_t tp_bin(tp_hlo_builder_t *b, tp_hlo_binary_t op, tp_hlo_value_t x,
                                    tp_hlo_value_t y) {
  return tp_hlo_binary(b, op, x, y);
}
/* tp_add, tp_sub, tp_mul, tp_div, tp_and, tp_or: x <op> y. */
#define TP_EMIT_BINARY(name, code)                                                              \
  static inline tp_hlo_value_t name(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t y) { \
    return tp_hlo_binary(b, code, x, y);                                                        \
  }
TP_EMIT_BINARY(tp_add, TP_HLO_ADD)
TP_EMIT_BINARY(tp_sub, TP_HLO_SUB)
TP_EMIT_BINARY(tp_mul, TP_HLO_MUL)
TP_EMIT_BINARY(tp_div, TP_HLO_DIV)
TP_EMIT_BINARY(tp_and, TP_HLO_AND)
TP_EMIT_BINARY(tp_or, TP_HLO_OR)
#undef TP_EMIT_BINARY
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
