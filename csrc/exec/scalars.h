/* Scalar inputs of programs: in eager mode a scalar argument (x * 0.5, a learning rate) is a
 * small device buffer, not a constant of the program, so a new value never recompiles. Buffers
 * are cached by value (512 slots, per device and dtype). Private to exec/. */
#ifndef TP_EXEC_SCALARS_H_
#define TP_EXEC_SCALARS_H_

#include <stdint.h>

#include "ops/op.h"
#include "runtime/client.h" /* PJRT_Buffer */

/* The host bytes (16, zero-padded) of scalar |a| converted to |dtype| as PyTorch converts. */
void tp_scalar_bytes(const tp_op_arg_t *a, tp_dtype_t dtype, unsigned char *out);

/* A fresh id for one execution's scalar inputs (under the executor lock). */
uint64_t tp_scalars_next_call(void);
/* A device buffer holding scalar |a| as a->scalar_dtype, for the execution |call|
 * (tp_scalars_next_call). Cached by value and borrowed, except when an earlier scalar of the same
 * call holds the cache slot: then the buffer is also returned in *out_owned (else NULL) and the
 * caller destroys it after enqueuing the execution. Under the executor lock. */
tp_status_t *tp_scalars_buffer(int device, const tp_op_arg_t *a, uint64_t call, PJRT_Buffer **out,
                               PJRT_Buffer **out_owned);

#endif  /* TP_EXEC_SCALARS_H_ */
