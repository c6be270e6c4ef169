/* Shape family: the view and factory ops a captured graph holds (view, permute, expand, slice,
 * select, squeeze/unsqueeze, transpose, alias/clone, _to_copy, full, empty, scalar_tensor,
 * full_like, split_with_sizes, the scatters of slices and selects that are their backwards, and
 * embedding). In eager mode PyTorch's own view machinery and composite kernels serve these, so
 * their rows carry TP_OPF_GRAPH: a whole-graph program computes them as values. Beside it,
 * channel_shuffle, which runs eagerly too. */
#include <string.h>

#include "ops/families.h"

static tp_status_t *shape_error(const tp_op_def_t *op, const char *what) {
  return tp_make_status(TP_INVALID_ARGUMENT, "%s: %s", op->name, what);
}

static tp_status_t *need(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args, int i,
                         tp_arg_kind_t kind) {
  if (i >= n_args || args[i].kind != kind)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: bad argument %d", op->name, i);
  return NULL;
}

static int64_t int_or(const tp_op_arg_t *args, int n_args, int i, int64_t dflt) {
  return i < n_args && args[i].kind == TP_ARG_INT ? args[i].i : dflt;
}

/* A shape argument (view's size, full's size), -1 inferred from |numel| when numel >= 0. */
static tp_status_t *shape_arg(const tp_op_def_t *op, const tp_op_arg_t *a, int64_t numel,
                              tp_meta_t *m) {
  if (a->kind != TP_ARG_INTS) return shape_error(op, "expected a list of sizes");
  m->ndim = a->n;
  int64_t known = 1;
  int infer_at = -1;
  for (int i = 0; i < a->n; i++) {
    m->sizes[i] = a->ints[i];
    if (a->ints[i] == -1 && numel >= 0 && infer_at < 0) infer_at = i;
    else if (a->ints[i] < 0) return shape_error(op, "invalid negative size");
    else known *= a->ints[i];
  }
  if (infer_at >= 0) {
    if (known == 0 || numel % known != 0) return shape_error(op, "shape is invalid for the input");
    m->sizes[infer_at] = numel / known;
    known = numel;
  }
  if (numel >= 0 && known != numel) return shape_error(op, "shape is invalid for the input size");
  return NULL;
}

/* A factory's dtype: the given one, else the fill value's kind (bool, int64, default float). */
static tp_dtype_t factory_dtype(const tp_op_arg_t *dtype, const tp_op_arg_t *fill) {
  if (dtype && dtype->kind == TP_ARG_INT) return (tp_dtype_t)dtype->i;
  if (!fill || fill->kind != TP_ARG_SCALAR) return TP_DTYPE_F32;
  if (fill->meta.dtype == TP_DTYPE_BOOL) return TP_DTYPE_BOOL;
  if (tp_dtype_is_complex(fill->meta.dtype)) return TP_DTYPE_C64; /* the default complex type */
  return tp_dtype_is_float(fill->meta.dtype) ? TP_DTYPE_F32 : TP_DTYPE_I64;
}

/* full, empty, scalar_tensor: the size from the arguments, the dtype from the fill value. */
static tp_status_t *infer_factory(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                  tp_meta_t *m) {
  int dt_at = op->code == TP_S_EMPTY ? 1 : 2;
  const tp_op_arg_t *fill = op->code == TP_S_EMPTY ? NULL : &args[op->code == TP_S_FULL];
  if (op->code == TP_S_SCALAR_TENSOR) {
    TP_RETURN_IF_ERROR(need(op, args, n_args, 0, TP_ARG_SCALAR));
    m->ndim = 0;
  } else {
    TP_RETURN_IF_ERROR(shape_arg(op, &args[0], -1, m));
    if (fill) TP_RETURN_IF_ERROR(need(op, args, n_args, 1, TP_ARG_SCALAR));
  }
  m->dtype = factory_dtype(dt_at < n_args ? &args[dt_at] : NULL, fill);
  if (fill && tp_dtype_is_complex(fill->meta.dtype) && !tp_dtype_is_complex(m->dtype))
    return tp_make_status(TP_UNIMPLEMENTED, "%s: a complex value into a real tensor", op->name);
  if (fill) ((tp_op_arg_t *)fill)->scalar_dtype = m->dtype;
  return NULL;
}

/* Canonicalizes the dims in args[1] to non-negative ones, which the emitter reads. */
static tp_status_t *infer_permute(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                  tp_meta_t *m) {
  const tp_meta_t *x = &args[0].meta;
  int nd = x->ndim;
  TP_RETURN_IF_ERROR(need(op, args, n_args, 1, TP_ARG_INTS));
  if (args[1].n != nd) return shape_error(op, "number of dims don't match in permute");
  bool seen[TP_MAX_DIMS] = {false};
  for (int i = 0; i < nd; i++) {
    int d = tp_norm_dim(args[1].ints[i], nd);
    if (d < 0 || seen[d]) return shape_error(op, "repeated or out-of-range dim in permute");
    seen[d] = true;
    args[1].ints[i] = d;
    m->sizes[i] = x->sizes[d];
  }
  return NULL;
}

/* New leading dims take the given size; existing ones keep theirs (-1) or grow from 1. */
static tp_status_t *infer_expand(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                 tp_meta_t *m) {
  const tp_meta_t *x = &args[0].meta;
  int nd = x->ndim;
  TP_RETURN_IF_ERROR(need(op, args, n_args, 1, TP_ARG_INTS));
  int n = args[1].n, lead = n - nd;
  if (lead < 0) return shape_error(op, "the number of sizes provided must be at least the "
                                   "number of dimensions of the tensor");
  m->ndim = n;
  for (int i = 0; i < n; i++) {
    int64_t s = args[1].ints[i];
    if (i < lead) {
      if (s < 0) return shape_error(op, "the expanded size of a new dimension cannot be -1");
      m->sizes[i] = s;
      continue;
    }
    int64_t have = x->sizes[i - lead];
    if (s == -1) s = have;
    if (have != s && have != 1) return shape_error(op, "the expanded size must match the "
                                                   "existing size at a non-singleton dim");
    m->sizes[i] = s;
  }
  return NULL;
}

/* Rewrites (dim, start, end, step) in args[1..4] as ints clamped to the dim, as PyTorch does. */
static tp_status_t *infer_slice(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                tp_meta_t *m) {
  const tp_meta_t *x = &args[0].meta;
  int nd = x->ndim;
  if (n_args < 5) return shape_error(op, "expected 5 arguments");
  int d = tp_norm_dim(int_or(args, n_args, 1, 0), nd);
  if (d < 0) return shape_error(op, "dimension out of range");
  int64_t size = x->sizes[d], step = int_or(args, n_args, 4, 1);
  int64_t start = int_or(args, n_args, 2, 0), end = int_or(args, n_args, 3, INT64_MAX);
  if (step <= 0) return shape_error(op, "slice step must be positive");
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = start < 0 ? 0 : start > size ? size : start;
  end = end < start ? start : end > size ? size : end;
  args[1].kind = TP_ARG_INT, args[1].i = d;
  args[2].kind = TP_ARG_INT, args[2].i = start;
  args[3].kind = TP_ARG_INT, args[3].i = end;
  args[4].kind = TP_ARG_INT, args[4].i = step;
  m->sizes[d] = (end - start + step - 1) / step;
  return NULL;
}

/* Rewrites (dim, index) in args[1..2] as non-negative; the dim drops out of the result. */
static tp_status_t *infer_select(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                 tp_meta_t *m) {
  const tp_meta_t *x = &args[0].meta;
  int nd = x->ndim;
  int d = tp_norm_dim(int_or(args, n_args, 1, 0), nd);
  if (d < 0 || n_args < 3) return shape_error(op, "dimension out of range");
  int64_t i = int_or(args, n_args, 2, 0);
  if (i < -x->sizes[d] || i >= x->sizes[d]) return tp_make_status(TP_OUT_OF_RANGE, "%s: "
                                                 "index out of range", op->name);
  args[1].i = d;
  args[2].i = i < 0 ? i + x->sizes[d] : i;
  memmove(&m->sizes[d], &m->sizes[d + 1], sizeof(int64_t) * (size_t)(nd - d - 1));
  m->ndim = nd - 1;
  return NULL;
}

static tp_status_t *infer_unsqueeze(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                    tp_meta_t *m) {
  int nd = args[0].meta.ndim;
  int d = tp_norm_dim(int_or(args, n_args, 1, 0), nd + 1);
  if (d < 0 || nd >= TP_MAX_DIMS) return shape_error(op, "dimension out of range");
  memmove(&m->sizes[d + 1], &m->sizes[d], sizeof(int64_t) * (size_t)(nd - d));
  m->sizes[d] = 1;
  m->ndim = nd + 1;
  return NULL;
}

/* No dim, one dim or a list of them: each named dim of size 1 drops out. */
static tp_status_t *infer_squeeze(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                  tp_meta_t *m) {
  const tp_meta_t *x = &args[0].meta;
  int nd = x->ndim;
  bool drop[TP_MAX_DIMS] = {false};
  if (n_args < 2 || args[1].kind == TP_ARG_NONE) {
    for (int i = 0; i < nd; i++) drop[i] = true;
  } else if (args[1].kind == TP_ARG_INT) {
    int d = tp_norm_dim(args[1].i, nd);
    if (d < 0 && nd > 0) return shape_error(op, "dimension out of range");
    if (d >= 0) drop[d] = true;
  } else {
    for (int k = 0; k < args[1].n; k++) {
      int d = tp_norm_dim(args[1].ints[k], nd);
      if (d < 0 && nd > 0) return shape_error(op, "dimension out of range");
      if (d >= 0) drop[d] = true;
    }
  }
  m->ndim = 0;
  for (int i = 0; i < nd; i++)
    if (!(drop[i] && x->sizes[i] == 1)) m->sizes[m->ndim++] = x->sizes[i];
  return NULL;
}

/* transpose(dim0, dim1), its dims rewritten non-negative in args[1..2], or t() without them. */
static tp_status_t *infer_transpose(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                    tp_meta_t *m) {
  const tp_meta_t *x = &args[0].meta;
  int nd = x->ndim;
  if (n_args < 3) { /* t(): 0-d and 1-d unchanged */
    if (nd > 2) return shape_error(op, "expects a tensor with <= 2 dimensions");
    if (nd == 2) m->sizes[0] = x->sizes[1], m->sizes[1] = x->sizes[0];
    return NULL;
  }
  int d0 = tp_norm_dim(int_or(args, n_args, 1, 0), nd);
  int d1 = tp_norm_dim(int_or(args, n_args, 2, 0), nd);
  if (nd == 0) return NULL;
  if (d0 < 0 || d1 < 0) return shape_error(op, "dimension out of range");
  args[1].i = d0, args[2].i = d1;
  m->sizes[d0] = x->sizes[d1];
  m->sizes[d1] = x->sizes[d0];
  return NULL;
}

/* split_with_sizes: one output per piece; the dim is rewritten non-negative in args[2]. */
static tp_status_t *infer_split(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                tp_meta_t *out, int *n_out) {
  const tp_meta_t *x = &args[0].meta;
  int nd = x->ndim;
  TP_RETURN_IF_ERROR(need(op, args, n_args, 1, TP_ARG_INTS));
  int d = tp_norm_dim(int_or(args, n_args, 2, 0), nd);
  if (d < 0) return shape_error(op, "dimension out of range");
  if (args[1].n > TP_MAX_OUTS)
    return tp_make_status(TP_UNIMPLEMENTED, "%s: more than %d pieces", op->name, TP_MAX_OUTS);
  int64_t total = 0;
  for (int k = 0; k < args[1].n; k++) {
    if (args[1].ints[k] < 0) return shape_error(op, "split sizes must be non-negative");
    out[k] = *x;
    out[k].sizes[d] = args[1].ints[k];
    total += args[1].ints[k];
  }
  if (total != x->sizes[d])
    return shape_error(op, "split sizes must sum exactly to the size of the dimension");
  if (n_args > 2) args[2].kind = TP_ARG_INT, args[2].i = d;
  *n_out = args[1].n;
  return NULL;
}

/* (self, src, dim, start/index[, end, step]): self with that slice (select) replaced; the dim
 * and start are rewritten as ints in args[2..3]. */
static tp_status_t *infer_slice_scatter(const tp_op_def_t *op, tp_op_arg_t *args, int n_args) {
  const tp_meta_t *x = &args[0].meta;
  int nd = x->ndim;
  TP_RETURN_IF_ERROR(need(op, args, n_args, 1, TP_ARG_TENSOR));
  int d = tp_norm_dim(int_or(args, n_args, 2, 0), nd);
  if (d < 0) return shape_error(op, "dimension out of range");
  int64_t size = x->sizes[d], start = int_or(args, n_args, 3, 0);
  if (start < 0) start += size;
  int64_t len = 1;
  if (op->code == TP_S_SLICE_SCATTER) {
    int64_t end = int_or(args, n_args, 4, INT64_MAX), step = int_or(args, n_args, 5, 1);
    if (step != 1)
      return tp_make_status(TP_UNIMPLEMENTED, "%s: step %lld", op->name, (long long)step);
    if (end < 0) end += size;
    start = start < 0 ? 0 : start > size ? size : start;
    end = end < start ? start : end > size ? size : end;
    len = end - start;
  } else if (start < 0 || start >= size) {
    return tp_make_status(TP_OUT_OF_RANGE, "%s: index out of range", op->name);
  }
  tp_meta_t want = *x;
  if (op->code == TP_S_SLICE_SCATTER) {
    want.sizes[d] = len;
  } else {
    memmove(&want.sizes[d], &want.sizes[d + 1], sizeof(int64_t) * (size_t)(nd - d - 1));
    want.ndim = nd - 1;
  }
  const tp_meta_t *src = &args[1].meta;
  if (src->ndim != want.ndim ||
      memcmp(src->sizes, want.sizes, sizeof(int64_t) * (size_t)want.ndim) != 0)
    return shape_error(op, "expected src to have the size of the slice");
  args[2].kind = TP_ARG_INT, args[2].i = d;
  args[3].kind = TP_ARG_INT, args[3].i = start;
  return NULL;
}

/* embedding(weight, indices, ...): rows of weight, indices' shape + [dim]. */
static tp_status_t *infer_embedding(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                    tp_meta_t *m) {
  const tp_meta_t *x = &args[0].meta;
  TP_RETURN_IF_ERROR(need(op, args, n_args, 1, TP_ARG_TENSOR));
  const tp_meta_t *ix = &args[1].meta;
  if (x->ndim != 2) return shape_error(op, "'weight' must be 2-D");
  if (ix->dtype != TP_DTYPE_I64 && ix->dtype != TP_DTYPE_I32)
    return shape_error(op, "expected indices of type Long or Int");
  if (ix->ndim + 1 > TP_MAX_DIMS) return tp_make_status(TP_UNIMPLEMENTED, "too many dims");
  *m = *ix;
  m->dtype = x->dtype;
  m->sizes[m->ndim++] = x->sizes[1];
  return NULL;
}

/* _to_copy, full_like, empty_like: self's shape, the given dtype if any. */
static tp_status_t *infer_like(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                               tp_meta_t *m) {
  int dt_at = op->code == TP_S_FULL_LIKE ? 2 : 1;
  if (dt_at < n_args && args[dt_at].kind == TP_ARG_INT) m->dtype = (tp_dtype_t)args[dt_at].i;
  if (op->code == TP_S_FULL_LIKE) {
    TP_RETURN_IF_ERROR(need(op, args, n_args, 1, TP_ARG_SCALAR));
    args[1].scalar_dtype = m->dtype;
  }
  return NULL;
}

tp_status_t *tp_infer_shape(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                            int *n_out) {
  *n_out = 1;
  tp_meta_t *m = &out[0];
  if (op->code == TP_S_FULL || op->code == TP_S_EMPTY || op->code == TP_S_SCALAR_TENSOR)
    return infer_factory(op, args, n_args, m);
  TP_RETURN_IF_ERROR(need(op, args, n_args, 0, TP_ARG_TENSOR));
  const tp_meta_t *x = &args[0].meta;
  *m = *x;
  m->writes_arg = 0;
  switch (op->code) {
    case TP_S_VIEW:
      TP_RETURN_IF_ERROR(need(op, args, n_args, 1, TP_ARG_INTS));
      return shape_arg(op, &args[1], tp_meta_numel(x), m);
    case TP_S_PERMUTE: return infer_permute(op, args, n_args, m);
    case TP_S_EXPAND: return infer_expand(op, args, n_args, m);
    case TP_S_SLICE: return infer_slice(op, args, n_args, m);
    case TP_S_SELECT: return infer_select(op, args, n_args, m);
    case TP_S_UNSQUEEZE: return infer_unsqueeze(op, args, n_args, m);
    case TP_S_SQUEEZE: return infer_squeeze(op, args, n_args, m);
    case TP_S_TRANSPOSE: return infer_transpose(op, args, n_args, m);
    case TP_S_ALIAS: return NULL;
    case TP_S_SPLIT: return infer_split(op, args, n_args, out, n_out);
    case TP_S_SLICE_SCATTER:
    case TP_S_SELECT_SCATTER: return infer_slice_scatter(op, args, n_args);
    case TP_S_EMBEDDING: return infer_embedding(op, args, n_args, m);
    case TP_S_TO_COPY:
    case TP_S_FULL_LIKE:
    case TP_S_EMPTY_LIKE: return infer_like(op, args, n_args, m);
    default:
      return tp_make_status(TP_UNIMPLEMENTED, "%s: no lowering", op->name);
  }
}

/* slice (dim, start, end, step) or select (dim, index) as one strided slice; select's dim then
 * reshaped away. */
static tp_hlo_value_t emit_slice_select(const tp_op_def_t *op, tp_hlo_builder_t *b,
                                        const tp_op_arg_t *args, const tp_hlo_value_t *in,
                                        const tp_meta_t *m) {
  const tp_meta_t *x = &args[0].meta;
  int64_t start[TP_MAX_DIMS] = {0}, limit[TP_MAX_DIMS], step[TP_MAX_DIMS];
  for (int i = 0; i < x->ndim; i++) limit[i] = x->sizes[i], step[i] = 1;
  int d = (int)args[1].i;
  start[d] = args[2].i;
  limit[d] = op->code == TP_S_SLICE ? args[3].i : args[2].i + 1;
  if (op->code == TP_S_SLICE) step[d] = args[4].i;
  if (limit[d] < start[d]) limit[d] = start[d];
  tp_hlo_value_t s = tp_hlo_slice(b, in[0], start, limit, step);
  return tp_hlo_reshape(b, s, m->ndim, m->sizes);
}

/* self (in[0]) with src (in[1]) written over the slice or select that infer_slice_scatter
 * canonicalized into args[2..3]. */
static tp_hlo_value_t emit_slice_scatter(const tp_op_def_t *op, tp_hlo_builder_t *b,
                                         const tp_op_arg_t *args, const tp_hlo_value_t *in,
                                         const tp_meta_t *m) {
  const tp_meta_t *x = &args[0].meta;
  int d = (int)args[2].i;
  int64_t start[TP_MAX_DIMS] = {0}, dims[TP_MAX_DIMS];
  start[d] = args[3].i;
  memcpy(dims, x->sizes, sizeof(dims));
  dims[d] = op->code == TP_S_SELECT_SCATTER ? 1 : args[1].meta.sizes[d];
  tp_hlo_value_t src = tp_hlo_convert(b, tp_hlo_reshape(b, in[1], x->ndim, dims), m->dtype);
  return tp_hlo_update_slice(b, in[0], src, start);
}

static tp_hlo_value_t emit_embedding(tp_hlo_builder_t *b, const tp_op_arg_t *args,
                                     const tp_hlo_value_t *in, const tp_meta_t *m) {
  /* Linear indices row * dim + column over [n, dim], gathered from the flat weight. */
  int64_t n = tp_meta_numel(&args[1].meta), dim = args[0].meta.sizes[1], nd2[2] = {n, dim};
  int64_t rows = args[0].meta.sizes[0], all = rows * dim;
  tp_hlo_value_t ix = tp_emit_checked_index(b, tp_hlo_reshape(b, in[1], 1, &n), rows, false);
  int64_t bd = 0;
  tp_hlo_value_t r = tp_hlo_broadcast_in_dim(b, ix, 2, nd2, &bd);
  tp_hlo_value_t lin = tp_hlo_binary(
      b, TP_HLO_ADD, tp_hlo_binary(b, TP_HLO_MUL, r, tp_k(b, (double)dim, r)),
      tp_hlo_iota(b, TP_DTYPE_I64, 2, nd2, 1));
  tp_hlo_value_t g = tp_hlo_gather_1d(b, tp_hlo_reshape(b, in[0], 1, &all), lin);
  return tp_hlo_reshape(b, g, m->ndim, m->sizes);
}

/* split_with_sizes: consecutive slices along the dim, one per output. */
static void emit_split(tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                       const tp_hlo_value_t *in, tp_hlo_value_t *out) {
  const tp_meta_t *x = &args[0].meta;
  int d = n_args > 2 ? (int)args[2].i : 0;
  int64_t start[TP_MAX_DIMS] = {0}, limit[TP_MAX_DIMS], step[TP_MAX_DIMS];
  for (int i = 0; i < x->ndim; i++) limit[i] = x->sizes[i], step[i] = 1;
  for (int k = 0; k < args[1].n; k++) {
    limit[d] = start[d] + args[1].ints[k];
    out[k] = tp_hlo_slice(b, in[0], start, limit, step);
    start[d] = limit[d];
  }
}

void tp_emit_shape(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                   int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                   tp_hlo_value_t *out) {
  const tp_meta_t *m = out_meta;
  switch (op->code) {
    case TP_S_FULL:
    case TP_S_SCALAR_TENSOR:
      out[0] = tp_emit_cast_to(b, in[op->code == TP_S_FULL], m);
      return;
    case TP_S_FULL_LIKE:
      out[0] = tp_emit_cast_to(b, in[1], m);
      return;
    case TP_S_EMPTY:
    case TP_S_EMPTY_LIKE: /* uninitialized memory: zeros */
      out[0] = tp_hlo_broadcast_to(b, tp_hlo_constant(b, m->dtype, 0), m->ndim, m->sizes);
      return;
    case TP_S_PERMUTE:
      out[0] = tp_hlo_transpose(b, in[0], args[1].ints);
      return;
    case TP_S_TRANSPOSE: {
      int64_t perm[TP_MAX_DIMS];
      int nd = args[0].meta.ndim;
      for (int i = 0; i < nd; i++) perm[i] = i;
      if (nd == 2 && n_args < 3) perm[0] = 1, perm[1] = 0;
      if (n_args >= 3 && nd > 0) perm[args[1].i] = args[2].i, perm[args[2].i] = args[1].i;
      out[0] = nd >= 2 ? tp_hlo_transpose(b, in[0], perm) : in[0];
      return;
    }
    case TP_S_EXPAND: {
      int64_t dims[TP_MAX_DIMS];
      int lead = m->ndim - args[0].meta.ndim;
      for (int i = 0; i < args[0].meta.ndim; i++) dims[i] = i + lead;
      out[0] = tp_hlo_broadcast_in_dim(b, in[0], m->ndim, m->sizes, dims);
      return;
    }
    case TP_S_SLICE:
    case TP_S_SELECT:
      out[0] = emit_slice_select(op, b, args, in, m);
      return;
    case TP_S_TO_COPY:
      out[0] = tp_hlo_convert(b, in[0], m->dtype);
      return;
    case TP_S_SLICE_SCATTER:
    case TP_S_SELECT_SCATTER:
      out[0] = emit_slice_scatter(op, b, args, in, m);
      return;
    case TP_S_EMBEDDING:
      out[0] = emit_embedding(b, args, in, m);
      return;
    case TP_S_SPLIT:
      emit_split(b, args, n_args, in, out);
      return;
    case TP_S_ALIAS:
      out[0] = in[0];
      return;
    default: /* view, unsqueeze, squeeze */
      out[0] = tp_hlo_reshape(b, in[0], m->ndim, m->sizes);
      return;
  }
}

tp_status_t *tp_infer_channel_shuffle(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                                      int *n_out) {
  TP_RETURN_IF_ERROR(tp_infer_like_self(op, args, n_args, out, n_out));
  const tp_meta_t *x = &args[0].meta;
  if (n_args < 2 || args[1].kind != TP_ARG_INT || x->ndim < 3 || args[1].i <= 0 ||
      x->sizes[1] % args[1].i)
    return tp_make_status(TP_UNIMPLEMENTED, "channel_shuffle: arguments");
  return NULL;
}

void tp_emit_channel_shuffle(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                             const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  tp_hlo_value_t x = in[0];
  int64_t g = args[1].i, sh[TP_MAX_DIMS], perm[TP_MAX_DIMS];
  sh[0] = x.dims[0];
  sh[1] = g;
  sh[2] = x.dims[1] / g;
  for (int i = 2; i < x.ndim; i++) sh[i + 1] = x.dims[i];
  for (int i = 0; i <= x.ndim; i++) perm[i] = i == 1 ? 2 : i == 2 ? 1 : i;
  tp_hlo_value_t v = tp_hlo_transpose(b, tp_hlo_reshape(b, x, x.ndim + 1, sh), perm);
  out[0] = tp_hlo_reshape(b, v, x.ndim, x.dims);
}
