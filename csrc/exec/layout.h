/* The strides PyTorch's CPU kernels give a fresh output of a call (the row's tp_op_layout rule
 * applied to the call's argument views), so the eager glue allocates outputs as CPU would: a
 * channels-last convolution's output is channels-last, `x.t().exp()` is transposed like x.
 * Knows nothing of PyTorch itself: its rules are restated here. */
#ifndef TP_EXEC_LAYOUT_H_
#define TP_EXEC_LAYOUT_H_

#include <stdbool.h>
#include <stdint.h>

#include "exec/eager.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fills |out_strides| (out->ndim of them, in elements) for a fresh output of shape |out| of a
 * call of table op |op| with |args|; false (strides untouched) when that layout is row-major. */
bool tp_exec_output_strides(int op, const tp_eager_arg_t *args, int n_args, const tp_meta_t *out,
                            int64_t *out_strides);

/* PyTorch's layout predicates of a strided shape, as its tensors compute them. */
bool tp_layout_non_overlapping_dense(int ndim, const int64_t *sizes, const int64_t *strides);
/* Channels-last (4-d) or channels-last-3d (5-d) strides "suggest" that format
 * (Tensor.suggest_memory_format). */
bool tp_layout_suggests_channels_last(int ndim, const int64_t *sizes, const int64_t *strides);
/* The dense channels-last strides of a 4-d or 5-d shape. */
void tp_layout_channels_last_strides(int ndim, const int64_t *sizes, int64_t *out_strides);

#ifdef __cplusplus
}
#endif
#endif  /* TP_EXEC_LAYOUT_H_ */
