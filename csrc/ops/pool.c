/* Pooling family: max_pool2d_with_indices and its backward. The forward walks the kernel offsets
 * (an unrolled loop of strided slices of the padded input), keeping the running maximum and the
 * flat index of its first occurrence; the backward scatter-adds gradients at those indices. */
#include <math.h>
#include <string.h>

#include "ops/families.h"

typedef struct {
  int64_t k[2], s[2], p[2], d[2];
  bool ceil_mode;
} pool_t;

static void pair(const tp_op_arg_t *a, int64_t dflt_a, const int64_t *dflt, int64_t *out) {
  int n = a && a->kind == TP_ARG_INTS ? a->n : 0;
  for (int i = 0; i < 2; i++)
    out[i] = n == 0 ? (dflt ? dflt[i] : dflt_a) : a->ints[n == 1 ? 0 : i];
}

/* (kernel, stride, padding, dilation, ceil_mode) from args[at]. */
static tp_status_t *parse_pool(const tp_op_arg_t *args, int n_args, int at, pool_t *p) {
  if (n_args < at + 5) return tp_make_status(TP_INVALID_ARGUMENT, "max_pool2d: missing arguments");
  pair(&args[at], 1, NULL, p->k);
  pair(&args[at + 1], 0, p->k, p->s); /* stride defaults to the kernel size */
  pair(&args[at + 2], 0, NULL, p->p);
  pair(&args[at + 3], 1, NULL, p->d);
  p->ceil_mode = args[at + 4].kind == TP_ARG_INT && args[at + 4].i;
  for (int i = 0; i < 2; i++) {
    if (p->k[i] < 1 || p->s[i] < 1 || p->d[i] < 1)
      return tp_make_status(TP_INVALID_ARGUMENT, "max_pool2d: kernel, stride and dilation must be positive");
    if (p->p[i] < 0 || p->p[i] > p->k[i] / 2)
      return tp_make_status(TP_INVALID_ARGUMENT, "pad should be at most half of effective kernel size");
  }
  return NULL;
}

static int64_t pool_out(int64_t in, const pool_t *p, int i) {
  int64_t span = in + 2 * p->p[i] - p->d[i] * (p->k[i] - 1) - 1;
  int64_t o = (p->ceil_mode ? (span + p->s[i] - 1) / p->s[i] : span / p->s[i]) + 1;
  if (p->ceil_mode && (o - 1) * p->s[i] >= in + p->p[i]) o--;
  return o;
}

/* max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode) */
tp_status_t *tp_infer_max_pool(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                               int *n_out) {
  int t = op->code ? 1 : 0;
  if (n_args < t + 6 || args[t].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  const tp_meta_t *x = &args[t].meta;
  if (x->ndim != 3 && x->ndim != 4)
    return tp_make_status(TP_INVALID_ARGUMENT, "max_pool2d: Expected 3D or 4D input");
  if (x->dtype == TP_DTYPE_BOOL) return tp_make_status(TP_UNIMPLEMENTED, "max_pool2d on bool");
  pool_t p;
  TP_RETURN_IF_ERROR(parse_pool(args, n_args, t + 1, &p));
  if (op->code) { /* backward: grad_input has self's shape */
    out[0] = *x;
    *n_out = 1;
    return NULL;
  }
  out[0] = *x;
  for (int i = 0; i < 2; i++) {
    out[0].sizes[x->ndim - 2 + i] = pool_out(x->sizes[x->ndim - 2 + i], &p, i);
    if (out[0].sizes[x->ndim - 2 + i] <= 0)
      return tp_make_status(TP_INVALID_ARGUMENT, "max_pool2d: output size is too small");
  }
  out[1] = out[0];
  out[1].dtype = TP_DTYPE_I64;
  *n_out = 2;
  return NULL;
}

void tp_emit_max_pool(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                      int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                      tp_hlo_value_t *out) {
  int t = op->code ? 1 : 0;
  pool_t p;
  tp_status_t *st = parse_pool(args, n_args, t + 1, &p);
  if (st) {
    tp_hlo_fail(b, st);
    return;
  }
  tp_hlo_value_t x = in[t];
  int nd = x.ndim, h = nd - 2, w = nd - 1;
  int64_t H = x.dims[h], W = x.dims[w];
  if (op->code) {
    /* grad_input: scatter-add grad_output at (plane, index) into zeros of self's shape. */
    tp_dtype_t md = tp_math_dtype(out_meta[0].dtype);
    tp_hlo_value_t g = tp_hlo_convert(b, in[0], md);
    tp_hlo_value_t idx = tp_hlo_convert(b, in[7], TP_DTYPE_I64);
    int64_t planes = 1;
    for (int i = 0; i < nd - 2; i++) planes *= x.dims[i];
    int64_t pd[3] = {planes, g.dims[h], g.dims[w]};
    g = tp_hlo_reshape(b, g, 3, pd);
    idx = tp_hlo_reshape(b, idx, 3, pd);
    tp_hlo_value_t plane = tp_hlo_iota(b, TP_DTYPE_I64, 3, pd, 0);
    tp_hlo_value_t lin = tp_hlo_binary(b, TP_HLO_ADD, idx,
                                       tp_hlo_binary(b, TP_HLO_MUL, plane, tp_emit_full_like(b, (double)(H * W), &plane)));
    int64_t total = planes * H * W;
    tp_hlo_value_t zeros = tp_hlo_broadcast_to(b, tp_hlo_constant(b, md, 0), 1, &total);
    tp_hlo_value_t r = tp_hlo_scatter_1d_op(b, zeros, lin, g, TP_HLO_ADD);
    out[0] = tp_hlo_convert(b, tp_hlo_reshape(b, r, nd, x.dims), out_meta[0].dtype);
    return;
  }
  int64_t Ho = out_meta[0].sizes[h], Wo = out_meta[0].sizes[w];
  /* Pad with the lowest value so padding never wins; enough on the high side for every window. */
  int64_t lo[TP_MAX_DIMS] = {0}, hi[TP_MAX_DIMS] = {0};
  int64_t need[2] = {(Ho - 1) * p.s[0] + p.d[0] * (p.k[0] - 1) + 1, (Wo - 1) * p.s[1] + p.d[1] * (p.k[1] - 1) + 1};
  lo[h] = p.p[0];
  lo[w] = p.p[1];
  hi[h] = need[0] - H - p.p[0] > 0 ? need[0] - H - p.p[0] : 0;
  hi[w] = need[1] - W - p.p[1] > 0 ? need[1] - W - p.p[1] : 0;
  bool fl = tp_dtype_is_float(x.dtype);
  tp_hlo_value_t low = fl ? tp_hlo_constant(b, x.dtype, -INFINITY)
                          : tp_hlo_constant_i(b, x.dtype, x.dtype == TP_DTYPE_U8 ? 0 : INT64_MIN >> (64 - 8 * (int)tp_dtype_size(x.dtype)));
  tp_hlo_value_t xp = tp_hlo_pad(b, x, low, lo, hi);
  int64_t oshape[TP_MAX_DIMS];
  memcpy(oshape, out_meta[0].sizes, sizeof(int64_t) * (size_t)nd);
  tp_hlo_value_t rows = tp_hlo_iota(b, TP_DTYPE_I64, nd, oshape, h);
  tp_hlo_value_t cols = tp_hlo_iota(b, TP_DTYPE_I64, nd, oshape, w);
  tp_hlo_value_t best = {0}, best_idx = {0};
  for (int i = 0; i < p.k[0]; i++)
    for (int j = 0; j < p.k[1]; j++) {
      int64_t start[TP_MAX_DIMS] = {0}, limit[TP_MAX_DIMS], step[TP_MAX_DIMS];
      for (int d = 0; d < nd; d++) {
        limit[d] = xp.dims[d];
        step[d] = 1;
      }
      start[h] = i * p.d[0];
      start[w] = j * p.d[1];
      limit[h] = start[h] + (Ho - 1) * p.s[0] + 1;
      limit[w] = start[w] + (Wo - 1) * p.s[1] + 1;
      step[h] = p.s[0];
      step[w] = p.s[1];
      tp_hlo_value_t v = tp_hlo_slice(b, xp, start, limit, step);
      /* flat index into the unpadded plane: (ho*s - p + i*d) * W + (wo*s - p + j*d) */
      tp_hlo_value_t r = tp_hlo_binary(b, TP_HLO_ADD, tp_hlo_binary(b, TP_HLO_MUL, rows, tp_emit_full_like(b, (double)p.s[0], &rows)),
                                       tp_emit_full_like(b, (double)(i * p.d[0] - p.p[0]), &rows));
      tp_hlo_value_t c = tp_hlo_binary(b, TP_HLO_ADD, tp_hlo_binary(b, TP_HLO_MUL, cols, tp_emit_full_like(b, (double)p.s[1], &cols)),
                                       tp_emit_full_like(b, (double)(j * p.d[1] - p.p[1]), &cols));
      tp_hlo_value_t idx = tp_hlo_binary(b, TP_HLO_ADD, tp_hlo_binary(b, TP_HLO_MUL, r, tp_emit_full_like(b, (double)W, &r)), c);
      if (i == 0 && j == 0) {
        best = v;
        best_idx = idx;
        continue;
      }
      /* Strictly greater keeps the first maximum; a NaN wins and stays. */
      tp_hlo_value_t take = tp_hlo_compare(b, TP_CMP_GT, v, best);
      if (fl)
        take = tp_hlo_binary(b, TP_HLO_OR, take,
                             tp_hlo_binary(b, TP_HLO_AND, tp_hlo_compare(b, TP_CMP_NE, v, v),
                                           tp_hlo_compare(b, TP_CMP_EQ, best, best)));
      best = tp_hlo_select(b, take, v, best);
      best_idx = tp_hlo_select(b, take, idx, best_idx);
    }
  out[0] = best;
  out[1] = best_idx;
}
