/* Nearest-neighbour upsampling (upsample_nearest{1,2,3}d, _upsample_nearest_exact{1,2,3}d) and
 * their backwards. Each output position reads one input position per spatial dim, computed in
 * the same float arithmetic as CPU's source-index helpers, so the forward is one gather per dim
 * and the backward one scatter-add per dim. Depends on ops/ helpers and hlo/ only.
 * |code|: the spatial rank k (1..3), plus 4 for nearest-exact, plus 8 for backward. */
#include <string.h>

#include "ops/families.h"

typedef struct {
  int k;
  bool exact, backward;
  int64_t in[TP_MAX_DIMS], out[TP_MAX_DIMS]; /* full shapes */
  int ndim;
  double scales[3]; /* <= 0: none */
} up_t;

static tp_status_t *parse_up(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args, up_t *p) {
  memset(p, 0, sizeof(*p));
  p->k = op->code & 3;
  p->exact = op->code & 4;
  p->backward = op->code & 8;
  int k = p->k, sc = p->backward ? 3 : 2;
  if (n_args < sc + k || args[0].kind != TP_ARG_TENSOR || args[1].kind != TP_ARG_INTS ||
      (p->backward && args[2].kind != TP_ARG_INTS))
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  const tp_meta_t *x = &args[0].meta;
  if (args[1].n != k) return tp_make_status(TP_UNIMPLEMENTED, "%s: output_size", op->name);
  if (p->backward) {
    if (args[2].n != k + 2 || x->ndim != k + 2)
      return tp_make_status(TP_UNIMPLEMENTED, "%s: input_size", op->name);
    p->ndim = k + 2;
    memcpy(p->in, args[2].ints, sizeof(int64_t) * (size_t)(k + 2));
  } else {
    if (x->ndim != k + 2) return tp_make_status(TP_UNIMPLEMENTED, "%s: rank", op->name);
    p->ndim = x->ndim;
    memcpy(p->in, x->sizes, sizeof(int64_t) * (size_t)x->ndim);
  }
  memcpy(p->out, p->in, sizeof(p->out));
  for (int i = 0; i < k; i++) {
    p->out[2 + i] = args[1].ints[i];
    const tp_op_arg_t *s = &args[sc + i];
    if (s->kind == TP_ARG_FLOAT) p->scales[i] = s->f;
    else if (s->kind != TP_ARG_NONE) return tp_make_status(TP_UNIMPLEMENTED, "%s: scales", op->name);
  }
  for (int d = 0; d < p->ndim; d++)
    if ((d >= 1 && (p->in[d] <= 0 || p->out[d] <= 0)) || p->in[d] < 0)
      return tp_make_status(TP_UNIMPLEMENTED, "%s: empty or negative sizes", op->name);
  return NULL;
}

tp_status_t *tp_infer_upsample(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                               int *n_out) {
  up_t p;
  TP_RETURN_IF_ERROR(parse_up(op, args, n_args, &p));
  tp_dtype_t dt = args[0].meta.dtype;
  bool half = dt == TP_DTYPE_BF16 || dt == TP_DTYPE_F16;
  /* CPU's dtypes: floats and uint8 forward, floats backward (16-bit ones summed in float). */
  bool ok = dt == TP_DTYPE_F32 || dt == TP_DTYPE_F64 || half ||
            (dt == TP_DTYPE_U8 && !p.backward);
  if (!ok) return tp_make_status(TP_UNIMPLEMENTED, "%s: dtype", op->name);
  tp_meta_t o = args[0].meta;
  if (p.backward) {
    if (memcmp(o.sizes, p.out, sizeof(int64_t) * (size_t)p.ndim) != 0)
      return tp_make_status(TP_UNIMPLEMENTED, "%s: grad_output shape", op->name);
    memcpy(o.sizes, p.in, sizeof(int64_t) * (size_t)p.ndim);
  } else {
    memcpy(o.sizes, p.out, sizeof(int64_t) * (size_t)p.ndim);
  }
  out[0] = o;
  *n_out = 1;
  return NULL;
}

/* CPU's source index of output |o| (an i64 iota) along spatial dim i: floorf(o * scale) or,
 * nearest-exact, floorf((o + 0.5) * scale) with the product in double, clamped to n - 1. */
static tp_hlo_value_t source_index(tp_hlo_builder_t *b, const up_t *p, int i, tp_hlo_value_t o) {
  int64_t n = p->in[2 + i], m = p->out[2 + i];
  float scale = p->scales[i] > 0 ? (float)(1.0 / p->scales[i]) : (float)n / (float)m;
  tp_hlo_value_t f;
  if (p->exact) {
    f = tp_hlo_convert(b, o, TP_DTYPE_F64);
    f = tp_hlo_binary(b, TP_HLO_ADD, f, tp_emit_full_like(b, 0.5, &f));
    f = tp_hlo_binary(b, TP_HLO_MUL, f, tp_emit_full_like(b, (double)scale, &f));
    f = tp_hlo_convert(b, f, TP_DTYPE_F32);
  } else {
    f = tp_hlo_convert(b, o, TP_DTYPE_F32);
    f = tp_hlo_binary(b, TP_HLO_MUL, f, tp_emit_full_like(b, (double)scale, &f));
  }
  tp_hlo_value_t s = tp_hlo_convert(b, tp_hlo_unary(b, TP_HLO_FLOOR, f), TP_DTYPE_I64);
  return tp_hlo_binary(b, TP_HLO_MIN, s, tp_emit_full_like(b, (double)(n - 1), &s));
}

/* Row-major linear index into |shape| with |idx| as the coordinate along dim d. */
static tp_hlo_value_t lin_index(tp_hlo_builder_t *b, tp_hlo_value_t idx, int d, int ndim,
                                const int64_t *shape) {
  tp_hlo_value_t lin = tp_emit_full_like(b, 0, &idx);
  int64_t stride = 1;
  for (int j = ndim - 1; j >= 0; j--) {
    tp_hlo_value_t c = j == d ? idx : tp_hlo_iota(b, TP_DTYPE_I64, idx.ndim, idx.dims, j);
    lin = tp_hlo_binary(b, TP_HLO_ADD, lin, tp_hlo_binary(b, TP_HLO_MUL, c, tp_emit_full_like(b, (double)stride, &c)));
    stride *= shape[j];
  }
  return lin;
}

void tp_emit_upsample(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                      int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                      tp_hlo_value_t *out) {
  up_t p;
  tp_status_t *st = parse_up(op, args, n_args, &p);
  if (st) {
    tp_hlo_fail(b, st);
    return;
  }
  int nd = p.ndim;
  if (tp_meta_numel(&out_meta[0]) == 0 || tp_meta_numel(&args[0].meta) == 0) {
    out[0] = tp_hlo_broadcast_to(b, tp_hlo_constant(b, out_meta[0].dtype, 0), out_meta[0].ndim, out_meta[0].sizes);
    return;
  }
  tp_hlo_value_t v = p.backward ? tp_hlo_convert(b, in[0], tp_math_dtype(in[0].dtype)) : in[0];
  int64_t cur[TP_MAX_DIMS];
  memcpy(cur, p.backward ? p.out : p.in, sizeof(cur));
  for (int i = 0; i < p.k; i++) {
    int d = 2 + i;
    int64_t big[TP_MAX_DIMS], small[TP_MAX_DIMS]; /* shapes with dim d at output / input size */
    memcpy(big, cur, sizeof(big));
    memcpy(small, cur, sizeof(small));
    big[d] = p.out[d];
    small[d] = p.in[d];
    tp_hlo_value_t src = source_index(b, &p, i, tp_hlo_iota(b, TP_DTYPE_I64, nd, big, d));
    int64_t n_big = 1, n_small = 1;
    for (int j = 0; j < nd; j++) {
      n_big *= big[j];
      n_small *= small[j];
    }
    tp_hlo_value_t lin = tp_hlo_reshape(b, lin_index(b, src, d, nd, small), 1, &n_big);
    if (p.backward) {
      tp_hlo_value_t zeros = tp_hlo_broadcast_to(b, tp_hlo_constant(b, v.dtype, 0), 1, &n_small);
      v = tp_hlo_scatter_1d_op(b, zeros, lin, tp_hlo_reshape(b, v, 1, &n_big), TP_HLO_ADD);
      v = tp_hlo_reshape(b, v, nd, small);
      memcpy(cur, small, sizeof(cur));
    } else {
      v = tp_hlo_reshape(b, tp_hlo_gather_1d(b, tp_hlo_reshape(b, v, 1, &n_small), lin), nd, big);
      memcpy(cur, big, sizeof(cur));
    }
  }
  out[0] = tp_hlo_convert(b, v, out_meta[0].dtype);
}
