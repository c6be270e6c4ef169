/* Program assembly both executors share: a program's parameters are whole storages (1-D arrays
 * of their buffer's element type); these read a view out of one, reinterpret a storage as another
 * dtype, write a value back through a view, and make scalar constants. Private to exec/. */
#ifndef TP_EXEC_PROGRAM_H_
#define TP_EXEC_PROGRAM_H_

#include "exec/eager.h"
#include "exec/view.h"
#include "hlo/builder.h"
#include "ops/op.h"

/* The 1-D contents of a storage reinterpreted as |dtype| (|nbytes|: the storage's size). */
tp_hlo_value_t tp_program_as_dtype(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_dtype_t dtype,
                                   int64_t nbytes);
/* |x| (any shape) flattened into a storage's contents: complex values as their interleaved
 * parts (tp_dtype_storage). */
tp_hlo_value_t tp_program_to_storage(tp_hlo_builder_t *b, tp_hlo_value_t x);
/* The dims in which storage |v|'s storage holds |v| when |v| writes all of it in |dtype|, in
 * order or permuted (a channels-last output): their count, else 0. */
int tp_program_storage_dims(const tp_view_t *v, tp_dtype_t dtype, int64_t *dims);
/* A storage's new contents |flat| (tp_program_to_storage's form) as a program's result: shaped
 * |dims| (|ndim| of them, from tp_program_storage_dims or a graph value's own) where the platform
 * reads a buffer whatever its shape (tp_exec_buffers_any_shape), so that XLA computes the value
 * in its own dims (a 1-D result makes a fusion of windows index every element back into them: a
 * 7x7 depthwise convolution ran 5-10x slower); else |flat|. */
tp_hlo_value_t tp_program_result(tp_hlo_builder_t *b, tp_hlo_value_t flat, int ndim,
                                 const int64_t *dims);
/* Storage |s| as a 1-D array of |dtype|: its parameter |param|, or zeros when it has no buffer
 * yet (param NULL). */
tp_hlo_value_t tp_program_storage(tp_hlo_builder_t *b, const tp_hlo_value_t *param,
                                  const tp_storage_t *s, tp_dtype_t dtype);
/* Reads view |v| out of the 1-D array |x| (already of v's dtype). */
tp_hlo_value_t tp_program_read_view(tp_hlo_builder_t *b, tp_hlo_value_t x, const tp_view_t *v);
/* Writes |value| (v's sizes and dtype) into the 1-D array |x| of v's dtype at view |v|. */
tp_hlo_value_t tp_program_write_view(tp_hlo_builder_t *b, tp_hlo_value_t x, const tp_view_t *v,
                                     tp_hlo_value_t value);
/* Whether a call's writes leave part of storage |slot|'s old contents: one of its outputs on
 * the slot (|out_slot|) is not the whole storage (in order or permuted), or two are. */
bool tp_program_slot_partial(const tp_view_t *outs, const int *out_slot, int n_out, int slot);
/* What storage |slot|'s buffer is after a call writing it (|outs|, |out_slot|), given what it
 * was (|has|: a buffer of |dtype| and |numel| elements): partial writes in the buffer's own type
 * keep its length (it may hold more than the storage: bucket.h); anything else leaves exactly the
 * storage, in the last output's storage type. */
void tp_program_slot_after(const tp_storage_t *s, bool has, tp_dtype_t dtype, int64_t numel,
                           const tp_view_t *outs, const int *out_slot, int n_out, int slot,
                           tp_dtype_t *new_dtype, int64_t *new_numel);
/* Emits one op call: reads its tensor arguments (|args[i].view|) out of the current contents of
 * their storages' slots (|arg_slot|; |cur[s]| when |has[s]|, else zeros of |storages[s]|'s
 * size), takes scalar arguments from |scalars| (in argument order), runs the op's emitter, and
 * writes each result through its view (|outs|) into its slot's contents, updating |cur| and
 * |has|. Both executors assemble programs from this: eager one call, fused a region of them. */
void tp_program_emit_call(tp_hlo_builder_t *b, const tp_op_def_t *op, const tp_eager_arg_t *args,
                          int n_args, const int *arg_slot, const tp_hlo_value_t *scalars,
                          const tp_meta_t *out_metas, const tp_view_t *outs, const int *out_slot,
                          int n_out, tp_storage_t *const *storages, tp_hlo_value_t *cur, bool *has);
/* Scalar |a| as a program constant of a->scalar_dtype (converted as a scalar input would be). */
tp_hlo_value_t tp_program_scalar_constant(tp_hlo_builder_t *b, const tp_op_arg_t *a);

#endif  /* TP_EXEC_PROGRAM_H_ */
