/* Collectives across devices of the process's client: the device transport of the c10d backend.
 * A collective over n devices is one replicated program (the StableHLO collective with a replica
 * group of all n), compiled once per (collective, reduction, element type, size, devices) and
 * cached like any program, and run by one execute over the n devices; no host copy.
 * Binds hlo/ to runtime/ as the executors do; knows nothing of PyTorch.
 * Thread-safe: takes the executor lock (exec.h) around the execute and the buffer swaps. */
#ifndef TP_EXEC_COLLECTIVE_H_
#define TP_EXEC_COLLECTIVE_H_

#include "exec/view.h"
#include "ops/collective.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The collectives and reductions are ops/collective.h's. */
typedef struct {
  tp_coll_kind_t kind;
  tp_coll_op_t op;          /* ALL_REDUCE, REDUCE_SCATTER */
  int root;                 /* BROADCAST: the participant whose input every output gets */
  int n;                    /* participants, 1..64 */
  const tp_view_t *inputs;  /* n (borrowed): participant r's, each on a device of its own */
  const tp_view_t *outputs; /* n (borrowed): outputs[r] on inputs[r]'s device, of its dtype */
} tp_collective_t;

/* Runs |c|: returns once enqueued (outputs are ready when the device is, as for any op). The
 * execute itself may still be under way on the collective thread, which holds the executor lock
 * until it is enqueued: every later use of the device, and any synchronize, comes after it.
 * Outputs may be inputs (in place) or any view. INVALID_ARGUMENT for participants that disagree
 * (dtype, size), share a device, or a reduction the dtype has not. */
tp_status_t *tp_exec_collective(const tp_collective_t *c);

#ifdef __cplusplus
}
#endif
#endif  /* TP_EXEC_COLLECTIVE_H_ */
