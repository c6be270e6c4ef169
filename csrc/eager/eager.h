/* The eager executor: runs one op call on device storages as a small compiled program.
 * It turns the call into a signature (op, argument layouts, attributes; scalar values excluded),
 * finds the executable in the cache or builds it (reading strided views inside the program and
 * writing outputs back into their storages, donating the old buffers), and enqueues it.
 * Binds ops/ (emitters) to runtime/ (PJRT); knows nothing of PyTorch.
 * Thread-safe: calls are serialized by one executor lock. */
#ifndef TP_EAGER_EAGER_H_
#define TP_EAGER_EAGER_H_

#include "ops/op.h"
#include "runtime/client.h"
#include "runtime/exec_cache.h"
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

/* One argument of a call: the op-level description plus, for tensors, the view. SCALAR values
 * live in arg.f (float types) or arg.i (integers and bool). */
typedef struct {
  tp_op_arg_t arg;
  tp_view_t view;
} tp_eager_arg_t;

/* Creates the process's client and executable cache. |cache_dir| NULL/"" disables the disk
 * cache; *out_warning (caller owns, may be NULL) explains a disk cache that could not be used. */
tp_status_t *tp_eager_init(const char *plugin_path, const char *cache_dir, size_t cache_capacity,
                           char **out_warning);
/* Borrowed; NULL before a successful init. */
tp_client_t *tp_eager_client(void);
tp_exec_cache_t *tp_eager_cache(void);
/* A StableHLO builder tuned for the client's backend (tp_hlo_builder_set_xla_cpu); caller owns. */
tp_status_t *tp_eager_builder_create(tp_hlo_builder_t **out_builder);
/* Every op waits for completion (errors point at the op that caused them). */
void tp_eager_set_blocking(int blocking);

/* Infers output metas of op |op| (a table index) and fills scalar_dtype of SCALAR args.
 * |out_metas| has room for TP_MAX_OUTS entries. */
tp_status_t *tp_eager_infer(int op, tp_eager_arg_t *args, int n_args, tp_meta_t *out_metas,
                            int *n_out);
/* Runs |op| writing its outputs into |outs| (whose shapes equal |out_metas|; their dtypes may
 * differ, in which case results are converted). Inputs and outputs may share storages. */
tp_status_t *tp_eager_run(int op, tp_eager_arg_t *args, int n_args, const tp_meta_t *out_metas,
                          const tp_view_t *outs, int n_out);

/* dst <- src with broadcasting and dtype conversion, both on the device. */
tp_status_t *tp_eager_copy(const tp_view_t *dst, const tp_view_t *src);
/* Like tp_eager_copy, conjugating (|conj|) and/or negating (|neg|) the values on the way: how a
 * copy between tensors whose lazy conjugate/negative bits differ resolves them. */
tp_status_t *tp_eager_copy_bits(const tp_view_t *dst, const tp_view_t *src, bool conj, bool neg);
/* dst <- dense host data of dst's dtype and shape. */
tp_status_t *tp_eager_copy_from_host(const tp_view_t *dst, const void *data);
/* dense host memory (src's dtype and shape) <- src. Blocks until the data is there. */
tp_status_t *tp_eager_copy_to_host(const tp_view_t *src, void *data);

#ifdef __cplusplus
}
#endif
#endif  /* TP_EAGER_EAGER_H_ */
