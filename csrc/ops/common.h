/* The inference and emission helpers every op family shares (common.c); the ones the executors
 * use too (tp_broadcast_shapes, tp_result_type, tp_emit_cast_to, tp_meta_numel,
 * tp_op_check_complex) are declared in op.h. Private to ops/. */
#ifndef TP_OPS_COMMON_H_
#define TP_OPS_COMMON_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/op.h"

/* Wraps a negative dim of a tensor of |ndim| dims; -1 when out of range (a 0-d tensor accepts 0
 * and -1). */
int tp_norm_dim(int64_t d, int ndim);
/* PyTorch's error for a dim |d| that tp_norm_dim rejects, after |op|'s name. */
tp_status_t *tp_dim_error(const tp_op_def_t *op, int64_t d, int ndim);
/* Writes |v| as PyTorch prints an int list ("[1, 2, 3]") into |buf| of |n| bytes. */
void tp_format_ints(char *buf, size_t n, const int64_t *v, int count);
/* |out|'s sizes become |x|'s without the dims |mask| marks, or with them as 1 (|keep|). */
void tp_meta_reduce(const tp_meta_t *x, const bool *mask, bool keep, tp_meta_t *out);
/* The type |t| computes in: f16/bf16 in f32, others in themselves. */
tp_dtype_t tp_math_dtype(tp_dtype_t t);
/* The elements from which an operand that XLA's CPU backend would transpose (a dot's weight read
 * transposed) costs more than moving the other operands instead: its transposes of arrays past
 * the caches run at a small fraction of memory speed (linalg.c, conv.c). */
#define TP_BIG_TRANSPOSE (1 << 16)
/* |v| converted to |dtype| and broadcast to |shape|'s sizes. */
tp_hlo_value_t tp_emit_cast_shape(tp_hlo_builder_t *b, tp_hlo_value_t v, tp_dtype_t dtype,
                                  const tp_meta_t *shape);
/* The start of an infer that many families share: INVALID_ARGUMENT ("self must be a tensor")
 * unless argument 0 is a TENSOR; otherwise one output, of argument 0's meta. */
tp_status_t *tp_infer_like_self(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                                tp_meta_t *out, int *n_out);
/* Whether |args| has a TENSOR at |i|. */
static inline bool tp_arg_is_tensor(const tp_op_arg_t *args, int n_args, int i) {
  return i < n_args && args[i].kind == TP_ARG_TENSOR;
}
/* The sign bit of |x| as bool, of the same shape: set for negative values, -0.0 and negative
 * NaNs; never for unsigned types. */
tp_hlo_value_t tp_emit_signbit(tp_hlo_builder_t *b, tp_hlo_value_t x);
/* Row-major linear index into |shape| (rank |ndim|) of every position of |idx|'s shape, with
 * |idx| (i64) as the coordinate along dim |d| and the position's own coordinate elsewhere. */
tp_hlo_value_t tp_emit_linear_index(tp_hlo_builder_t *b, tp_hlo_value_t idx, int d, int ndim,
                                    const int64_t *shape);

#endif  /* TP_OPS_COMMON_H_ */
