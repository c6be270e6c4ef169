/* Linear algebra family: mm and addmm as dot_general. */
#include "ops/families.h"

static tp_status_t *check_mm(const char *name, const tp_meta_t *a, const tp_meta_t *b) {
  if (a->ndim != 2 || b->ndim != 2)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected 2-D tensors, got %d-D and %d-D",
                          name, a->ndim, b->ndim);
  if (a->sizes[1] != b->sizes[0])
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
                          (long long)a->sizes[0], (long long)a->sizes[1], (long long)b->sizes[0],
                          (long long)b->sizes[1]);
  if (a->dtype != b->dtype)
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "expected m1 and m2 to have the same dtype, but got: %s != %s",
                          tp_dtype_name(a->dtype), tp_dtype_name(b->dtype));
  return NULL;
}

tp_status_t *tp_infer_mm(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                         int *n_out) {
  if (n_args < 2 || args[0].kind != TP_ARG_TENSOR || args[1].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected two tensors", op->name);
  TP_RETURN_IF_ERROR(check_mm(op->name, &args[0].meta, &args[1].meta));
  out[0].dtype = args[0].meta.dtype;
  out[0].ndim = 2;
  out[0].sizes[0] = args[0].meta.sizes[0];
  out[0].sizes[1] = args[1].meta.sizes[1];
  *n_out = 1;
  return NULL;
}

static tp_hlo_value_t emit_matmul(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t y) {
  const int64_t xc = 1, yc = 0;
  return tp_hlo_dot_general(b, x, y, 0, NULL, NULL, 1, &xc, &yc, x.dtype);
}

void tp_emit_mm(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  (void)op, (void)args, (void)n_args, (void)out_meta;
  out[0] = emit_matmul(b, in[0], in[1]);
}

/* addmm(self, mat1, mat2, *, beta, alpha) = beta * self + alpha * (mat1 @ mat2). */
tp_status_t *tp_infer_addmm(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                            int *n_out) {
  if (n_args < 3 || args[0].kind != TP_ARG_TENSOR || args[1].kind != TP_ARG_TENSOR ||
      args[2].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected three tensors", op->name);
  TP_RETURN_IF_ERROR(check_mm(op->name, &args[1].meta, &args[2].meta));
  tp_meta_t prod = {args[1].meta.dtype, 2, {args[1].meta.sizes[0], args[2].meta.sizes[1]}};
  tp_meta_t shape;
  TP_RETURN_IF_ERROR(tp_broadcast_shapes(&args[0].meta, &prod, &shape));
  if (shape.ndim != 2 || shape.sizes[0] != prod.sizes[0] || shape.sizes[1] != prod.sizes[1])
    return tp_make_status(TP_INVALID_ARGUMENT, "addmm: self cannot be broadcast to %lldx%lld",
                          (long long)prod.sizes[0], (long long)prod.sizes[1]);
  if (args[0].meta.dtype != prod.dtype)
    return tp_make_status(TP_INVALID_ARGUMENT, "self and mat2 must have the same dtype, but got "
                          "%s and %s", tp_dtype_name(args[0].meta.dtype),
                          tp_dtype_name(prod.dtype));
  for (int i = 3; i < n_args && i < 5; i++)
    if (args[i].kind == TP_ARG_SCALAR) args[i].scalar_dtype = prod.dtype;
  out[0] = prod;
  *n_out = 1;
  return NULL;
}

void tp_emit_addmm(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                   int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                   tp_hlo_value_t *out) {
  (void)op;
  tp_hlo_value_t p = emit_matmul(b, in[1], in[2]);
  tp_hlo_value_t s = tp_emit_cast_to(b, in[0], out_meta);
  if (n_args > 3 && args[3].kind == TP_ARG_SCALAR) /* beta == 0 ignores self, NaN included */
    s = tp_hlo_select(b, tp_emit_cast_to(b, tp_hlo_compare(b, TP_CMP_NE, in[3],
                                                           tp_hlo_constant(b, in[3].dtype, 0)),
                                          &(tp_meta_t){TP_DTYPE_BOOL, out_meta->ndim,
                                                       {out_meta->sizes[0], out_meta->sizes[1]}}),
                      tp_hlo_binary(b, TP_HLO_MUL, s, tp_emit_cast_to(b, in[3], out_meta)),
                      tp_emit_cast_to(b, tp_hlo_constant(b, out_meta->dtype, 0), out_meta));
  if (n_args > 4 && args[4].kind == TP_ARG_SCALAR)
    p = tp_hlo_binary(b, TP_HLO_MUL, p, tp_emit_cast_to(b, in[4], out_meta));
  out[0] = tp_hlo_binary(b, TP_HLO_ADD, s, p);
}
