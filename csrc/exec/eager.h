/* The eager executor: runs one op call on device storages as a small compiled program.
 * It turns the call into a signature (op, argument layouts, attributes; scalar values excluded),
 * finds the executable in the cache or builds it (reading strided views inside the program and
 * writing outputs back into their storages, donating the old buffers), and enqueues it.
 * Binds ops/ (emitters) to runtime/ (PJRT); knows nothing of PyTorch.
 * Thread-safe: calls are serialized by the executor lock (exec.h). */
#ifndef TP_EXEC_EAGER_H_
#define TP_EXEC_EAGER_H_

#include "exec/view.h"
#include "ops/op.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One argument of a call: the op-level description plus, for tensors, the view. SCALAR values
 * live in arg.f (float types) or arg.i (integers and bool). */
typedef struct {
  tp_op_arg_t arg;
  tp_view_t view;
  /* A model's parameter (the glue's judgement: a leaf that requires grad, or a view of one):
   * its sizes say where in a model the call is (exec/bucket.c: a site). */
  bool param;
} tp_eager_arg_t;

/* Infers output metas of op |op| (a table index) and fills scalar_dtype of SCALAR args.
 * |out_metas| has room for TP_MAX_OUTS entries. */
tp_status_t *tp_eager_infer(int op, tp_eager_arg_t *args, int n_args, tp_meta_t *out_metas,
                            int *n_out);
/* Runs |op| writing its outputs into |outs| (whose shapes equal |out_metas|; their dtypes may
 * differ, in which case results are converted). Inputs and outputs may share storages. */
tp_status_t *tp_eager_run(int op, tp_eager_arg_t *args, int n_args, const tp_meta_t *out_metas,
                          const tp_view_t *outs, int n_out);

/* A fresh, unwritten storage on |device| and |out_v|, a contiguous view of |dtype| over all of it
 * with |shape_of|'s sizes; the caller releases *out_s. */
tp_status_t *tp_eager_temp_storage(int device, tp_dtype_t dtype, const tp_view_t *shape_of,
                                   tp_storage_t **out_s, tp_view_t *out_v);
/* dst <- src with broadcasting and dtype conversion, both on the device. */
tp_status_t *tp_eager_copy(const tp_view_t *dst, const tp_view_t *src);
/* Like tp_eager_copy, conjugating (|conj|) and/or negating (|neg|) the values on the way: how a
 * copy between tensors whose lazy conjugate/negative bits differ resolves them. */
tp_status_t *tp_eager_copy_bits(const tp_view_t *dst, const tp_view_t *src, bool conj, bool neg);
/* dst <- dense host data of dst's dtype and shape. */
tp_status_t *tp_eager_copy_from_host(const tp_view_t *dst, const void *data);
/* The same, returning once enqueued when |dst| is a whole storage: *out_done (caller owns; NULL
 * when the copy already completed) completes once |data| is no longer read, which it must not
 * change until then (tp_event_await). */
tp_status_t *tp_eager_copy_from_host_async(const tp_view_t *dst, const void *data,
                                           PJRT_Event **out_done);
/* dense host memory (src's dtype and shape) <- src. Blocks until the data is there. */
tp_status_t *tp_eager_copy_to_host(const tp_view_t *src, void *data);
/* Where |v| (dense, row-major) can be read and written in place on the host, for devices whose
 * memory is host memory (the CPU plugin): every execution enqueued before has finished, and the
 * address stays valid until a program next writes the view's storage. *out_ptr is NULL (and the
 * caller copies instead) when the device or the view does not allow it: another platform, a
 * storage never written, a view whose dtype its storage's buffer does not hold, complex. A
 * synchronizing call: it reports an earlier asynchronous failure. */
tp_status_t *tp_eager_host_alias(const tp_view_t *v, void **out_ptr);

#ifdef __cplusplus
}
#endif
#endif  /* TP_EXEC_EAGER_H_ */
