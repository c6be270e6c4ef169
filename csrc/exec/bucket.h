/* Shape buckets in eager mode: one program serves every shape of a bucket, so a sequence length
 * that grows by one token does not compile every op again.
 *
 * Which dims: a call's site (its kind: op, argument dtypes and ranks, non-tensor arguments, and
 * the sizes of a model's parameters among its arguments; in the context of the calls before it
 * and of the last call that read a parameter) remembers the sizes it first ran with; a dim whose size
 * later differs is padded from then on (as Dynamo's automatic dynamic shapes do). A workload
 * whose shapes never change compiles exact programs only, and one whose calls repeat (a
 * fixed-shape loop whose sites collide) runs exact programs only after its first pass (bucket.c:
 * a site settles).
 * A site whose views move (an offset, or the length of a storage's buffer, differs from its first
 * call's) runs the bucket's program too, nothing padded: offsets are inputs there, not part of the
 * program, so the last token of growing ids costs no program per step.
 * How far: the bucket policy (TORCH_PJRT_SHAPE_BUCKETS) rounds a padded size up: "pow2" (the
 * default, powers of two from 16: 2..16 -> 16, 17..32 -> 32), "pow2:N" (from N), a list "8,32,128"
 * (the first that holds the size; past the last, powers of two), or "off" (exact shapes only).
 * Sizes 0 and 1 are never padded (1 broadcasts).
 * How: the program reads each tensor argument out of its storage with the view's live sizes,
 * strides and offset as inputs (a gather), the padding reading as the row's fill (ops/op.h:
 * tp_pad_t), runs the op's emitter on the bucket's shape (tp_op_emit_live for an op that must
 * know where live values end: cat along a padded dim), and writes each output's live values
 * to the front of a storage buffer of the bucket's size: storages may hold more elements than
 * their tensors (tp_storage_buffer_numel >= tp_storage_elems); the rest is undefined and never
 * read. tp_bucket_run is the eager executor's (under the executor lock); the policy and the
 * counters are for anyone. */
#ifndef TP_EXEC_BUCKET_H_
#define TP_EXEC_BUCKET_H_

#include <stdbool.h>
#include <stdint.h>

#include "exec/eager.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs the call (as tp_eager_run, on |device|) as a bucketed program when the policy, the row
 * and the call allow it; *out_ran says whether it did (else the caller runs it exactly). */
tp_status_t *tp_bucket_run(int op, const tp_eager_arg_t *args, int n_args,
                           const tp_meta_t *out_metas, const tp_view_t *outs, int n_out,
                           int device, bool *out_ran);

/* While paused (on this thread), calls run exactly: for callers that hand a copy's buffer to a
 * program expecting its exact length (a collective's dense temporaries), and for calls whose
 * results must not depend on what ran before (the glue's, under PyTorch's deterministic mode).
 * Returns the previous state. */
bool tp_bucket_pause(bool paused);

/* The policy's size for a padded dim of live size |size|. */
int64_t tp_bucket_size(int64_t size);
/* Whether buckets are on (the policy is not "off"). */
bool tp_bucket_enabled(void);
/* Calls run bucketed, and bucket programs compiled, since the last reset. */
int64_t tp_bucket_calls(void);
int64_t tp_bucket_compiles(void);
void tp_bucket_reset_stats(void);

#ifdef __cplusplus
}
#endif
#endif  /* TP_EXEC_BUCKET_H_ */
