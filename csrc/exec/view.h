/* A strided view of a storage: what a tensor argument of either executor is, and what the glue
 * describes a tpu tensor as. Knows nothing of PyTorch. */
#ifndef TP_EXEC_VIEW_H_
#define TP_EXEC_VIEW_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"
#include "hlo/builder.h" /* TP_MAX_DIMS */
#include "runtime/storage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A strided view of a storage, in elements of |dtype|. */
typedef struct {
  tp_storage_t *storage; /* borrowed */
  tp_dtype_t dtype;
  int ndim;
  int64_t sizes[TP_MAX_DIMS];
  int64_t strides[TP_MAX_DIMS];
  int64_t offset;
} tp_view_t;

int64_t tp_view_numel(const tp_view_t *v);
/* Dense in row-major order (size-1 dims may have any stride). */
bool tp_view_contiguous(const tp_view_t *v);
/* The whole storage, dense, in order. */
bool tp_view_is_whole(const tp_view_t *v);
/* The whole storage, dense in some order of its dims (a channels-last or transposed tensor
 * that fills its storage): |out_perm| (may be NULL) gets the dims from the slowest to the
 * fastest, the order in which the storage holds them. */
bool tp_view_is_whole_permuted(const tp_view_t *v, int64_t *out_perm);
/* Elements of |dtype| the storage holds. */
int64_t tp_storage_elems(const tp_storage_t *s, tp_dtype_t dtype);
/* INVALID_ARGUMENT when the view reaches outside its storage. */
tp_status_t *tp_view_check_bounds(const tp_view_t *v);

#ifdef __cplusplus
}
#endif
#endif  /* TP_EXEC_VIEW_H_ */
