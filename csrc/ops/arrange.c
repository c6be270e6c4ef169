/* Arrange family: ops whose result holds the input's elements, moved: cat (tensors joined along
 * a dim; PyTorch's legacy rule skips 1-D empty tensors), flip and roll. |code|: a
 * tp_arrange_t (families.h). Depends on ops/ helpers and hlo/ only. */
#include <string.h>

#include "ops/families.h"

/* A tensor cat ignores whatever the others' shape: the legacy 1-D empty tensor. */
static bool cat_skipped(const tp_op_arg_t *a) { return a->meta.ndim == 1 && a->meta.sizes[0] == 0; }

/* cat(tensors, dim): args are (n, tensor_0 .. tensor_{n-1}, dim), the list flattened by the glue. */
static int cat_count(const tp_op_arg_t *args, int n_args) {
  return n_args > 0 && args[0].kind == TP_ARG_INT ? (int)args[0].i : -1;
}

static int64_t cat_dim(const tp_op_arg_t *args, int n_args, int n) {
  return n_args > n + 1 && args[n + 1].kind == TP_ARG_INT ? args[n + 1].i : 0;
}

static tp_status_t *infer_cat(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args, tp_meta_t *out) {
  int n = cat_count(args, n_args);
  if (n <= 0 || n_args < n + 1)
    return tp_make_status(TP_INVALID_ARGUMENT, "torch.cat(): expected a non-empty list of Tensors");
  const tp_op_arg_t *first = NULL;
  tp_dtype_t dt = tp_result_type(&args[1], n);
  for (int i = 1; i <= n; i++)
    if (!cat_skipped(&args[i])) {
      first = &args[i];
      break;
    }
  if (!first) {
    out[0] = args[1].meta;
    out[0].dtype = dt;
    return NULL;
  }
  int64_t d0 = cat_dim(args, n_args, n);
  int nd = first->meta.ndim, dim = tp_norm_dim(d0, nd);
  if (dim < 0) return tp_dim_error(op, d0, nd);
  out[0] = first->meta;
  out[0].dtype = dt;
  out[0].sizes[dim] = 0;
  for (int i = 1; i <= n; i++) {
    const tp_meta_t *m = &args[i].meta;
    if (cat_skipped(&args[i])) continue;
    if (m->ndim != out[0].ndim)
      return tp_make_status(TP_INVALID_ARGUMENT,
                            "Tensors must have same number of dimensions: got %d and %d",
                            out[0].ndim, m->ndim);
    for (int d = 0; d < m->ndim; d++)
      if (d != dim && m->sizes[d] != first->meta.sizes[d])
        return tp_make_status(TP_INVALID_ARGUMENT,
                              "Sizes of tensors must match except in dimension %d. Expected "
                              "size %lld but got size %lld for tensor number %d in the list.",
                              dim, (long long)first->meta.sizes[d], (long long)m->sizes[d], i - 1);
    out[0].sizes[dim] += m->sizes[dim];
  }
  return NULL;
}

/* roll(self, shifts, dims=[]): PyTorch's checks, in its order and words. */
static tp_status_t *infer_roll(const tp_op_arg_t *args, int n_args, int nd) {
  const tp_op_arg_t *sh = n_args > 1 ? &args[1] : NULL, *dm = n_args > 2 ? &args[2] : NULL;
  int ns = !sh ? 0 : sh->kind == TP_ARG_INTS ? sh->n : sh->kind == TP_ARG_INT ? 1 : 0;
  int nd_dims = dm && dm->kind == TP_ARG_INTS ? dm->n : dm && dm->kind == TP_ARG_INT ? 1 : 0;
  if (ns == 0) return tp_make_status(TP_INVALID_ARGUMENT, "`shifts` required");
  if (nd_dims == 0 && ns == 1) return NULL;
  if (ns != nd_dims)
    return tp_make_status(TP_INVALID_ARGUMENT, "shifts and dimensions must align. shifts: %d, dims:%d",
                          ns, nd_dims);
  for (int k = 0; k < nd_dims; k++) {
    int64_t d = dm->kind == TP_ARG_INTS ? dm->ints[k] : dm->i;
    if (nd == 0)
      return tp_make_status(TP_OUT_OF_RANGE, "Dimension specified as %lld but tensor has no dimensions",
                            (long long)d);
    if (tp_norm_dim(d, nd) < 0)
      return tp_make_status(TP_OUT_OF_RANGE,
                            "Dimension out of range (expected to be in range of [%d, %d], but got %lld)",
                            -nd, nd - 1, (long long)d);
  }
  return NULL;
}

tp_status_t *tp_infer_arrange(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                              int *n_out) {
  *n_out = 1;
  if (op->code == TP_AR_CAT) return infer_cat(op, args, n_args, out);
  if (n_args < 1 || args[0].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: self must be a tensor", op->name);
  out[0] = args[0].meta;
  return op->code == TP_AR_ROLL ? infer_roll(args, n_args, args[0].meta.ndim) : NULL;
}

static tp_hlo_value_t emit_cat(tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                               const tp_hlo_value_t *in, const tp_meta_t *om) {
  int n = cat_count(args, n_args), k = 0;
  tp_hlo_value_t parts[TP_MAX_ARGS];
  int dim = tp_norm_dim(cat_dim(args, n_args, n), om->ndim);
  for (int i = 1; i <= n; i++) {
    if (cat_skipped(&args[i]) && om->ndim != 1) continue;
    parts[k++] = tp_hlo_convert(b, in[i], om->dtype);
  }
  return k ? tp_hlo_concatenate(b, parts, k, dim < 0 ? 0 : dim)
           : tp_hlo_broadcast_to(b, tp_hlo_constant(b, om->dtype, 0), om->ndim, om->sizes);
}

int tp_cat_dim(const tp_op_arg_t *args, int n_args, int ndim) {
  int n = cat_count(args, n_args);
  return n < 1 ? -1 : tp_norm_dim(cat_dim(args, n_args, n), ndim);
}

tp_hlo_value_t tp_emit_cat_live(tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                                const tp_hlo_value_t *in, const tp_hlo_value_t *live,
                                const tp_meta_t *om) {
  int n = cat_count(args, n_args), dim = tp_cat_dim(args, n_args, om->ndim);
  tp_hlo_value_t out = tp_hlo_broadcast_to(b, tp_hlo_constant(b, om->dtype, 0), om->ndim, om->sizes);
  tp_hlo_value_t at = tp_hlo_constant_i(b, live[1].dtype, 0), start[TP_MAX_DIMS];
  for (int d = 0; d < om->ndim; d++) start[d] = at;
  /* In order, each part's bucket-sized block at the end of the live values before it: a later
   * part overwrites the padding an earlier one brought. The blocks fit, since the result's
   * bucket size is the sum of theirs. */
  for (int i = 1; i <= n; i++) {
    if (cat_skipped(&args[i]) || args[i].meta.sizes[dim] == 0) continue;
    start[dim] = at;
    out = tp_hlo_dynamic_update_slice(b, out, tp_hlo_convert(b, in[i], om->dtype), start);
    at = tp_hlo_binary(b, TP_HLO_ADD, at, live[i]);
  }
  return out;
}

/* flip(self, dims) */
static tp_hlo_value_t emit_flip(tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args, tp_hlo_value_t x) {
  int64_t dims[TP_MAX_DIMS];
  int n = 0, nd = x.ndim;
  const tp_op_arg_t *d = n_args > 1 ? &args[1] : NULL;
  int cnt = d && d->kind == TP_ARG_INTS ? d->n : 0;
  for (int i = 0; i < cnt; i++) {
    int dd = tp_norm_dim(d->ints[i], nd);
    if (dd >= 0 && nd) dims[n++] = dd;
  }
  return tp_hlo_reverse(b, x, n, dims);
}

/* roll(self, shifts, dims): each shifted dim is its two slices exchanged; with no dims, the
 * flattened tensor's one. */
static tp_hlo_value_t emit_roll(tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args, tp_hlo_value_t x,
                                const tp_meta_t *om) {
  const tp_op_arg_t *sh = &args[1], *dm = n_args > 2 ? &args[2] : NULL;
  int n = sh->kind == TP_ARG_INTS ? sh->n : 1;
  bool flatten = !dm || dm->kind != TP_ARG_INTS || dm->n == 0;
  int64_t numel = tp_hlo_numel(&x);
  tp_hlo_value_t v = flatten ? tp_hlo_reshape(b, x, 1, &numel) : x;
  for (int k = 0; k < (flatten ? 1 : n); k++) {
    int dim = flatten ? 0 : tp_norm_dim(dm->ints[k], x.ndim);
    int64_t len = v.dims[dim];
    if (len == 0) continue;
    int64_t s = (sh->kind == TP_ARG_INTS ? sh->ints[k] : sh->i) % len;
    if (s < 0) s += len;
    if (s == 0) continue;
    int64_t a0[TP_MAX_DIMS] = {0}, a1[TP_MAX_DIMS], b0[TP_MAX_DIMS] = {0}, b1[TP_MAX_DIMS], st[TP_MAX_DIMS];
    for (int i = 0; i < v.ndim; i++) {
      a1[i] = b1[i] = v.dims[i];
      st[i] = 1;
    }
    a0[dim] = len - s;
    b1[dim] = len - s;
    tp_hlo_value_t parts[2] = {tp_hlo_slice(b, v, a0, a1, st), tp_hlo_slice(b, v, b0, b1, st)};
    v = tp_hlo_concatenate(b, parts, 2, dim);
  }
  return tp_hlo_reshape(b, v, om->ndim, om->sizes);
}

void tp_emit_arrange(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                     const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  if (op->code == TP_AR_CAT) {
    out[0] = emit_cat(b, args, n_args, in, out_meta);
    return;
  }
  tp_hlo_value_t x = tp_hlo_convert(b, in[0], out_meta->dtype);
  out[0] = op->code == TP_AR_FLIP ? emit_flip(b, args, n_args, x) : emit_roll(b, args, n_args, x, out_meta);
}
