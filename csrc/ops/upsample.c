/* Nearest-neighbour and linear upsampling (upsample_nearest{1,2,3}d,
 * _upsample_nearest_exact{1,2,3}d, upsample_{linear1d,bilinear2d,trilinear3d}) and their backwards. Each output position reads one input position per spatial dim, computed in
 * the same float arithmetic as CPU's source-index helpers, so the forward is one gather per dim
 * and the backward one scatter-add per dim. Depends on ops/ helpers and hlo/ only.
 * Linear modes (upsample_linear1d, bilinear2d, trilinear3d) gather the two neighbours per dim
 * and weight them, or scatter the weighted gradient back.
 * |code|: a tp_upsample_t (families.h): the spatial rank k (1..3), the mode, backward. */
#include <string.h>

#include "ops/families.h"

typedef struct {
  int k;
  bool exact, backward, linear, align_corners;
  int64_t in[TP_MAX_DIMS], out[TP_MAX_DIMS]; /* full shapes */
  int ndim;
  double scales[3]; /* <= 0: none */
} up_t;

static tp_status_t *parse_up(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args, up_t *p) {
  memset(p, 0, sizeof(*p));
  p->k = op->code & TP_UPF_RANK;
  p->exact = op->code & TP_UPF_NEAREST_EXACT;
  p->backward = op->code & TP_UPF_BACKWARD;
  p->linear = op->code & TP_UPF_LINEAR;
  int k = p->k, sc = (p->backward ? 3 : 2) + (p->linear ? 1 : 0);
  if (n_args < sc + k || args[0].kind != TP_ARG_TENSOR || args[1].kind != TP_ARG_INTS ||
      (p->backward && args[2].kind != TP_ARG_INTS))
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  const tp_meta_t *x = &args[0].meta;
  if (p->linear) {
    if (args[sc - 1].kind != TP_ARG_INT)
      return tp_make_status(TP_INVALID_ARGUMENT, "%s: align_corners", op->name);
    p->align_corners = args[sc - 1].i != 0;
  }
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
  /* Linear uint8 has a kernel of its own, and so has the 16-bit bilinear forward (its rounding
   * is not the separable sums' below): those fall back. */
  if (p.linear && (dt == TP_DTYPE_U8 || (half && !p.backward && p.k == 2))) ok = false;
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
    f = tp_hlo_binary(b, TP_HLO_ADD, f, tp_k(b, 0.5, f));
    f = tp_hlo_binary(b, TP_HLO_MUL, f, tp_k(b, (double)scale, f));
    f = tp_hlo_convert(b, f, TP_DTYPE_F32);
  } else {
    f = tp_hlo_convert(b, o, TP_DTYPE_F32);
    f = tp_hlo_binary(b, TP_HLO_MUL, f, tp_k(b, (double)scale, f));
  }
  tp_hlo_value_t s = tp_hlo_convert(b, tp_hlo_unary(b, TP_HLO_FLOOR, f), TP_DTYPE_I64);
  return tp_hlo_binary(b, TP_HLO_MIN, s, tp_k(b, (double)(n - 1), s));
}

/* CPU's linear source indices and weights along spatial dim i for outputs |o| (an i64 iota):
 * the real index in |md| (float for float, double for double) from area_pixel_compute_source_index,
 * i0 = min(floor(real), n - 1), i1 = i0 + (i0 < n - 1), l1 = clamp(real - i0, 0, 1), l0 = 1 - l1;
 * equal sizes copy (l0 = 1, l1 = 0). */
static void linear_index(tp_hlo_builder_t *b, const up_t *p, int i, tp_hlo_value_t o, tp_dtype_t md,
                         tp_dtype_t weight_dtype, tp_hlo_value_t *i0, tp_hlo_value_t *i1,
                         tp_hlo_value_t *l0, tp_hlo_value_t *l1) {
  int64_t n = p->in[2 + i], m = p->out[2 + i];
  if (n == m) {
    *i0 = *i1 = o;
    *l1 = tp_k(b, 0, o);
    *l1 = tp_hlo_convert(b, *l1, md);
    *l0 = tp_k(b, 1, *l1);
    return;
  }
  double scale; /* area_pixel_compute_scale in md */
  if (md == TP_DTYPE_F32) {
    float sf = p->align_corners ? (m > 1 ? (float)(n - 1) / (float)(m - 1) : 0.0f)
                                : (p->scales[i] > 0 ? (float)(1.0 / p->scales[i]) : (float)n / (float)m);
    scale = sf;
  } else {
    scale = p->align_corners ? (m > 1 ? (double)(n - 1) / (double)(m - 1) : 0.0)
                             : (p->scales[i] > 0 ? 1.0 / p->scales[i] : (double)n / (double)m);
  }
  tp_hlo_value_t real;
  if (p->align_corners) {
    real = tp_hlo_convert(b, o, md);
    real = tp_hlo_binary(b, TP_HLO_MUL, tp_k(b, scale, real), real);
  } else { /* scale * (o + 0.5) - 0.5 in double, stored in md, negatives to 0 */
    real = tp_hlo_convert(b, o, TP_DTYPE_F64);
    real = tp_hlo_binary(b, TP_HLO_ADD, real, tp_k(b, 0.5, real));
    real = tp_hlo_binary(b, TP_HLO_MUL, tp_k(b, scale, real), real);
    real = tp_hlo_binary(b, TP_HLO_SUB, real, tp_k(b, 0.5, real));
    real = tp_hlo_convert(b, real, md);
    real = tp_hlo_binary(b, TP_HLO_MAX, real, tp_k(b, 0, real));
  }
  tp_hlo_value_t f = tp_hlo_convert(b, tp_hlo_unary(b, TP_HLO_FLOOR, tp_hlo_convert(b, real, TP_DTYPE_F32)), TP_DTYPE_I64);
  *i0 = tp_hlo_binary(b, TP_HLO_MIN, f, tp_k(b, (double)(n - 1), f));
  tp_hlo_value_t more = tp_hlo_compare(b, TP_CMP_LT, *i0, tp_k(b, (double)(n - 1), *i0));
  *i1 = tp_hlo_select(b, more, tp_hlo_binary(b, TP_HLO_ADD, *i0, tp_k(b, 1, *i0)), *i0);
  tp_hlo_value_t l = tp_hlo_binary(b, TP_HLO_SUB, real, tp_hlo_convert(b, *i0, md));
  l = tp_hlo_binary(b, TP_HLO_MAX, l, tp_k(b, 0, l));
  *l1 = tp_hlo_binary(b, TP_HLO_MIN, l, tp_k(b, 1, l));
  if (weight_dtype != md) /* CPU's 16-bit forward stores l1, then l0 = 1 - l1, in the input's type */
    *l1 = tp_hlo_convert(b, tp_hlo_convert(b, *l1, weight_dtype), md);
  *l0 = tp_hlo_binary(b, TP_HLO_SUB, tp_k(b, 1, *l1), *l1);
  if (weight_dtype != md) *l0 = tp_hlo_convert(b, tp_hlo_convert(b, *l0, weight_dtype), md);
}

void tp_emit_upsample(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                      int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                      tp_hlo_value_t *out) {
  up_t p;
  if (!tp_emit_ok(b, parse_up(op, args, n_args, &p))) return;
  int nd = p.ndim;
  if (tp_meta_numel(&out_meta[0]) == 0 || tp_meta_numel(&args[0].meta) == 0) {
    out[0] = tp_hlo_broadcast_to(b, tp_hlo_constant(b, out_meta[0].dtype, 0), out_meta[0].ndim, out_meta[0].sizes);
    return;
  }
  tp_hlo_value_t v = p.backward ? tp_hlo_convert(b, in[0], tp_math_dtype(in[0].dtype)) : in[0];
  int64_t cur[TP_MAX_DIMS];
  memcpy(cur, p.backward ? p.out : p.in, sizeof(cur));
  if (p.linear) v = tp_hlo_convert(b, v, tp_math_dtype(in[0].dtype));
  /* Linear: the last dim first, then outwards, as CPU's nested weighted sums run. */
  for (int ii = 0; ii < p.k; ii++) {
    int i = p.linear ? p.k - 1 - ii : ii, d = 2 + i;
    int64_t big[TP_MAX_DIMS], small[TP_MAX_DIMS]; /* shapes with dim d at output / input size */
    memcpy(big, cur, sizeof(big));
    memcpy(small, cur, sizeof(small));
    big[d] = p.out[d];
    small[d] = p.in[d];
    int64_t n_big = 1, n_small = 1;
    for (int j = 0; j < nd; j++) {
      n_big *= big[j];
      n_small *= small[j];
    }
    if (p.linear) {
      tp_hlo_value_t i0, i1, l0, l1;
      linear_index(b, &p, i, tp_hlo_iota(b, TP_DTYPE_I64, nd, big, d), v.dtype,
                   p.backward ? v.dtype : in[0].dtype, &i0, &i1, &l0, &l1);
      tp_hlo_value_t a0 = tp_hlo_reshape(b, tp_emit_linear_index(b, i0, d, nd, small), 1, &n_big);
      tp_hlo_value_t a1 = tp_hlo_reshape(b, tp_emit_linear_index(b, i1, d, nd, small), 1, &n_big);
      if (p.backward) {
        tp_hlo_value_t zeros = tp_hlo_broadcast_to(b, tp_hlo_constant(b, v.dtype, 0), 1, &n_small);
        tp_hlo_value_t g0 = tp_hlo_reshape(b, tp_hlo_binary(b, TP_HLO_MUL, v, l0), 1, &n_big);
        tp_hlo_value_t g1 = tp_hlo_reshape(b, tp_hlo_binary(b, TP_HLO_MUL, v, l1), 1, &n_big);
        tp_hlo_value_t r = tp_hlo_scatter_1d_op(b, zeros, a0, g0, TP_HLO_ADD);
        v = tp_hlo_reshape(b, tp_hlo_scatter_1d_op(b, r, a1, g1, TP_HLO_ADD), nd, small);
        memcpy(cur, small, sizeof(cur));
      } else {
        tp_hlo_value_t flat = tp_hlo_reshape(b, v, 1, &n_small);
        tp_hlo_value_t x0 = tp_hlo_reshape(b, tp_hlo_gather_1d(b, flat, a0), nd, big);
        tp_hlo_value_t x1 = tp_hlo_reshape(b, tp_hlo_gather_1d(b, flat, a1), nd, big);
        v = tp_hlo_binary(b, TP_HLO_ADD, tp_hlo_binary(b, TP_HLO_MUL, x0, l0), tp_hlo_binary(b, TP_HLO_MUL, x1, l1));
        memcpy(cur, big, sizeof(cur));
      }
      continue;
    }
    tp_hlo_value_t src = source_index(b, &p, i, tp_hlo_iota(b, TP_DTYPE_I64, nd, big, d));
    tp_hlo_value_t lin = tp_hlo_reshape(b, tp_emit_linear_index(b, src, d, nd, small), 1, &n_big);
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
