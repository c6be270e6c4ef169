/* Linear algebra family: mm, addmm, bmm, baddbmm, dot, mv, addmv as dot_general. */
#include <string.h>

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

/* Products of half types accumulate and round once in f32, as PyTorch's CPU kernels do; the
 * caller converts the result back. */
static tp_hlo_value_t emit_matmul(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t y) {
  const int64_t xc = 1, yc = 0;
  return tp_hlo_dot_general(b, x, y, 0, NULL, NULL, 1, &xc, &yc, tp_math_dtype(x.dtype));
}

/* x [M, K] @ y [K, N] where y is a transposed view (|y_arg| not contiguous: nn.Linear's weight,
 * [N, K] as it lies). XLA's CPU backend transposes such a y before its dot, at a small fraction
 * of memory speed (9 ms for a 768x3072 weight, the product of 64 rows with it 1.4 ms), so when
 * x and the product are the smaller operands the product is computed transposed, y^T [N, K]
 * (as it lies) @ x^T, behind a barrier that keeps XLA from folding the result's transpose back
 * into the dot: x and the result move instead. Only for a weight of TP_BIG_TRANSPOSE elements
 * or more: smaller ones transpose in cache, fast, and keep the plain form's rounding. */
static tp_hlo_value_t emit_matmul_rhs(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t y,
                                      const tp_op_arg_t *y_arg) {
  int64_t m = x.dims[0], k = x.dims[1], n = y.dims[1];
  if (y_arg->contiguous || x.ndim != 2 || n * k < TP_BIG_TRANSPOSE || m * (k + n) >= n * k)
    return emit_matmul(b, x, y);
  const int64_t c = 1, perm[2] = {1, 0};
  tp_hlo_value_t r = tp_hlo_dot_general(b, tp_hlo_transpose(b, y, perm), x, 0, NULL, NULL, 1, &c,
                                        &c, tp_math_dtype(x.dtype)); /* [N, M] */
  return tp_hlo_transpose(b, tp_hlo_optimization_barrier(b, r), perm);
}

void tp_emit_mm(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  (void)op, (void)n_args;
  out[0] = tp_hlo_convert(b, emit_matmul_rhs(b, in[0], in[1], &args[1]), out_meta->dtype);
}

/* beta * in[self_i] + alpha * p, with beta at args[scal_i] and alpha at args[scal_i + 1] when
 * present, in p's (accumulation) dtype. beta == 0 ignores self entirely, NaN included. */
static tp_hlo_value_t scale_add(tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                                const tp_hlo_value_t *in, tp_hlo_value_t p, int self_i, int scal_i) {
  tp_meta_t m = {.dtype = p.dtype, .ndim = p.ndim};
  memcpy(m.sizes, p.dims, sizeof(int64_t) * (size_t)p.ndim);
  tp_hlo_value_t s = tp_emit_cast_to(b, in[self_i], &m);
  if (n_args > scal_i && args[scal_i].kind == TP_ARG_SCALAR) {
    tp_hlo_value_t beta = tp_emit_cast_to(b, in[scal_i], &m);
    tp_hlo_value_t zero = tp_k(b, 0, p);
    s = tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_NE, beta, zero), tp_hlo_binary(b, TP_HLO_MUL, s, beta),
                      zero);
  }
  if (n_args > scal_i + 1 && args[scal_i + 1].kind == TP_ARG_SCALAR)
    p = tp_hlo_binary(b, TP_HLO_MUL, p, tp_emit_cast_to(b, in[scal_i + 1], &m));
  return tp_hlo_binary(b, TP_HLO_ADD, s, p);
}

/* addmm(self, mat1, mat2, *, beta, alpha) = beta * self + alpha * (mat1 @ mat2). */
tp_status_t *tp_infer_addmm(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                            int *n_out) {
  if (n_args < 3 || args[0].kind != TP_ARG_TENSOR || args[1].kind != TP_ARG_TENSOR ||
      args[2].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected three tensors", op->name);
  TP_RETURN_IF_ERROR(check_mm(op->name, &args[1].meta, &args[2].meta));
  tp_meta_t prod = {.dtype = args[1].meta.dtype, .ndim = 2,
                    .sizes = {args[1].meta.sizes[0], args[2].meta.sizes[1]}};
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
  tp_hlo_value_t p = emit_matmul_rhs(b, in[1], in[2], &args[2]);
  out[0] = tp_hlo_convert(b, scale_add(b, args, n_args, in, p, 0, 3), out_meta->dtype);
}

/* bmm(self, mat2) and baddbmm(self, batch1, batch2, *, beta, alpha): TP_BMM_BADDBMM;
 * TP_BMM_ADDBMM addbmm, which also sums the batch: beta * self + alpha * sum_i batch1[i] @ batch2[i]. */
tp_status_t *tp_infer_bmm(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                          int *n_out) {
  int a = op->code != TP_BMM_BMM ? 1 : 0; /* self first: a scaled add */
  if (n_args < a + 2 || args[a].kind != TP_ARG_TENSOR || args[a + 1].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected tensors", op->name);
  const tp_meta_t *x = &args[a].meta, *y = &args[a + 1].meta;
  if (x->ndim != 3 || y->ndim != 3)
    return tp_make_status(TP_INVALID_ARGUMENT, "batch1 must be a 3D tensor");
  if (x->sizes[0] != y->sizes[0] || x->sizes[2] != y->sizes[1])
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "Expected size for first two dimensions of batch2 tensor to be: "
                          "[%lld, %lld] but got: [%lld, %lld].", (long long)x->sizes[0],
                          (long long)x->sizes[2], (long long)y->sizes[0], (long long)y->sizes[1]);
  if (x->dtype != y->dtype)
    return tp_make_status(TP_INVALID_ARGUMENT, "expected scalar type %s but found %s",
                          tp_dtype_name(x->dtype), tp_dtype_name(y->dtype));
  tp_meta_t m = {.dtype = x->dtype, .ndim = 3, .sizes = {x->sizes[0], x->sizes[1], y->sizes[2]}};
  if (op->code == TP_BMM_ADDBMM) { /* addbmm sums over the batch too */
    m.ndim = 2;
    m.sizes[0] = x->sizes[1];
    m.sizes[1] = y->sizes[2];
  }
  if (op->code != TP_BMM_BMM) {
    tp_meta_t shape;
    TP_RETURN_IF_ERROR(tp_broadcast_shapes(&args[0].meta, &m, &shape));
    if (shape.ndim != m.ndim || memcmp(shape.sizes, m.sizes, sizeof(int64_t) * (size_t)m.ndim))
      return tp_make_status(TP_INVALID_ARGUMENT,
                            "%s: self of %d dims does not broadcast to the product's shape",
                            op->name, args[0].meta.ndim);
    for (int i = 3; i < n_args && i < 5; i++)
      if (args[i].kind == TP_ARG_SCALAR) args[i].scalar_dtype = x->dtype;
  }
  out[0] = m;
  *n_out = 1;
  return NULL;
}

void tp_emit_bmm(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                 const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  int a = op->code != TP_BMM_BMM ? 1 : 0; /* self first: a scaled add */
  const int64_t xb = 0, yb = 0, xc = 2, yc = 1, xcs[2] = {0, 2}, ycs[2] = {0, 1};
  tp_hlo_value_t p = op->code == TP_BMM_ADDBMM
                         ? tp_hlo_dot_general(b, in[a], in[a + 1], 0, NULL, NULL, 2, xcs, ycs,
                                              tp_math_dtype(in[a].dtype))
                         : tp_hlo_dot_general(b, in[a], in[a + 1], 1, &xb, &yb, 1, &xc, &yc,
                                              tp_math_dtype(in[a].dtype));
  if (op->code != TP_BMM_BMM) p = scale_add(b, args, n_args, in, p, 0, 3);
  out[0] = tp_hlo_convert(b, p, out_meta->dtype);
}

/* dot(self, tensor) TP_MV_DOT; mv(self, vec) TP_MV_MV; addmv(self, mat, vec, *, beta, alpha)
 * TP_MV_ADDMV. */
tp_status_t *tp_infer_matvec(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                             int *n_out) {
  int a = op->code == TP_MV_ADDMV ? 1 : 0;
  if (n_args < a + 2 || args[a].kind != TP_ARG_TENSOR || args[a + 1].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected tensors", op->name);
  const tp_meta_t *x = &args[a].meta, *y = &args[a + 1].meta;
  if (x->dtype != y->dtype)
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "%s: expected both vectors to have same dtype, but found %s and %s",
                          op->name, tp_dtype_name(x->dtype), tp_dtype_name(y->dtype));
  int want = op->code == TP_MV_DOT ? 1 : 2;
  if (x->ndim != want || y->ndim != 1 || x->sizes[want - 1] != y->sizes[0])
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: size mismatch (%d-D x %d-D)", op->name,
                          x->ndim, y->ndim);
  tp_meta_t m = {.dtype = x->dtype, .ndim = op->code == TP_MV_DOT ? 0 : 1, .sizes = {x->sizes[0]}};
  if (op->code == TP_MV_ADDMV)
    for (int i = 3; i < n_args && i < 5; i++)
      if (args[i].kind == TP_ARG_SCALAR) args[i].scalar_dtype = x->dtype;
  out[0] = m;
  *n_out = 1;
  return NULL;
}

void tp_emit_matvec(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                    int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                    tp_hlo_value_t *out) {
  int a = op->code == TP_MV_ADDMV ? 1 : 0;
  const int64_t xc = op->code == TP_MV_DOT ? 0 : 1, yc = 0;
  tp_hlo_value_t p = tp_hlo_dot_general(b, in[a], in[a + 1], 0, NULL, NULL, 1, &xc, &yc,
                                        tp_math_dtype(in[a].dtype));
  if (op->code == TP_MV_ADDMV) p = scale_add(b, args, n_args, in, p, 0, 3);
  out[0] = tp_hlo_convert(b, p, out_meta->dtype);
}

/* linalg_cross(self, other, *, dim): broadcast, then per component
 * (a1 b2 - a2 b1, a2 b0 - a0 b2, a0 b1 - a1 b0) along dim, which must have size 3. */
tp_status_t *tp_infer_cross(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                            int *n_out) {
  if (n_args < 2 || args[0].kind != TP_ARG_TENSOR || args[1].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "linalg.cross: expected two tensors");
  if (args[0].meta.ndim != args[1].meta.ndim)
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "linalg.cross: inputs must have the same number of dimensions.");
  tp_meta_t m;
  TP_RETURN_IF_ERROR(tp_broadcast_shapes(&args[0].meta, &args[1].meta, &m));
  m.dtype = tp_result_type(args, 2);
  if (m.dtype == TP_DTYPE_BOOL) return tp_make_status(TP_UNIMPLEMENTED, "cross of bool"); /* CPU raises */
  int64_t d = n_args > 2 && args[2].kind == TP_ARG_INT ? args[2].i : -1;
  int dim = tp_norm_dim(d, m.ndim);
  if (dim < 0 || m.ndim == 0)
    return tp_make_status(TP_OUT_OF_RANGE, "Dimension out of range (expected to be in range of "
                          "[%d, %d], but got %lld)", -(m.ndim ? m.ndim : 1), (m.ndim ? m.ndim : 1) - 1,
                          (long long)d);
  if (args[0].meta.sizes[dim] != 3 || args[1].meta.sizes[dim] != 3)
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "linalg.cross: inputs dimension %d must have length 3. Got %lld and %lld",
                          (int)d, (long long)args[0].meta.sizes[dim], (long long)args[1].meta.sizes[dim]);
  out[0] = m;
  *n_out = 1;
  return NULL;
}

void tp_emit_cross(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                   const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  const tp_meta_t *om = &out_meta[0];
  int dim = tp_norm_dim(n_args > 2 && args[2].kind == TP_ARG_INT ? args[2].i : -1, om->ndim);
  tp_dtype_t md = tp_math_dtype(om->dtype);
  tp_hlo_value_t x = tp_emit_cast_shape(b, in[0], md, om), y = tp_emit_cast_shape(b, in[1], md, om);
  tp_hlo_value_t xa[3], ya[3];
  int64_t start[TP_MAX_DIMS] = {0}, limit[TP_MAX_DIMS], step[TP_MAX_DIMS];
  for (int i = 0; i < om->ndim; i++) {
    limit[i] = om->sizes[i];
    step[i] = 1;
  }
  for (int c = 0; c < 3; c++) {
    start[dim] = c;
    limit[dim] = c + 1;
    xa[c] = tp_hlo_slice(b, x, start, limit, step);
    ya[c] = tp_hlo_slice(b, y, start, limit, step);
  }
  tp_hlo_value_t parts[3];
  for (int c = 0; c < 3; c++) {
    int i = (c + 1) % 3, j = (c + 2) % 3;
    /* Each product rounds to the tensor's type first, as the CPU kernel computes in it. */
    tp_hlo_value_t p = tp_hlo_convert(b, tp_hlo_binary(b, TP_HLO_MUL, xa[i], ya[j]), om->dtype);
    tp_hlo_value_t q = tp_hlo_convert(b, tp_hlo_binary(b, TP_HLO_MUL, xa[j], ya[i]), om->dtype);
    parts[c] = tp_hlo_binary(b, TP_HLO_SUB, tp_hlo_convert(b, p, md), tp_hlo_convert(b, q, md));
  }
  out[0] = tp_hlo_convert(b, tp_hlo_concatenate(b, parts, 3, dim), om->dtype);
}
