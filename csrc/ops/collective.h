/* Collectives as StableHLO, shared by the device transport's replicated programs
 * (exec/collective.c) and the _c10d_functional rows that lower collectives into whole graphs
 * (ops/collective.c). Depends on base/ and hlo/ only. */
#ifndef TP_OPS_COLLECTIVE_H_
#define TP_OPS_COLLECTIVE_H_

#include "base/status.h"
#include "hlo/builder.h"

#ifdef __cplusplus
extern "C" {
#endif

/* On participant r, with x_r its input (numel k, the same on every participant):
 *   ALL_REDUCE      out_r = op(x_0, ..., x_{n-1})                        numel k
 *   BROADCAST       out_r = x_root                                       numel k
 *   ALL_GATHER      out_r = x_0 ++ ... ++ x_{n-1}                        numel n*k
 *   REDUCE_SCATTER  out_r = chunk r of op(x_0, ..., x_{n-1})             numel k/n
 *   ALL_TO_ALL      out_r = chunk r of x_0 ++ ... ++ chunk r of x_{n-1}  numel k
 * (in row-major order of the views; chunk: one of n equal parts). */
typedef enum {
  TP_COLL_ALL_REDUCE, TP_COLL_BROADCAST, TP_COLL_ALL_GATHER, TP_COLL_REDUCE_SCATTER,
  TP_COLL_ALL_TO_ALL,
  TP_COLL_KIND_COUNT
} tp_coll_kind_t;

/* c10d's reductions. AVG divides the sum by n (floored for integers). On bool, SUM and MAX are
 * OR, PRODUCT and MIN are AND. Complex tensors take SUM and AVG; the bitwise ones take integers
 * and bool. */
typedef enum {
  TP_COLL_SUM, TP_COLL_AVG, TP_COLL_PRODUCT, TP_COLL_MIN, TP_COLL_MAX, TP_COLL_BAND, TP_COLL_BOR,
  TP_COLL_BXOR,
  TP_COLL_OP_COUNT
} tp_coll_op_t;

extern const char *const tp_coll_kind_names[];  /* "all_reduce", ... by tp_coll_kind_t */
extern const char *const tp_coll_op_names[];    /* "SUM", ... by tp_coll_op_t */

/* Whether collective |kind| with reduction |op| takes elements of |dt| (a tensor's own dtype):
 * NULL, or INVALID_ARGUMENT saying what is missing. */
tp_status_t *tp_coll_check(tp_coll_kind_t kind, tp_coll_op_t op, tp_dtype_t dt);

/* Emits |kind| (with |op| and |root| where it takes them) over all |n| replicas of a replicated
 * program on 1-D |x|, whose elements are |dt|'s (|x|'s own type, or a complex dtype's parts). */
tp_hlo_value_t tp_coll_emit(tp_hlo_builder_t *b, tp_coll_kind_t kind, tp_coll_op_t op, int root,
                            int n, tp_dtype_t dt, tp_hlo_value_t x);

#ifdef __cplusplus
}
#endif
#endif  /* TP_OPS_COLLECTIVE_H_ */
