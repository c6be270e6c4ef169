/* Ops that stand alone, each with its own argument list: equal (a bool the glue reads back to the
 * host), glu and its backward, prelu's kernels, elu_backward, logcumsumexp (a log-add-exp scan),
 * channel_shuffle, renorm and mode. Semantics are CPU's, including where its kernels round 16-bit
 * floats. Depends on ops/ helpers and hlo/ only. |code|: a tp_misc_t (families.h). */
#include <math.h>
#include <string.h>

#include "ops/families.h"

static bool is_tensor(const tp_op_arg_t *args, int n_args, int i) {
  return i < n_args && args[i].kind == TP_ARG_TENSOR;
}

/* Moves |dim| of |x| last. */
static tp_hlo_value_t dim_last(tp_hlo_builder_t *b, tp_hlo_value_t x, int dim) {
  int64_t perm[TP_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < x.ndim; i++)
    if (i != dim) perm[k++] = i;
  perm[k] = dim;
  return tp_hlo_transpose(b, x, perm);
}

/* CPU's log_add_exp of two floats: max + log1p(exp(min - max)), except that equal infinities
 * give themselves. */
static tp_hlo_value_t log_add_exp(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t y) {
  tp_hlo_value_t mn = tp_bin(b, TP_HLO_MIN, x, y), mx = tp_bin(b, TP_HLO_MAX, x, y);
  tp_hlo_value_t r = tp_bin(b, TP_HLO_ADD, mx, tp_hlo_unary(b, TP_HLO_LOG1P, tp_hlo_unary(b, TP_HLO_EXP, tp_bin(b, TP_HLO_SUB, mn, mx))));
  tp_hlo_value_t keep = tp_bin(b, TP_HLO_AND, tp_hlo_compare(b, TP_CMP_EQ, mn, mx),
                            tp_hlo_unary(b, TP_HLO_NOT, tp_hlo_unary(b, TP_HLO_IS_FINITE, mn)));
  /* A NaN on either side propagates (XLA's min/max need not). */
  tp_hlo_value_t nan = tp_bin(b, TP_HLO_OR, tp_hlo_compare(b, TP_CMP_NE, x, x), tp_hlo_compare(b, TP_CMP_NE, y, y));
  return tp_hlo_select(b, nan, tp_bin(b, TP_HLO_ADD, x, y), tp_hlo_select(b, keep, x, r));
}

/* |p|-norm over the last dim of |x| (keeping it, size 1): p > 0. */
static tp_hlo_value_t norm_last(tp_hlo_builder_t *b, tp_hlo_value_t x, double p) {
  tp_hlo_value_t a = tp_hlo_unary(b, TP_HLO_ABS, x);
  int64_t last = x.ndim - 1, kd[TP_MAX_DIMS];
  memcpy(kd, x.dims, sizeof(kd));
  kd[last] = 1;
  tp_hlo_value_t r;
  if (isinf(p)) { /* XLA's max drops NaN; CPU's norm is NaN then */
    r = tp_hlo_reduce(b, a, tp_hlo_constant(b, x.dtype, 0), TP_HLO_MAX, 1, &last);
    tp_hlo_value_t nan = tp_hlo_reduce(b, tp_hlo_compare(b, TP_CMP_NE, x, x),
                                       tp_hlo_constant_i(b, TP_DTYPE_BOOL, 0), TP_HLO_OR, 1, &last);
    r = tp_hlo_select(b, nan, tp_k(b, NAN, r), r);
  } else if (p == 1) {
    r = tp_hlo_reduce(b, a, tp_hlo_constant(b, x.dtype, 0), TP_HLO_ADD, 1, &last);
  } else if (p == 2) {
    r = tp_hlo_unary(b, TP_HLO_SQRT, tp_hlo_reduce(b, tp_bin(b, TP_HLO_MUL, a, a), tp_hlo_constant(b, x.dtype, 0),
                                                   TP_HLO_ADD, 1, &last));
  } else {
    r = tp_hlo_reduce(b, tp_bin(b, TP_HLO_POW, a, tp_k(b, p, a)), tp_hlo_constant(b, x.dtype, 0), TP_HLO_ADD, 1, &last);
    r = tp_bin(b, TP_HLO_POW, r, tp_k(b, 1.0 / p, r));
  }
  return tp_hlo_reshape(b, r, x.ndim, kd);
}

/* (values, indices) of a reduction of |x| over dim |d|. */
static tp_status_t *values_indices(const tp_meta_t *x, int d, bool keep, tp_meta_t *out, int *n_out) {
  bool mask[TP_MAX_DIMS] = {false};
  if (x->ndim) mask[d] = true;
  tp_meta_reduce(x, mask, keep, &out[0]);
  out[1] = out[0];
  out[1].dtype = TP_DTYPE_I64;
  *n_out = 2;
  return NULL;
}

tp_status_t *tp_infer_misc(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                           int *n_out) {
  if (!is_tensor(args, n_args, 0))
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: self must be a tensor", op->name);
  const tp_meta_t *x = &args[0].meta;
  bool fl = tp_dtype_is_float(x->dtype);
  *n_out = 1;
  out[0] = *x;
  switch ((tp_misc_t)op->code) {
    case TP_M_EQUAL:
      /* CPU raises on differing dtypes. */
      if (!is_tensor(args, n_args, 1) || args[1].meta.dtype != x->dtype)
        return tp_make_status(TP_UNIMPLEMENTED, "equal: dtypes");
      out[0].dtype = TP_DTYPE_BOOL;
      out[0].ndim = 0;
      return NULL;
    case TP_M_GLU: case TP_M_GLU_BACKWARD: {
      int t = op->code == TP_M_GLU ? 0 : 1;
      if (!is_tensor(args, n_args, t) || n_args < t + 2 || args[t + 1].kind != TP_ARG_INT)
        return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
      x = &args[t].meta;
      int d = tp_norm_dim(args[t + 1].i, x->ndim);
      /* CPU words its errors (0-d input, odd size, integer types). */
      if (x->ndim == 0 || d < 0 || x->sizes[d] % 2 || !tp_dtype_is_float(x->dtype))
        return tp_make_status(TP_UNIMPLEMENTED, "%s: arguments", op->name);
      out[0] = *x;
      if (t) {
        const tp_meta_t *g = &args[0].meta;
        if (g->dtype != x->dtype || g->ndim != x->ndim) return tp_make_status(TP_UNIMPLEMENTED, "%s: grad", op->name);
        for (int i = 0; i < x->ndim; i++)
          if (g->sizes[i] != (i == d ? x->sizes[i] / 2 : x->sizes[i]))
            return tp_make_status(TP_UNIMPLEMENTED, "%s: grad shape", op->name);
      } else {
        out[0].sizes[d] /= 2;
      }
      return NULL;
    }
    case TP_M_PRELU: case TP_M_PRELU_BACKWARD: {
      int t = op->code == TP_M_PRELU ? 0 : 1;
      if (!is_tensor(args, n_args, t) || !is_tensor(args, n_args, t + 1))
        return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
      tp_meta_t s;
      TP_RETURN_IF_ERROR(tp_broadcast_shapes(&args[t].meta, &args[t + 1].meta, &s));
      if (t) TP_RETURN_IF_ERROR(tp_broadcast_shapes(&s, &args[0].meta, &s));
      s.dtype = args[t].meta.dtype;
      if (!tp_dtype_is_float(s.dtype) || args[t + 1].meta.dtype != s.dtype || (t && args[0].meta.dtype != s.dtype))
        return tp_make_status(TP_UNIMPLEMENTED, "%s: dtypes", op->name);
      s.writes_arg = 0;
      out[0] = s;
      if (t) {
        out[1] = s;
        *n_out = 2;
      }
      return NULL;
    }
    case TP_M_ELU_BACKWARD:
      /* (grad_output, alpha, scale, input_scale, is_result, self_or_result) */
      if (n_args < 6 || !is_tensor(args, n_args, 5) || args[4].kind != TP_ARG_INT ||
          !fl || args[5].meta.dtype != x->dtype)
        return tp_make_status(TP_UNIMPLEMENTED, "elu_backward: arguments");
      TP_RETURN_IF_ERROR(tp_broadcast_shapes(x, &args[5].meta, &out[0]));
      out[0].dtype = x->dtype;
      for (int i = 1; i < 4; i++)
        if (args[i].kind == TP_ARG_SCALAR) args[i].scalar_dtype = TP_DTYPE_F64;
      return NULL;
    case TP_M_LOGCUMSUMEXP:
      if (n_args < 2 || args[1].kind != TP_ARG_INT || !fl || tp_norm_dim(args[1].i, x->ndim) < 0)
        return tp_make_status(TP_UNIMPLEMENTED, "logcumsumexp: arguments");
      return NULL;
    case TP_M_CHANNEL_SHUFFLE:
      if (n_args < 2 || args[1].kind != TP_ARG_INT || x->ndim < 3 || args[1].i <= 0 ||
          x->sizes[1] % args[1].i)
        return tp_make_status(TP_UNIMPLEMENTED, "channel_shuffle: arguments");
      return NULL;
    case TP_M_RENORM: {
      /* (self, p, dim, maxnorm); p shapes the program. */
      if (n_args < 4 || args[1].kind != TP_ARG_SCALAR || args[2].kind != TP_ARG_INT ||
          args[3].kind != TP_ARG_SCALAR || !fl || x->ndim < 1 || tp_norm_dim(args[2].i, x->ndim) < 0)
        return tp_make_status(TP_UNIMPLEMENTED, "renorm: arguments");
      double p = tp_dtype_is_float(args[1].meta.dtype) ? args[1].f : (double)args[1].i;
      if (!(p > 0)) return tp_make_status(TP_UNIMPLEMENTED, "renorm: p");
      args[1].kind = TP_ARG_FLOAT;
      args[1].f = p;
      args[3].scalar_dtype = TP_DTYPE_F64;
      return NULL;
    }
    case TP_M_MODE: {
      /* (self, dim=-1, keepdim=False) -> (values, indices) */
      int nd = x->ndim;
      int d = tp_norm_dim(n_args > 1 && args[1].kind == TP_ARG_INT ? args[1].i : -1, nd);
      bool keep = n_args > 2 && args[2].kind == TP_ARG_INT && args[2].i;
      if (d < 0 || (nd && x->sizes[d] == 0) || tp_meta_numel(x) == 0)
        return tp_make_status(TP_UNIMPLEMENTED, "mode: arguments");
      return values_indices(x, d, keep, out, n_out);
    }
    case TP_M_SEARCHSORTED: case TP_M_BUCKETIZE: {
      /* searchsorted(sorted_sequence, self, out_int32, right, side, sorter);
       * bucketize(self, boundaries, out_int32, right) */
      bool bk = op->code == TP_M_BUCKETIZE;
      const tp_meta_t *seq = &args[bk ? 1 : 0].meta, *v = &args[bk ? 0 : 1].meta;
      if (!is_tensor(args, n_args, 1) || n_args < 4 || seq->ndim < 1 || seq->dtype != v->dtype ||
          v->dtype == TP_DTYPE_BOOL)
        return tp_make_status(TP_UNIMPLEMENTED, "%s: arguments", op->name);
      if (bk && seq->ndim != 1) return tp_make_status(TP_UNIMPLEMENTED, "bucketize: boundaries");
      if (seq->ndim > 1) { /* leading dims must match the values' */
        if (v->ndim != seq->ndim) return tp_make_status(TP_UNIMPLEMENTED, "searchsorted: shapes");
        for (int i = 0; i < seq->ndim - 1; i++)
          if (v->sizes[i] != seq->sizes[i]) return tp_make_status(TP_UNIMPLEMENTED, "searchsorted: shapes");
      }
      if (!bk) {
        bool right = args[3].kind == TP_ARG_INT && args[3].i;
        if (n_args > 4 && args[4].kind == TP_ARG_STR) {
          bool sr = strcmp(args[4].s, "right") == 0;
          if ((!sr && strcmp(args[4].s, "left") != 0) || (right && !sr))
            return tp_make_status(TP_UNIMPLEMENTED, "searchsorted: side");
        }
        if (n_args > 5 && args[5].kind == TP_ARG_TENSOR &&
            (args[5].meta.dtype != TP_DTYPE_I64 || args[5].meta.ndim != seq->ndim ||
             memcmp(args[5].meta.sizes, seq->sizes, sizeof(int64_t) * (size_t)seq->ndim) != 0))
          return tp_make_status(TP_UNIMPLEMENTED, "searchsorted: sorter");
      }
      out[0] = *v;
      out[0].writes_arg = 0;
      out[0].dtype = args[2].kind == TP_ARG_INT && args[2].i ? TP_DTYPE_I32 : TP_DTYPE_I64;
      return NULL;
    }
    case TP_M_MEDIAN: case TP_M_NANMEDIAN: {
      /* (self) -> value, or (self, dim, keepdim) -> (values, indices) */
      bool with_dim = n_args > 1 && args[1].kind == TP_ARG_INT;
      int nd = x->ndim;
      if (tp_meta_numel(x) == 0 || x->dtype == TP_DTYPE_BOOL)
        return tp_make_status(TP_UNIMPLEMENTED, "%s: arguments", op->name);
      if (!with_dim) {
        out[0].ndim = 0;
        return NULL;
      }
      /* Of equal values CPU returns the one a stable sort puts at the median's place (observed
       * over thousands of tied inputs), which is what the sort below gives. */
      int d = tp_norm_dim(args[1].i, nd);
      bool keep = n_args > 2 && args[2].kind == TP_ARG_INT && args[2].i;
      if (d < 0) return tp_make_status(TP_UNIMPLEMENTED, "%s: dim", op->name);
      return values_indices(x, d, keep, out, n_out);
    }
    case TP_M_INDEX_COPY: {
      /* (self, dim, index, source) */
      if (n_args < 4 || args[1].kind != TP_ARG_INT || !is_tensor(args, n_args, 2) || !is_tensor(args, n_args, 3))
        return tp_make_status(TP_INVALID_ARGUMENT, "index_copy: unexpected arguments");
      const tp_meta_t *idx = &args[2].meta, *src = &args[3].meta;
      int nd = x->ndim ? x->ndim : 1, d = tp_norm_dim(args[1].i, nd);
      int64_t k = idx->ndim ? idx->sizes[0] : 1;
      bool ok = d >= 0 && idx->dtype == TP_DTYPE_I64 && idx->ndim <= 1 && src->dtype == x->dtype &&
                (src->ndim ? src->ndim : 1) == nd;
      for (int i = 0; ok && i < src->ndim; i++)
        ok = src->sizes[i] == (i == d ? k : x->sizes[i]);
      if (ok && src->ndim == 0) ok = k == 1;
      if (!ok) return tp_make_status(TP_UNIMPLEMENTED, "index_copy: arguments");
      return NULL;
    }
    case TP_M_MASKED_SCATTER: {
      /* (self, mask, source): in the in-place form mask broadcasts to self */
      if (!is_tensor(args, n_args, 1) || !is_tensor(args, n_args, 2) || args[1].meta.dtype != TP_DTYPE_BOOL ||
          args[2].meta.dtype != x->dtype)
        return tp_make_status(TP_UNIMPLEMENTED, "masked_scatter: arguments");
      TP_RETURN_IF_ERROR(tp_broadcast_shapes(x, &args[1].meta, &out[0]));
      out[0].dtype = x->dtype;
      out[0].writes_arg = 0;
      if (tp_meta_numel(&args[2].meta) == 0) return tp_make_status(TP_UNIMPLEMENTED, "masked_scatter: empty source");
      return NULL;
    }
    case TP_M_LSHIFT: case TP_M_RSHIFT: {
      if (!is_tensor(args, n_args, 1) && !(n_args > 1 && args[1].kind == TP_ARG_SCALAR))
        return tp_make_status(TP_UNIMPLEMENTED, "%s: arguments", op->name);
      tp_dtype_t dt = tp_result_type(args, 2);
      if (!tp_dtype_is_int(dt)) return tp_make_status(TP_UNIMPLEMENTED, "%s: dtype", op->name);
      if (args[1].kind == TP_ARG_SCALAR) {
        args[1].scalar_dtype = dt;
        out[0] = *x;
      } else {
        TP_RETURN_IF_ERROR(tp_broadcast_shapes(x, &args[1].meta, &out[0]));
      }
      out[0].dtype = dt;
      out[0].writes_arg = 0;
      return NULL;
    }
    case TP_M_BCE: case TP_M_BCE_BACKWARD: {
      /* (self, target, weight, reduction); backward: (grad_output, self, target, weight, reduction) */
      int t = op->code == TP_M_BCE ? 0 : 1;
      if (n_args < t + 4 || !is_tensor(args, n_args, t) || !is_tensor(args, n_args, t + 1) ||
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
    case TP_M_IM2COL: case TP_M_COL2IM: {
      /* im2col(self, kernel_size, dilation, padding, stride);
       * col2im(self, output_size, kernel_size, dilation, padding, stride) */
      bool col = op->code == TP_M_COL2IM;
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
  }
  return tp_make_status(TP_UNIMPLEMENTED, "%s", op->name);
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
    int64_t s4[4] = {nb, c, full[0], full[1]}, lo[4] = {0, 0, pd[0], pd[1]}, hi[4] = {0, 0, pd[0], pd[1]};
    tp_hlo_value_t xp = tp_hlo_pad(b, tp_hlo_reshape(b, x, 4, s4), tp_hlo_constant(b, x.dtype, 0), lo, hi);
    tp_hlo_value_t parts[256];
    int np = 0;
    for (int64_t i = 0; i < k[0]; i++)
      for (int64_t j = 0; j < k[1]; j++) {
        int64_t s0[4] = {0, 0, i * dl[0], j * dl[1]};
        int64_t l0[4] = {nb, c, s0[2] + (o[0] - 1) * st[0] + 1, s0[3] + (o[1] - 1) * st[1] + 1};
        int64_t step[4] = {1, 1, st[0], st[1]}, sh[4] = {nb, c, 1, L};
        parts[np++] = tp_hlo_reshape(b, tp_hlo_slice(b, xp, s0, l0, step), 4, sh);
      }
    tp_hlo_value_t r = tp_hlo_concatenate(b, parts, np, 2); /* [nb, c, kk, L] */
    out[0] = tp_hlo_reshape(b, r, om->ndim, om->sizes);
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

/* sorted_sequence [.., n] against values: how many elements each value passes ((s < v) or
 * unordered, as CPU's binary search counts; right: s <= v or unordered). */
static tp_hlo_value_t emit_search(tp_hlo_builder_t *b, tp_hlo_value_t seq, tp_hlo_value_t v,
                                  const tp_hlo_value_t *sorter, bool right, tp_dtype_t out_dt) {
  int64_t n = seq.dims[seq.ndim - 1];
  if (sorter) { /* seq in sorter's order, row by row */
    int64_t total = tp_hlo_numel(&seq);
    tp_hlo_value_t row = tp_hlo_iota(b, TP_DTYPE_I64, sorter->ndim, sorter->dims, 0);
    tp_hlo_value_t lin = *sorter;
    if (seq.ndim > 1) {
      int64_t rows = total / n, sh[2] = {rows, n};
      row = tp_hlo_iota(b, TP_DTYPE_I64, 2, sh, 0);
      lin = tp_bin(b, TP_HLO_ADD, tp_hlo_reshape(b, *sorter, 2, sh), tp_bin(b, TP_HLO_MUL, row, tp_k(b, (double)n, row)));
    }
    int64_t fl = total;
    seq = tp_hlo_reshape(b, tp_hlo_gather_1d(b, tp_hlo_reshape(b, seq, 1, &fl), tp_hlo_reshape(b, lin, 1, &fl)),
                         seq.ndim, seq.dims);
  }
  int64_t dims[TP_MAX_DIMS], bs[TP_MAX_DIMS], bv[TP_MAX_DIMS];
  int nd = v.ndim + 1;
  for (int i = 0; i < v.ndim; i++) {
    dims[i] = v.dims[i];
    bv[i] = i;
  }
  dims[v.ndim] = n;
  if (seq.ndim == 1) {
    bs[0] = v.ndim;
  } else { /* leading dims shared, the values' last dim against the sequence's */
    for (int i = 0; i < seq.ndim - 1; i++) bs[i] = i;
    bs[seq.ndim - 1] = v.ndim;
  }
  tp_hlo_value_t S = tp_hlo_broadcast_in_dim(b, seq, nd, dims, bs);
  tp_hlo_value_t V = tp_hlo_broadcast_in_dim(b, v, nd, dims, bv);
  tp_hlo_value_t past = tp_hlo_unary(b, TP_HLO_NOT, tp_hlo_compare(b, right ? TP_CMP_GT : TP_CMP_GE, S, V));
  tp_hlo_value_t c = tp_hlo_convert(b, past, out_dt);
  int64_t last = v.ndim;
  return tp_hlo_reduce(b, c, tp_hlo_constant_i(b, out_dt, 0), TP_HLO_ADD, 1, &last);
}

/* median / nanmedian: the lower median of each slice along |d| (NaN sorted last). median: a NaN
 * in the slice gives NaN and its first index; nanmedian: the median of the others. */
static void emit_median(tp_hlo_builder_t *b, bool nan_skip, tp_hlo_value_t x, int d,
                        const tp_meta_t *om, int n_out, tp_hlo_value_t *out) {
  tp_hlo_value_t v = d >= 0 ? dim_last(b, x, d) : x;
  int64_t total = tp_hlo_numel(&v);
  int64_t n = d >= 0 ? v.dims[v.ndim - 1] : total, rows = total / n, sh[2] = {rows, n};
  v = tp_hlo_reshape(b, v, 2, sh);
  tp_hlo_value_t sorted[2], ops[2] = {v, tp_hlo_iota(b, TP_DTYPE_I64, 2, sh, 1)};
  tp_hlo_sort(b, ops, 2, 1, false, sorted);
  int64_t one = 1;
  tp_hlo_value_t nans = tp_hlo_convert(b, tp_hlo_compare(b, TP_CMP_NE, v, v), TP_DTYPE_I64);
  nans = tp_hlo_reduce(b, nans, tp_hlo_constant_i(b, TP_DTYPE_I64, 0), TP_HLO_ADD, 1, &one);
  tp_hlo_value_t k;
  if (nan_skip) { /* (count - 1) / 2 of the non-NaN ones; all NaN: the first */
    tp_hlo_value_t cnt = tp_bin(b, TP_HLO_SUB, tp_k(b, (double)n, nans), nans);
    k = tp_bin(b, TP_HLO_DIV, tp_bin(b, TP_HLO_MAX, tp_bin(b, TP_HLO_SUB, cnt, tp_k(b, 1, cnt)), tp_k(b, 0, cnt)), tp_k(b, 2, cnt));
  } else { /* the first NaN when there is one */
    tp_hlo_value_t has = tp_hlo_compare(b, TP_CMP_GT, nans, tp_k(b, 0, nans));
    k = tp_hlo_select(b, has, tp_bin(b, TP_HLO_SUB, tp_k(b, (double)n, nans), nans), tp_k(b, (double)((n - 1) / 2), nans));
  }
  tp_hlo_value_t lin = tp_bin(b, TP_HLO_ADD, k, tp_bin(b, TP_HLO_MUL, tp_hlo_iota(b, TP_DTYPE_I64, 1, &rows, 0), tp_k(b, (double)n, k)));
  out[0] = tp_hlo_reshape(b, tp_hlo_gather_1d(b, tp_hlo_reshape(b, sorted[0], 1, &total), lin), om[0].ndim, om[0].sizes);
  if (n_out > 1)
    out[1] = tp_hlo_reshape(b, tp_hlo_gather_1d(b, tp_hlo_reshape(b, sorted[1], 1, &total), lin), om[1].ndim, om[1].sizes);
}

static void emit_mode(tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args, tp_hlo_value_t x,
                      const tp_meta_t *om, tp_hlo_value_t *out) {
  if (x.ndim == 0) {
    out[0] = x;
    out[1] = tp_hlo_constant_i(b, TP_DTYPE_I64, 0);
    return;
  }
  int d = tp_norm_dim(n_args > 1 && args[1].kind == TP_ARG_INT ? args[1].i : -1, x.ndim);
  tp_hlo_value_t v = dim_last(b, x, d);
  int nd = v.ndim, last = nd - 1;
  int64_t n = v.dims[last], rows = tp_hlo_numel(&v) / n;
  int64_t sh[2] = {rows, n};
  v = tp_hlo_reshape(b, v, 2, sh);
  tp_hlo_value_t sorted[2], ops[2] = {v, tp_hlo_iota(b, TP_DTYPE_I64, 2, sh, 1)};
  tp_hlo_sort(b, ops, 2, 1, false, sorted);
  tp_hlo_value_t s = sorted[0], j = tp_hlo_iota(b, TP_DTYPE_I64, 2, sh, 1);
  /* Runs of equal values in sorted order: where each starts, and its length at its last element. */
  int64_t z[2] = {0, 0}, one_lo[2] = {0, 1}, one_hi[2] = {0, 1};
  int64_t st0[2] = {0, 0}, lim0[2] = {rows, n - 1}, st1[2] = {0, 1}, lim1[2] = {rows, n}, step[2] = {1, 1};
  tp_hlo_value_t prev = tp_hlo_slice(b, s, st0, lim0, step), next = tp_hlo_slice(b, s, st1, lim1, step);
  tp_hlo_value_t diff = tp_hlo_compare(b, TP_CMP_NE, prev, next); /* [rows, n-1] */
  tp_hlo_value_t t = tp_hlo_constant_i(b, TP_DTYPE_BOOL, 1);
  tp_hlo_value_t starts = tp_hlo_pad(b, diff, t, one_lo, z);  /* start_j: j == 0 or s_j != s_{j-1} */
  tp_hlo_value_t ends = tp_hlo_pad(b, diff, t, z, one_hi);    /* end_j: j == n-1 or s_j != s_{j+1} */
  tp_hlo_value_t start_at = tp_hlo_select(b, starts, j, tp_k(b, 0, j));
  int64_t win[2] = {1, n}, plo[2] = {0, n - 1}, phi[2] = {0, 0};
  start_at = tp_hlo_reduce_window(b, start_at, tp_hlo_constant_i(b, TP_DTYPE_I64, 0), TP_HLO_MAX, win, plo, phi);
  tp_hlo_value_t count = tp_bin(b, TP_HLO_ADD, tp_bin(b, TP_HLO_SUB, j, start_at), tp_k(b, 1, j));
  count = tp_hlo_select(b, ends, count, tp_k(b, 0, count));
  int64_t rd = 1;
  tp_hlo_value_t maxc = tp_hlo_reduce(b, count, tp_hlo_constant_i(b, TP_DTYPE_I64, 0), TP_HLO_MAX, 1, &rd);
  int64_t bd[1] = {0};
  tp_hlo_value_t best = tp_hlo_compare(b, TP_CMP_EQ, count, tp_hlo_broadcast_in_dim(b, maxc, 2, sh, bd));
  /* The smallest value among the most frequent: the first such run. */
  tp_hlo_value_t pick = tp_hlo_reduce(b, tp_hlo_select(b, best, j, tp_k(b, (double)n, j)),
                                      tp_hlo_constant_i(b, TP_DTYPE_I64, n), TP_HLO_MIN, 1, &rd);
  tp_hlo_value_t lin = tp_bin(b, TP_HLO_ADD, pick, tp_bin(b, TP_HLO_MUL, tp_hlo_iota(b, TP_DTYPE_I64, 1, &rows, 0),
                                                    tp_k(b, (double)n, pick)));
  int64_t total = rows * n;
  tp_hlo_value_t val = tp_hlo_gather_1d(b, tp_hlo_reshape(b, s, 1, &total), lin);
  tp_hlo_value_t idx = tp_hlo_gather_1d(b, tp_hlo_reshape(b, sorted[1], 1, &total), lin);
  out[0] = tp_hlo_reshape(b, val, om[0].ndim, om[0].sizes);
  out[1] = tp_hlo_reshape(b, idx, om[1].ndim, om[1].sizes);
}

void tp_emit_misc(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                  const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  const tp_meta_t *om = &out_meta[0];
  tp_dtype_t md = tp_math_dtype(om->dtype);
  switch ((tp_misc_t)op->code) {
    case TP_M_EQUAL: {
      tp_hlo_value_t x = in[0], y = in[1];
      if (x.ndim != y.ndim || memcmp(x.dims, y.dims, sizeof(int64_t) * (size_t)x.ndim) != 0) {
        out[0] = tp_hlo_constant_i(b, TP_DTYPE_BOOL, 0);
        return;
      }
      int64_t dims[TP_MAX_DIMS];
      for (int i = 0; i < x.ndim; i++) dims[i] = i;
      tp_hlo_value_t eq = tp_hlo_compare(b, TP_CMP_EQ, x, y);
      out[0] = x.ndim ? tp_hlo_reduce(b, eq, tp_hlo_constant_i(b, TP_DTYPE_BOOL, 1), TP_HLO_AND, x.ndim, dims) : eq;
      return;
    }
    case TP_M_GLU: case TP_M_GLU_BACKWARD: {
      int t = op->code == TP_M_GLU ? 0 : 1;
      tp_hlo_value_t x = tp_hlo_convert(b, in[t], md);
      int d = tp_norm_dim(args[t + 1].i, x.ndim);
      int64_t h = x.dims[d] / 2, st[TP_MAX_DIMS] = {0}, lim[TP_MAX_DIMS], step[TP_MAX_DIMS];
      for (int i = 0; i < x.ndim; i++) {
        lim[i] = x.dims[i];
        step[i] = 1;
      }
      lim[d] = h;
      tp_hlo_value_t a = tp_hlo_slice(b, x, st, lim, step);
      st[d] = h;
      lim[d] = 2 * h;
      tp_hlo_value_t s = tp_hlo_unary(b, TP_HLO_LOGISTIC, tp_hlo_slice(b, x, st, lim, step));
      if (!t) {
        out[0] = tp_hlo_convert(b, tp_bin(b, TP_HLO_MUL, a, s), om->dtype);
        return;
      }
      /* CPU stores the sigmoid in the gradient's type before using it. */
      s = tp_hlo_convert(b, tp_hlo_convert(b, s, om->dtype), md);
      tp_hlo_value_t g = tp_hlo_convert(b, in[0], md);
      tp_hlo_value_t ga = tp_bin(b, TP_HLO_MUL, s, g);
      tp_hlo_value_t gb = tp_bin(b, TP_HLO_MUL, tp_bin(b, TP_HLO_MUL, tp_bin(b, TP_HLO_MUL, tp_bin(b, TP_HLO_SUB, tp_k(b, 1, s), s), s), a), g);
      tp_hlo_value_t parts[2] = {ga, gb};
      out[0] = tp_hlo_convert(b, tp_hlo_concatenate(b, parts, 2, d), om->dtype);
      return;
    }
    case TP_M_PRELU: case TP_M_PRELU_BACKWARD: {
      int t = op->code == TP_M_PRELU ? 0 : 1;
      tp_hlo_value_t x = tp_emit_cast_shape(b, in[t], md, om), w = tp_emit_cast_shape(b, in[t + 1], md, om);
      tp_hlo_value_t pos = tp_hlo_compare(b, TP_CMP_GT, x, tp_k(b, 0, x));
      if (!t) {
        out[0] = tp_hlo_convert(b, tp_hlo_select(b, pos, x, tp_bin(b, TP_HLO_MUL, w, x)), om->dtype);
        return;
      }
      tp_hlo_value_t g = tp_emit_cast_shape(b, in[0], md, om);
      out[0] = tp_hlo_convert(b, tp_hlo_select(b, pos, g, tp_bin(b, TP_HLO_MUL, w, g)), om->dtype);
      out[1] = tp_hlo_convert(b, tp_hlo_select(b, pos, tp_k(b, 0, x), tp_bin(b, TP_HLO_MUL, x, g)), om->dtype);
      return;
    }
    case TP_M_ELU_BACKWARD: {
      tp_hlo_value_t g = tp_emit_cast_shape(b, in[0], md, om), x = tp_emit_cast_shape(b, in[5], md, om);
      tp_hlo_value_t c[3];
      for (int i = 0; i < 3; i++)
        c[i] = args[1 + i].kind == TP_ARG_SCALAR ? tp_emit_cast_shape(b, in[1 + i], md, om) : tp_k(b, 1, x);
      tp_hlo_value_t negcoef = tp_bin(b, TP_HLO_MUL, c[0], c[1]), poscoef = c[1], negip = c[2];
      tp_hlo_value_t neg;
      if (args[4].i) /* x holds the result */
        neg = tp_bin(b, TP_HLO_MUL, tp_bin(b, TP_HLO_MUL, g, negip), tp_bin(b, TP_HLO_ADD, x, negcoef));
      else
        neg = tp_bin(b, TP_HLO_MUL, tp_bin(b, TP_HLO_MUL, tp_bin(b, TP_HLO_MUL, g, negip), negcoef),
                  tp_hlo_unary(b, TP_HLO_EXP, tp_bin(b, TP_HLO_MUL, x, negip)));
      tp_hlo_value_t r = tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_LE, x, tp_k(b, 0, x)), neg,
                                       tp_bin(b, TP_HLO_MUL, g, poscoef));
      out[0] = tp_hlo_convert(b, r, om->dtype);
      return;
    }
    case TP_M_LOGCUMSUMEXP: {
      /* CPU accumulates in its accumulation type: double for float, float for 16-bit types. */
      if (om->dtype == TP_DTYPE_F32) md = TP_DTYPE_F64;
      tp_hlo_value_t x = tp_hlo_convert(b, in[0], md);
      if (x.ndim == 0 || x.dims[tp_norm_dim(args[1].i, x.ndim)] <= 1) {
        out[0] = tp_hlo_convert(b, x, om->dtype);
        return;
      }
      int d = tp_norm_dim(args[1].i, x.ndim);
      int64_t n = x.dims[d];
      if (n <= 128) { /* CPU's sequential order, so large inputs round as they do there */
        tp_hlo_value_t parts[128], acc = {0};
        int64_t st[TP_MAX_DIMS] = {0}, lim[TP_MAX_DIMS], step[TP_MAX_DIMS];
        for (int i = 0; i < x.ndim; i++) {
          lim[i] = x.dims[i];
          step[i] = 1;
        }
        for (int64_t i = 0; i < n; i++) {
          st[d] = i;
          lim[d] = i + 1;
          tp_hlo_value_t xi = tp_hlo_slice(b, x, st, lim, step);
          acc = i == 0 ? xi : log_add_exp(b, xi, acc);
          parts[i] = acc;
        }
        out[0] = tp_hlo_convert(b, tp_hlo_concatenate(b, parts, (int)n, d), om->dtype);
        return;
      }
      /* Longer: an inclusive scan by doubling, y_i = lae(y_i, y_{i-s}) for s = 1, 2, 4, ... */
      tp_hlo_value_t ninf = tp_hlo_constant(b, md, -INFINITY);
      for (int64_t s = 1; s < n; s *= 2) {
        int64_t lo[TP_MAX_DIMS] = {0}, hi[TP_MAX_DIMS] = {0};
        lo[d] = s;
        hi[d] = -s;
        tp_hlo_value_t sh = tp_hlo_pad(b, x, ninf, lo, hi);
        x = log_add_exp(b, x, sh);
      }
      out[0] = tp_hlo_convert(b, x, om->dtype);
      return;
    }
    case TP_M_CHANNEL_SHUFFLE: {
      tp_hlo_value_t x = in[0];
      int64_t g = args[1].i, sh[TP_MAX_DIMS], perm[TP_MAX_DIMS];
      sh[0] = x.dims[0];
      sh[1] = g;
      sh[2] = x.dims[1] / g;
      for (int i = 2; i < x.ndim; i++) sh[i + 1] = x.dims[i];
      for (int i = 0; i <= x.ndim; i++) perm[i] = i == 1 ? 2 : i == 2 ? 1 : i;
      tp_hlo_value_t v = tp_hlo_transpose(b, tp_hlo_reshape(b, x, x.ndim + 1, sh), perm);
      out[0] = tp_hlo_reshape(b, v, x.ndim, x.dims);
      return;
    }
    case TP_M_RENORM: {
      /* CPU: the norm of each slice along dim, in float for 16-bit types, then (in the input's
       * type) factor = norm > maxnorm ? maxnorm / (norm + 1e-7) : 1, and self * factor. */
      tp_hlo_value_t x = in[0];
      int d = tp_norm_dim(args[2].i, x.ndim);
      tp_dtype_t dt = om->dtype;
      /* |d| first, the rest flattened: one row per slice. */
      int64_t perm[TP_MAX_DIMS];
      perm[0] = d;
      for (int i = 0, k = 1; i < x.ndim; i++)
        if (i != d) perm[k++] = i;
      tp_hlo_value_t v = tp_hlo_transpose(b, x, perm);
      int64_t n = x.dims[d], rest = tp_hlo_numel(&x) / (n ? n : 1), sh[2] = {n, rest};
      v = tp_hlo_convert(b, tp_hlo_reshape(b, v, 2, sh), md);
      tp_hlo_value_t nrm = norm_last(b, v, args[1].f); /* [n, 1] in md */
      tp_hlo_value_t maxn = tp_hlo_convert(b, in[3], TP_DTYPE_F64);
      int64_t one[2] = {n, 1};
      tp_hlo_value_t nd = tp_hlo_convert(b, nrm, dt); /* rounded to the input's type */
      tp_hlo_value_t big = tp_hlo_compare(b, TP_CMP_GT, tp_hlo_convert(b, nd, TP_DTYPE_F64), tp_hlo_broadcast_to(b, maxn, 2, one));
      tp_hlo_value_t mt = tp_hlo_broadcast_to(b, tp_hlo_convert(b, in[3], dt), 2, one);
      tp_hlo_value_t eps = tp_hlo_broadcast_to(b, tp_hlo_convert(b, tp_hlo_constant(b, TP_DTYPE_F64, 1e-7), dt), 2, one);
      tp_hlo_value_t den = tp_bin(b, TP_HLO_ADD, nd, eps);
      tp_hlo_value_t f = tp_hlo_select(b, big, tp_bin(b, TP_HLO_DIV, mt, den), tp_k(b, 1, nd));
      tp_hlo_value_t xs = tp_hlo_transpose(b, x, perm);
      int64_t tsh[TP_MAX_DIMS], bdim[1] = {0};
      memcpy(tsh, xs.dims, sizeof(tsh));
      tp_hlo_value_t fb = tp_hlo_broadcast_in_dim(b, tp_hlo_reshape(b, f, 1, &n), xs.ndim, tsh, bdim);
      tp_hlo_value_t r = tp_hlo_convert(b, tp_bin(b, TP_HLO_MUL, tp_hlo_convert(b, xs, md), tp_hlo_convert(b, fb, md)), dt);
      int64_t inv[TP_MAX_DIMS];
      for (int i = 0; i < x.ndim; i++) inv[perm[i]] = i;
      out[0] = tp_hlo_transpose(b, r, inv);
      return;
    }
    case TP_M_MODE:
      emit_mode(b, args, n_args, in[0], out_meta, out);
      return;
    case TP_M_SEARCHSORTED: case TP_M_BUCKETIZE: {
      bool bk = op->code == TP_M_BUCKETIZE;
      bool right = args[3].kind == TP_ARG_INT && args[3].i;
      if (!bk && n_args > 4 && args[4].kind == TP_ARG_STR) right = strcmp(args[4].s, "right") == 0;
      const tp_hlo_value_t *sorter = !bk && n_args > 5 && args[5].kind == TP_ARG_TENSOR ? &in[5] : NULL;
      if (tp_meta_numel(om) == 0 || in[bk ? 1 : 0].dims[in[bk ? 1 : 0].ndim - 1] == 0) { /* nothing to pass */
        out[0] = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, om->dtype, 0), om->ndim, om->sizes);
        return;
      }
      out[0] = emit_search(b, in[bk ? 1 : 0], in[bk ? 0 : 1], sorter, right, om->dtype);
      if (out[0].ndim != om->ndim) out[0] = tp_hlo_reshape(b, out[0], om->ndim, om->sizes);
      return;
    }
    case TP_M_MEDIAN: case TP_M_NANMEDIAN: {
      bool with_dim = n_args > 1 && args[1].kind == TP_ARG_INT;
      tp_hlo_value_t x = in[0];
      if (x.ndim == 0) {
        int64_t one = 1;
        x = tp_hlo_reshape(b, x, 1, &one);
      }
      int d = with_dim ? tp_norm_dim(args[1].i, x.ndim) : -1;
      if (!with_dim) {
        int64_t total = tp_hlo_numel(&x);
        x = tp_hlo_reshape(b, x, 1, &total);
        d = 0;
      }
      emit_median(b, op->code == TP_M_NANMEDIAN, x, d, out_meta, with_dim ? 2 : 1, out);
      return;
    }
    case TP_M_INDEX_COPY: {
      /* Rows of source land at self's rows index[i], moved first; the last write wins. */
      tp_hlo_value_t x = in[0], src = in[3], idx = in[2];
      int nd = x.ndim ? x.ndim : 1, d = tp_norm_dim(args[1].i, nd);
      int64_t one = 1;
      if (x.ndim == 0) x = tp_hlo_reshape(b, x, 1, &one);
      if (src.ndim == 0) src = tp_hlo_reshape(b, src, 1, &one);
      if (idx.ndim == 0) idx = tp_hlo_reshape(b, idx, 1, &one);
      int64_t perm[TP_MAX_DIMS], inv[TP_MAX_DIMS];
      perm[0] = d;
      for (int i = 0, k = 1; i < nd; i++)
        if (i != d) perm[k++] = i;
      for (int i = 0; i < nd; i++) inv[perm[i]] = i;
      tp_hlo_value_t xt = tp_hlo_transpose(b, x, perm), st = tp_hlo_transpose(b, src, perm);
      int64_t n = xt.dims[0], total = tp_hlo_numel(&xt), rest = n ? total / n : 0, k = st.dims[0], m = k * rest;
      if (m == 0 || total == 0) {
        out[0] = in[0];
        return;
      }
      int64_t sh[2] = {k, rest};
      tp_hlo_value_t row = tp_hlo_broadcast_in_dim(b, tp_emit_checked_index(b, idx, n, false), 2, sh, (int64_t[]){0});
      tp_hlo_value_t bad = tp_bin(b, TP_HLO_OR, tp_hlo_compare(b, TP_CMP_LT, row, tp_k(b, 0, row)),
                               tp_hlo_compare(b, TP_CMP_GE, row, tp_k(b, (double)n, row)));
      tp_hlo_value_t lin = tp_bin(b, TP_HLO_ADD, tp_bin(b, TP_HLO_MUL, row, tp_k(b, (double)rest, row)), tp_hlo_iota(b, TP_DTYPE_I64, 2, sh, 1));
      lin = tp_hlo_reshape(b, tp_hlo_select(b, bad, tp_k(b, (double)total, lin), lin), 1, &m);
      tp_hlo_value_t pos = tp_hlo_iota(b, TP_DTYPE_I64, 1, &m, 0);
      tp_hlo_value_t none = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, -1), 1, &total);
      tp_hlo_value_t from = tp_hlo_scatter_1d_op(b, none, lin, pos, TP_HLO_MAX);
      tp_hlo_value_t hit = tp_hlo_compare(b, TP_CMP_GE, from, tp_k(b, 0, from));
      tp_hlo_value_t g = tp_hlo_gather_1d(b, tp_hlo_reshape(b, st, 1, &m), tp_bin(b, TP_HLO_MAX, from, tp_k(b, 0, from)));
      tp_hlo_value_t r = tp_hlo_select(b, hit, g, tp_hlo_reshape(b, xt, 1, &total));
      r = tp_hlo_transpose(b, tp_hlo_reshape(b, r, nd, xt.dims), inv);
      out[0] = tp_hlo_reshape(b, r, om->ndim, om->sizes);
      return;
    }
    case TP_M_MASKED_SCATTER: {
      /* The i-th true position (row-major) takes source's i-th element. */
      tp_hlo_value_t x = tp_hlo_broadcast_to(b, in[0], om->ndim, om->sizes);
      tp_hlo_value_t m = tp_hlo_broadcast_to(b, in[1], om->ndim, om->sizes);
      int64_t total = tp_meta_numel(om), ns = tp_hlo_numel(&in[2]);
      if (total == 0) {
        out[0] = x;
        return;
      }
      tp_hlo_value_t mf = tp_hlo_reshape(b, m, 1, &total);
      tp_hlo_value_t c = tp_hlo_convert(b, mf, TP_DTYPE_I64);
      int64_t win = total, lo = total - 1, hi = 0;
      tp_hlo_value_t pos = tp_hlo_reduce_window(b, c, tp_hlo_constant_i(b, TP_DTYPE_I64, 0), TP_HLO_ADD, &win, &lo, &hi);
      pos = tp_bin(b, TP_HLO_SUB, pos, tp_k(b, 1, pos));
      pos = tp_bin(b, TP_HLO_MIN, tp_bin(b, TP_HLO_MAX, pos, tp_k(b, 0, pos)), tp_k(b, (double)(ns - 1), pos));
      tp_hlo_value_t g = tp_hlo_gather_1d(b, tp_hlo_reshape(b, in[2], 1, &ns), pos);
      tp_hlo_value_t r = tp_hlo_select(b, mf, g, tp_hlo_reshape(b, x, 1, &total));
      out[0] = tp_hlo_reshape(b, r, om->ndim, om->sizes);
      return;
    }
    case TP_M_IM2COL: case TP_M_COL2IM:
      emit_im2col(b, op->code == TP_M_COL2IM, args, in[0], om, out);
      return;
    case TP_M_BCE: case TP_M_BCE_BACKWARD:
      emit_bce(b, op->code == TP_M_BCE_BACKWARD, args, in, om, out);
      return;
    case TP_M_LSHIFT: case TP_M_RSHIFT: {
      /* CPU: a count outside [0, bits) shifts everything out (left: 0; right: the sign). */
      tp_dtype_t dt = om->dtype;
      tp_hlo_value_t a = tp_emit_cast_shape(b, in[0], dt, om), s = tp_emit_cast_shape(b, in[1], dt, om);
      int bits = 8 * (int)tp_dtype_size(dt);
      bool uns = tp_dtype_is_unsigned(dt);
      tp_hlo_value_t bad = tp_hlo_compare(b, TP_CMP_GE, s, tp_k(b, bits, s));
      if (!uns) bad = tp_bin(b, TP_HLO_OR, bad, tp_hlo_compare(b, TP_CMP_LT, s, tp_k(b, 0, s)));
      tp_hlo_value_t safe = tp_hlo_select(b, bad, tp_k(b, 0, s), s);
      tp_hlo_value_t r;
      if (op->code == TP_M_LSHIFT) {
        r = tp_hlo_select(b, bad, tp_k(b, 0, a), tp_bin(b, TP_HLO_SHL, a, safe));
      } else {
        tp_hlo_value_t all = uns ? tp_k(b, 0, a) : tp_bin(b, TP_HLO_SHR_A, a, tp_k(b, bits - 1, a));
        r = tp_hlo_select(b, bad, all, tp_bin(b, uns ? TP_HLO_SHR_L : TP_HLO_SHR_A, a, safe));
      }
      out[0] = r;
      return;
    }
  }
}
