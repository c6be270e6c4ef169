/* Padding: constant_pad_nd (at the end of the file: stablehlo.pad), and reflection and
 * replication padding (1d/2d/3d) and their backwards. Each output position reads
 * one input position: the last k dims map through a reflection or a clamp, so the forward is a
 * gather of the flattened input and the backward a scatter-add of the gradient into zeros.
 * |code|: a tp_pad_mode_t (families.h): replication or reflection, forward or backward; the
 * row's name gives k.
 * Depends on ops/ helpers and hlo/ only. */
#include <string.h>

#include "ops/families.h"

static int pad_dims(const tp_op_def_t *op) {
  const char *d = strstr(op->name, "_pad");
  return d ? d[4] - '0' : 0; /* "reflection_pad2d..." */
}

tp_status_t *tp_infer_pad_mode(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                               tp_meta_t *out, int *n_out) {
  bool backward = op->code & TP_PADF_BACKWARD, repl = op->code & TP_PADF_REPLICATION;
  int k = pad_dims(op), xi = backward ? 1 : 0, pi = backward ? 2 : 1;
  if (n_args <= pi || args[xi].kind != TP_ARG_TENSOR || args[pi].kind != TP_ARG_INTS ||
      args[pi].n != 2 * k || (backward && args[0].kind != TP_ARG_TENSOR))
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected (input, padding of %d)", op->name, 2 * k);
  const tp_meta_t *x = &args[xi].meta;
  int nd = x->ndim;
  /* Shapes CPU rejects (wrong rank, empty dims, pads too large) fall back so CPU words the error. */
  if (nd != k + 1 && nd != k + 2) return tp_make_status(TP_UNIMPLEMENTED, "%s: rank", op->name);
  tp_meta_t o = *x;
  for (int d = 0; d < nd; d++)
    if (x->sizes[d] == 0) return tp_make_status(TP_UNIMPLEMENTED, "%s: empty input", op->name);
  for (int j = 0; j < k; j++) {
    int d = nd - 1 - j; /* padding lists the last dim first */
    int64_t lo = args[pi].ints[2 * j], hi = args[pi].ints[2 * j + 1], n = x->sizes[d];
    /* Replication also crops (negative padding); reflection pads stay below the size. */
    if ((!repl && (lo < 0 || hi < 0 || lo >= n || hi >= n)) || n + lo + hi <= 0)
      return tp_make_status(TP_UNIMPLEMENTED, "%s: padding size", op->name);
    o.sizes[d] = n + lo + hi;
  }
  if (backward) {
    const tp_meta_t *g = &args[0].meta;
    if (g->ndim != nd || memcmp(g->sizes, o.sizes, sizeof(int64_t) * (size_t)nd) != 0)
      return tp_make_status(TP_INVALID_ARGUMENT, "%s: grad_output has the wrong shape", op->name);
    o = *x;
    o.dtype = g->dtype;
  }
  if (o.dtype == TP_DTYPE_BOOL) return tp_make_status(TP_UNIMPLEMENTED, "%s of bool", op->name);
  out[0] = o;
  *n_out = 1;
  return NULL;
}

void tp_emit_pad_mode(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                      int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                      tp_hlo_value_t *out) {
  bool backward = op->code & TP_PADF_BACKWARD, repl = op->code & TP_PADF_REPLICATION;
  int k = pad_dims(op), xi = backward ? 1 : 0, pi = backward ? 2 : 1;
  const tp_meta_t *x = &args[xi].meta;
  int nd = x->ndim;
  tp_meta_t o = backward ? args[0].meta : out_meta[0]; /* the padded shape */
  int64_t st[TP_MAX_DIMS], s = 1;
  for (int d = nd - 1; d >= 0; d--) {
    st[d] = s;
    s *= x->sizes[d];
  }
  tp_hlo_value_t lin = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, 0), o.ndim, o.sizes);
  for (int d = 0; d < nd; d++) {
    tp_hlo_value_t c = tp_hlo_iota(b, TP_DTYPE_I64, o.ndim, o.sizes, d);
    int j = nd - 1 - d;
    if (j < k) {
      int64_t lo = args[pi].ints[2 * j], n = x->sizes[d];
      c = tp_hlo_binary(b, TP_HLO_SUB, c, tp_k(b, (double)lo, c));
      if (repl) {
        c = tp_hlo_binary(b, TP_HLO_MAX, c, tp_k(b, 0, c));
        c = tp_hlo_binary(b, TP_HLO_MIN, c, tp_k(b, (double)(n - 1), c));
      } else { /* reflect about 0 and n - 1, without repeating the edge */
        c = tp_hlo_unary(b, TP_HLO_ABS, c);
        tp_hlo_value_t over = tp_hlo_compare(b, TP_CMP_GT, c, tp_k(b, (double)(n - 1), c));
        c = tp_hlo_select(b, over, tp_hlo_binary(b, TP_HLO_SUB, tp_k(b, (double)(2 * (n - 1)), c), c), c);
      }
    }
    lin = tp_hlo_binary(b, TP_HLO_ADD, lin, tp_hlo_binary(b, TP_HLO_MUL, c, tp_k(b, (double)st[d], c)));
  }
  int64_t total = tp_meta_numel(&o), n_in = tp_meta_numel(x);
  tp_hlo_value_t flat_lin = tp_hlo_reshape(b, lin, 1, &total);
  if (!backward) {
    tp_hlo_value_t xf = tp_hlo_reshape(b, in[0], 1, &n_in);
    out[0] = tp_hlo_reshape(b, tp_hlo_gather_1d(b, xf, flat_lin), out_meta[0].ndim, out_meta[0].sizes);
    return;
  }
  /* Accumulate in the tensor's own type, in output order, as the CPU kernel does. */
  tp_dtype_t md = out_meta[0].dtype;
  tp_hlo_value_t g = tp_hlo_reshape(b, tp_hlo_convert(b, in[0], md), 1, &total);
  tp_hlo_value_t zeros = tp_hlo_broadcast_to(b, tp_hlo_constant(b, md, 0), 1, &n_in);
  tp_hlo_value_t r = tp_hlo_scatter_1d_op(b, zeros, flat_lin, g, TP_HLO_ADD);
  out[0] = tp_hlo_convert(b, tp_hlo_reshape(b, r, out_meta[0].ndim, out_meta[0].sizes), out_meta[0].dtype);
}

/* constant_pad_nd(self, pad, value=0): pad holds (low, high) pairs from the last dim inwards; a
 * negative amount crops. */
tp_status_t *tp_infer_constant_pad(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                   tp_meta_t *out, int *n_out) {
  if (n_args < 1 || args[0].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: self must be a tensor", op->name);
  int nd = args[0].meta.ndim;
  *n_out = 1;
  out[0] = args[0].meta;
  if (n_args < 2 || args[1].kind != TP_ARG_INTS || args[1].n % 2 || args[1].n / 2 > nd)
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "Length of pad must be even but instead it equals %d", args[1].n);
  for (int i = 0; i < args[1].n / 2; i++) {
    int d = nd - 1 - i;
    out[0].sizes[d] += args[1].ints[2 * i] + args[1].ints[2 * i + 1];
    if (out[0].sizes[d] < 0)
      return tp_make_status(TP_INVALID_ARGUMENT, "constant_pad_nd: resulting padded dimension %d is negative", d);
  }
  if (n_args > 2 && args[2].kind == TP_ARG_SCALAR) args[2].scalar_dtype = args[0].meta.dtype;
  return NULL;
}

void tp_emit_constant_pad(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                          int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                          tp_hlo_value_t *out) {
  (void)op;
  const tp_meta_t *om = out_meta;
  int nd = args[0].meta.ndim;
  int64_t lo[TP_MAX_DIMS] = {0}, hi[TP_MAX_DIMS] = {0};
  for (int i = 0; i < args[1].n / 2; i++) {
    lo[nd - 1 - i] = args[1].ints[2 * i];
    hi[nd - 1 - i] = args[1].ints[2 * i + 1];
  }
  tp_hlo_value_t v = n_args > 2 && args[2].kind == TP_ARG_SCALAR ? tp_hlo_convert(b, in[2], om->dtype)
                                                                 : tp_hlo_constant(b, om->dtype, 0);
  out[0] = tp_hlo_pad(b, tp_hlo_convert(b, in[0], om->dtype), v, lo, hi);
}
