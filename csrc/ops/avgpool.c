/* Average pooling: avg_pool2d/3d, adaptive average pooling 2d/3d and their backwards. Every
 * window is a box, so the window sum is separable: one pass per spatial dim, adding the
 * window's offsets one gather at a time (bounds from iotas). The divisor is a product of per-dim counts, applied
 * once after the sum as the CPU kernels do. The backward divides the gradient by the same
 * divisor and scatter-adds it back over the same windows. Depends on ops/ helpers and hlo/ only.
 * |code|: a tp_avg_pool_t (families.h): the spatial rank k (2 or 3), adaptive, backward. */
#include <string.h>

#include "ops/families.h"

typedef struct {
  int k;
  bool adaptive, backward;
  int64_t ks[3], st[3], pd[3];
  bool ceil_mode, include_pad;
  int64_t divisor; /* 0: none */
} avg_t;

static void triple(const tp_op_arg_t *a, int k, const int64_t *dflt, int64_t *out) {
  int n = a->kind == TP_ARG_INTS ? a->n : 0;
  for (int i = 0; i < k; i++) out[i] = n == 0 ? (dflt ? dflt[i] : 0) : a->ints[n == 1 ? 0 : i];
}

/* PyTorch's pooling_output_shape: the division rounds down, also for a negative span. */
static int64_t avg_out(int64_t in, const avg_t *p, int i) {
  int64_t span = in + 2 * p->pd[i] - p->ks[i] + (p->ceil_mode ? p->st[i] - 1 : 0);
  int64_t o = (span >= 0 ? span / p->st[i] : -((-span + p->st[i] - 1) / p->st[i])) + 1;
  if (p->ceil_mode && (o - 1) * p->st[i] >= in + p->pd[i]) o--;
  return o;
}

/* Parses the arguments after self (and grad_output). Calls CPU rejects fall back so CPU words
 * the error. */
static tp_status_t *parse_avg(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args, avg_t *p) {
  memset(p, 0, sizeof(*p));
  p->k = op->code & TP_APF_RANK;
  p->adaptive = op->code & TP_APF_ADAPTIVE;
  p->backward = op->code & TP_APF_BACKWARD;
  int t = p->backward ? 1 : 0;
  if (n_args < t + 1 || args[t].kind != TP_ARG_TENSOR || (p->backward && args[0].kind != TP_ARG_TENSOR))
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  if (p->adaptive) {
    if (!p->backward && (n_args < 2 || args[1].kind != TP_ARG_INTS || args[1].n != p->k))
      return tp_make_status(TP_UNIMPLEMENTED, "%s: output_size", op->name);
    return NULL;
  }
  if (n_args < t + 7 || args[t + 1].kind != TP_ARG_INTS)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  const tp_op_arg_t *a = &args[t + 1];
  for (int j = 0; j < 3; j++)
    if (a[j].kind == TP_ARG_INTS && a[j].n != 0 && a[j].n != 1 && a[j].n != p->k)
      return tp_make_status(TP_UNIMPLEMENTED, "%s: tuple length", op->name);
  if (a[0].n == 0) return tp_make_status(TP_UNIMPLEMENTED, "%s: kernel_size", op->name);
  triple(&a[0], p->k, NULL, p->ks);
  triple(&a[1], p->k, p->ks, p->st);
  triple(&a[2], p->k, NULL, p->pd);
  p->ceil_mode = a[3].kind == TP_ARG_INT && a[3].i;
  p->include_pad = a[4].kind == TP_ARG_INT && a[4].i;
  if (a[5].kind == TP_ARG_INT) {
    if (a[5].i == 0) return tp_make_status(TP_UNIMPLEMENTED, "%s: divisor_override 0", op->name);
    p->divisor = a[5].i;
  }
  for (int i = 0; i < p->k; i++)
    if (p->ks[i] < 1 || p->st[i] < 1 || p->pd[i] < 0 || p->pd[i] > p->ks[i] / 2)
      return tp_make_status(TP_UNIMPLEMENTED, "%s: kernel/stride/padding", op->name);
  return NULL;
}

tp_status_t *tp_infer_avg_pool(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                               int *n_out) {
  avg_t p;
  TP_RETURN_IF_ERROR(parse_avg(op, args, n_args, &p));
  const tp_meta_t *x = &args[p.backward ? 1 : 0].meta;
  int nd = x->ndim, k = p.k;
  if (nd != k + 1 && nd != k + 2) return tp_make_status(TP_UNIMPLEMENTED, "%s: rank", op->name);
  for (int d = 0; d < nd; d++)
    if (x->sizes[d] == 0 && !(d == 0 && nd == k + 2))
      return tp_make_status(TP_UNIMPLEMENTED, "%s: empty input", op->name);
  /* CPU's dtypes: floats (no half for avg_pool3d), and int64 for the non-adaptive forward. */
  tp_dtype_t dt = p.backward ? args[0].meta.dtype : x->dtype;
  bool ok = dt == TP_DTYPE_F32 || dt == TP_DTYPE_F64 || dt == TP_DTYPE_BF16 ||
            (dt == TP_DTYPE_F16 && !(k == 3 && !p.adaptive)) ||
            (dt == TP_DTYPE_I64 && !p.adaptive && !p.backward);
  /* 16-bit floats: CPU rounds every step of these (the backwards add each window's share into
   * the 16-bit gradient one by one; adaptive 3d sums in 16 bits), which a matrix sum cannot
   * reproduce. */
  bool half = dt == TP_DTYPE_BF16 || dt == TP_DTYPE_F16;
  if (half && (p.backward || (p.adaptive && k == 3))) ok = false;
  if (!ok || (p.backward && args[0].meta.dtype != x->dtype))
    return tp_make_status(TP_UNIMPLEMENTED, "%s: dtype", op->name);
  tp_meta_t o = *x;
  for (int i = 0; i < k; i++) {
    int d = nd - k + i;
    if (p.adaptive) {
      o.sizes[d] = p.backward ? args[0].meta.sizes[d] : args[1].ints[i];
      if (o.sizes[d] <= 0) return tp_make_status(TP_UNIMPLEMENTED, "%s: output_size", op->name);
    } else {
      o.sizes[d] = avg_out(x->sizes[d], &p, i);
      if (o.sizes[d] <= 0) return tp_make_status(TP_UNIMPLEMENTED, "%s: output size", op->name);
    }
  }
  if (p.backward) {
    const tp_meta_t *g = &args[0].meta;
    if (g->ndim != nd || memcmp(g->sizes, o.sizes, sizeof(int64_t) * (size_t)nd) != 0)
      return tp_make_status(TP_UNIMPLEMENTED, "%s: grad_output shape", op->name);
    o = *x;
  }
  out[0] = o;
  *n_out = 1;
  return NULL;
}

/* Window bounds [lo, hi) of output position |o| (an i64 iota) along spatial dim i over |n| inputs,
 * clipped to the input; |full| receives CPU's count_include_pad size (avg_pool only). */
static void bounds(tp_hlo_builder_t *b, const avg_t *p, int i, int64_t n, int64_t n_out,
                   tp_hlo_value_t o, tp_hlo_value_t *lo, tp_hlo_value_t *hi, tp_hlo_value_t *full) {
  if (p->adaptive) { /* floor(o*n/out), ceil((o+1)*n/out) */
    *lo = tp_hlo_binary(b, TP_HLO_DIV, tp_hlo_binary(b, TP_HLO_MUL, o, tp_k(b, (double)n, o)), tp_k(b, (double)n_out, o));
    tp_hlo_value_t e = tp_hlo_binary(b, TP_HLO_MUL, tp_hlo_binary(b, TP_HLO_ADD, o, tp_k(b, 1, o)), tp_k(b, (double)n, o));
    *hi = tp_hlo_binary(b, TP_HLO_DIV, tp_hlo_binary(b, TP_HLO_ADD, e, tp_k(b, (double)(n_out - 1), o)), tp_k(b, (double)n_out, o));
    *full = tp_hlo_binary(b, TP_HLO_SUB, *hi, *lo);
    return;
  }
  tp_hlo_value_t s = tp_hlo_binary(b, TP_HLO_SUB, tp_hlo_binary(b, TP_HLO_MUL, o, tp_k(b, (double)p->st[i], o)),
                                   tp_k(b, (double)p->pd[i], o));
  tp_hlo_value_t e = tp_hlo_binary(b, TP_HLO_MIN, tp_hlo_binary(b, TP_HLO_ADD, s, tp_k(b, (double)p->ks[i], o)),
                                   tp_k(b, (double)(n + p->pd[i]), o));
  *full = tp_hlo_binary(b, TP_HLO_SUB, e, s);
  *lo = tp_hlo_binary(b, TP_HLO_MAX, s, tp_k(b, 0, o));
  *hi = tp_hlo_binary(b, TP_HLO_MIN, e, tp_k(b, (double)n, o));
}

/* The largest window along spatial dim i: the number of offsets each output walks. */
static int64_t max_window(const avg_t *p, int i, int64_t n, int64_t m) {
  if (!p->adaptive) return p->ks[i];
  int64_t k = 1;
  for (int64_t o = 0; o < m; o++) {
    int64_t w = ((o + 1) * n + m - 1) / m - o * n / m;
    if (w > k) k = w;
  }
  return k;
}

/* Sums (forward) or spreads (backward) |v| over the windows along dim d: from n positions to m
 * outputs, or back. Gathers and scatters rather than a 0/1 matrix product, so an inf stays in
 * its own windows instead of turning every other sum into NaN. */
static tp_hlo_value_t window_pass(tp_hlo_builder_t *b, const avg_t *p, int i, int d, int64_t n,
                                  int64_t m, tp_hlo_value_t v) {
  int64_t os[TP_MAX_DIMS], is[TP_MAX_DIMS];
  memcpy(os, v.dims, sizeof(os));
  memcpy(is, v.dims, sizeof(is));
  os[d] = m;
  is[d] = n;
  tp_hlo_value_t oi = tp_hlo_iota(b, TP_DTYPE_I64, v.ndim, os, d);
  tp_hlo_value_t lo, hi, full;
  bounds(b, p, i, n, m, oi, &lo, &hi, &full);
  int64_t K = max_window(p, i, n, m), n_in = 1, n_out = 1;
  for (int j = 0; j < v.ndim; j++) {
    n_in *= is[j];
    n_out *= os[j];
  }
  tp_hlo_value_t zero = tp_hlo_broadcast_to(b, tp_hlo_constant(b, v.dtype, 0), v.ndim, os);
  tp_hlo_value_t acc = p->backward ? tp_hlo_broadcast_to(b, tp_hlo_constant(b, v.dtype, 0), 1, &n_in) : zero;
  tp_hlo_value_t flat = p->backward ? v : tp_hlo_reshape(b, v, 1, &n_in);
  for (int64_t t = 0; t < K; t++) {
    tp_hlo_value_t src = tp_hlo_binary(b, TP_HLO_ADD, lo, tp_k(b, (double)t, lo));
    tp_hlo_value_t valid = tp_hlo_compare(b, TP_CMP_LT, src, hi);
    src = tp_hlo_binary(b, TP_HLO_MIN, src, tp_k(b, (double)(n - 1), src));
    tp_hlo_value_t lin = tp_hlo_reshape(b, tp_emit_linear_index(b, src, d, v.ndim, is), 1, &n_out);
    if (p->backward) {
      tp_hlo_value_t g = tp_hlo_reshape(b, tp_hlo_select(b, valid, flat, zero), 1, &n_out);
      acc = tp_hlo_scatter_1d_op(b, acc, lin, g, TP_HLO_ADD);
    } else {
      tp_hlo_value_t x = tp_hlo_reshape(b, tp_hlo_gather_1d(b, flat, lin), v.ndim, os);
      acc = tp_hlo_binary(b, TP_HLO_ADD, acc, tp_hlo_select(b, valid, x, zero));
    }
  }
  return p->backward ? tp_hlo_reshape(b, acc, v.ndim, is) : acc;
}

/* The divisor of every output position, shape |o|, i64 (0 for a window wholly in padding). */
static tp_hlo_value_t divisor(tp_hlo_builder_t *b, const avg_t *p, const tp_meta_t *x, const tp_meta_t *o) {
  tp_hlo_value_t div = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, 1), o->ndim, o->sizes);
  tp_hlo_value_t any_empty = tp_hlo_compare(b, TP_CMP_NE, div, div);
  for (int i = 0; i < p->k; i++) {
    int d = o->ndim - p->k + i;
    tp_hlo_value_t oi = tp_hlo_iota(b, TP_DTYPE_I64, o->ndim, o->sizes, d);
    tp_hlo_value_t lo, hi, full;
    bounds(b, p, i, x->sizes[d], o->sizes[d], oi, &lo, &hi, &full);
    tp_hlo_value_t c = tp_hlo_binary(b, TP_HLO_SUB, hi, lo);
    any_empty = tp_hlo_binary(b, TP_HLO_OR, any_empty, tp_hlo_compare(b, TP_CMP_LE, c, tp_k(b, 0, c)));
    div = tp_hlo_binary(b, TP_HLO_MUL, div, p->include_pad && !p->adaptive ? full : c);
  }
  if (p->divisor) div = tp_k(b, (double)p->divisor, div);
  return tp_hlo_select(b, any_empty, tp_k(b, 0, div), div);
}

void tp_emit_avg_pool(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                      int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                      tp_hlo_value_t *out) {
  avg_t p;
  if (!tp_emit_ok(b, parse_avg(op, args, n_args, &p))) return;
  const tp_meta_t *x = &args[p.backward ? 1 : 0].meta;
  const tp_meta_t *o = p.backward ? &args[0].meta : &out_meta[0];
  int nd = x->ndim, first = nd - p.k;
  tp_dtype_t md = tp_math_dtype(out_meta[0].dtype);
  if (tp_meta_numel(x) == 0 || tp_meta_numel(o) == 0) { /* an empty batch: nothing to gather */
    out[0] = tp_hlo_broadcast_to(b, tp_hlo_constant(b, out_meta[0].dtype, 0), out_meta[0].ndim, out_meta[0].sizes);
    return;
  }
  tp_hlo_value_t div = divisor(b, &p, x, o);
  tp_hlo_value_t zero_div = tp_hlo_compare(b, TP_CMP_EQ, div, tp_k(b, 0, div));
  tp_hlo_value_t v = tp_hlo_convert(b, in[0], md);
  if (p.backward) { /* the gradient each output spreads over its window */
    tp_hlo_value_t dv = tp_hlo_convert(b, tp_hlo_select(b, zero_div, tp_k(b, 1, div), div), md);
    v = tp_hlo_select(b, zero_div, tp_k(b, 0, v), tp_hlo_binary(b, TP_HLO_DIV, v, dv));
  }
  for (int i = 0; i < p.k; i++) {
    int d = first + i;
    v = window_pass(b, &p, i, d, x->sizes[d], o->sizes[d], v);
  }
  if (!p.backward) {
    tp_hlo_value_t dv = tp_hlo_convert(b, tp_hlo_select(b, zero_div, tp_k(b, 1, div), div), md);
    v = tp_hlo_select(b, zero_div, tp_k(b, 0, v), tp_hlo_binary(b, TP_HLO_DIV, v, dv));
  }
  out[0] = tp_hlo_convert(b, v, out_meta[0].dtype);
}
