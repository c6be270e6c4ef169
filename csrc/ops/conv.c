/* Convolution family: convolution (1-3 spatial dims, stride, padding, dilation, groups,
 * transposed) and convolution_backward (its bias_sizes argument dropped by infer), as
 * stablehlo.convolution, and im2col/col2im. Grouped transposed convolution (forward and
 * backward) falls back to CPU (UNIMPLEMENTED). Half types accumulate in f32. */
#include <stdio.h>
#include <string.h>

#include "ops/families.h"

typedef struct {
  int ns;                        /* spatial dims */
  int64_t stride[3], pad[3], dil[3], out_pad[3];
  bool transposed;
  int64_t groups;
} conv_t;

/* Reads (stride, padding, dilation, transposed, output_padding, groups) starting at args[at]. */
static tp_status_t *parse_conv(const tp_op_arg_t *args, int n_args, int at, int ns, conv_t *c) {
  memset(c, 0, sizeof(*c));
  c->ns = ns;
  if (ns < 1 || ns > 3) return tp_make_status(TP_UNIMPLEMENTED, "convolution with %d spatial dims", ns);
  if (n_args < at + 6) return tp_make_status(TP_INVALID_ARGUMENT, "convolution: missing arguments");
  const tp_op_arg_t *lists[4] = {&args[at], &args[at + 1], &args[at + 2], &args[at + 4]};
  int64_t *dst[4] = {c->stride, c->pad, c->dil, c->out_pad};
  const int64_t dflt[4] = {1, 0, 1, 0};
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < ns; i++) {
      const tp_op_arg_t *l = lists[k];
      int n = l->kind == TP_ARG_INTS ? l->n : 0;
      dst[k][i] = n == 0 ? dflt[k] : l->ints[n == 1 ? 0 : i];
    }
  c->transposed = args[at + 3].kind == TP_ARG_INT && args[at + 3].i;
  c->groups = args[at + 5].kind == TP_ARG_INT && args[at + 5].i > 0 ? args[at + 5].i : 1;
  for (int i = 0; i < ns; i++)
    if (c->stride[i] < 1 || c->dil[i] < 1 || c->pad[i] < 0)
      return tp_make_status(TP_INVALID_ARGUMENT, "convolution: non-positive stride or dilation, or negative padding");
  return NULL;
}

static const char *spec(int ns, const char *lhs, const char *rhs, const char *out, char *buf, size_t n) {
  static const char *sp[] = {"0", "0, 1", "0, 1, 2"};
  snprintf(buf, n, "[%s, %s]x[%s, %s]->[%s, %s]", lhs, sp[ns - 1], rhs, sp[ns - 1], out, sp[ns - 1]);
  return buf;
}

/* convolution(input, weight, bias?, stride, padding, dilation, transposed,
 * output_padding, groups) */
tp_status_t *tp_infer_conv(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                           int *n_out) {
  if (n_args < 9 || args[0].kind != TP_ARG_TENSOR || args[1].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected input and weight", op->name);
  const tp_meta_t *x = &args[0].meta, *w = &args[1].meta;
  int ns = x->ndim - 2;
  conv_t c;
  TP_RETURN_IF_ERROR(parse_conv(args, n_args, 3, ns, &c));
  if (w->ndim != x->ndim)
    return tp_make_status(TP_INVALID_ARGUMENT, "Expected %d-dimensional weight, but got weight of size %d-D",
                          x->ndim, w->ndim);
  if (x->dtype != w->dtype)
    return tp_make_status(TP_INVALID_ARGUMENT, "Input type (%s) and weight type (%s) should be the same",
                          tp_dtype_name(x->dtype), tp_dtype_name(w->dtype));
  /* CPU also convolves int64 (exactly, wrapping on overflow, as an i64 convolution does); which
   * other integer types its kernels take varies by kernel, so those run there. */
  if (!tp_dtype_is_float(x->dtype) && x->dtype != TP_DTYPE_I64)
    return tp_make_status(TP_UNIMPLEMENTED, "convolution of %s tensors", tp_dtype_name(x->dtype));
  if (c.transposed && c.groups != 1) return tp_make_status(TP_UNIMPLEMENTED, "grouped transposed convolution");
  int64_t cin = c.transposed ? w->sizes[0] : w->sizes[1] * c.groups;
  if (x->sizes[1] != cin)
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "Given groups=%lld, weight of size %lld, expected input to have %lld channels, but got %lld channels instead",
                          (long long)c.groups, (long long)w->sizes[0], (long long)cin, (long long)x->sizes[1]);
  out[0] = *x;
  out[0].sizes[1] = c.transposed ? w->sizes[1] : w->sizes[0];
  for (int i = 0; i < ns; i++) {
    int64_t s = x->sizes[2 + i], k = w->sizes[2 + i];
    int64_t o = c.transposed ? (s - 1) * c.stride[i] - 2 * c.pad[i] + c.dil[i] * (k - 1) + c.out_pad[i] + 1
                             : (s + 2 * c.pad[i] - c.dil[i] * (k - 1) - 1) / c.stride[i] + 1;
    if (o <= 0)
      return tp_make_status(TP_INVALID_ARGUMENT, "convolution: calculated output size is too small");
    out[0].sizes[2 + i] = o;
  }
  *n_out = 1;
  return NULL;
}

/* The weight of the convolution that computes the input gradient (or a transposed convolution):
 * spatially reversed, input/output channels exchanged within each group. */
static tp_hlo_value_t transpose_weight(tp_hlo_builder_t *b, tp_hlo_value_t w, int64_t groups,
                                       bool from_transposed) {
  int ns = w.ndim - 2;
  int64_t rev[3] = {2, 3, 4};
  for (int i = 0; i < ns; i++) rev[i] = 2 + i;
  w = tp_hlo_reverse(b, w, ns, rev);
  if (from_transposed || groups == 1) return w; /* the spec swaps o and i */
  /* [O, C/G, K] -> [G, O/G, C/G, K] -> [G, C/G, O/G, K] -> [C, O/G, K] */
  int64_t o = w.dims[0], cg = w.dims[1], og = o / groups;
  int64_t d5[TP_MAX_DIMS] = {groups, og, cg};
  for (int i = 0; i < ns; i++) d5[3 + i] = w.dims[2 + i];
  w = tp_hlo_reshape(b, w, w.ndim + 1, d5);
  int64_t perm[TP_MAX_DIMS] = {0, 2, 1, 3, 4, 5};
  w = tp_hlo_transpose(b, w, perm);
  int64_t d4[TP_MAX_DIMS] = {groups * cg, og};
  for (int i = 0; i < ns; i++) d4[2 + i] = w.dims[3 + i];
  return tp_hlo_reshape(b, w, w.ndim - 1, d4);
}

/* Tap |t| (row-major over the kernel sizes |ksize|) of the padded input |x|: its strided window
 * at the output's sizes |osz| (the channel dim |cd|, the spatial dims from |sd|); the tap is
 * placed in spatial dims |from| on, dims before |from| start at 0. */
static tp_hlo_value_t tap_window(tp_hlo_builder_t *b, int ns, const int64_t *ksize,
                                 const int64_t *stride, const int64_t *dil, tp_hlo_value_t x,
                                 int64_t t, int from, int cd, int sd, const int64_t *osz) {
  int64_t start[TP_MAX_DIMS] = {0}, limit[TP_MAX_DIMS], step[TP_MAX_DIMS] = {1, 1, 1, 1, 1};
  limit[0] = osz[0];
  limit[cd] = x.dims[cd];
  for (int64_t i = ns - 1, rest = t; i >= 0; i--) {
    int64_t at = 0;
    if (i >= from) { /* the tap's place, row-major */
      at = rest % ksize[i];
      rest /= ksize[i];
    }
    start[sd + i] = at * dil[i];
    limit[sd + i] = start[sd + i] + (osz[sd + i] - 1) * stride[i] + 1;
    step[sd + i] = stride[i];
  }
  return tp_hlo_slice(b, x, start, limit, step);
}

/* |acc| (nothing when its dtype is TP_DTYPE_INVALID) plus the sum over |n| taps of |x|'s strided
 * window (tap_window's) times the tap's weight per channel (column t of |wt|, [ch, n]). */
static tp_hlo_value_t add_taps(tp_hlo_builder_t *b, const conv_t *c, int ns, const int64_t *ksize,
                               tp_hlo_value_t x, tp_hlo_value_t wt, int64_t n, int from, int cd,
                               int sd, const int64_t *osz, tp_hlo_value_t acc) {
  const int nd = ns + 2;
  const int64_t ch = x.dims[cd];
  for (int64_t t = 0; t < n; t++) {
    tp_hlo_value_t window = tap_window(b, ns, ksize, c->stride, c->dil, x, t, from, cd, sd, osz);
    tp_hlo_value_t tap = tp_hlo_reshape(
        b, tp_hlo_slice(b, wt, (int64_t[]){0, t}, (int64_t[]){ch, t + 1}, (int64_t[]){1, 1}), 1, &ch);
    int64_t channel_dim = cd;
    tp_hlo_value_t term = tp_hlo_binary(
        b, TP_HLO_MUL, window, tp_hlo_broadcast_in_dim(b, tap, nd, osz, &channel_dim));
    acc = acc.dtype == TP_DTYPE_INVALID ? term : tp_hlo_binary(b, TP_HLO_ADD, acc, term);
  }
  return acc;
}

/* A depthwise convolution (one filter per channel: groups = input = output channels) with a
 * kernel of at most 49 taps, as the sum over taps of the padded input's strided window times the
 * tap's weight per channel. XLA's CPU backend ran grouped convolutions 15-70x slower than
 * PyTorch's (mobilenet's and efficientnet's 3x3 depthwise layers: 95 ms against 1.3 ms at 256
 * channels of 56x56); windows and products fuse into one pass over memory. |cl|: the input is
 * channels-last, and the taps run in that order (channels innermost), which XLA reads from the
 * storage as it is (a 7x7 of 40 channels at 56x56: 3.2 ms taken in NCHW order).
 * In a whole graph, a kernel of more than 25 taps sums as a loop over its rows (of its first
 * spatial dim), each adding its row's taps to the carried sum: a loop's result is a boundary XLA
 * fuses nothing across. As one expression, XLA fused the taps into their consumers and computed
 * them in each consumer's order: ConvNeXt's permute to channels-last after its 7x7 read the 49
 * windows across the input's layout, 5.5 ms against 0.8 ms eager for that pair at 40 channels of
 * 56x56; its compiled forward took 74 ms, 31-34 ms with the loop. A loop costs its passes: 3x3
 * layers (mobilenet's) stay one expression, which ran faster there. (The input moves a row along
 * per pass by static slices: dynamic ones ran 4x slower at the optimization level graphs
 * compile at.) False: not such a convolution (emit the general one). */
static bool emit_depthwise(tp_hlo_builder_t *b, const conv_t *c, int ns, tp_hlo_value_t x,
                           tp_hlo_value_t w, tp_dtype_t md, const int64_t *out_sizes, bool cl,
                           tp_hlo_value_t *out) {
  int64_t ch = x.dims[1], taps = 1;
  if (c->transposed || c->groups != ch || w.dims[0] != ch || w.dims[1] != 1) return false;
  for (int i = 0; i < ns; i++) {
    taps *= w.dims[2 + i];
    if (out_sizes[2 + i] == 0) return false;
  }
  if (taps > 49 || out_sizes[0] == 0) return false;
  int nd = ns + 2, cd = cl ? nd - 1 : 1, sd = cl ? 1 : 2; /* the channel dim, the first spatial */
  int64_t to_cl[TP_MAX_DIMS] = {0}, from_cl[TP_MAX_DIMS] = {0}, osz[TP_MAX_DIMS];
  osz[0] = out_sizes[0];
  osz[cd] = ch;
  for (int i = 0; i < ns; i++) {
    osz[sd + i] = out_sizes[2 + i];
    to_cl[1 + i] = 2 + i;
    from_cl[2 + i] = 1 + i;
  }
  to_cl[nd - 1] = 1;
  from_cl[1] = nd - 1;
  x = tp_hlo_convert(b, x, md);
  if (cl) x = tp_hlo_transpose(b, x, to_cl);
  int64_t lo[TP_MAX_DIMS] = {0}, hi[TP_MAX_DIMS] = {0};
  for (int i = 0; i < ns; i++) lo[sd + i] = hi[sd + i] = c->pad[i];
  x = tp_hlo_pad(b, x, tp_hlo_constant(b, md, 0), lo, hi);
  int64_t ksize[TP_MAX_DIMS];
  memcpy(ksize, &w.dims[2], sizeof(int64_t) * (size_t)ns);
  const int64_t rows = ksize[0], per_row = taps / rows;
  w = tp_hlo_convert(b, w, md);
  tp_hlo_value_t acc = {.dtype = TP_DTYPE_INVALID};
  if (!tp_hlo_builder_whole_graph(b) || rows == 1 || taps <= 25) {
    acc = add_taps(b, c, ns, ksize, x, tp_hlo_reshape(b, w, 2, (int64_t[]){ch, taps}), taps, 0, cd,
                   sd, osz, acc);
  } else {
    int64_t zero[TP_MAX_DIMS] = {0}, one[TP_MAX_DIMS] = {1, 1, 1, 1, 1, 1}, shift[TP_MAX_DIMS] = {0};
    shift[sd] = c->dil[0];
    int64_t span[TP_MAX_DIMS]; /* the input rows one kernel row's windows read */
    memcpy(span, x.dims, sizeof(int64_t) * (size_t)nd);
    span[sd] = (out_sizes[2] - 1) * c->stride[0] + 1;
    /* carried: the row, the sum, the input moved up by the rows passed */
    tp_hlo_value_t init[3] = {tp_hlo_constant_i(b, TP_DTYPE_I32, 0),
                              tp_hlo_broadcast_to(b, tp_hlo_constant(b, md, 0), nd, osz), x};
    tp_hlo_value_t s[3], res[3];
    tp_hlo_while_begin(b, init, 3, s);
    tp_hlo_while_body(
        b, tp_hlo_compare(b, TP_CMP_LT, s[0], tp_hlo_constant_i(b, TP_DTYPE_I32, rows)), s);
    tp_hlo_value_t i0 = tp_hlo_constant_i(b, TP_DTYPE_I32, 0);
    tp_hlo_value_t wr = tp_hlo_reshape(
        b, tp_hlo_dynamic_slice(b, tp_hlo_reshape(b, w, 3, (int64_t[]){ch, rows, per_row}),
                                (tp_hlo_value_t[]){i0, s[0], i0}, (int64_t[]){ch, 1, per_row}),
        2, (int64_t[]){ch, per_row});
    tp_hlo_value_t next[3] = {
        tp_hlo_binary(b, TP_HLO_ADD, s[0], tp_hlo_constant_i(b, TP_DTYPE_I32, 1)),
        add_taps(b, c, ns, ksize, tp_hlo_slice(b, s[2], zero, span, one), wr, per_row, 1, cd, sd,
                 osz, s[1]),
        tp_hlo_pad(b, tp_hlo_slice(b, s[2], shift, x.dims, one), tp_hlo_constant(b, md, 0), zero,
                   shift)};
    tp_hlo_while_end(b, next, res);
    acc = res[1];
  }
  *out = cl ? tp_hlo_transpose(b, acc, from_cl) : acc;
  return true;
}

/* The patches of |x| for a kernel of |k| (ns dims): for each tap (row-major), the zero-padded
 * input's strided window at the output's spatial sizes |out_sp|. |x| is [N, C, spatial...]
 * (patches [N, C, taps, L], L the output's spatial elements: im2col's rows) or, |cl|,
 * channels-last [N, spatial..., C] (patches [N, L, taps, C]). */
static tp_hlo_value_t patches(tp_hlo_builder_t *b, tp_hlo_value_t x, bool cl, int ns,
                              const int64_t *k, const int64_t *stride, const int64_t *pad,
                              const int64_t *dil, const int64_t *out_sp) {
  const int sp = cl ? 1 : 2, cd = cl ? ns + 1 : 1; /* the first spatial dim; the channel dim */
  int64_t lo[TP_MAX_DIMS] = {0}, hi[TP_MAX_DIMS] = {0}, taps = 1, L = 1;
  bool padded = false;
  for (int i = 0; i < ns; i++) {
    lo[sp + i] = hi[sp + i] = pad[i];
    padded = padded || pad[i];
    taps *= k[i];
    L *= out_sp[i];
  }
  if (padded) x = tp_hlo_pad(b, x, tp_hlo_constant(b, x.dtype, 0), lo, hi);
  /* Concatenated 16 at a time (the first of each batch the batches before): a small stack. */
  tp_hlo_value_t parts[17];
  int np = 0;
  int64_t sh[4] = {x.dims[0], cl ? L : x.dims[1], 1, cl ? x.dims[cd] : L};
  int64_t osz[TP_MAX_DIMS] = {x.dims[0]}; /* the windows' sizes: the batch, the output's spatial */
  memcpy(&osz[sp], out_sp, sizeof(int64_t) * (size_t)ns);
  for (int64_t t = 0; t < taps; t++) {
    parts[np++] = tp_hlo_reshape(b, tap_window(b, ns, k, stride, dil, x, t, 0, cd, sp, osz), 4, sh);
    if (np == 17 || t == taps - 1) {
      parts[0] = np == 1 ? parts[0] : tp_hlo_concatenate(b, parts, np, 2);
      np = 1;
    }
  }
  return parts[0];
}

/* A convolution as a matmul of the weight and the input's patches, which XLA's CPU backend runs
 * at its dot's speed: it ran NCHW convolutions through a transpose of the weight that cost more
 * than the convolution (a 3x3 512-channel layer at 7x7: 7.3 ms against 2.2 for the matmul's form
 * and 2.9 for PyTorch's), grouped ones 1.3-2.5x slower still. Taken for every 1x1 convolution
 * (no patches to build: the input is the operand), a strided or grouped one, and one whose
 * weight outweighs its patches (the deep layers); a stride-1 convolution over a large image
 * (patches taps times the input's size) stays XLA's; so do patches past 256 MB of f32. */
static bool matmul_form(const conv_t *c, int ns, const int64_t *x, const int64_t *w,
                        const int64_t *out_sizes, tp_dtype_t md) {
  if (c->transposed || !tp_dtype_is_float(md)) return false;
  int64_t n = x[0], ch = x[1], o = w[0], taps = 1, L = 1;
  bool strided = false;
  for (int i = 0; i < ns; i++) {
    taps *= w[2 + i];
    L *= out_sizes[2 + i];
    strided = strided || c->stride[i] > 1;
  }
  int64_t wn = o * (ch / c->groups) * taps, pn = n * ch * taps * L;
  if (n == 0 || L == 0 || o == 0 || ch == 0) return false;
  if (taps > 1 && !(strided || c->groups > 1 || wn >= pn)) return false;
  return pn <= ((int64_t)1 << 26);
}

/* The convolution as matmul_form says, if it says so (false: not taken). A channels-last input
 * (|cl|: the program read it through a transpose, and its output is written back so) is
 * convolved in its own order, which leaves XLA no transpose to make. */
static bool emit_as_matmul(tp_hlo_builder_t *b, const conv_t *c, int ns, tp_hlo_value_t x,
                           tp_hlo_value_t w, bool cl, tp_dtype_t md, const int64_t *out_sizes,
                           tp_hlo_value_t *out) {
  if (!matmul_form(c, ns, x.dims, w.dims, out_sizes, md)) return false;
  int64_t n = x.dims[0], ch = x.dims[1], o = w.dims[0], g = c->groups, taps = 1, L = 1;
  for (int i = 0; i < ns; i++) taps *= w.dims[2 + i], L *= out_sizes[2 + i];
  x = tp_hlo_convert(b, x, md);
  w = tp_hlo_convert(b, w, md);
  int64_t cgt = ch / g * taps, og = o / g, perm[TP_MAX_DIMS];
  if (cl && g == 1) {
    /* [N, spatial..., C] and the weight [O, kernel..., C]: patches [N L, taps C] times its
     * transpose give [N L, O], the output in its channels-last order. */
    for (int d = 0; d < ns + 2; d++) perm[d] = d == 0 ? 0 : d <= ns ? d + 1 : 1;
    tp_hlo_value_t p = patches(b, tp_hlo_transpose(b, x, perm), true, ns, &w.dims[2], c->stride,
                               c->pad, c->dil, &out_sizes[2]);
    p = tp_hlo_reshape(b, p, 2, (int64_t[]){n * L, cgt});
    tp_hlo_value_t wm = taps == 1 ? w : tp_hlo_transpose(b, w, perm);
    wm = tp_hlo_reshape(b, wm, 2, (int64_t[]){o, cgt});
    tp_hlo_value_t r = tp_hlo_dot_general(b, p, wm, 0, NULL, NULL, 1, (int64_t[]){1},
                                          (int64_t[]){1}, md);
    int64_t sh[TP_MAX_DIMS] = {n};
    for (int i = 0; i < ns; i++) sh[1 + i] = out_sizes[2 + i];
    sh[ns + 1] = o;
    for (int d = 0; d < ns + 2; d++) perm[d] = d == 0 ? 0 : d == 1 ? ns + 1 : d - 1;
    *out = tp_hlo_transpose(b, tp_hlo_reshape(b, r, ns + 2, sh), perm);
    return true;
  }
  tp_hlo_value_t p = patches(b, x, false, ns, &w.dims[2], c->stride, c->pad, c->dil,
                             &out_sizes[2]); /* [N, C, taps, L] */
  p = tp_hlo_reshape(b, p, 4, (int64_t[]){n, g, cgt, L});
  tp_hlo_value_t wm = tp_hlo_reshape(b, w, 3, (int64_t[]){g, og, cgt});
  /* [G, O/G, N, L]: the batch (groups), the weight's rows, the patches' batch and columns */
  tp_hlo_value_t r = tp_hlo_dot_general(b, wm, p, 1, (int64_t[]){0}, (int64_t[]){1}, 1,
                                        (int64_t[]){2}, (int64_t[]){2}, md);
  if (n > 1) r = tp_hlo_transpose(b, r, (int64_t[]){2, 0, 1, 3}); /* rows of L move whole */
  *out = tp_hlo_reshape(b, r, ns + 2, out_sizes);
  return true;
}

void tp_emit_conv(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                  const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  conv_t c;
  int ns = args[0].meta.ndim - 2;
  if (!tp_emit_ok(b, parse_conv(args, n_args, 3, ns, &c))) return;
  tp_dtype_t md = tp_math_dtype(out_meta->dtype);
  tp_hlo_value_t x = in[0], w = in[1];
  int64_t one[3] = {1, 1, 1}, lo[3], hi[3], lhs_dil[3], strides[3];
  char buf[96];
  tp_hlo_value_t r;
  if (emit_depthwise(b, &c, ns, x, w, md, out_meta->sizes, args[0].channels_last, &r) ||
      emit_as_matmul(b, &c, ns, x, w, args[0].channels_last, md, out_meta->sizes, &r)) {
    /* r: the sum of the taps, or the matmul's product */
  } else if (!c.transposed) {
    r = tp_hlo_convolution(b, x, w, spec(ns, "b, f", "o, i", "b, f", buf, sizeof(buf)), ns, c.stride,
                           c.pad, c.pad, one, c.dil, c.groups, 1, md, out_meta->sizes);
  } else {
    for (int i = 0; i < ns; i++) {
      int64_t k = args[1].meta.sizes[2 + i];
      lo[i] = c.dil[i] * (k - 1) - c.pad[i];
      hi[i] = lo[i] + c.out_pad[i];
      lhs_dil[i] = c.stride[i];
      strides[i] = 1;
    }
    r = tp_hlo_convolution(b, x, transpose_weight(b, w, 1, true),
                           spec(ns, "b, f", "i, o", "b, f", buf, sizeof(buf)), ns, strides, lo, hi,
                           lhs_dil, c.dil, 1, 1, md, out_meta->sizes);
  }
  if (args[2].kind == TP_ARG_TENSOR) {
    int64_t bd = 1;
    r = tp_hlo_binary(b, TP_HLO_ADD, r,
                      tp_hlo_broadcast_in_dim(b, tp_hlo_convert(b, in[2], md), r.ndim, r.dims, &bd));
  }
  out[0] = tp_hlo_convert(b, r, out_meta->dtype);
}

/* convolution_backward(grad_output, input, weight, bias_sizes?, stride, padding, dilation,
 * transposed, output_padding, groups, output_mask) -> (grad_input, grad_weight, grad_bias);
 * TP_CONVB_NO_BIAS_SIZES reads the form without bias_sizes (as convolution_backward_overrideable
 * has it). */
tp_status_t *tp_infer_conv_backward(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                    tp_meta_t *out, int *n_out) {
  if (op->code == TP_CONVB_BIAS_SIZES && n_args >= 11) {
    /* Drop bias_sizes (argument 3): the rest is the other form. */
    memmove(&args[3], &args[4], sizeof(args[0]) * (size_t)(n_args - 4));
    memset(&args[n_args - 1], 0, sizeof(args[0]));
  }
  if (n_args < 10 || args[0].kind != TP_ARG_TENSOR || args[1].kind != TP_ARG_TENSOR ||
      args[2].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  conv_t c;
  TP_RETURN_IF_ERROR(parse_conv(args, n_args, 3, args[1].meta.ndim - 2, &c));
  if (c.transposed && c.groups != 1)
    return tp_make_status(TP_UNIMPLEMENTED, "grouped transposed convolution backward");
  out[0] = args[1].meta;
  out[1] = args[2].meta;
  out[2] = args[2].meta;
  out[2].ndim = 1;
  out[2].sizes[0] = c.transposed ? args[2].meta.sizes[1] : args[2].meta.sizes[0];
  *n_out = 3;
  return NULL;
}

void tp_emit_conv_backward(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                           int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                           tp_hlo_value_t *out) {
  int ns = args[1].meta.ndim - 2;
  conv_t c;
  if (!tp_emit_ok(b, parse_conv(args, n_args, 3, ns, &c))) return;
  tp_dtype_t md = tp_math_dtype(out_meta[0].dtype);
  tp_hlo_value_t g = in[0], x = in[1], w = in[2];
  char buf[96];
  int64_t one[3] = {1, 1, 1}, lo[3], hi[3];
  tp_hlo_value_t gi, gw;
  /* Where the forward is a matmul of the weight and the patches (emit_as_matmul), so are the
   * gradients: the weight's, grad [G, O/G, N L] times the patches, contracted over N and L; the
   * input's of a 1x1 convolution with no stride or padding, the weight's transpose times grad. */
  int64_t taps = 1, L = 1, n = x.dims[0], ch = x.dims[1], o = w.dims[0], G = c.groups;
  bool pointwise = true;
  for (int i = 0; i < ns; i++) {
    taps *= w.dims[2 + i];
    L *= g.dims[2 + i];
    pointwise = pointwise && c.stride[i] == 1 && c.pad[i] == 0;
  }
  const bool mm = matmul_form(&c, ns, x.dims, w.dims, g.dims, md);
  const int64_t cg = ch / G, og = o / G;
  /* output_mask: a gradient nobody asked for is zeros (a ViT's patch embedding: the image's
   * gradient, a strided transposed convolution, took 0.9 s a step). */
  const tp_op_arg_t *mask = &args[9];
  bool need_gi = mask->kind != TP_ARG_INTS || mask->n < 3 || mask->ints[0];
  bool need_gw = mask->kind != TP_ARG_INTS || mask->n < 3 || mask->ints[1];
  /* A depthwise convolution's (emit_depthwise's form): the weight's gradient is, per channel,
   * grad times the patches summed over the batch and the image; the input's the depthwise
   * convolution, stride 1, of grad (its stride's gaps filled with zeros, padded as the transposed
   * convolution below pads it) with the weight reversed. */
  bool dw = !c.transposed && G == ch && o == ch && w.dims[1] == 1 && taps <= 49 &&
            tp_dtype_is_float(md) && n > 0 && L > 0 && n * ch * taps * L <= ((int64_t)1 << 26);
  conv_t back = c;
  int64_t glo[TP_MAX_DIMS] = {0}, ghi[TP_MAX_DIMS] = {0}, gaps[TP_MAX_DIMS] = {0};
  for (int i = 0; i < ns; i++) {
    int64_t s = x.dims[2 + i], k = w.dims[2 + i];
    glo[2 + i] = c.dil[i] * (k - 1) - c.pad[i];
    ghi[2 + i] = glo[2 + i] + (s + 2 * c.pad[i] - c.dil[i] * (k - 1) - 1) % c.stride[i];
    gaps[2 + i] = c.stride[i] - 1;
    back.pad[i] = 0;
    back.stride[i] = 1;
  }
  tp_hlo_value_t gc = tp_hlo_convert(b, g, md); /* grad in the math type: the taps' and matmuls' */
  tp_hlo_value_t gm = mm ? tp_hlo_reshape(b, gc, 4, (int64_t[]){n, G, og, L}) : g;
  if (!need_gi) {
    gi = tp_hlo_broadcast_to(b, tp_hlo_constant(b, md, 0), x.ndim, x.dims);
  } else if (dw && emit_depthwise(b, &back, ns,
                                  tp_hlo_pad_interior(b, gc, tp_hlo_constant(b, md, 0), glo, ghi,
                                                      gaps),
                                  tp_hlo_reverse(b, w, ns, (int64_t[]){2, 3, 4}), md, x.dims, false,
                                  &gi)) {
    /* gi: the taps' sum */
  } else if (mm && pointwise && taps == 1) {
    tp_hlo_value_t wm = tp_hlo_reshape(b, tp_hlo_convert(b, w, md), 3, (int64_t[]){G, og, cg});
    if (n == 1 && og * cg >= TP_BIG_TRANSPOSE && L * (og + cg) < og * cg) {
      /* A deep layer's: its weight is read transposed, which XLA's CPU backend makes a slow
       * copy of (as linalg.c's emit_matmul_rhs says); grad and the result move instead. */
      gi = tp_hlo_dot_general(b, tp_hlo_reshape(b, gm, 3, (int64_t[]){G, og, L}), wm, 1,
                              (int64_t[]){0}, (int64_t[]){0}, 1, (int64_t[]){1}, (int64_t[]){1},
                              md); /* [G, L, C/G] */
      gi = tp_hlo_transpose(b, tp_hlo_optimization_barrier(b, gi), (int64_t[]){0, 2, 1});
    } else {
      gi = tp_hlo_dot_general(b, wm, gm, 1, (int64_t[]){0}, (int64_t[]){1}, 1, (int64_t[]){1},
                              (int64_t[]){2}, md); /* [G, C/G, N, L] */
      if (n > 1) gi = tp_hlo_transpose(b, gi, (int64_t[]){2, 0, 1, 3});
    }
    gi = tp_hlo_reshape(b, gi, x.ndim, x.dims);
  } else if (!c.transposed) {
    /* grad_input: a transposed convolution of grad with the weight, its channels exchanged
     * within each group. */
    for (int i = 0; i < ns; i++) {
      int64_t s = x.dims[2 + i], k = w.dims[2 + i];
      lo[i] = c.dil[i] * (k - 1) - c.pad[i];
      hi[i] = lo[i] + (s + 2 * c.pad[i] - c.dil[i] * (k - 1) - 1) % c.stride[i];
    }
    gi = tp_hlo_convolution(b, g, transpose_weight(b, w, c.groups, false),
                            spec(ns, "b, f", c.groups == 1 ? "i, o" : "o, i", "b, f", buf, sizeof(buf)),
                            ns, one, lo, hi, c.stride, c.dil, c.groups, 1, md, out_meta[0].sizes);
  } else {
    /* grad_input of a transposed convolution: the forward convolution of grad with the weight. */
    gi = tp_hlo_convolution(b, g, w, spec(ns, "b, f", "o, i", "b, f", buf, sizeof(buf)), ns,
                            c.stride, c.pad, c.pad, one, c.dil, 1, 1, md, out_meta[0].sizes);
  }
  out[0] = tp_hlo_convert(b, gi, out_meta[0].dtype);
  /* grad_weight: the strided operand (input; grad for a transposed convolution) and the other
   * convolved with batch and feature roles exchanged; groups split the batch (batch_group_count). */
  if (!need_gw) {
    gw = tp_hlo_broadcast_to(b, tp_hlo_constant(b, md, 0), w.ndim, w.dims);
  } else if (dw) {
    /* Per tap, grad times the tap's window of the padded input, summed over all but the
     * channels: one fused pass each. As a dot of grad and the patches batched over the channels,
     * XLA's CPU backend copied the patches transposed and ran the batched products element by
     * element: 100 ms against CPU's 0.5 for 32 channels of 56x56 at batch 8. */
    int64_t lo_p[TP_MAX_DIMS] = {0}, red[TP_MAX_DIMS], one_ch[2] = {ch, 1};
    for (int i = 0; i < ns; i++) lo_p[2 + i] = c.pad[i];
    for (int i = 0; i < g.ndim - 1; i++) red[i] = i == 0 ? 0 : i + 1;
    tp_hlo_value_t xp = tp_hlo_pad(b, tp_hlo_convert(b, x, md), tp_hlo_constant(b, md, 0), lo_p, lo_p);
    tp_hlo_value_t cols[49];
    for (int64_t t = 0; t < taps; t++) {
      tp_hlo_value_t prod =
          tp_hlo_binary(b, TP_HLO_MUL, gc, tap_window(b, ns, &w.dims[2], c.stride, c.dil, xp, t, 0, 1, 2, g.dims));
      cols[t] = tp_hlo_reshape(
          b, tp_hlo_reduce(b, prod, tp_hlo_constant(b, md, 0), TP_HLO_ADD, g.ndim - 1, red), 2, one_ch);
    }
    gw = tp_hlo_reshape(b, taps == 1 ? cols[0] : tp_hlo_concatenate(b, cols, (int)taps, 1), w.ndim,
                        w.dims);
  } else if (mm) {
    tp_hlo_value_t p = patches(b, tp_hlo_convert(b, x, md), false, ns, &w.dims[2], c.stride,
                               c.pad, c.dil, &g.dims[2]); /* [N, C, taps, L] */
    p = tp_hlo_reshape(b, p, 4, (int64_t[]){n, G, cg * taps, L});
    gw = tp_hlo_dot_general(b, gm, p, 1, (int64_t[]){1}, (int64_t[]){1}, 2, (int64_t[]){0, 3},
                            (int64_t[]){0, 3}, md); /* [G, O/G, C/G taps] */
    gw = tp_hlo_reshape(b, gw, w.ndim, w.dims);
  } else {
    tp_hlo_value_t a = c.transposed ? g : x, e = c.transposed ? x : g;
    for (int i = 0; i < ns; i++) {
      int64_t s = a.dims[2 + i], k = w.dims[2 + i], so = e.dims[2 + i];
      lo[i] = c.pad[i];
      hi[i] = (k - 1) * c.dil[i] + c.stride[i] * (so - 1) + 1 - s - lo[i];
    }
    gw = tp_hlo_convolution(b, a, e, spec(ns, "f, b", "i, o", "f, b", buf, sizeof(buf)), ns,
                            c.dil, lo, hi, one, c.stride, 1, c.groups, md, out_meta[1].sizes);
  }
  out[1] = tp_hlo_convert(b, gw, out_meta[1].dtype);
  int64_t dims[TP_MAX_DIMS];
  int nd = 0;
  for (int i = 0; i < g.ndim; i++)
    if (i != 1) dims[nd++] = i;
  tp_hlo_value_t gb = tp_hlo_reduce(b, gc, tp_hlo_constant(b, md, 0), TP_HLO_ADD, nd, dims);
  out[2] = tp_hlo_convert(b, gb, out_meta[2].dtype);
}

/* im2col: each kernel offset's strided view of the zero-padded input becomes a row block;
 * col2im: the columns scatter-added back over the padded image, which is then cropped. */
static void emit_im2col(tp_hlo_builder_t *b, bool col, const tp_op_arg_t *args, tp_hlo_value_t x,
                        const tp_meta_t *om, tp_hlo_value_t *out) {
  int at = col ? 2 : 1;
  int64_t k[2], dl[2], pd[2], st[2], o[2], full[2];
  bool batched = x.ndim == (col ? 3 : 4);
  for (int i = 0; i < 2; i++) {
    k[i] = args[at].ints[i];
    dl[i] = args[at + 1].ints[i];
    pd[i] = args[at + 2].ints[i];
    st[i] = args[at + 3].ints[i];
    full[i] = col ? args[1].ints[i] : x.dims[x.ndim - 2 + i];
    o[i] = (full[i] + 2 * pd[i] - dl[i] * (k[i] - 1) - 1) / st[i] + 1;
  }
  if (tp_meta_numel(om) == 0) {
    out[0] = tp_hlo_broadcast_to(b, tp_hlo_constant(b, om->dtype, 0), om->ndim, om->sizes);
    return;
  }
  int64_t nb = batched ? x.dims[0] : 1, kk = k[0] * k[1], L = o[0] * o[1];
  int64_t c = col ? x.dims[batched ? 1 : 0] / kk : x.dims[batched ? 1 : 0];
  int64_t hp = full[0] + 2 * pd[0], wp = full[1] + 2 * pd[1];
  if (!col) {
    int64_t s4[4] = {nb, c, full[0], full[1]};
    tp_hlo_value_t r = patches(b, tp_hlo_reshape(b, x, 4, s4), false, 2, k, st, pd, dl, o);
    out[0] = tp_hlo_reshape(b, r, om->ndim, om->sizes); /* [nb, c, kk, L] */
    return;
  }
  /* col2im: the padded-plane position of column (c, i, j, oh, ow) */
  int64_t sh[5] = {nb, c, kk, o[0], o[1]}, n = nb * c * kk * L, planes = nb * c;
  tp_hlo_value_t v = tp_hlo_reshape(b, x, 5, sh);
  tp_hlo_value_t kidx = tp_hlo_iota(b, TP_DTYPE_I64, 5, sh, 2);
  tp_hlo_value_t ki = tp_bin(b, TP_HLO_DIV, kidx, tp_k(b, (double)k[1], kidx));
  tp_hlo_value_t kj = tp_bin(b, TP_HLO_REM, kidx, tp_k(b, (double)k[1], kidx));
  tp_hlo_value_t oh = tp_hlo_iota(b, TP_DTYPE_I64, 5, sh, 3), ow = tp_hlo_iota(b, TP_DTYPE_I64, 5, sh, 4);
  tp_hlo_value_t r = tp_bin(b, TP_HLO_ADD, tp_bin(b, TP_HLO_MUL, oh, tp_k(b, (double)st[0], oh)), tp_bin(b, TP_HLO_MUL, ki, tp_k(b, (double)dl[0], ki)));
  tp_hlo_value_t q = tp_bin(b, TP_HLO_ADD, tp_bin(b, TP_HLO_MUL, ow, tp_k(b, (double)st[1], ow)), tp_bin(b, TP_HLO_MUL, kj, tp_k(b, (double)dl[1], kj)));
  tp_hlo_value_t pl = tp_bin(b, TP_HLO_ADD, tp_bin(b, TP_HLO_MUL, tp_hlo_iota(b, TP_DTYPE_I64, 5, sh, 0), tp_k(b, (double)c, oh)),
                          tp_hlo_iota(b, TP_DTYPE_I64, 5, sh, 1));
  tp_hlo_value_t lin = tp_bin(b, TP_HLO_ADD, tp_bin(b, TP_HLO_MUL, pl, tp_k(b, (double)(hp * wp), pl)),
                           tp_bin(b, TP_HLO_ADD, tp_bin(b, TP_HLO_MUL, r, tp_k(b, (double)wp, r)), q));
  int64_t total = planes * hp * wp;
  tp_hlo_value_t zeros = tp_hlo_broadcast_to(b, tp_hlo_constant(b, x.dtype, 0), 1, &total);
  tp_hlo_value_t acc = tp_hlo_scatter_1d_op(b, zeros, tp_hlo_reshape(b, lin, 1, &n), tp_hlo_reshape(b, v, 1, &n), TP_HLO_ADD);
  int64_t s3[3] = {planes, hp, wp}, a0[3] = {0, pd[0], pd[1]}, a1[3] = {planes, pd[0] + full[0], pd[1] + full[1]}, one[3] = {1, 1, 1};
  tp_hlo_value_t img = tp_hlo_slice(b, tp_hlo_reshape(b, acc, 3, s3), a0, a1, one);
  out[0] = tp_hlo_reshape(b, img, om->ndim, om->sizes);
}

tp_status_t *tp_infer_im2col(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                             int *n_out) {
  TP_RETURN_IF_ERROR(tp_infer_like_self(op, args, n_args, out, n_out));
  const tp_meta_t *x = &args[0].meta;
  /* im2col(self, kernel_size, dilation, padding, stride);
   * col2im(self, output_size, kernel_size, dilation, padding, stride) */
  bool col = op->code == TP_IC_COL2IM;
  int at = col ? 2 : 1;
  if (n_args < at + 4) return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  for (int j = col ? 1 : at; j < at + 4; j++)
    if (args[j].kind != TP_ARG_INTS || args[j].n != 2) return tp_make_status(TP_UNIMPLEMENTED, "%s: sizes", op->name);
  int64_t k[2], dl[2], pd[2], st[2], o[2], full[2];
  for (int i = 0; i < 2; i++) {
    k[i] = args[at].ints[i];
    dl[i] = args[at + 1].ints[i];
    pd[i] = args[at + 2].ints[i];
    st[i] = args[at + 3].ints[i];
    if (k[i] <= 0 || dl[i] <= 0 || pd[i] < 0 || st[i] <= 0) return tp_make_status(TP_UNIMPLEMENTED, "%s: sizes", op->name);
  }
  if (k[0] * k[1] > 256) return tp_make_status(TP_UNIMPLEMENTED, "%s: kernel size", op->name);
  int nd = x->ndim, b0 = nd == (col ? 3 : 4) ? 1 : 0;
  if (nd != (col ? 2 : 3) + b0) return tp_make_status(TP_UNIMPLEMENTED, "%s: rank", op->name);
  for (int i = b0; i < nd; i++) /* an empty batch is fine; empty planes CPU rejects */
    if (x->sizes[i] == 0) return tp_make_status(TP_UNIMPLEMENTED, "%s: empty input", op->name);
  for (int i = 0; i < 2; i++) {
    full[i] = col ? args[1].ints[i] : x->sizes[b0 + 1 + i];
    o[i] = (full[i] + 2 * pd[i] - dl[i] * (k[i] - 1) - 1) / st[i] + 1;
    if (o[i] <= 0) return tp_make_status(TP_UNIMPLEMENTED, "%s: output size", op->name);
  }
  if (col) {
    /* CPU adds overlapping windows one by one in the tensor's type: floats of 32 bits and up. */
    if ((x->dtype != TP_DTYPE_F32 && x->dtype != TP_DTYPE_F64) || x->sizes[b0] % (k[0] * k[1]) ||
        x->sizes[b0 + 1] != o[0] * o[1])
      return tp_make_status(TP_UNIMPLEMENTED, "col2im: arguments");
    out[0].ndim = nd + 1;
    if (b0) out[0].sizes[0] = x->sizes[0];
    out[0].sizes[b0] = x->sizes[b0] / (k[0] * k[1]);
    out[0].sizes[b0 + 1] = full[0];
    out[0].sizes[b0 + 2] = full[1];
  } else {
    out[0].ndim = nd - 1;
    if (b0) out[0].sizes[0] = x->sizes[0];
    out[0].sizes[b0] = x->sizes[b0] * k[0] * k[1];
    out[0].sizes[b0 + 1] = o[0] * o[1];
  }
  return NULL;
}

void tp_emit_im2col(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                    const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  const tp_meta_t *om = &out_meta[0];
  emit_im2col(b, op->code == TP_IC_COL2IM, args, in[0], om, out);
}
