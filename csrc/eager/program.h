/* Program-assembly helpers the eager executor and the graph executor share. Private to eager/. */
#ifndef TP_EAGER_PROGRAM_H_
#define TP_EAGER_PROGRAM_H_

#include "eager/eager.h"
#include "hlo/builder.h"

int64_t tp_view_numel(const tp_view_t *v);
/* Elements of |dtype| the storage holds. */
int64_t tp_storage_elems(const tp_storage_t *s, tp_dtype_t dtype);
/* INVALID_ARGUMENT when the view reaches outside its storage. */
tp_status_t *tp_view_check_bounds(const tp_view_t *v);

/* The 1-D contents of a storage slot reinterpreted as |dtype| (|nbytes|: the storage's size). */
tp_hlo_value_t tp_program_as_dtype(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_dtype_t dtype,
                                   int64_t nbytes);
/* |x| (any shape) flattened into a storage's contents: complex values as their interleaved
 * parts (tp_dtype_storage). */
tp_hlo_value_t tp_program_to_storage(tp_hlo_builder_t *b, tp_hlo_value_t x);
/* Storage |s| as a 1-D array of |dtype|: its parameter |param|, or zeros when it has no buffer
 * yet (param NULL). */
tp_hlo_value_t tp_program_storage(tp_hlo_builder_t *b, const tp_hlo_value_t *param,
                                  const tp_storage_t *s, tp_dtype_t dtype);
/* Reads view |v| out of the 1-D array |x| (already of v's dtype). */
tp_hlo_value_t tp_program_read_view(tp_hlo_builder_t *b, tp_hlo_value_t x, const tp_view_t *v);

/* Scalar |a| as a program constant of a->scalar_dtype (converted as a scalar input would be). */
tp_hlo_value_t tp_program_scalar_constant(tp_hlo_builder_t *b, const tp_op_arg_t *a);
/* A fresh id for one execution's scalar inputs (under the executor lock). */
uint64_t tp_eager_next_call(void);
/* A device buffer holding scalar |a| as a->scalar_dtype, for the execution |call|
 * (tp_eager_next_call). Cached by value and borrowed, except when an earlier scalar of the same
 * call holds the cache slot: then the buffer is also returned in *out_owned (else NULL) and the
 * caller destroys it after enqueuing the execution. Under the executor lock. */
tp_status_t *tp_eager_scalar_buffer(int device, const tp_op_arg_t *a, uint64_t call, void **out,
                                    void **out_owned);

/* Appends to a program key, through |put|, the kind of argument |a| and what of it shapes the
 * program: the dtypes of a scalar (its value too if |scalar_value|), an int, float, string or int
 * list; a tensor's part is the caller's. */
typedef void (*tp_key_put_fn)(void *key, const void *data, size_t n);
void tp_program_key_arg(const tp_op_arg_t *a, bool scalar_value, tp_key_put_fn put, void *key);

/* The executor lock: every program run and buffer swap happens under it. */
void tp_eager_lock(void);
void tp_eager_unlock(void);
int tp_eager_blocking(void);

#endif  /* TP_EAGER_PROGRAM_H_ */
