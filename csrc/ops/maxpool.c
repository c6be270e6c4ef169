/* Max pooling family: max_pool{2,3}d_with_indices, adaptive_max_pool{2,3}d, their backwards, and
 * max_unpool{2,3}d. The fixed-window forward walks the kernel offsets (an unrolled loop of
 * strided slices of the padded input); the adaptive forward walks the offsets of the largest
 * window, gathering each one. Both keep the running maximum and the flat index (within its
 * plane) of CPU's choice: the first maximum, or the last NaN. The backwards scatter-add gradients
 * at those indices; max_unpool scatters the input to them. Depends on ops/ helpers and hlo/ only.
 * |code| of the max_pool rows: bit 0 backward, bit 1 three spatial dims, bit 2 adaptive. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/families.h"

typedef struct {
  int k;  /* spatial rank */
  bool backward, adaptive;
  int64_t ks[3], s[3], p[3], d[3];
  bool ceil_mode;
} pool_t;

static void tuple(const tp_op_arg_t *a, int k, int64_t dflt_a, const int64_t *dflt, int64_t *out) {
  int n = a && a->kind == TP_ARG_INTS ? a->n : 0;
  for (int i = 0; i < k; i++)
    out[i] = n == 0 ? (dflt ? dflt[i] : dflt_a) : a->ints[n == 1 ? 0 : i];
}

/* (kernel, stride, padding, dilation, ceil_mode) from args[at]. */
static tp_status_t *parse_pool(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args, pool_t *p) {
  memset(p, 0, sizeof(*p));
  p->backward = op->code & TP_MPF_BACKWARD;
  p->k = op->code & TP_MPF_3D ? 3 : 2;
  p->adaptive = op->code & TP_MPF_ADAPTIVE;
  if (p->adaptive) return NULL;
  int at = p->backward ? 2 : 1;
  if (n_args < at + 5) return tp_make_status(TP_INVALID_ARGUMENT, "%s: missing arguments", op->name);
  for (int j = 0; j < 4; j++)
    if (args[at + j].kind == TP_ARG_INTS && args[at + j].n != 0 && args[at + j].n != 1 &&
        args[at + j].n != p->k)
      return tp_make_status(TP_UNIMPLEMENTED, "%s: tuple length", op->name);
  tuple(&args[at], p->k, 1, NULL, p->ks);
  tuple(&args[at + 1], p->k, 0, p->ks, p->s); /* stride defaults to the kernel size */
  tuple(&args[at + 2], p->k, 0, NULL, p->p);
  tuple(&args[at + 3], p->k, 1, NULL, p->d);
  p->ceil_mode = args[at + 4].kind == TP_ARG_INT && args[at + 4].i;
  for (int i = 0; i < p->k; i++) {
    if (p->ks[i] < 1 || p->s[i] < 1 || p->d[i] < 1)
      return tp_make_status(TP_INVALID_ARGUMENT, "%s: kernel, stride and dilation must be positive", op->name);
    if (p->p[i] < 0 || p->p[i] > p->ks[i] / 2)
      return tp_make_status(TP_INVALID_ARGUMENT, "pad should be at most half of effective kernel size");
  }
  return NULL;
}

/* PyTorch's pooling_output_shape: the division rounds down, also for a window larger than the
 * padded input (a negative span), whose output size is then 0 or less. */
static int64_t pool_out(int64_t in, const pool_t *p, int i) {
  int64_t span = in + 2 * p->p[i] - p->d[i] * (p->ks[i] - 1) - 1 + (p->ceil_mode ? p->s[i] - 1 : 0);
  int64_t o = (span >= 0 ? span / p->s[i] : -((-span + p->s[i] - 1) / p->s[i])) + 1;
  if (p->ceil_mode && (o - 1) * p->s[i] >= in + p->p[i]) o--;
  return o;
}

/* max_pool{2,3}d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode),
 * its backward(grad_output, self, ..., indices), adaptive_max_pool{2,3}d(self, output_size),
 * adaptive_max_pool{2,3}d_backward(grad_output, self, indices). */
tp_status_t *tp_infer_max_pool(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                               int *n_out) {
  pool_t p;
  TP_RETURN_IF_ERROR(parse_pool(op, args, n_args, &p));
  int t = p.backward ? 1 : 0, k = p.k;
  if (n_args < t + 2 || args[t].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  const tp_meta_t *x = &args[t].meta;
  if (x->ndim != k + 1 && x->ndim != k + 2)
    return tp_make_status(TP_UNIMPLEMENTED, "%s: rank", op->name);
  for (int d = 0; d < x->ndim; d++)
    if (x->sizes[d] <= 0) return tp_make_status(TP_UNIMPLEMENTED, "%s: empty input", op->name);
  if (x->dtype == TP_DTYPE_BOOL) return tp_make_status(TP_UNIMPLEMENTED, "%s on bool", op->name);
  /* CPU's adaptive kernels take floating types only. */
  if (p.adaptive && !tp_dtype_is_float(x->dtype))
    return tp_make_status(TP_UNIMPLEMENTED, "%s: dtype", op->name);
  if (p.backward) { /* grad_input has self's shape */
    const tp_op_arg_t *g = &args[0], *idx = &args[p.adaptive ? 2 : 7];
    if (n_args < (p.adaptive ? 3 : 8) || g->kind != TP_ARG_TENSOR || idx->kind != TP_ARG_TENSOR ||
        idx->meta.dtype != TP_DTYPE_I64 || g->meta.dtype != x->dtype || g->meta.ndim != x->ndim ||
        memcmp(g->meta.sizes, idx->meta.sizes, sizeof(int64_t) * (size_t)x->ndim) != 0 ||
        idx->meta.ndim != x->ndim)
      return tp_make_status(TP_UNIMPLEMENTED, "%s: arguments", op->name);
    out[0] = *x;
    *n_out = 1;
    return NULL;
  }
  out[0] = *x;
  bool too_small = false;
  for (int i = 0; i < k; i++) {
    int d = x->ndim - k + i;
    if (p.adaptive) {
      if (args[1].kind != TP_ARG_INTS || args[1].n != k)
        return tp_make_status(TP_UNIMPLEMENTED, "%s: output_size", op->name);
      out[0].sizes[d] = args[1].ints[i];
      if (out[0].sizes[d] <= 0) return tp_make_status(TP_UNIMPLEMENTED, "%s: output size", op->name);
    } else {
      out[0].sizes[d] = pool_out(x->sizes[d], &p, i);
      too_small = too_small || out[0].sizes[d] < 1;
    }
  }
  if (too_small) { /* CPU's words: the channel and spatial sizes, in and out */
    char given[96] = "", calc[96] = "";
    for (int d = x->ndim - k - 1, gi = 0, ci = 0; d < x->ndim; d++) {
      gi += snprintf(given + gi, sizeof(given) - (size_t)gi, "%s%lld", gi ? "x" : "", (long long)x->sizes[d]);
      ci += snprintf(calc + ci, sizeof(calc) - (size_t)ci, "%s%lld", ci ? "x" : "", (long long)out[0].sizes[d]);
    }
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "Given input size: (%s). Calculated output size: (%s). Output size is too small",
                          given, calc);
  }
  out[1] = out[0];
  out[1].dtype = TP_DTYPE_I64;
  *n_out = 2;
  return NULL;
}

/* Scatters |v| (shape of |idx|, i64 flat indices within each plane of |k| trailing dims) into a
 * zero tensor of |shape|, adding duplicates (|add|) or keeping the last. Indices outside the
 * plane are dropped. */
static tp_hlo_value_t scatter_planes(tp_hlo_builder_t *b, tp_hlo_value_t v, tp_hlo_value_t idx,
                                     int k, int ndim, const int64_t *shape, bool add) {
  int64_t planes = 1, plane = 1, n = tp_hlo_numel(&v);
  for (int i = 0; i < ndim - k; i++) planes *= shape[i];
  for (int i = ndim - k; i < ndim; i++) plane *= shape[i];
  int64_t total = planes * plane;
  int64_t pd[2] = {planes, n / planes};
  v = tp_hlo_reshape(b, v, 2, pd);
  idx = tp_hlo_reshape(b, idx, 2, pd);
  tp_hlo_value_t pl = tp_hlo_iota(b, TP_DTYPE_I64, 2, pd, 0);
  tp_hlo_value_t bad = tp_hlo_binary(b, TP_HLO_OR, tp_hlo_compare(b, TP_CMP_LT, idx, tp_k(b, 0, idx)),
                                     tp_hlo_compare(b, TP_CMP_GE, idx, tp_k(b, (double)plane, idx)));
  tp_hlo_check(b, bad, tp_hlo_constant_i(b, TP_DTYPE_I32, TP_CHECK_INDEX));
  tp_hlo_value_t lin = tp_hlo_binary(b, TP_HLO_ADD, idx, tp_hlo_binary(b, TP_HLO_MUL, pl, tp_k(b, (double)plane, pl)));
  lin = tp_hlo_select(b, bad, tp_k(b, (double)total, lin), lin);
  lin = tp_hlo_reshape(b, lin, 1, &n);
  v = tp_hlo_reshape(b, v, 1, &n);
  tp_hlo_value_t zeros = tp_hlo_broadcast_to(b, tp_hlo_constant(b, v.dtype, 0), 1, &total);
  if (add) return tp_hlo_reshape(b, tp_hlo_scatter_1d_op(b, zeros, lin, v, TP_HLO_ADD), ndim, shape);
  /* The last write wins: scatter the largest source position to each target, then gather. */
  tp_hlo_value_t pos = tp_hlo_iota(b, TP_DTYPE_I64, 1, &n, 0);
  tp_hlo_value_t none = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, -1), 1, &total);
  tp_hlo_value_t src = tp_hlo_scatter_1d_op(b, none, lin, pos, TP_HLO_MAX);
  tp_hlo_value_t hit = tp_hlo_compare(b, TP_CMP_GE, src, tp_k(b, 0, src));
  tp_hlo_value_t g = tp_hlo_gather_1d(b, v, tp_hlo_binary(b, TP_HLO_MAX, src, tp_k(b, 0, src)));
  return tp_hlo_reshape(b, tp_hlo_select(b, hit, g, zeros), ndim, shape);
}

/* CPU's choice between the running maximum and candidate |v|: strictly greater, or a NaN. */
static tp_hlo_value_t takes(tp_hlo_builder_t *b, tp_hlo_value_t v, tp_hlo_value_t best) {
  tp_hlo_value_t take = tp_hlo_compare(b, TP_CMP_GT, v, best);
  if (tp_dtype_is_float(v.dtype)) take = tp_hlo_binary(b, TP_HLO_OR, take, tp_hlo_compare(b, TP_CMP_NE, v, v));
  return take;
}

static void emit_fixed(tp_hlo_builder_t *b, const pool_t *p, tp_hlo_value_t x, const tp_meta_t *om,
                       tp_hlo_value_t *out) {
  int nd = x.ndim, k = p->k, f = nd - k;
  int64_t lo[TP_MAX_DIMS] = {0}, hi[TP_MAX_DIMS] = {0};
  for (int i = 0; i < k; i++) {
    /* Pad with the lowest value so padding never wins; enough on the high side for every window. */
    int64_t need = (om->sizes[f + i] - 1) * p->s[i] + p->d[i] * (p->ks[i] - 1) + 1;
    lo[f + i] = p->p[i];
    hi[f + i] = need - x.dims[f + i] - p->p[i] > 0 ? need - x.dims[f + i] - p->p[i] : 0;
  }
  bool fl = tp_dtype_is_float(x.dtype);
  tp_hlo_value_t low = fl ? tp_hlo_constant(b, x.dtype, -INFINITY)
                          : tp_hlo_constant_i(b, x.dtype, x.dtype == TP_DTYPE_U8 ? 0 : INT64_MIN >> (64 - 8 * (int)tp_dtype_size(x.dtype)));
  tp_hlo_value_t xp = tp_hlo_pad(b, x, low, lo, hi);
  tp_hlo_value_t pos[3];
  for (int i = 0; i < k; i++) pos[i] = tp_hlo_iota(b, TP_DTYPE_I64, nd, om->sizes, f + i);
  int64_t n_off = 1;
  for (int i = 0; i < k; i++) n_off *= p->ks[i];
  tp_hlo_value_t best = {0}, best_idx = {0};
  for (int64_t o = 0; o < n_off; o++) {
    int64_t t[3], rem = o;
    for (int i = k - 1; i >= 0; i--) {
      t[i] = rem % p->ks[i];
      rem /= p->ks[i];
    }
    int64_t start[TP_MAX_DIMS] = {0}, limit[TP_MAX_DIMS], step[TP_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
      limit[d] = xp.dims[d];
      step[d] = 1;
    }
    /* flat index into the unpadded plane: sum over dims of (o*s - p + t*d) * stride */
    tp_hlo_value_t idx = {0};
    int64_t stride = 1;
    for (int i = k - 1; i >= 0; i--) {
      int d = f + i;
      start[d] = t[i] * p->d[i];
      limit[d] = start[d] + (om->sizes[d] - 1) * p->s[i] + 1;
      step[d] = p->s[i];
      tp_hlo_value_t c = tp_hlo_binary(b, TP_HLO_ADD, tp_hlo_binary(b, TP_HLO_MUL, pos[i], tp_k(b, (double)p->s[i], pos[i])),
                                       tp_k(b, (double)(t[i] * p->d[i] - p->p[i]), pos[i]));
      c = tp_hlo_binary(b, TP_HLO_MUL, c, tp_k(b, (double)stride, c));
      idx = i == k - 1 ? c : tp_hlo_binary(b, TP_HLO_ADD, idx, c);
      stride *= x.dims[d];
    }
    tp_hlo_value_t v = tp_hlo_slice(b, xp, start, limit, step);
    if (o == 0) {
      best = v;
      best_idx = idx;
      continue;
    }
    tp_hlo_value_t take = takes(b, v, best);
    best = tp_hlo_select(b, take, v, best);
    best_idx = tp_hlo_select(b, take, idx, best_idx);
  }
  out[0] = best;
  out[1] = best_idx;
}

/* Adaptive windows along each spatial dim: [floor(o*n/m), ceil((o+1)*n/m)). */
static void emit_adaptive(tp_hlo_builder_t *b, const pool_t *p, tp_hlo_value_t x, const tp_meta_t *om,
                          tp_hlo_value_t *out) {
  int nd = x.ndim, k = p->k, f = nd - k;
  tp_hlo_value_t lo[3], hi[3];
  int64_t K[3], n_off = 1;
  for (int i = 0; i < k; i++) {
    int64_t n = x.dims[f + i], m = om->sizes[f + i];
    tp_hlo_value_t o = tp_hlo_iota(b, TP_DTYPE_I64, nd, om->sizes, f + i);
    lo[i] = tp_hlo_binary(b, TP_HLO_DIV, tp_hlo_binary(b, TP_HLO_MUL, o, tp_k(b, (double)n, o)), tp_k(b, (double)m, o));
    tp_hlo_value_t e = tp_hlo_binary(b, TP_HLO_MUL, tp_hlo_binary(b, TP_HLO_ADD, o, tp_k(b, 1, o)), tp_k(b, (double)n, o));
    hi[i] = tp_hlo_binary(b, TP_HLO_DIV, tp_hlo_binary(b, TP_HLO_ADD, e, tp_k(b, (double)(m - 1), o)), tp_k(b, (double)m, o));
    K[i] = 1;
    for (int64_t j = 0; j < m; j++) {
      int64_t w = ((j + 1) * n + m - 1) / m - j * n / m;
      if (w > K[i]) K[i] = w;
    }
    n_off *= K[i];
  }
  int64_t total = tp_hlo_numel(&x), plane = 1;
  for (int i = 0; i < k; i++) plane *= x.dims[f + i];
  tp_hlo_value_t flat = tp_hlo_reshape(b, x, 1, &total);
  /* plane offset of every output position */
  tp_hlo_value_t base = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, 0), nd, om->sizes);
  int64_t pstride = plane;
  for (int d = f - 1; d >= 0; d--) {
    tp_hlo_value_t c = tp_hlo_iota(b, TP_DTYPE_I64, nd, om->sizes, d);
    base = tp_hlo_binary(b, TP_HLO_ADD, base, tp_hlo_binary(b, TP_HLO_MUL, c, tp_k(b, (double)pstride, c)));
    pstride *= x.dims[d];
  }
  int64_t on = tp_meta_numel(om);
  tp_hlo_value_t best = {0}, best_idx = {0};
  for (int64_t o = 0; o < n_off; o++) {
    int64_t t[3], rem = o;
    for (int i = k - 1; i >= 0; i--) {
      t[i] = rem % K[i];
      rem /= K[i];
    }
    tp_hlo_value_t idx = {0}, valid = {0};
    int64_t stride = 1;
    for (int i = k - 1; i >= 0; i--) {
      tp_hlo_value_t c = tp_hlo_binary(b, TP_HLO_ADD, lo[i], tp_k(b, (double)t[i], lo[i]));
      tp_hlo_value_t ok = tp_hlo_compare(b, TP_CMP_LT, c, hi[i]);
      c = tp_hlo_binary(b, TP_HLO_MIN, c, tp_k(b, (double)(x.dims[f + i] - 1), c));
      c = tp_hlo_binary(b, TP_HLO_MUL, c, tp_k(b, (double)stride, c));
      idx = i == k - 1 ? c : tp_hlo_binary(b, TP_HLO_ADD, idx, c);
      valid = i == k - 1 ? ok : tp_hlo_binary(b, TP_HLO_AND, valid, ok);
      stride *= x.dims[f + i];
    }
    tp_hlo_value_t g = tp_hlo_reshape(b, tp_hlo_binary(b, TP_HLO_ADD, base, idx), 1, &on);
    tp_hlo_value_t v = tp_hlo_reshape(b, tp_hlo_gather_1d(b, flat, g), nd, om->sizes);
    if (o == 0) { /* the first offset is always inside the window */
      best = v;
      best_idx = idx;
      continue;
    }
    tp_hlo_value_t take = tp_hlo_binary(b, TP_HLO_AND, valid, takes(b, v, best));
    best = tp_hlo_select(b, take, v, best);
    best_idx = tp_hlo_select(b, take, idx, best_idx);
  }
  out[0] = best;
  out[1] = best_idx;
}

void tp_emit_max_pool(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                      int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                      tp_hlo_value_t *out) {
  pool_t p;
  if (!tp_emit_ok(b, parse_pool(op, args, n_args, &p))) return;
  if (p.backward) {
    /* grad_input: scatter-add grad_output at (plane, index) into zeros of self's shape. */
    tp_dtype_t md = tp_math_dtype(out_meta[0].dtype);
    tp_hlo_value_t g = tp_hlo_convert(b, in[0], md);
    tp_hlo_value_t idx = in[p.adaptive ? 2 : 7];
    tp_hlo_value_t r = scatter_planes(b, g, idx, p.k, out_meta[0].ndim, out_meta[0].sizes, true);
    out[0] = tp_hlo_convert(b, r, out_meta[0].dtype);
    return;
  }
  if (p.adaptive) emit_adaptive(b, &p, in[0], &out_meta[0], out);
  else emit_fixed(b, &p, in[0], &out_meta[0], out);
}

/* max_unpool2d(self, indices, output_size), max_unpool3d(self, indices, output_size, stride,
 * padding): zeros of the output size with self's values written at indices, the last write to a
 * position winning as in CPU's sequential loop. |code| is the spatial rank (tp_max_unpool_t). */
tp_status_t *tp_infer_max_unpool(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                                 int *n_out) {
  int k = op->code;
  if (n_args < (k == TP_UNPOOL_3D ? 5 : 3) || args[0].kind != TP_ARG_TENSOR || args[1].kind != TP_ARG_TENSOR ||
      args[2].kind != TP_ARG_INTS)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  const tp_meta_t *x = &args[0].meta, *idx = &args[1].meta;
  /* CPU's own checks word the errors. */
  if (args[2].n != k || idx->dtype != TP_DTYPE_I64 || idx->ndim != x->ndim ||
      memcmp(idx->sizes, x->sizes, sizeof(int64_t) * (size_t)x->ndim) != 0 ||
      (x->ndim != k + 1 && x->ndim != k + 2) || x->dtype == TP_DTYPE_BOOL)
    return tp_make_status(TP_UNIMPLEMENTED, "%s: arguments", op->name);
  if (k == 3) {
    for (int j = 3; j < 5; j++)
      if (args[j].kind != TP_ARG_INTS || args[j].n != 3)
        return tp_make_status(TP_UNIMPLEMENTED, "%s: stride/padding", op->name);
    /* The emitter reads only the indices; CPU still checks the stride. */
    if (args[3].ints[0] <= 0 || args[3].ints[1] <= 0 || args[3].ints[2] <= 0) {
      char st[96];
      tp_format_ints(st, sizeof(st), args[3].ints, 3);
      return tp_make_status(TP_INVALID_ARGUMENT, "strides should be greater than zero, but got stride: %s", st);
    }
  }
  for (int d = 0; d < x->ndim; d++)
    if (x->sizes[d] <= 0) return tp_make_status(TP_UNIMPLEMENTED, "%s: empty input", op->name);
  out[0] = *x;
  for (int i = 0; i < k; i++) {
    if (args[2].ints[i] <= 0) return tp_make_status(TP_UNIMPLEMENTED, "%s: output_size", op->name);
    out[0].sizes[x->ndim - k + i] = args[2].ints[i];
  }
  *n_out = 1;
  return NULL;
}

void tp_emit_max_unpool(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                        int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                        tp_hlo_value_t *out) {
  (void)args;
  (void)n_args;
  out[0] = scatter_planes(b, in[0], in[1], op->code, out_meta[0].ndim, out_meta[0].sizes, false);
}
