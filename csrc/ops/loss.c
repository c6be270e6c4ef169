/* Losses: mse_loss, nll_loss (forward and backward) and binary_cross_entropy with its backward,
 * each with PyTorch's reductions (none, mean, sum). Half types compute in f32; binary cross
 * entropy rounds where CPU's kernel does. Depends on ops/ helpers and hlo/ only. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/families.h"

/* Loss reduction: 0 none, 1 mean, 2 sum (at::Reduction). */
static tp_hlo_value_t reduce_loss(tp_hlo_builder_t *b, tp_hlo_value_t l, int64_t reduction) {
  if (reduction == 0) return l;
  int64_t dims[TP_MAX_DIMS];
  for (int i = 0; i < l.ndim; i++) dims[i] = i;
  tp_hlo_value_t s = tp_hlo_reduce(b, l, tp_hlo_constant(b, l.dtype, 0), TP_HLO_ADD, l.ndim, dims);
  if (reduction == 1)
    s = tp_hlo_binary(b, TP_HLO_DIV, s, tp_hlo_constant(b, l.dtype, (double)tp_hlo_numel(&l)));
  return s;
}

/* mse_loss(self, target, reduction) and mse_loss_backward(grad, self, target, reduction). */
tp_status_t *tp_infer_mse(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                          int *n_out) {
  int t0 = op->code == TP_DIR_BACKWARD ? 1 : 0; /* backward: grad first */
  if (n_args < t0 + 3 || args[t0].kind != TP_ARG_TENSOR || args[t0 + 1].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  tp_meta_t shape;
  TP_RETURN_IF_ERROR(tp_broadcast_shapes(&args[t0].meta, &args[t0 + 1].meta, &shape));
  shape.dtype = tp_result_type(&args[t0], 2);
  out[0] = shape;
  if (op->code == TP_DIR_FORWARD && args[2].i != 0) out[0].ndim = 0;
  *n_out = 1;
  return NULL;
}

void tp_emit_mse(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                 const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  int t0 = op->code == TP_DIR_BACKWARD ? 1 : 0;
  tp_meta_t shape = args[t0].meta;
  tp_broadcast_shapes(&args[t0].meta, &args[t0 + 1].meta, &shape);
  tp_dtype_t md = tp_math_dtype(out_meta->dtype);
  tp_hlo_value_t x = tp_emit_cast_shape(b, in[t0], md, &shape);
  tp_hlo_value_t y = tp_emit_cast_shape(b, in[t0 + 1], md, &shape);
  tp_hlo_value_t d = tp_hlo_binary(b, TP_HLO_SUB, x, y);
  int64_t reduction = args[t0 + 2].i;
  if (op->code == TP_DIR_FORWARD) {
    out[0] = tp_hlo_convert(b, reduce_loss(b, tp_hlo_binary(b, TP_HLO_MUL, d, d), reduction), out_meta->dtype);
    return;
  }
  double scale = reduction == 1 ? 2.0 / (double)tp_hlo_numel(&d) : 2.0;
  tp_hlo_value_t g = tp_emit_cast_shape(b, in[0], md, &shape);
  out[0] = tp_hlo_convert(b, tp_hlo_binary(b, TP_HLO_MUL, tp_hlo_binary(b, TP_HLO_MUL, d, g),
                                           tp_k(b, scale, d)), out_meta->dtype);
}

/* nll_loss_forward(self, target, weight?, reduction, ignore_index) -> (output, total_weight);
 * nll_loss_backward(grad, self, target, weight?, reduction, ignore_index, total_weight).
 * The class is picked with a one-hot mask over the class dim (dim 1, or 0 for 1-D input). */
tp_status_t *tp_infer_nll(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                          int *n_out) {
  int s = op->code == TP_DIR_BACKWARD ? 1 : 0;
  if (n_args < s + 5 || args[s].kind != TP_ARG_TENSOR || args[s + 1].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  const tp_meta_t *x = &args[s].meta;
  if (x->ndim < 1 || x->ndim > 2 || !tp_dtype_is_float(x->dtype))
    return tp_make_status(TP_UNIMPLEMENTED, "%s: native only for 1-D/2-D float input", op->name);
  if (!tp_dtype_is_int(args[s + 1].meta.dtype))
    return tp_make_status(TP_INVALID_ARGUMENT, "expected scalar type Long but found %s",
                          tp_dtype_name(args[s + 1].meta.dtype));
  const tp_meta_t *t = &args[s + 1].meta;
  if (t->ndim > 1)
    return tp_make_status(TP_INVALID_ARGUMENT, "0D or 1D target tensor expected, multi-target not supported");
  if (x->ndim == 1 && t->ndim != 0) /* what CPU does with it is CPU's to say */
    return tp_make_status(TP_UNIMPLEMENTED, "%s: native only for a 0-D target of 1-D input", op->name);
  if (x->ndim == 2 && (t->ndim != 1 || t->sizes[0] != x->sizes[0]))
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "Expected input batch_size (%lld) to match target batch_size (%lld).",
                          (long long)x->sizes[0], (long long)(t->ndim == 1 ? t->sizes[0] : 1));
  if (op->code == TP_DIR_BACKWARD) {
    out[0] = *x;
    *n_out = 1;
    return NULL;
  }
  int64_t reduction = args[3].i;
  out[0] = *x;
  out[0].ndim = reduction == 0 && x->ndim == 2 ? 1 : 0;
  out[1] = *x;
  out[1].ndim = 0;
  *n_out = 2;
  return NULL;
}

void tp_emit_nll(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                 const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  int s = op->code == TP_DIR_BACKWARD ? 1 : 0;
  tp_dtype_t md = tp_math_dtype(args[s].meta.dtype);
  tp_hlo_value_t x = tp_hlo_convert(b, in[s], md);
  int cdim = x.ndim == 2 ? 1 : 0;
  tp_hlo_value_t t = tp_hlo_convert(b, in[s + 1], TP_DTYPE_I64);
  int64_t bd[1] = {0};
  tp_hlo_value_t tb = x.ndim == 2 ? tp_hlo_broadcast_in_dim(b, t, 2, x.dims, bd)
                                  : tp_hlo_broadcast_to(b, t, 1, x.dims);
  tp_hlo_value_t cls = tp_hlo_iota(b, TP_DTYPE_I64, x.ndim, x.dims, cdim);
  tp_hlo_value_t onehot = tp_hlo_compare(b, TP_CMP_EQ, cls, tb);
  int64_t ignore = args[s + 4].i;
  tp_hlo_value_t valid = tp_hlo_compare(b, TP_CMP_NE, t, tp_k(b, (double)ignore, t));
  /* Targets other than ignore_index must name a class. */
  tp_emit_checked_index(b, tp_hlo_select(b, valid, t, tp_k(b, 0, t)), x.dims[cdim], false);
  /* Per-sample weight: weight[target] (1 without weights), 0 where ignored. */
  tp_hlo_value_t zero = tp_k(b, 0, x);
  tp_hlo_value_t wfull = args[s + 2].kind == TP_ARG_TENSOR
                             ? tp_hlo_broadcast_in_dim(b, tp_hlo_convert(b, in[s + 2], md), x.ndim, x.dims,
                                                       (int64_t[]){cdim})
                             : tp_k(b, 1, x);
  tp_hlo_value_t wsel = tp_hlo_select(b, onehot, wfull, zero);
  int64_t cd = cdim;
  tp_hlo_value_t w = tp_hlo_reduce(b, wsel, tp_hlo_constant(b, md, 0), TP_HLO_ADD, 1, &cd);
  w = tp_hlo_select(b, valid, w, tp_k(b, 0, w));
  int64_t reduction = args[s + 3].i;
  int64_t all[1] = {0};
  tp_hlo_value_t total = w.ndim ? tp_hlo_reduce(b, w, tp_hlo_constant(b, md, 0), TP_HLO_ADD, 1, all) : w;
  if (op->code == TP_DIR_FORWARD) {
    tp_hlo_value_t picked = tp_hlo_reduce(b, tp_hlo_select(b, onehot, x, zero), tp_hlo_constant(b, md, 0),
                                          TP_HLO_ADD, 1, &cd);
    tp_hlo_value_t l = tp_hlo_unary(b, TP_HLO_NEG, tp_hlo_binary(b, TP_HLO_MUL, picked, w));
    /* CPU skips an ignored sample: its loss is 0 even where its input is NaN or inf. */
    l = tp_hlo_select(b, valid, l, tp_k(b, 0, l));
    if (reduction != 0) {
      l = l.ndim ? tp_hlo_reduce(b, l, tp_hlo_constant(b, md, 0), TP_HLO_ADD, 1, all) : l;
      if (reduction == 1) l = tp_hlo_binary(b, TP_HLO_DIV, l, total);
    }
    out[0] = tp_hlo_convert(b, tp_hlo_reshape(b, l, out_meta[0].ndim, out_meta[0].sizes), out_meta[0].dtype);
    out[1] = tp_hlo_convert(b, total, out_meta[1].dtype);
    return;
  }
  /* grad_input = -onehot * w * grad (/ total for mean). */
  tp_hlo_value_t g = tp_hlo_convert(b, in[0], md);
  if (reduction == 1) g = tp_hlo_binary(b, TP_HLO_DIV, g, tp_hlo_broadcast_to(b, tp_hlo_convert(b, in[s + 5], md), g.ndim, g.dims));
  tp_hlo_value_t gw = reduction == 0 && w.ndim ? tp_hlo_binary(b, TP_HLO_MUL, w, g)
                                                : tp_hlo_binary(b, TP_HLO_MUL, w, tp_hlo_broadcast_to(b, g, w.ndim, w.dims));
  gw = tp_hlo_select(b, valid, gw, tp_k(b, 0, gw)); /* ignored: 0 even for NaN grads */
  tp_hlo_value_t gx = x.ndim == 2 ? tp_hlo_broadcast_in_dim(b, gw, 2, x.dims, bd) : tp_hlo_broadcast_to(b, gw, 1, x.dims);
  out[0] = tp_hlo_convert(b, tp_hlo_select(b, onehot, tp_hlo_unary(b, TP_HLO_NEG, gx), zero), out_meta[0].dtype);
}

/* Rounds |v| (computed in a wider type) to |dt| and back, as CPU's 16-bit scalar ops do. */
static tp_hlo_value_t rnd(tp_hlo_builder_t *b, tp_hlo_value_t v, tp_dtype_t dt) {
  return v.dtype == dt ? v : tp_hlo_convert(b, tp_hlo_convert(b, v, dt), v.dtype);
}

/* binary_cross_entropy and its backward, in CPU's order of operations, each rounded to the
 * input's type. */
static void emit_bce(tp_hlo_builder_t *b, bool backward, const tp_op_arg_t *args, const tp_hlo_value_t *in,
                     const tp_meta_t *om, tp_hlo_value_t *out) {
  int t = backward ? 1 : 0;
  const tp_meta_t *xm = &args[t].meta;
  tp_dtype_t dt = xm->dtype, md = tp_math_dtype(dt);
  int64_t reduction = args[t + 3].i, numel = tp_meta_numel(xm);
  tp_hlo_value_t x = tp_hlo_convert(b, in[t], md), y = tp_hlo_convert(b, in[t + 1], md);
  tp_hlo_value_t one = tp_k(b, 1, x), r;
  if (!backward) {
    tp_hlo_value_t lo = tp_k(b, -100, x);
    tp_hlo_value_t a = tp_bin(b, TP_HLO_MAX, rnd(b, tp_hlo_unary(b, TP_HLO_LOG1P, tp_hlo_unary(b, TP_HLO_NEG, x)), dt), lo);
    tp_hlo_value_t l = tp_bin(b, TP_HLO_MAX, rnd(b, tp_hlo_unary(b, TP_HLO_LOG, x), dt), lo);
    tp_hlo_value_t p1 = rnd(b, tp_bin(b, TP_HLO_MUL, rnd(b, tp_bin(b, TP_HLO_SUB, y, one), dt), a), dt);
    r = rnd(b, tp_bin(b, TP_HLO_SUB, p1, rnd(b, tp_bin(b, TP_HLO_MUL, y, l), dt)), dt);
  } else {
    tp_hlo_value_t g = tp_emit_cast_shape(b, in[0], md, xm);
    tp_hlo_value_t num = rnd(b, tp_bin(b, TP_HLO_MUL, g, rnd(b, tp_bin(b, TP_HLO_SUB, x, y), dt)), dt);
    tp_hlo_value_t den = rnd(b, tp_bin(b, TP_HLO_MUL, rnd(b, tp_bin(b, TP_HLO_SUB, one, x), dt), x), dt);
    den = tp_bin(b, TP_HLO_MAX, den, rnd(b, tp_k(b, 1e-12, x), dt));
    r = rnd(b, tp_bin(b, TP_HLO_DIV, num, den), dt);
  }
  if (args[t + 2].kind == TP_ARG_TENSOR)
    r = rnd(b, tp_bin(b, TP_HLO_MUL, r, tp_emit_cast_shape(b, in[t + 2], md, xm)), dt);
  if (backward) {
    if (reduction == 1) r = rnd(b, tp_bin(b, TP_HLO_DIV, r, tp_k(b, (double)numel, r)), dt);
  } else if (reduction != 0) {
    int64_t dims[TP_MAX_DIMS];
    for (int i = 0; i < r.ndim; i++) dims[i] = i;
    r = tp_hlo_reduce(b, r, tp_hlo_constant(b, md, 0), TP_HLO_ADD, r.ndim, dims);
    if (reduction == 1) r = tp_bin(b, TP_HLO_DIV, r, tp_k(b, (double)numel, r));
  }
  out[0] = tp_hlo_convert(b, r, om->dtype);
}

tp_status_t *tp_infer_bce(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                          int *n_out) {
  TP_RETURN_IF_ERROR(tp_infer_like_self(op, args, n_args, out, n_out));
  /* (self, target, weight, reduction); backward: (grad_output, self, target, weight, reduction) */
  int t = op->code == TP_DIR_FORWARD ? 0 : 1;
  if (n_args < t + 4 || !tp_arg_is_tensor(args, n_args, t) || !tp_arg_is_tensor(args, n_args, t + 1) ||
      args[t + 3].kind != TP_ARG_INT || args[t + 3].i < 0 || args[t + 3].i > 2)
    return tp_make_status(TP_UNIMPLEMENTED, "%s: arguments", op->name);
  const tp_meta_t *in = &args[t].meta, *tg = &args[t + 1].meta;
  tp_dtype_t dt = in->dtype;
  bool ok = tp_dtype_is_float(dt) && tg->dtype == dt && tg->ndim == in->ndim &&
            memcmp(tg->sizes, in->sizes, sizeof(int64_t) * (size_t)in->ndim) == 0;
  tp_meta_t tmp;
  if (ok && args[t + 2].kind == TP_ARG_TENSOR)
    ok = args[t + 2].meta.dtype == dt && !tp_broadcast_shapes(in, &args[t + 2].meta, &tmp) &&
         tmp.ndim == in->ndim && memcmp(tmp.sizes, in->sizes, sizeof(int64_t) * (size_t)in->ndim) == 0;
  if (ok && t) ok = args[0].meta.dtype == dt;
  if (!ok) return tp_make_status(TP_UNIMPLEMENTED, "%s: arguments", op->name);
  out[0] = *in;
  out[0].writes_arg = 0;
  if (!t && args[3].i != 0) out[0].ndim = 0;
  return NULL;
}

void tp_emit_bce(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                 const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  const tp_meta_t *om = &out_meta[0];
  emit_bce(b, op->code == TP_DIR_BACKWARD, args, in, om, out);
}
