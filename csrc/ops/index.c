/* Indexing family: index_select, gather, scatter/scatter_add, index_add, masked_fill,
 * embedding's dense backward, and advanced
 * indexing with integer index tensors and boolean masks (index.Tensor, whose result size a mask
 * makes depend on the values: a count pass first, op.h; index_put's masks fall back); the
 * scatter-reduce family (scatter_reduce, index_reduce, index_fill), the lookup family (take,
 * isin, eye, put), index_copy and masked_scatter. Gathers and
 * scatters address the input flattened to 1-D with computed linear indices, so every layout takes
 * the same path. */
#include <math.h>
#include <string.h>

#include "ops/families.h"

/* Row-major strides of a logical shape. */
static void strides_of(const tp_meta_t *m, int64_t *st) {
  int64_t s = 1;
  for (int i = m->ndim - 1; i >= 0; i--) {
    st[i] = s;
    s *= m->sizes[i] > 0 ? m->sizes[i] : 1;
  }
}

/* Linear indices into |self| (flattened) for every position of |shape|: coordinate |dim| comes
 * from |along| (already of |shape|), the others from the position itself. */
static tp_hlo_value_t linear_index(tp_hlo_builder_t *b, const tp_meta_t *self, const tp_meta_t *shape,
                                   int dim, tp_hlo_value_t along) {
  int64_t st[TP_MAX_DIMS];
  strides_of(self, st);
  tp_hlo_value_t idx = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, 0), shape->ndim,
                                           shape->sizes);
  for (int d = 0; d < shape->ndim; d++) {
    tp_hlo_value_t c = d == dim ? tp_hlo_convert(b, along, TP_DTYPE_I64)
                                : tp_hlo_iota(b, TP_DTYPE_I64, shape->ndim, shape->sizes, d);
    idx = tp_hlo_binary(b, TP_HLO_ADD, idx,
                        tp_hlo_binary(b, TP_HLO_MUL, c, tp_k(b, (double)st[d], c)));
  }
  return idx;
}

static tp_hlo_value_t flat(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  int64_t n = tp_hlo_numel(&x);
  return tp_hlo_reshape(b, x, 1, &n);
}

/* An index tensor's values as i64 (embedding's backward: indices its forward checked). */
static tp_hlo_value_t index_values(tp_hlo_builder_t *b, tp_hlo_value_t index) {
  return tp_hlo_convert(b, index, TP_DTYPE_I64);
}

tp_hlo_value_t tp_emit_checked_index(tp_hlo_builder_t *b, tp_hlo_value_t index, int64_t n,
                                     bool negative_ok) {
  tp_hlo_value_t iv = index_values(b, index);
  tp_hlo_value_t hi = tp_k(b, (double)n, iv);
  tp_hlo_check(b, tp_hlo_binary(b, TP_HLO_OR,
                                tp_hlo_compare(b, TP_CMP_LT, iv, tp_k(b, negative_ok ? -(double)n : 0, iv)),
                                tp_hlo_compare(b, TP_CMP_GE, iv, hi)),
               tp_hlo_constant_i(b, TP_DTYPE_I32, TP_CHECK_INDEX));
  if (!negative_ok) return iv;
  tp_hlo_value_t neg = tp_hlo_compare(b, TP_CMP_LT, iv, tp_k(b, 0, iv));
  return tp_hlo_select(b, neg, tp_hlo_binary(b, TP_HLO_ADD, iv, hi), iv);
}

/* The (self, dim, index, source, ...) arguments that index_select, gather, scatter, index_add,
 * index_fill, index_reduce, scatter_reduce and index_copy share: |dim| wrapped (a 0-d self
 * counts as 1-d), |src| the fourth argument or NULL. */
typedef struct {
  const tp_meta_t *self, *index;
  const tp_op_arg_t *src;
  int nd, dim;
} dim_index_t;

static dim_index_t dim_index_of(const tp_op_arg_t *args, int n_args) {
  dim_index_t p = {.self = &args[0].meta, .index = &args[2].meta, .src = n_args > 3 ? &args[3] : NULL,
                   .nd = args[0].meta.ndim};
  p.dim = tp_norm_dim(args[1].i, p.nd);
  return p;
}

/* Checks the shared arguments' kinds (at least |min_args| of them) and the dim's range. */
static tp_status_t *parse_dim_index(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                                    int min_args, dim_index_t *p) {
  if (n_args < min_args || args[0].kind != TP_ARG_TENSOR || args[1].kind != TP_ARG_INT ||
      args[2].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected (self, dim, index, ...)", op->name);
  *p = dim_index_of(args, n_args);
  return p->dim < 0 ? tp_dim_error(op, args[1].i, p->nd) : NULL;
}

/* The [k] (or 0-d) checked |index| into a dim of |size|, placed along |dim| of |pos|'s shape. */
static tp_hlo_value_t index_along(tp_hlo_builder_t *b, tp_hlo_value_t index, int64_t size,
                                  const tp_meta_t *pos, int dim, bool negative_ok) {
  tp_hlo_value_t iv = tp_emit_checked_index(b, index, size, negative_ok);
  int64_t one = 1, bd = dim;
  if (iv.ndim == 0) iv = tp_hlo_reshape(b, iv, 1, &one);
  return tp_hlo_broadcast_in_dim(b, iv, pos->ndim, pos->sizes, &bd);
}

/* Arguments of a tensor list flattened by the glue: args[at] = count, then the tensors. */
static int list_count(const tp_op_arg_t *args, int n_args, int at) {
  return at < n_args && args[at].kind == TP_ARG_INT ? (int)args[at].i : -1;
}

/* cat skips legacy empty 1-D tensors when others have data. */
/* Advanced indexing, index.Tensor(self, indices) and index_put: args are (self, n, index_0 ..
 * index_{n-1}, ...), each index an integer tensor, a boolean mask or None. An integer index
 * indexes one dim; a mask as many as it has, with the coordinates of its true elements (as many
 * rows as it has true elements: index.Tensor's count argument, op.h). The indexed positions form
 * a shape: the index tensors broadcast together, placed where the first of them stands if they
 * are adjacent, in front otherwise, among the remaining dims. */
typedef struct {
  int n, at, nb, covered;
  int index_of[TP_MAX_DIMS]; /* per dim of self: the argument indexing it, or -1 */
  int mask_dim[TP_MAX_DIMS]; /* per dim of self a mask indexes: the mask's dim, else -1 */
  int mask;                  /* the argument that is a boolean mask, or -1 */
  int others;                /* index tensors besides the mask */
} index_layout_t;

/* |rows|: the mask's true elements, or -1 while unknown (its index shape then broadcasts as 1). */
static tp_status_t *index_layout(const tp_op_arg_t *args, int n_args, int64_t rows,
                                 index_layout_t *l, tp_meta_t *bshape) {
  memset(l, 0, sizeof(*l));
  l->n = list_count(args, n_args, 1);
  l->mask = -1;
  if (args[0].kind != TP_ARG_TENSOR || l->n < 0 || n_args < l->n + 2)
    return tp_make_status(TP_UNIMPLEMENTED, "index: unexpected arguments");
  const tp_meta_t *x = &args[0].meta;
  for (int d = 0; d < TP_MAX_DIMS; d++) l->index_of[d] = l->mask_dim[d] = -1;
  int d = 0, first = -1, last = -1;
  bool adjacent = true;
  memset(bshape, 0, sizeof(*bshape));
  for (int k = 0; k < l->n; k++) {
    const tp_op_arg_t *a = &args[2 + k];
    bool mask = a->kind != TP_ARG_NONE && a->meta.dtype == TP_DTYPE_BOOL;
    /* A uint8 index is a mask PyTorch deprecates (with a warning): CPU serves it. */
    if (a->kind != TP_ARG_NONE && !mask &&
        (!tp_dtype_is_int(a->meta.dtype) || a->meta.dtype == TP_DTYPE_U8))
      return tp_make_status(TP_UNIMPLEMENTED, "index with a %s tensor", tp_dtype_name(a->meta.dtype));
    int span = mask ? a->meta.ndim : 1;
    if (d + span > x->ndim)
      return tp_make_status(TP_OUT_OF_RANGE, "too many indices for tensor of dimension %d", x->ndim);
    if (a->kind == TP_ARG_NONE) {
      d++;
      continue;
    }
    tp_meta_t ishape = a->meta;
    if (mask) {
      if (l->mask >= 0 || span == 0)
        return tp_make_status(TP_UNIMPLEMENTED, "index with two masks or a 0-d mask");
      for (int j = 0; j < span; j++)
        if (a->meta.sizes[j] != x->sizes[d + j]) {
          char ms[256], xs[256];
          tp_format_ints(ms, sizeof(ms), a->meta.sizes, a->meta.ndim);
          tp_format_ints(xs, sizeof(xs), x->sizes, x->ndim);
          return tp_make_status(TP_OUT_OF_RANGE,
                                "The shape of the mask %s at index %d does not match the shape of "
                                "the indexed tensor %s at index %d", ms, j, xs, d + j);
        }
      l->mask = 2 + k;
      ishape = (tp_meta_t){.dtype = TP_DTYPE_I64, .ndim = 1, .sizes = {rows < 0 ? 1 : rows}};
      for (int j = 0; j < span; j++) l->mask_dim[d + j] = j;
    } else {
      l->others++;
    }
    for (int j = 0; j < span; j++) l->index_of[d + j] = 2 + k;
    if (first >= 0 && last != d - 1) adjacent = false;
    if (first < 0) {
      first = d;
      *bshape = ishape;
    } else {
      TP_RETURN_IF_ERROR(tp_broadcast_shapes(bshape, &ishape, bshape));
    }
    last = d + span - 1;
    l->covered += span;
    d += span;
  }
  if (first < 0) return tp_make_status(TP_UNIMPLEMENTED, "index without index tensors");
  l->at = adjacent ? first : 0;
  l->nb = bshape->ndim;
  return NULL;
}

static tp_status_t *index_positions_shape(const tp_op_arg_t *args, int n_args, int64_t rows,
                                          tp_meta_t *pos) {
  index_layout_t l;
  tp_meta_t bshape;
  TP_RETURN_IF_ERROR(index_layout(args, n_args, rows, &l, &bshape));
  if (l.mask >= 0 && rows < 0) /* index_put with a mask: its row count is not known */
    return tp_make_status(TP_UNIMPLEMENTED, "index with a mask");
  const tp_meta_t *x = &args[0].meta;
  memset(pos, 0, sizeof(*pos));
  pos->dtype = x->dtype;
  if (x->ndim - l.covered + l.nb > TP_MAX_DIMS) return tp_make_status(TP_UNIMPLEMENTED, "index: rank");
  for (int d = 0; d < l.at; d++) pos->sizes[pos->ndim++] = x->sizes[d];
  for (int d = 0; d < l.nb; d++) pos->sizes[pos->ndim++] = bshape.sizes[d];
  for (int d = l.at; d < x->ndim; d++)
    if (l.index_of[d] < 0) pos->sizes[pos->ndim++] = x->sizes[d];
  return NULL;
}

/* index_put with a boolean mask (x[mask] = v) whose values broadcast to the indexing result
 * for any count of true elements (a scalar, a row of the trailing dims): x where the mask is
 * false, v where it is true, with no count. |vx| gets the values' shape at self's rank (1 in
 * the mask's dims). False when the values need the count: the CPU serves those. */
static bool mask_put_shape(const tp_op_arg_t *args, const index_layout_t *l, int v, int64_t *vx) {
  const tp_meta_t *x = &args[0].meta, *val = &args[v].meta;
  if (l->mask < 0 || l->others) return false;
  int span = args[l->mask].meta.ndim, at = l->at, trail = x->ndim - at - span, rn = at + 1 + trail;
  if (val->ndim > rn) return false;
  int64_t p[TP_MAX_DIMS + 1];
  for (int i = 0; i < rn; i++) p[i] = i < rn - val->ndim ? 1 : val->sizes[i - (rn - val->ndim)];
  if (p[at] != 1) return false;
  for (int i = 0; i < at; i++) {
    if (p[i] != 1 && p[i] != x->sizes[i]) return false;
    vx[i] = p[i];
  }
  for (int j = 0; j < span; j++) vx[at + j] = 1;
  for (int k = 0; k < trail; k++) {
    if (p[at + 1 + k] != 1 && p[at + 1 + k] != x->sizes[at + span + k]) return false;
    vx[at + span + k] = p[at + 1 + k];
  }
  return true;
}

/* PyTorch's ensure_nonempty_dim: gather and scatter count a 0-d tensor as 1-d. */
static int nonempty_dims(int ndim) { return ndim ? ndim : 1; }

/* index.Tensor's count argument: after the indices. */
static tp_op_arg_t *index_count_arg(tp_op_arg_t *args, int n_args) {
  int c = 2 + list_count(args, n_args, 1);
  return c >= 2 && c < n_args && args[c].kind == TP_ARG_INT ? &args[c] : NULL;
}

/* Linear indices into flattened self for every indexed position (shape |pos|); |rows| as for
 * index_layout. */
static tp_hlo_value_t index_positions(tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                                      const tp_hlo_value_t *in, const tp_meta_t *pos, int64_t rows) {
  index_layout_t l;
  tp_meta_t bshape;
  tp_status_t *st = index_layout(args, n_args, rows, &l, &bshape);
  if (st) {
    tp_hlo_fail(b, st);
    return tp_hlo_constant_i(b, TP_DTYPE_I64, 0);
  }
  const tp_meta_t *x = &args[0].meta;
  int64_t stv[TP_MAX_DIMS];
  strides_of(x, stv);
  /* The mask's true elements (rows past them, padding, address its end: the caller drops them). */
  tp_hlo_value_t mask_pos = {0};
  if (l.mask >= 0) mask_pos = tp_emit_true_positions(b, in[l.mask], rows);
  tp_hlo_value_t lin = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, 0), pos->ndim, pos->sizes);
  int od = 0; /* the next position dim for a dim that is not indexed */
  for (int d = 0; d < x->ndim; d++) {
    tp_hlo_value_t c;
    if (l.index_of[d] >= 0) {
      const tp_op_arg_t *a = &args[l.index_of[d]];
      tp_hlo_value_t iv = l.mask_dim[d] >= 0
                              ? tp_emit_unravel(b, mask_pos, a->meta.sizes, l.mask_dim[d], a->meta.ndim)
                              : tp_emit_checked_index(b, in[l.index_of[d]], x->sizes[d], true);
      int64_t bd[TP_MAX_DIMS];
      for (int i = 0; i < iv.ndim; i++) bd[i] = l.at + l.nb - iv.ndim + i;
      c = tp_hlo_broadcast_in_dim(b, iv, pos->ndim, pos->sizes, bd);
    } else {
      if (od == l.at) od += l.nb;
      c = tp_hlo_iota(b, TP_DTYPE_I64, pos->ndim, pos->sizes, od++);
    }
    lin = tp_hlo_binary(b, TP_HLO_ADD, lin, tp_hlo_binary(b, TP_HLO_MUL, c, tp_k(b, (double)stv[d], c)));
  }
  return lin;
}

/* index.Tensor: the indexed positions' shape. A mask's rows are counted first (op.h); the result
 * pads to their capacity where they are its leading dim and broadcast with no other index. */
static tp_status_t *infer_index_tensor(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                       tp_meta_t *out, int *n_out) {
  tp_meta_t pos;
  index_layout_t l;
  tp_meta_t bshape;
  TP_RETURN_IF_ERROR(index_layout(args, n_args, -1, &l, &bshape));
  int64_t rows = -1;
  if (l.mask >= 0) {
    TP_RETURN_IF_ERROR(tp_infer_count(op, index_count_arg(args, n_args),
                                      tp_meta_numel(&args[l.mask].meta),
                                      l.at != 0 || l.others > 0, out, n_out, &rows));
    if (rows < 0) return NULL; /* the count pass */
  }
  TP_RETURN_IF_ERROR(index_positions_shape(args, n_args, rows, &pos));
  out[0] = pos;
  return NULL;
}

/* index_put(self, n, indices..., values, accumulate[, unsafe]): self's shape, once the values
 * match self's dtype and broadcast to the indexed positions. */
static tp_status_t *infer_index_put(const tp_op_arg_t *args, int n_args, tp_meta_t *out) {
  tp_meta_t pos;
  int v = 2 + list_count(args, n_args, 1);
  if (v >= n_args || args[v].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "index_put_: values must be a tensor");
  if (args[v].meta.dtype != args[0].meta.dtype)
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "Index put requires the source and destination dtypes match, got %s "
                          "for the destination and %s for the source.",
                          tp_dtype_scalar_type_name(args[0].meta.dtype),
                          tp_dtype_scalar_type_name(args[v].meta.dtype));
  index_layout_t l;
  tp_meta_t bshape;
  int64_t vx[TP_MAX_DIMS];
  TP_RETURN_IF_ERROR(index_layout(args, n_args, -1, &l, &bshape));
  if (mask_put_shape(args, &l, v, vx)) {
    out[0] = args[0].meta;
    return NULL;
  }
  TP_RETURN_IF_ERROR(index_positions_shape(args, n_args, -1, &pos));
  tp_meta_t check;
  TP_RETURN_IF_ERROR(tp_broadcast_shapes(&pos, &args[v].meta, &check));
  if (check.ndim != pos.ndim || memcmp(check.sizes, pos.sizes, sizeof(int64_t) * (size_t)pos.ndim))
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "shape mismatch: value tensor cannot be broadcast to indexing result");
  out[0] = args[0].meta;
  return NULL;
}

/* (grad_output, indices, num_weights, padding_idx, scale_grad_by_freq): [num_weights, dim]. */
static tp_status_t *infer_embedding_backward(const tp_op_def_t *op, const tp_op_arg_t *args,
                                             int n_args, tp_meta_t *out) {
  if (n_args < 5 || args[0].kind != TP_ARG_TENSOR || args[1].kind != TP_ARG_TENSOR ||
      args[0].meta.ndim < 1)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  if (args[4].i) return tp_make_status(TP_UNIMPLEMENTED, "scale_grad_by_freq");
  out[0].dtype = args[0].meta.dtype;
  out[0].ndim = 2;
  out[0].sizes[0] = args[2].i;
  out[0].sizes[1] = args[0].meta.sizes[args[0].meta.ndim - 1];
  return NULL;
}

/* gather: index's shape, self's dtype; index no larger than self but along dim. */
static tp_status_t *infer_gather(const dim_index_t *p, tp_meta_t *out) {
  const tp_meta_t *self = p->self, *index = p->index;
  int nd = p->nd, dim = p->dim;
  if (nonempty_dims(index->ndim) != nonempty_dims(nd)) /* a 0-d tensor counts as 1-d */
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "Index tensor must have the same number of dimensions as input tensor");
  if (index->ndim != nd) /* a 0-d tensor with a 1-d one: CPU serves it */
    return tp_make_status(TP_UNIMPLEMENTED, "gather: 0-d and 1-d tensors mixed");
  if (tp_meta_numel(index) > 0)
    for (int d = 0; d < nd; d++)
      if (d != dim && index->sizes[d] > self->sizes[d]) {
        char is[160], ss[160];
        tp_format_ints(is, sizeof(is), index->sizes, index->ndim);
        tp_format_ints(ss, sizeof(ss), self->sizes, nd);
        return tp_make_status(TP_INVALID_ARGUMENT,
                              "Size does not match at dimension %d expected index %s to be no "
                              "larger than self %s apart from dimension %d", d, is, ss, dim);
      }
  out[0] = *index;
  out[0].dtype = self->dtype;
  return NULL;
}

/* scatter/scatter_add: self's shape; index no larger than src, nor than self but along dim. */
static tp_status_t *infer_scatter(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                  const dim_index_t *p) {
  const tp_meta_t *self = p->self, *index = p->index;
  int nd = p->nd, dim = p->dim;
  const tp_meta_t *src = p->src && p->src->kind == TP_ARG_TENSOR ? &p->src->meta : NULL;
  if (src && src->dtype != self->dtype)
    return tp_make_status(TP_INVALID_ARGUMENT, "scatter(): Expected self.dtype to be equal to src.dtype");
  if (nonempty_dims(index->ndim) != nonempty_dims(nd))
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "Index tensor must have the same number of dimensions as self tensor");
  if (index->ndim != nd || (src && src->ndim != nd && nonempty_dims(src->ndim) == nonempty_dims(nd)))
    return tp_make_status(TP_UNIMPLEMENTED, "%s: 0-d and 1-d tensors mixed", op->name);
  if (src && nonempty_dims(src->ndim) != nonempty_dims(nd))
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "Index tensor must have the same number of dimensions as src tensor");
  bool wrong = false;
  for (int d = 0; d < nd && tp_meta_numel(index) > 0; d++)
    wrong = wrong || (d != dim && index->sizes[d] > self->sizes[d]) ||
            (src && index->sizes[d] > src->sizes[d]);
  if (wrong) {
    char is[160], ss[160], rs[160];
    tp_format_ints(is, sizeof(is), index->sizes, index->ndim);
    tp_format_ints(ss, sizeof(ss), self->sizes, nd);
    if (src) tp_format_ints(rs, sizeof(rs), src->sizes, src->ndim);
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "Expected index %s to be smaller than self %s apart from dimension %d%s%s",
                          is, ss, dim, src ? " and to be smaller size than src " : "", src ? rs : "");
  }
  if (n_args > 3 && args[3].kind == TP_ARG_SCALAR) args[3].scalar_dtype = self->dtype;
  if (n_args > 4 && args[4].kind != TP_ARG_NONE)
    return tp_make_status(TP_UNIMPLEMENTED, "scatter with reduce");
  return NULL;
}

/* index_select, gather, scatter, scatter_add, index_add: (self, dim, index, ...). out[0] holds
 * self's meta on entry. */
static tp_status_t *infer_dim_index(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                    tp_meta_t *out) {
  const tp_meta_t *self = &args[0].meta;
  int nd = self->ndim;
  dim_index_t p = {0};
  TP_RETURN_IF_ERROR(parse_dim_index(op, args, n_args, 3, &p));
  int dim = p.dim;
  const tp_meta_t *index = p.index;
  if (!tp_dtype_is_int(index->dtype))
    return tp_make_status(TP_INVALID_ARGUMENT, "%s(): Expected dtype int64 for index", op->name);
  if (op->code == TP_X_INDEX_SELECT) {
    if (index->ndim > 1)
      return tp_make_status(TP_INVALID_ARGUMENT, "index_select(): Index is supposed to be a vector");
    if (nd) out[0].sizes[dim] = index->ndim ? index->sizes[0] : 1;
  } else if (op->code == TP_X_GATHER) {
    TP_RETURN_IF_ERROR(infer_gather(&p, out));
  } else if (op->code == TP_X_INDEX_ADD) {
    if (!p.src || p.src->kind != TP_ARG_TENSOR || p.src->meta.ndim != nd)
      return tp_make_status(TP_UNIMPLEMENTED, "index_add: source rank differs");
    for (int i = 4; i < n_args; i++)
      if (args[i].kind == TP_ARG_SCALAR) args[i].scalar_dtype = self->dtype;
  } else {
    TP_RETURN_IF_ERROR(infer_scatter(op, args, n_args, &p));
  }
  return NULL;
}

/* masked_fill(self, mask, value): self's shape, the mask a bool one that broadcasts to it. */
static tp_status_t *infer_masked_fill(tp_op_arg_t *args, int n_args) {
  const tp_meta_t *self = &args[0].meta;
  int nd = self->ndim;
  if (n_args < 3 || args[1].kind != TP_ARG_TENSOR || args[1].meta.dtype != TP_DTYPE_BOOL)
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "masked_fill_ only supports boolean masks, but got mask with dtype %s",
                          tp_dtype_name(args[1].meta.dtype));
  tp_meta_t shape;
  TP_RETURN_IF_ERROR(tp_broadcast_shapes(self, &args[1].meta, &shape));
  /* A mask that broadcasts self: the functional form's result takes the broadcast shape,
   * the in-place form raises; CPU does each. */
  if (shape.ndim != nd || memcmp(shape.sizes, self->sizes, sizeof(int64_t) * (size_t)nd))
    return tp_make_status(TP_UNIMPLEMENTED, "masked_fill: the mask broadcasts self");
  if (args[2].kind == TP_ARG_TENSOR && args[2].meta.ndim != 0)
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "masked_fill_ only supports a 0-dimensional value tensor, but got "
                          "tensor with %d dimension(s).", args[2].meta.ndim);
  if (args[2].kind == TP_ARG_SCALAR) args[2].scalar_dtype = self->dtype;
  return NULL;
}

tp_status_t *tp_infer_index(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                            int *n_out) {
  *n_out = 1;
  switch ((tp_index_t)op->code) {
    case TP_X_INDEX: return infer_index_tensor(op, args, n_args, out, n_out);
    case TP_X_INDEX_PUT: return infer_index_put(args, n_args, out);
    case TP_X_EMBEDDING_BACKWARD: return infer_embedding_backward(op, args, n_args, out);
    default: break;
  }
  if (n_args < 1 || args[0].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: self must be a tensor", op->name);
  const tp_meta_t *self = &args[0].meta;
  out[0] = *self;
  switch ((tp_index_t)op->code) {
    case TP_X_INDEX_SELECT: case TP_X_GATHER: case TP_X_SCATTER: case TP_X_SCATTER_ADD:
    case TP_X_INDEX_ADD:
      return infer_dim_index(op, args, n_args, out);
    case TP_X_MASKED_FILL: return infer_masked_fill(args, n_args);
    default:
      return NULL;
  }
}

/* index.Tensor: the count pass's count of true mask elements, else a gather of the positions. */
static void emit_index_tensor(tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                              const tp_hlo_value_t *in, const tp_meta_t *om, tp_hlo_value_t *out) {
  tp_op_arg_t *count = index_count_arg((tp_op_arg_t *)args, n_args);
  index_layout_t l;
  tp_meta_t bshape;
  if (!index_layout(args, n_args, -1, &l, &bshape) && l.mask >= 0 && tp_count_pass(count)) {
    out[0] = tp_emit_count_true(b, in[l.mask]);
    return;
  }
  tp_hlo_value_t lin = index_positions(b, args, n_args, in, om, l.mask >= 0 ? om->sizes[l.at + l.nb - 1] : -1);
  out[0] = tp_hlo_gather_1d(b, flat(b, tp_hlo_convert(b, in[0], om->dtype)), lin);
}

/* index_put: a select where the values broadcast over a mask (mask_put_shape), else a scatter
 * (or scatter-add, with accumulate) of the values into the indexed positions. */
static void emit_index_put(tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                           const tp_hlo_value_t *in, const tp_meta_t *om, tp_hlo_value_t *out) {
  int v = 2 + list_count(args, n_args, 1);
  bool acc = v + 1 < n_args && args[v + 1].kind == TP_ARG_INT && args[v + 1].i;
  index_layout_t l;
  tp_meta_t bshape;
  int64_t vx[TP_MAX_DIMS];
  if (!index_layout(args, n_args, -1, &l, &bshape) && mask_put_shape(args, &l, v, vx)) {
    int64_t md[TP_MAX_DIMS];
    int span = args[l.mask].meta.ndim;
    for (int j = 0; j < span; j++) md[j] = l.at + j;
    tp_hlo_value_t x = tp_hlo_convert(b, in[0], om->dtype);
    tp_hlo_value_t m = tp_hlo_broadcast_in_dim(b, in[l.mask], om->ndim, om->sizes, md);
    tp_hlo_value_t val = tp_hlo_broadcast_to(
        b, tp_hlo_reshape(b, tp_hlo_convert(b, in[v], om->dtype), om->ndim, vx), om->ndim, om->sizes);
    if (!acc) out[0] = tp_sel(b, m, val, x);
    else if (om->dtype == TP_DTYPE_BOOL) out[0] = tp_or(b, x, tp_and(b, m, val));
    else out[0] = tp_add(b, x, tp_sel(b, m, val, tp_k(b, 0, x)));
    return;
  }
  tp_meta_t pos;
  if (!tp_emit_ok(b, index_positions_shape(args, n_args, -1, &pos))) return;
  pos.dtype = om->dtype;
  tp_hlo_value_t lin = index_positions(b, args, n_args, in, &pos, -1);
  tp_hlo_value_t vals = tp_emit_cast_to(b, in[v], &pos);
  tp_hlo_value_t x = flat(b, tp_hlo_convert(b, in[0], om->dtype));
  tp_hlo_value_t r = acc ? tp_hlo_scatter_1d_op(b, x, lin, vals, om->dtype == TP_DTYPE_BOOL ? TP_HLO_OR : TP_HLO_ADD)
                         : tp_hlo_scatter_1d(b, x, lin, vals);
  out[0] = tp_hlo_reshape(b, r, om->ndim, om->sizes);
}

/* Scatter-add each grad row into the row its index names; padding_idx rows stay zero. */
static void emit_embedding_backward(tp_hlo_builder_t *b, const tp_op_arg_t *args,
                                    const tp_hlo_value_t *in, const tp_meta_t *om,
                                    tp_hlo_value_t *out) {
  int64_t n = tp_meta_numel(&args[1].meta), d = om->sizes[1];
  tp_dtype_t md = tp_math_dtype(om->dtype);
  int64_t gs[2] = {n, d};
  tp_hlo_value_t g = tp_hlo_reshape(b, tp_hlo_convert(b, in[0], md), 2, gs);
  tp_hlo_value_t iv = tp_hlo_reshape(b, index_values(b, in[1]), 1, &n);
  int64_t bd0 = 0;
  tp_hlo_value_t rows = tp_hlo_broadcast_in_dim(b, iv, 2, gs, &bd0);
  tp_hlo_value_t keep = tp_hlo_compare(b, TP_CMP_NE, rows, tp_k(b, (double)args[3].i, rows));
  g = tp_hlo_select(b, keep, g, tp_k(b, 0, g));
  tp_meta_t table = {.dtype = md, .ndim = 2, .sizes = {om->sizes[0], d}};
  tp_meta_t pos = {.dtype = md, .ndim = 2, .sizes = {n, d}};
  tp_hlo_value_t idx = linear_index(b, &table, &pos, 0, rows);
  int64_t total = om->sizes[0] * d;
  tp_hlo_value_t zeros = tp_hlo_broadcast_to(b, tp_hlo_constant(b, md, 0), 1, &total);
  tp_hlo_value_t r = tp_hlo_scatter_1d_op(b, zeros, idx, g, TP_HLO_ADD);
  out[0] = tp_hlo_convert(b, tp_hlo_reshape(b, r, 2, om->sizes), om->dtype);
}

/* scatter, scatter_add and index_add into |x| (self converted), along |dim|. */
static void emit_scatter(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                         int n_args, const tp_hlo_value_t *in, tp_hlo_value_t x, int dim,
                         const tp_meta_t *om, tp_hlo_value_t *out) {
  const tp_meta_t *self = &args[0].meta;
  int nd = self->ndim;
  const tp_meta_t *pos; /* the positions written: index's shape, or source's for index_add */
  tp_hlo_value_t along, upd;
  if (op->code == TP_X_INDEX_ADD) {
    pos = &args[3].meta;
    along = nd ? index_along(b, in[2], self->sizes[dim], pos, dim, false)
               : tp_emit_checked_index(b, in[2], 1, false);
    upd = tp_hlo_convert(b, in[3], om->dtype);
    if (n_args > 4 && args[4].kind == TP_ARG_SCALAR)
      upd = tp_hlo_binary(b, TP_HLO_MUL, upd, tp_hlo_broadcast_to(b, in[4], upd.ndim, upd.dims));
  } else {
    pos = &args[2].meta;
    along = tp_emit_checked_index(b, in[2], nd ? self->sizes[dim] : 1, false);
    if (args[3].kind == TP_ARG_TENSOR) {
      int64_t start[TP_MAX_DIMS] = {0}, step[TP_MAX_DIMS];
      for (int i = 0; i < pos->ndim; i++) step[i] = 1;
      upd = tp_hlo_slice(b, tp_hlo_convert(b, in[3], om->dtype), start, pos->sizes, step);
    } else {
      upd = tp_hlo_broadcast_to(b, tp_hlo_convert(b, in[3], om->dtype), pos->ndim, pos->sizes);
    }
  }
  tp_hlo_value_t idx = nd ? linear_index(b, self, pos, dim, along) : tp_hlo_constant_i(b, TP_DTYPE_I64, 0);
  tp_hlo_value_t r = op->code == TP_X_SCATTER
                         ? tp_hlo_scatter_1d(b, flat(b, x), idx, upd)
                         : tp_hlo_scatter_1d_op(b, flat(b, x), idx, upd,
                                                om->dtype == TP_DTYPE_BOOL ? TP_HLO_OR : TP_HLO_ADD);
  out[0] = tp_hlo_reshape(b, r, om->ndim, om->sizes);
}

void tp_emit_index(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                   const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  const tp_meta_t *om = out_meta;
  switch ((tp_index_t)op->code) {
    case TP_X_INDEX:
      emit_index_tensor(b, args, n_args, in, om, out);
      return;
    case TP_X_INDEX_PUT:
      emit_index_put(b, args, n_args, in, om, out);
      return;
    case TP_X_EMBEDDING_BACKWARD:
      emit_embedding_backward(b, args, in, om, out);
      return;
    default: break;
  }
  const tp_meta_t *self = &args[0].meta;
  tp_hlo_value_t x = tp_hlo_convert(b, in[0], om->dtype);
  int nd = self->ndim, dim = op->code == TP_X_MASKED_FILL ? 0 : dim_index_of(args, n_args).dim;
  switch ((tp_index_t)op->code) {
    case TP_X_INDEX_SELECT: {
      if (nd == 0) {
        tp_emit_checked_index(b, in[2], 1, false);
        out[0] = x;
        return;
      }
      tp_hlo_value_t along = index_along(b, in[2], self->sizes[dim], om, dim, false);
      tp_hlo_value_t idx = linear_index(b, self, om, dim, along);
      out[0] = tp_hlo_gather_1d(b, flat(b, x), idx);
      return;
    }
    case TP_X_GATHER: {
      if (nd == 0) {
        out[0] = tp_hlo_reshape(b, x, om->ndim, om->sizes);
        return;
      }
      tp_hlo_value_t idx = linear_index(b, self, om, dim, tp_emit_checked_index(b, in[2], self->sizes[dim], false));
      out[0] = tp_hlo_gather_1d(b, flat(b, x), idx);
      return;
    }
    case TP_X_SCATTER: case TP_X_SCATTER_ADD: case TP_X_INDEX_ADD:
      emit_scatter(op, b, args, n_args, in, x, dim, om, out);
      return;
    case TP_X_MASKED_FILL: {
      tp_hlo_value_t m = tp_hlo_broadcast_to(b, in[1], om->ndim, om->sizes);
      tp_hlo_value_t v = tp_emit_cast_to(b, in[2], om);
      out[0] = tp_hlo_select(b, m, v, x);
      return;
    }
    default:
      out[0] = x;
  }
}

/* ---- scatter_reduce.two, index_reduce and index_fill ----
 * scatter_reduce.two(self, dim, index, src, reduce, *, include_self) and
 * index_reduce(self, dim, index, source, reduce, *, include_self), and index_fill: a
 * tp_index_reduce_t. Each source
 * element combines into the position its index names; without include_self, a position that
 * receives anything starts from the reduction's identity instead of self. mean divides by the
 * number of contributions (self counting as one), flooring for integer types, as CPU does. */

typedef enum { TP_RED_SUM, TP_RED_PROD, TP_RED_MEAN, TP_RED_AMAX, TP_RED_AMIN } tp_index_red_t;

static int parse_index_reduction(const char *s) {
  static const char *const names[] = {"sum", "prod", "mean", "amax", "amin"};
  for (int i = 0; i < 5; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return -1;
}

/* index_fill(self, dim, index, value): TP_XR_INDEX_FILL of the same row family. */
static tp_status_t *infer_index_fill(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                     tp_meta_t *out, int *n_out) {
  dim_index_t p = {0};
  TP_RETURN_IF_ERROR(parse_dim_index(op, args, n_args, 4, &p));
  const tp_meta_t *self = p.self, *index = p.index;
  if (index->dtype != TP_DTYPE_I64)
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "index_fill_(): Expected dtype int64 for index.");
  if (index->ndim > 1)
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "index_fill_(): Index is supposed to be a vector");
  if (args[3].kind == TP_ARG_TENSOR && args[3].meta.ndim != 0)
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "index_fill_ only supports a 0-dimensional value tensor, but got tensor "
                          "with %d dimension(s).", args[3].meta.ndim);
  if (args[3].kind == TP_ARG_SCALAR) args[3].scalar_dtype = self->dtype;
  out[0] = *self;
  *n_out = 1;
  return NULL;
}

static tp_hlo_value_t emit_index_fill(tp_hlo_builder_t *b, const tp_op_arg_t *args,
                                      const tp_hlo_value_t *in, const tp_meta_t *om) {
  tp_meta_t self = args[0].meta, pos;
  if (self.ndim == 0) { /* a 0-dim self has one row along dim 0 */
    self.ndim = 1;
    self.sizes[0] = 1;
  }
  int dim = tp_norm_dim(args[1].i, self.ndim);
  int64_t n = tp_meta_numel(&args[2].meta);
  if (n == 0 || tp_meta_numel(&self) == 0) return in[0];
  pos = self;
  pos.sizes[dim] = n;
  tp_hlo_value_t index = tp_hlo_reshape(b, in[2], 1, &n);
  tp_hlo_value_t along = index_along(b, index, self.sizes[dim], &pos, dim, true);
  tp_hlo_value_t upd = tp_hlo_broadcast_to(b, tp_hlo_convert(b, in[3], om->dtype), pos.ndim, pos.sizes);
  tp_hlo_value_t r = tp_hlo_scatter_1d(b, flat(b, in[0]), linear_index(b, &self, &pos, dim, along), upd);
  return tp_hlo_reshape(b, r, om->ndim, om->sizes);
}

tp_status_t *tp_infer_index_reduce(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                   tp_meta_t *out, int *n_out) {
  if (op->code == TP_XR_INDEX_FILL) return infer_index_fill(op, args, n_args, out, n_out);
  bool scatter = op->code == TP_XR_SCATTER_REDUCE;
  dim_index_t p = {0};
  TP_RETURN_IF_ERROR(parse_dim_index(op, args, n_args, 5, &p));
  if (args[3].kind != TP_ARG_TENSOR || args[4].kind != TP_ARG_STR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected (self, dim, index, src, reduce)", op->name);
  const tp_meta_t *self = p.self, *index = p.index, *src = &args[3].meta;
  int nd = p.nd, dim = p.dim;
  int red = parse_index_reduction(args[4].s);
  if (red < 0 || (!scatter && red == TP_RED_SUM))
    return tp_make_status(TP_INVALID_ARGUMENT,
                          scatter ? "reduce argument must be either sum, prod, mean, amax or amin, got %s"
                                  : "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got %s.",
                          args[4].s);
  if (index->dtype != TP_DTYPE_I64 && !(index->dtype == TP_DTYPE_I32 && !scatter))
    return tp_make_status(TP_INVALID_ARGUMENT, "%s(): Expected dtype int64 for index", op->name);
  if (self->dtype != src->dtype)
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "%s(): self (%s) and %s (%s) must have the same scalar type", op->name,
                          tp_dtype_name(self->dtype), scatter ? "src" : "source",
                          tp_dtype_name(src->dtype));
  if (self->dtype == TP_DTYPE_BOOL && red == TP_RED_MEAN)
    return tp_make_status(TP_UNIMPLEMENTED, "%s: mean of bool", op->name);
  if (scatter) {
    if (index->ndim != nd || src->ndim != nd)
      return tp_make_status(nd == 0 ? TP_UNIMPLEMENTED : TP_INVALID_ARGUMENT,
                            "Index tensor must have the same number of dimensions as self tensor");
    for (int d = 0; d < nd; d++)
      if (index->sizes[d] > src->sizes[d] || (d != dim && index->sizes[d] > self->sizes[d]))
        return tp_make_status(TP_INVALID_ARGUMENT,
                              "Expected index %s to be smaller than self %s apart from dimension %d "
                              "and to be smaller size than src", "shape", "shape", dim);
  } else {
    if (index->ndim > 1)
      return tp_make_status(TP_INVALID_ARGUMENT, "index_reduce_(): Index is supposed to be a vector");
    if (src->ndim != nd)
      return tp_make_status(TP_UNIMPLEMENTED, "index_reduce: source rank differs from self");
    int64_t n = index->ndim ? index->sizes[0] : 1;
    if ((nd ? src->sizes[dim] : 1) != n)
      return tp_make_status(TP_INVALID_ARGUMENT,
                            "index_reduce_(): Number of indices (%lld) should be equal to "
                            "source.size(dim) (%lld)", (long long)n, (long long)src->sizes[dim]);
    for (int d = 0; d < nd; d++)
      if (d != dim && src->sizes[d] != self->sizes[d])
        return tp_make_status(TP_INVALID_ARGUMENT,
                              "index_reduce_(): self and source must have the same size at "
                              "dimension %d", d);
  }
  out[0] = *self;
  *n_out = 1;
  return NULL;
}

void tp_emit_index_reduce(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                          int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                          tp_hlo_value_t *out) {
  if (op->code == TP_XR_INDEX_FILL) {
    out[0] = emit_index_fill(b, args, in, &out_meta[0]);
    return;
  }
  bool scatter = op->code == TP_XR_SCATTER_REDUCE;
  const tp_meta_t *om = &out_meta[0];
  tp_meta_t self1 = args[0].meta; /* index_reduce of a 0-dim self works on shape [1] */
  const tp_meta_t *self = &self1;
  tp_dtype_t dt = om->dtype;
  int red = parse_index_reduction(args[4].s);
  bool include_self = !(n_args > 5 && args[5].kind == TP_ARG_INT && !args[5].i);
  /* The positions written: index's shape (scatter) or source's (index_reduce). */
  tp_meta_t pos = scatter ? args[2].meta : args[3].meta;
  pos.dtype = dt;
  tp_hlo_value_t src = in[3];
  if (!scatter && self1.ndim == 0) {
    self1.ndim = pos.ndim = 1;
    self1.sizes[0] = pos.sizes[0] = 1;
    src = tp_hlo_reshape(b, src, 1, pos.sizes);
  }
  int nd = self->ndim, dim = tp_norm_dim(args[1].i, nd);
  tp_hlo_value_t along, upd;
  if (scatter) {
    along = tp_emit_checked_index(b, in[2], nd ? self->sizes[dim] : 1, false);
    int64_t start[TP_MAX_DIMS] = {0}, step[TP_MAX_DIMS];
    for (int i = 0; i < pos.ndim; i++) step[i] = 1;
    upd = tp_hlo_slice(b, src, start, pos.sizes, step);
  } else {
    along = index_along(b, in[2], self->sizes[dim], &pos, dim, false);
    upd = src;
  }
  tp_hlo_value_t idx = nd ? linear_index(b, self, &pos, dim, along) : tp_hlo_constant_i(b, TP_DTYPE_I64, 0);
  tp_hlo_value_t x = flat(b, in[0]);
  bool bl = dt == TP_DTYPE_BOOL;
  tp_hlo_binary_t hop;
  double ident;
  switch (red) {
    case TP_RED_PROD: hop = bl ? TP_HLO_AND : TP_HLO_MUL; ident = 1; break;
    case TP_RED_AMAX: hop = bl ? TP_HLO_OR : TP_HLO_MAX; ident = bl ? 0 : -INFINITY; break;
    case TP_RED_AMIN: hop = bl ? TP_HLO_AND : TP_HLO_MIN; ident = bl ? 1 : INFINITY; break;
    default: hop = bl ? TP_HLO_OR : TP_HLO_ADD; ident = 0; break;
  }
  if (!include_self) {
    tp_hlo_value_t none = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_BOOL, 0), x.ndim, x.dims);
    tp_hlo_value_t hit = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_BOOL, 1), upd.ndim, upd.dims);
    tp_hlo_value_t touched = tp_hlo_scatter_1d_op(b, none, idx, hit, TP_HLO_OR);
    tp_hlo_value_t id;
    if (tp_dtype_is_float(dt) || bl || (red != TP_RED_AMAX && red != TP_RED_AMIN)) {
      id = tp_hlo_convert(b, tp_hlo_constant(b, TP_DTYPE_F64, ident), dt);
    } else { /* integer extremes */
      int bits = dt == TP_DTYPE_I8 || dt == TP_DTYPE_U8 ? 8 : dt == TP_DTYPE_I16 ? 16 : dt == TP_DTYPE_I32 ? 32 : 64;
      bool uns = dt == TP_DTYPE_U8;
      int64_t hi = bits == 64 ? INT64_MAX : uns ? (1 << bits) - 1 : (int64_t)((1ull << (bits - 1)) - 1);
      int64_t lo = uns ? 0 : bits == 64 ? INT64_MIN : -hi - 1;
      id = tp_hlo_constant_i(b, dt, red == TP_RED_AMAX ? lo : hi);
    }
    x = tp_hlo_select(b, touched, tp_hlo_broadcast_to(b, id, x.ndim, x.dims), x);
  }
  tp_hlo_value_t r = tp_hlo_scatter_1d_op(b, x, idx, upd, hop);
  if ((red == TP_RED_AMAX || red == TP_RED_AMIN) && tp_dtype_is_float(dt)) {
    /* A NaN wins, as in CPU's kernel (the scatter's max/min combiner does not keep it). */
    tp_hlo_value_t none = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_BOOL, 0), x.ndim, x.dims);
    tp_hlo_value_t nan_in = tp_hlo_scatter_1d_op(b, none, idx, tp_hlo_compare(b, TP_CMP_NE, upd, upd), TP_HLO_OR);
    nan_in = tp_hlo_binary(b, TP_HLO_OR, nan_in, tp_hlo_compare(b, TP_CMP_NE, x, x));
    r = tp_hlo_select(b, nan_in, tp_hlo_broadcast_to(b, tp_hlo_convert(b, tp_hlo_constant(b, TP_DTYPE_F64, NAN), dt), x.ndim, x.dims), r);
  }
  if (red == TP_RED_MEAN) {
    tp_hlo_value_t c0 = tp_hlo_broadcast_to(b, tp_hlo_constant(b, dt, include_self ? 1 : 0), x.ndim, x.dims);
    tp_hlo_value_t ones = tp_hlo_broadcast_to(b, tp_hlo_constant(b, dt, 1), upd.ndim, upd.dims);
    tp_hlo_value_t cnt = tp_hlo_scatter_1d_op(b, c0, idx, ones, TP_HLO_ADD);
    tp_hlo_value_t zero = tp_k(b, 0, cnt);
    cnt = tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_EQ, cnt, zero), tp_k(b, 1, cnt), cnt);
    if (tp_dtype_is_float(dt)) {
      tp_dtype_t md = tp_math_dtype(dt);
      r = tp_hlo_convert(b, tp_hlo_binary(b, TP_HLO_DIV, tp_hlo_convert(b, r, md), tp_hlo_convert(b, cnt, md)), dt);
    } else { /* floor division by a positive count */
      tp_hlo_value_t q = tp_hlo_binary(b, TP_HLO_DIV, r, cnt);
      tp_hlo_value_t fix = tp_hlo_binary(
          b, TP_HLO_AND, tp_hlo_compare(b, TP_CMP_NE, tp_hlo_binary(b, TP_HLO_REM, r, cnt), zero),
          tp_hlo_compare(b, TP_CMP_LT, r, zero));
      r = tp_hlo_select(b, fix, tp_hlo_binary(b, TP_HLO_SUB, q, tp_k(b, 1, q)), q);
    }
  }
  out[0] = tp_hlo_reshape(b, r, om->ndim, om->sizes);
}

/* ---- take, isin, eye, put: the tp_lookup_t codes of tp_infer_lookup ----
 * take(self, index): self flattened, read at index (negative counts from the end).
 * isin(elements, test_elements, *, assume_unique, invert), any side may be a Scalar: every
 * element compared with every test element (memory elements x tests), == as CPU (NaN never in).
 * eye(n[, m], *, dtype): a factory, iota == iota.
 * put(self, index, source, accumulate): take's inverse, a scatter (adding when accumulating). */

tp_status_t *tp_infer_lookup(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                             int *n_out) {
  *n_out = 1;
  switch ((tp_lookup_t)op->code) {
    case TP_LK_TAKE: {
      if (n_args < 2 || args[0].kind != TP_ARG_TENSOR || args[1].kind != TP_ARG_TENSOR)
        return tp_make_status(TP_INVALID_ARGUMENT, "take: expected (self, index)");
      if (args[1].meta.dtype != TP_DTYPE_I64)
        return tp_make_status(TP_INVALID_ARGUMENT, "take(): Expected a long tensor for index, but got %s",
                              tp_dtype_name(args[1].meta.dtype));
      if (tp_meta_numel(&args[0].meta) == 0 && tp_meta_numel(&args[1].meta) > 0)
        return tp_make_status(TP_INVALID_ARGUMENT, "take(): tried to take from an empty tensor");
      out[0] = args[1].meta;
      out[0].dtype = args[0].meta.dtype;
      return NULL;
    }
    case TP_LK_PUT: {
      if (n_args < 3 || args[0].kind != TP_ARG_TENSOR || args[1].kind != TP_ARG_TENSOR ||
          args[2].kind != TP_ARG_TENSOR)
        return tp_make_status(TP_INVALID_ARGUMENT, "put: expected (self, index, source)");
      if (args[1].meta.dtype != TP_DTYPE_I64)
        return tp_make_status(TP_INVALID_ARGUMENT, "put_(): Expected a long tensor for index, but got %s",
                              tp_dtype_name(args[1].meta.dtype));
      if (args[2].meta.dtype != args[0].meta.dtype)
        return tp_make_status(TP_INVALID_ARGUMENT,
                              "put_(): self and source expected to have the same dtype, but got "
                              "self.dtype = %s and source.dtype = %s", tp_dtype_name(args[0].meta.dtype),
                              tp_dtype_name(args[2].meta.dtype));
      if (tp_meta_numel(&args[1].meta) != tp_meta_numel(&args[2].meta))
        return tp_make_status(TP_INVALID_ARGUMENT,
                              "put_(): Expected source and index to have the same number of elements, "
                              "but got source.numel() = %lld, index.numel() = %lld",
                              (long long)tp_meta_numel(&args[2].meta), (long long)tp_meta_numel(&args[1].meta));
      out[0] = args[0].meta;
      return NULL;
    }
    case TP_LK_ISIN: {
      if (n_args < 2 || (args[0].kind != TP_ARG_TENSOR && args[1].kind != TP_ARG_TENSOR))
        return tp_make_status(TP_INVALID_ARGUMENT, "isin: expected a tensor");
      tp_dtype_t ct = tp_result_type(args, 2);
      int64_t ne = args[0].kind == TP_ARG_TENSOR ? tp_meta_numel(&args[0].meta) : 1;
      int64_t nt = args[1].kind == TP_ARG_TENSOR ? tp_meta_numel(&args[1].meta) : 1;
      if (ne * nt > (int64_t)1 << 26) /* the all-pairs compare would be too big: CPU sorts */
        return tp_make_status(TP_UNIMPLEMENTED, "isin of large tensors");
      for (int i = 0; i < 2; i++)
        if (args[i].kind == TP_ARG_SCALAR) args[i].scalar_dtype = ct;
      if (args[0].kind == TP_ARG_TENSOR) out[0] = args[0].meta;
      else memset(&out[0], 0, sizeof(out[0]));
      out[0].dtype = TP_DTYPE_BOOL;
      return NULL;
    }
    default: /* TP_LK_EYE */ {
      int64_t n = n_args > 0 && args[0].kind == TP_ARG_INT ? args[0].i : -1;
      bool has_m = strcmp(op->name, "eye.m") == 0 && n_args > 1 && args[1].kind == TP_ARG_INT;
      int64_t m = has_m ? args[1].i : n;
      if (n < 0) return tp_make_status(TP_INVALID_ARGUMENT, "n must be greater or equal to 0, got %lld", (long long)n);
      if (m < 0) return tp_make_status(TP_INVALID_ARGUMENT, "m must be greater or equal to 0, got %lld", (long long)m);
      int di = has_m ? 2 : 1;
      memset(&out[0], 0, sizeof(out[0]));
      out[0].dtype = di < n_args && args[di].kind == TP_ARG_INT ? (tp_dtype_t)args[di].i : TP_DTYPE_F32;
      out[0].ndim = 2;
      out[0].sizes[0] = n;
      out[0].sizes[1] = m;
      return NULL;
    }
  }
}

void tp_emit_lookup(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                    const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  const tp_meta_t *om = &out_meta[0];
  switch ((tp_lookup_t)op->code) {
    case TP_LK_TAKE: {
      int64_t n = tp_meta_numel(&args[0].meta);
      if (tp_meta_numel(om) == 0) {
        out[0] = tp_hlo_broadcast_to(b, tp_hlo_constant(b, om->dtype, 0), om->ndim, om->sizes);
        return;
      }
      tp_hlo_value_t iv = tp_emit_checked_index(b, in[1], n, true);
      out[0] = tp_hlo_gather_1d(b, flat(b, in[0]), iv);
      return;
    }
    case TP_LK_PUT: {
      int64_t n = tp_meta_numel(&args[0].meta), k = tp_meta_numel(&args[1].meta);
      if (k == 0 || n == 0) {
        out[0] = in[0];
        return;
      }
      tp_hlo_value_t iv = tp_hlo_reshape(b, tp_emit_checked_index(b, in[1], n, true), 1, &k);
      tp_hlo_value_t src = tp_hlo_reshape(b, in[2], 1, &k);
      bool acc = n_args > 3 && args[3].kind == TP_ARG_INT && args[3].i;
      tp_hlo_value_t r = acc ? tp_hlo_scatter_1d_op(b, flat(b, in[0]), iv, src,
                                                    om->dtype == TP_DTYPE_BOOL ? TP_HLO_OR : TP_HLO_ADD)
                             : tp_hlo_scatter_1d(b, flat(b, in[0]), iv, src);
      out[0] = tp_hlo_reshape(b, r, om->ndim, om->sizes);
      return;
    }
    case TP_LK_ISIN: {
      tp_dtype_t ct = tp_result_type(args, 2);
      tp_hlo_value_t e = tp_hlo_convert(b, in[0], ct), t = flat(b, tp_hlo_convert(b, in[1], ct));
      int64_t ne = tp_hlo_numel(&e), nt = t.dims[0];
      bool invert = n_args > 3 && args[3].kind == TP_ARG_INT && args[3].i;
      if (nt == 0) {
        out[0] = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_BOOL, invert), om->ndim, om->sizes);
        return;
      }
      int64_t pair[2] = {ne, nt}, d0 = 0, d1 = 1;
      tp_hlo_value_t ee = tp_hlo_broadcast_in_dim(b, flat(b, e), 2, pair, &d0);
      tp_hlo_value_t tt = tp_hlo_broadcast_in_dim(b, t, 2, pair, &d1);
      tp_hlo_value_t hit = tp_hlo_reduce(b, tp_hlo_compare(b, TP_CMP_EQ, ee, tt),
                                         tp_hlo_constant_i(b, TP_DTYPE_BOOL, 0), TP_HLO_OR, 1, &d1);
      if (invert) hit = tp_hlo_unary(b, TP_HLO_NOT, hit);
      out[0] = tp_hlo_reshape(b, hit, om->ndim, om->sizes);
      return;
    }
    default: /* TP_LK_EYE */ {
      tp_hlo_value_t eq = tp_hlo_compare(b, TP_CMP_EQ, tp_hlo_iota(b, TP_DTYPE_I64, 2, om->sizes, 0),
                                         tp_hlo_iota(b, TP_DTYPE_I64, 2, om->sizes, 1));
      out[0] = tp_hlo_convert(b, eq, om->dtype);
      return;
    }
  }
}

tp_status_t *tp_infer_index_copy(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                                 int *n_out) {
  TP_RETURN_IF_ERROR(tp_infer_like_self(op, args, n_args, out, n_out));
  const tp_meta_t *x = &args[0].meta;
  /* (self, dim, index, source) */
  if (n_args < 4 || args[1].kind != TP_ARG_INT || !tp_arg_is_tensor(args, n_args, 2) || !tp_arg_is_tensor(args, n_args, 3))
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

/* index_copy with the first |live| entries of index live (|live| NULL: all of them; the rest
 * are neither checked nor written) into the first |rows| rows of self's dim (NULL: all). */
static tp_hlo_value_t index_copy(tp_hlo_builder_t *b, const tp_op_arg_t *args, const tp_hlo_value_t *in,
                                 const tp_hlo_value_t *live, const tp_hlo_value_t *rows,
                                 const tp_meta_t *om) {
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
  if (m == 0 || total == 0) return in[0];
  int64_t sh[2] = {k, rest};
  tp_hlo_value_t dead = {0};
  if (live) { /* padding entries read as row 0 (in range: n > 0), then dropped like bad ones */
    tp_hlo_value_t at = tp_hlo_iota(b, TP_DTYPE_I64, 1, &k, 0);
    dead = tp_hlo_compare(b, TP_CMP_GE, at, tp_hlo_broadcast_to(b, tp_hlo_convert(b, *live, TP_DTYPE_I64), 1, &k));
    idx = tp_hlo_select(b, dead, tp_k(b, 0, idx), idx);
  }
  if (rows) /* past the live rows: an error, as past the end is */
    tp_hlo_check(b, tp_hlo_compare(b, TP_CMP_GE, tp_hlo_convert(b, idx, TP_DTYPE_I64),
                                   tp_hlo_broadcast_to(b, tp_hlo_convert(b, *rows, TP_DTYPE_I64), 1, &k)),
                 tp_hlo_constant_i(b, TP_DTYPE_I32, TP_CHECK_INDEX));
  tp_hlo_value_t row = tp_hlo_broadcast_in_dim(b, tp_emit_checked_index(b, idx, n, false), 2, sh, (int64_t[]){0});
  tp_hlo_value_t bad = tp_bin(b, TP_HLO_OR, tp_hlo_compare(b, TP_CMP_LT, row, tp_k(b, 0, row)),
                           tp_hlo_compare(b, TP_CMP_GE, row, tp_k(b, (double)n, row)));
  if (live) bad = tp_bin(b, TP_HLO_OR, bad, tp_hlo_broadcast_in_dim(b, dead, 2, sh, (int64_t[]){0}));
  tp_hlo_value_t lin = tp_bin(b, TP_HLO_ADD, tp_bin(b, TP_HLO_MUL, row, tp_k(b, (double)rest, row)), tp_hlo_iota(b, TP_DTYPE_I64, 2, sh, 1));
  lin = tp_hlo_reshape(b, tp_hlo_select(b, bad, tp_k(b, (double)total, lin), lin), 1, &m);
  tp_hlo_value_t pos = tp_hlo_iota(b, TP_DTYPE_I64, 1, &m, 0);
  tp_hlo_value_t none = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, -1), 1, &total);
  tp_hlo_value_t from = tp_hlo_scatter_1d_op(b, none, lin, pos, TP_HLO_MAX);
  tp_hlo_value_t hit = tp_hlo_compare(b, TP_CMP_GE, from, tp_k(b, 0, from));
  tp_hlo_value_t g = tp_hlo_gather_1d(b, tp_hlo_reshape(b, st, 1, &m), tp_bin(b, TP_HLO_MAX, from, tp_k(b, 0, from)));
  tp_hlo_value_t r = tp_hlo_select(b, hit, g, tp_hlo_reshape(b, xt, 1, &total));
  r = tp_hlo_transpose(b, tp_hlo_reshape(b, r, nd, xt.dims), inv);
  return tp_hlo_reshape(b, r, om->ndim, om->sizes);
}

void tp_emit_index_copy(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                        const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  out[0] = index_copy(b, args, in, NULL, NULL, &out_meta[0]);
}

tp_hlo_value_t tp_emit_index_copy_live(tp_hlo_builder_t *b, const tp_op_arg_t *args, const tp_hlo_value_t *in,
                                       const tp_hlo_value_t *live, const tp_hlo_value_t *rows,
                                       const tp_meta_t *om) {
  return index_copy(b, args, in, live, rows, om);
}

tp_status_t *tp_infer_masked_scatter(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                                     int *n_out) {
  TP_RETURN_IF_ERROR(tp_infer_like_self(op, args, n_args, out, n_out));
  const tp_meta_t *x = &args[0].meta;
  /* (self, mask, source): in the in-place form mask broadcasts to self */
  if (!tp_arg_is_tensor(args, n_args, 1) || !tp_arg_is_tensor(args, n_args, 2) || args[1].meta.dtype != TP_DTYPE_BOOL ||
      args[2].meta.dtype != x->dtype)
    return tp_make_status(TP_UNIMPLEMENTED, "masked_scatter: arguments");
  TP_RETURN_IF_ERROR(tp_broadcast_shapes(x, &args[1].meta, &out[0]));
  out[0].dtype = x->dtype;
  out[0].writes_arg = 0;
  if (tp_meta_numel(&args[2].meta) == 0) return tp_make_status(TP_UNIMPLEMENTED, "masked_scatter: empty source");
  return NULL;
}

void tp_emit_masked_scatter(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                            const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  const tp_meta_t *om = &out_meta[0];
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
}
