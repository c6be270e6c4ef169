/* Infer and emit functions of every op family, as op_table.def names them. Private to ops/. */
#ifndef TP_OPS_FAMILIES_H_
#define TP_OPS_FAMILIES_H_

#include "ops/op.h"

#define TP_DECLARE_OP(infer, emit)                                                          \
  tp_status_t *infer(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,  \
                     int *n_out);                                                           \
  void emit(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args, \
            const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out);

/* elementwise.c */
TP_DECLARE_OP(tp_infer_unary, tp_emit_unary)
TP_DECLARE_OP(tp_infer_binary, tp_emit_binary)
TP_DECLARE_OP(tp_infer_copy, tp_emit_copy)
TP_DECLARE_OP(tp_infer_fill, tp_emit_fill)
TP_DECLARE_OP(tp_infer_threshold_backward, tp_emit_threshold_backward)
void tp_emit_relu(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                  const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out);
void tp_emit_zero(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                  const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out);
/* reduce.c */
TP_DECLARE_OP(tp_infer_sum, tp_emit_sum)
/* linalg.c */
TP_DECLARE_OP(tp_infer_mm, tp_emit_mm)
TP_DECLARE_OP(tp_infer_addmm, tp_emit_addmm)

#endif
