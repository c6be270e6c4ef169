/* Program assembly both executors share: a program's parameters are whole storages (1-D arrays
 * of their buffer's element type); these read a view out of one, reinterpret a storage as another
 * dtype, write a value back through a view, and make scalar constants. Private to exec/. */
#ifndef TP_EXEC_PROGRAM_H_
#define TP_EXEC_PROGRAM_H_

#include "exec/view.h"
#include "hlo/builder.h"
#include "ops/op.h"

/* The 1-D contents of a storage reinterpreted as |dtype| (|nbytes|: the storage's size). */
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
/* Writes |value| (v's sizes and dtype) into the 1-D array |x| of v's dtype at view |v|. */
tp_hlo_value_t tp_program_write_view(tp_hlo_builder_t *b, tp_hlo_value_t x, const tp_view_t *v,
                                     tp_hlo_value_t value);
/* Scalar |a| as a program constant of a->scalar_dtype (converted as a scalar input would be). */
tp_hlo_value_t tp_program_scalar_constant(tp_hlo_builder_t *b, const tp_op_arg_t *a);

#endif  /* TP_EXEC_PROGRAM_H_ */
