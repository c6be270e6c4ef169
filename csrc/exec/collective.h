/* Collectives across devices of the process's client: the device transport of the c10d backend.
 * A collective over n devices is one replicated program (the StableHLO collective with a replica
 * group of all n), compiled once per (collective, reduction, element type, size, devices) and
 * cached like any program, and run by one execute over the n devices; no host copy.
 * Binds hlo/ to runtime/ as the executors do; knows nothing of PyTorch.
 * Thread-safe: takes the executor lock (exec.h) around the execute and the buffer swaps. */
#ifndef TP_EXEC_COLLECTIVE_H_
#define TP_EXEC_COLLECTIVE_H_

#include "exec/view.h"

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
} tp_coll_kind_t;

/* c10d's reductions. AVG divides the sum by n (floored for integers). On bool, SUM and MAX are
 * OR, PRODUCT and MIN are AND. Complex tensors take SUM and AVG; the bitwise ones take integers
 * and bool. */
typedef enum {
  TP_COLL_SUM, TP_COLL_AVG, TP_COLL_PRODUCT, TP_COLL_MIN, TP_COLL_MAX, TP_COLL_BAND, TP_COLL_BOR,
  TP_COLL_BXOR,
} tp_coll_op_t;

typedef struct {
  tp_coll_kind_t kind;
  tp_coll_op_t op;          /* ALL_REDUCE, REDUCE_SCATTER */
  int root;                 /* BROADCAST: the participant whose input every output gets */
  int n;                    /* participants, 1..64 */
  const tp_view_t *inputs;  /* n (borrowed): participant r's, each on a device of its own */
  const tp_view_t *outputs; /* n (borrowed): outputs[r] on inputs[r]'s device, of its dtype */
} tp_collective_t;

/* Runs |c|: returns once enqueued (outputs are ready when the device is, as for any op).
 * Outputs may be inputs (in place) or any view. INVALID_ARGUMENT for participants that disagree
 * (dtype, size), share a device, or a reduction the dtype has not. */
tp_status_t *tp_exec_collective(const tp_collective_t *c);

#ifdef __cplusplus
}
#endif
#endif  /* TP_EXEC_COLLECTIVE_H_ */
