/* Program assembly shared by the executors. See program.h. */
#include "exec/program.h"

#include <string.h>

#include "exec/exec.h"
#include "exec/layout.h"
#include "exec/scalars.h"

int64_t tp_view_numel(const tp_view_t *v) {
  int64_t n = 1;
  for (int i = 0; i < v->ndim; i++) n *= v->sizes[i];
  return n;
}

bool tp_view_contiguous(const tp_view_t *v) {
  int64_t expect = 1;
  for (int i = v->ndim - 1; i >= 0; i--) {
    if (v->sizes[i] != 1 && v->strides[i] != expect) return false;
    expect *= v->sizes[i];
  }
  return true;
}

int64_t tp_storage_elems(const tp_storage_t *s, tp_dtype_t dtype) {
  return (int64_t)(tp_storage_nbytes(s) / tp_dtype_size(dtype));
}

bool tp_view_is_whole(const tp_view_t *v) {
  return v->offset == 0 && tp_view_contiguous(v) &&
         (size_t)tp_view_numel(v) * tp_dtype_size(v->dtype) == tp_storage_nbytes(v->storage);
}

bool tp_view_is_whole_permuted(const tp_view_t *v, int64_t *out_perm) {
  int64_t numel = tp_view_numel(v);
  if (v->offset != 0 || numel == 0 ||
      (size_t)numel * tp_dtype_size(v->dtype) != tp_storage_nbytes(v->storage) ||
      !tp_layout_non_overlapping_dense(v->ndim, v->sizes, v->strides))
    return false;
  if (out_perm) { /* by decreasing stride (size-1 dims hold no order: anywhere) */
    for (int d = 0; d < v->ndim; d++) out_perm[d] = d;
    for (int i = 1; i < v->ndim; i++)
      for (int j = i; j > 0 && v->strides[out_perm[j - 1]] < v->strides[out_perm[j]]; j--) {
        int64_t t = out_perm[j];
        out_perm[j] = out_perm[j - 1];
        out_perm[j - 1] = t;
      }
  }
  return true;
}

tp_status_t *tp_view_check_bounds(const tp_view_t *v) {
  if (tp_view_numel(v) == 0) return NULL;
  int64_t lo = v->offset, hi = v->offset;
  for (int i = 0; i < v->ndim; i++) {
    if (v->strides[i] >= 0) hi += v->strides[i] * (v->sizes[i] - 1);
    else lo += v->strides[i] * (v->sizes[i] - 1);
  }
  if (lo < 0 || hi >= tp_storage_elems(v->storage, v->dtype))
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "view [offset %lld, extent %lld] lies outside its storage of %zu bytes",
                          (long long)v->offset, (long long)(hi - lo + 1), tp_storage_nbytes(v->storage));
  return NULL;
}

static tp_dtype_t index_type(int64_t n) { return n < ((int64_t)1 << 31) ? TP_DTYPE_I32 : TP_DTYPE_I64; }

/* XLA's bitcast_convert takes no complex types: a complex array and its storage form (the
 * interleaved parts, 1-D) convert through stablehlo.real/imag/complex. */
tp_hlo_value_t tp_program_to_storage(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  int64_t n = tp_hlo_numel(&x);
  x = tp_hlo_reshape(b, x, 1, &n);
  if (!tp_dtype_is_complex(x.dtype)) return x;
  int64_t col[2] = {n, 1}, n2 = 2 * n;
  tp_hlo_value_t parts[2] = {tp_hlo_reshape(b, tp_hlo_real(b, x), 2, col),
                             tp_hlo_reshape(b, tp_hlo_imag(b, x), 2, col)};
  return tp_hlo_reshape(b, tp_hlo_concatenate(b, parts, 2, 1), 1, &n2);
}

int tp_program_storage_dims(const tp_view_t *v, tp_dtype_t dtype, int64_t *dims) {
  int64_t perm[TP_MAX_DIMS];
  if (v->dtype != dtype) return 0;
  if (tp_view_is_whole(v)) {
    memcpy(dims, v->sizes, sizeof(int64_t) * (size_t)v->ndim);
    return v->ndim;
  }
  if (!tp_view_is_whole_permuted(v, perm)) return 0;
  for (int d = 0; d < v->ndim; d++) dims[d] = v->sizes[perm[d]];
  return v->ndim;
}

tp_hlo_value_t tp_program_result(tp_hlo_builder_t *b, tp_hlo_value_t flat, int ndim,
                                 const int64_t *dims) {
  if (ndim < 2 || !tp_exec_buffers_any_shape() || tp_dtype_is_complex(flat.dtype))
    return flat;
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= dims[d];
  return n == tp_hlo_numel(&flat) ? tp_hlo_reshape(b, flat, ndim, dims) : flat;
}

static tp_hlo_value_t parts_to_complex(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  int64_t m = x.dims[0] / 2, one = 1;
  if (2 * m != x.dims[0]) x = tp_hlo_slice(b, x, (int64_t[]){0}, (int64_t[]){2 * m}, &one);
  tp_hlo_value_t pairs = tp_hlo_reshape(b, x, 2, (int64_t[]){m, 2});
  int64_t step[2] = {1, 1};
  tp_hlo_value_t re = tp_hlo_slice(b, pairs, (int64_t[]){0, 0}, (int64_t[]){m, 1}, step);
  tp_hlo_value_t im = tp_hlo_slice(b, pairs, (int64_t[]){0, 1}, (int64_t[]){m, 2}, step);
  return tp_hlo_complex(b, tp_hlo_reshape(b, re, 1, &m), tp_hlo_reshape(b, im, 1, &m));
}

tp_hlo_value_t tp_program_as_dtype(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_dtype_t dtype,
                               int64_t nbytes) {
  if (x.dtype == dtype) return x;
  if (tp_dtype_is_complex(x.dtype)) x = tp_program_to_storage(b, x);
  if (tp_dtype_is_complex(dtype))
    return parts_to_complex(b, tp_program_as_dtype(b, x, tp_dtype_real_part(dtype), nbytes));
  if (x.dtype == dtype) return x;
  if (x.dtype == TP_DTYPE_BOOL) x = tp_hlo_convert(b, x, TP_DTYPE_U8);
  bool to_bool = dtype == TP_DTYPE_BOOL;
  tp_dtype_t target = to_bool ? TP_DTYPE_U8 : dtype;
  if (x.dtype != target) {
    size_t from = tp_dtype_size(x.dtype), to = tp_dtype_size(target);
    int64_t n = x.dims[0];
    if (from == to) {
      x = tp_hlo_bitcast(b, x, target, 1, &n);
    } else if (from > to) {
      int64_t d2[2] = {n, (int64_t)(from / to)}, m = nbytes / (int64_t)to;
      x = tp_hlo_reshape(b, tp_hlo_bitcast(b, x, target, 2, d2), 1, &m);
    } else {
      int64_t r = (int64_t)(to / from), m = n / r, d2[2] = {m, r};
      if (m * r != n) {
        x = tp_hlo_slice(b, x, (int64_t[]){0}, (int64_t[]){m * r}, (int64_t[]){1});
      }
      x = tp_hlo_bitcast(b, tp_hlo_reshape(b, x, 2, d2), target, 1, &m);
    }
  }
  return to_bool ? tp_hlo_convert(b, x, TP_DTYPE_BOOL) : x;
}

tp_hlo_value_t tp_program_storage(tp_hlo_builder_t *b, const tp_hlo_value_t *param,
                                  const tp_storage_t *s, tp_dtype_t dtype) {
  if (param) {
    /* A buffer may hold more elements than the storage (bucket.h): reinterpreting its type
     * starts from the storage's own. */
    tp_hlo_value_t x = *param;
    int64_t own = tp_storage_elems(s, x.dtype), one = 1, zero = 0;
    if (x.dtype != dtype && x.dims[0] > own) x = tp_hlo_slice(b, x, &zero, &own, &one);
    return tp_program_as_dtype(b, x, dtype, (int64_t)tp_storage_nbytes(s));
  }
  int64_t n = tp_storage_elems(s, dtype);
  return tp_hlo_broadcast_to(b, tp_hlo_constant(b, dtype, 0), 1, &n);
}

/* Linear element indices of |v| (shape = v's sizes), for gather/scatter. */
static tp_hlo_value_t view_indices(tp_hlo_builder_t *b, const tp_view_t *v, tp_dtype_t it) {
  tp_hlo_value_t idx = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, it, v->offset), v->ndim,
                                           v->sizes);
  for (int d = 0; d < v->ndim; d++) {
    if (v->sizes[d] == 1 || v->strides[d] == 0) continue;
    tp_hlo_value_t io = tp_hlo_iota(b, it, v->ndim, v->sizes, d);
    tp_hlo_value_t st = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, it, v->strides[d]), v->ndim,
                                            v->sizes);
    idx = tp_hlo_binary(b, TP_HLO_ADD, idx, tp_hlo_binary(b, TP_HLO_MUL, io, st));
  }
  return idx;
}

/* Sorts the dims of |v| that matter (size > 1, stride > 0) by decreasing stride; returns their
 * count and whether they are non-overlapping (each stride covers the next dim's extent). */
static int core_dims(const tp_view_t *v, int *order, bool *nonoverlap) {
  int n = 0;
  for (int d = 0; d < v->ndim; d++)
    if (v->sizes[d] > 1 && v->strides[d] > 0) order[n++] = d;
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v->strides[order[j - 1]] < v->strides[order[j]]; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  /* Each stride passes the extent of the dims inside it: no two elements meet. */
  *nonoverlap = true;
  int64_t extent = 1;
  for (int i = n - 1; i >= 0; i--) {
    if (i < n - 1 && v->strides[order[i]] < extent) *nonoverlap = false;
    extent += v->strides[order[i]] * (v->sizes[order[i]] - 1);
  }
  return n;
}

/* A non-overlapping view as a strided window of its storage, read with slices and reshapes: its
 * n core dims |order| (decreasing stride) z_k = size, s_k = stride. The window is the run of
 * s_0 * z_0 elements from the view's offset (zero-padded where it runs past the storage: the last
 * row needs less than a whole stride). Level k is L_k = [z_0 .. z_k, s_k]; its head,
 * S_k = L_k[..., :z_{k+1} * s_{k+1}] (:1 for the last; zero-padded to that length where the
 * stride is shorter, past any element the view reads), reshapes to L_{k+1}; S_{n-1} is the
 * view's values in core order, [z_0 .. z_{n-1}, 1]. |levels| gets L_0 .. L_{n-1}; returns S_{n-1}. */
typedef struct {
  int n;
  int order[TP_MAX_DIMS];
  int64_t len; /* the storage array's length before padding */
  int64_t pad; /* zeros appended so the window fits */
} window_t;

static tp_hlo_value_t window_read(tp_hlo_builder_t *b, tp_hlo_value_t x, const tp_view_t *v,
                                  window_t *w, tp_hlo_value_t *levels) {
  int64_t one = 1;
  const int *order = w->order;
  int n = w->n;
  int64_t need = v->offset + v->strides[order[0]] * v->sizes[order[0]];
  w->len = x.dims[0];
  w->pad = need > x.dims[0] ? need - x.dims[0] : 0;
  if (w->pad) {
    tp_hlo_value_t zeros = tp_hlo_broadcast_to(b, tp_hlo_constant(b, x.dtype, 0), 1, &w->pad);
    tp_hlo_value_t parts[2] = {x, zeros};
    x = tp_hlo_concatenate(b, parts, 2, 0);
  }
  int64_t lo = v->offset, hi = need;
  x = tp_hlo_slice(b, x, &lo, &hi, &one);
  int64_t dims[TP_MAX_DIMS + 1], start[TP_MAX_DIMS + 1] = {0}, limit[TP_MAX_DIMS + 1],
      step[TP_MAX_DIMS + 1];
  for (int k = 0; k < n; k++) {
    /* x is [z_0 .. z_{k-1}, z_k * s_k]: split the last dim, keep its head. */
    dims[k] = v->sizes[order[k]];
    dims[k + 1] = v->strides[order[k]];
    x = levels[k] = tp_hlo_reshape(b, x, k + 2, dims);
    for (int i = 0; i < k + 2; i++) {
      limit[i] = dims[i];
      step[i] = 1;
    }
    int64_t lim = k + 1 < n ? v->strides[order[k + 1]] * v->sizes[order[k + 1]] : 1;
    if (lim <= dims[k + 1]) {
      limit[k + 1] = lim;
      x = tp_hlo_slice(b, x, start, limit, step);
    } else { /* the next dim's rows run past this stride (x[::2] of an odd count): padding the
              * view never reads */
      int64_t lo[TP_MAX_DIMS + 1] = {0}, hi[TP_MAX_DIMS + 1] = {0};
      hi[k + 1] = lim - dims[k + 1];
      x = tp_hlo_pad(b, x, tp_hlo_constant(b, x.dtype, 0), lo, hi);
    }
  }
  return x;
}

/* The inverse of window_read: |core| (S_{n-1}'s shape) written into the levels, back out to the
 * storage array. */
static tp_hlo_value_t window_write(tp_hlo_builder_t *b, tp_hlo_value_t x, const tp_view_t *v,
                                   const window_t *w, const tp_hlo_value_t *levels,
                                   tp_hlo_value_t core) {
  int64_t zeros[TP_MAX_DIMS + 1] = {0}, one = 1;
  /* |core| is S_k: into L_k, which is S_{k-1} reshaped. */
  for (int k = w->n - 1; k >= 0; k--) {
    int last = levels[k].ndim - 1;
    if (core.dims[last] > levels[k].dims[last]) { /* drop window_read's padding */
      int64_t limit[TP_MAX_DIMS + 1], step[TP_MAX_DIMS + 1];
      for (int i = 0; i <= last; i++) limit[i] = levels[k].dims[i], step[i] = 1;
      core = tp_hlo_slice(b, core, zeros, limit, step);
    }
    tp_hlo_value_t lk = tp_hlo_update_slice(b, levels[k], core, zeros);
    if (k == 0) {
      core = lk;
      break;
    }
    int64_t d[TP_MAX_DIMS + 1]; /* S_{k-1}: L_k with its last two dims as one */
    memcpy(d, levels[k].dims, sizeof(int64_t) * (size_t)k);
    d[k] = v->sizes[w->order[k]] * v->strides[w->order[k]];
    core = tp_hlo_reshape(b, lk, k + 1, d);
  }
  int64_t span = v->strides[w->order[0]] * v->sizes[w->order[0]];
  core = tp_hlo_reshape(b, core, 1, &span);
  if (w->pad) {
    tp_hlo_value_t z = tp_hlo_broadcast_to(b, tp_hlo_constant(b, x.dtype, 0), 1, &w->pad);
    tp_hlo_value_t parts[2] = {x, z};
    x = tp_hlo_concatenate(b, parts, 2, 0);
  }
  x = tp_hlo_update_slice(b, x, core, &v->offset);
  if (w->pad) {
    int64_t lo = 0;
    x = tp_hlo_slice(b, x, &lo, &w->len, &one);
  }
  return x;
}

/* The permutation from the view's order of its core dims to |order| (decreasing stride), and
 * back. */
static void core_perm(const tp_view_t *v, const int *order, int n, int64_t *to_view,
                      int64_t *to_core) {
  int m = 0;
  for (int d = 0; d < v->ndim; d++)
    for (int k = 0; k < n; k++)
      if (order[k] == d) to_view[m++] = k;
  for (int i = 0; i < n; i++) to_core[to_view[i]] = i;
}

#define UNROLL_MAX 64 /* slices an overlapping view may be read as */

/* |v| (no broadcast dims) read out of |x| with slices only: a non-overlapping view as its
 * window; an overlapping one (unfold's windows, as_strided's overlaps) as the concatenation of
 * its slices along the dim whose removal leaves the rest non-overlapping (or, recursively, along
 * several), at most |budget| slices in all. False when that fails (whatever it emitted is left
 * unused, and XLA drops it). */
static bool read_sliced(tp_hlo_builder_t *b, tp_hlo_value_t x, const tp_view_t *v, int64_t budget,
                        tp_hlo_value_t *out) {
  window_t w;
  bool nonoverlap;
  w.n = core_dims(v, w.order, &nonoverlap);
  if (w.n == 0) {
    int64_t lo = v->offset, hi = v->offset + 1, one = 1;
    *out = tp_hlo_reshape(b, tp_hlo_slice(b, x, &lo, &hi, &one), v->ndim, v->sizes);
    return true;
  }
  if (nonoverlap) {
    tp_hlo_value_t levels[TP_MAX_DIMS];
    tp_hlo_value_t s = window_read(b, x, v, &w, levels);
    int64_t cs[TP_MAX_DIMS], to_view[TP_MAX_DIMS], to_core[TP_MAX_DIMS];
    for (int k = 0; k < w.n; k++) cs[k] = v->sizes[w.order[k]];
    core_perm(v, w.order, w.n, to_view, to_core);
    *out = tp_hlo_reshape(b, tp_hlo_transpose(b, tp_hlo_reshape(b, s, w.n, cs), to_view),
                          v->ndim, v->sizes);
    return true;
  }
  /* Unroll the smallest dim whose removal leaves a non-overlapping view, else the smallest. */
  int pick = -1;
  bool pick_clean = false;
  for (int k = 0; k < w.n; k++) {
    int d = w.order[k];
    if (v->sizes[d] > budget) continue;
    tp_view_t sub = *v;
    sub.sizes[d] = 1;
    int o2[TP_MAX_DIMS];
    bool clean;
    core_dims(&sub, o2, &clean);
    if (pick < 0 || (clean && !pick_clean) ||
        (clean == pick_clean && v->sizes[d] < v->sizes[pick]))
      pick = d, pick_clean = clean;
  }
  if (pick < 0) return false;
  int64_t k = v->sizes[pick];
  tp_hlo_value_t parts[UNROLL_MAX];
  tp_view_t sub = *v;
  sub.sizes[pick] = 1;
  for (int64_t i = 0; i < k; i++) {
    sub.offset = v->offset + i * v->strides[pick];
    if (!read_sliced(b, x, &sub, budget / k, &parts[i])) return false;
  }
  *out = tp_hlo_concatenate(b, parts, (int)k, pick);
  return true;
}

tp_hlo_value_t tp_program_read_view(tp_hlo_builder_t *b, tp_hlo_value_t x, const tp_view_t *v) {
  int64_t numel = tp_view_numel(v);
  int64_t one = 1;
  if (numel == 0) {
    tp_hlo_value_t e = tp_hlo_slice(b, x, (int64_t[]){0}, (int64_t[]){0}, &one);
    return tp_hlo_reshape(b, e, v->ndim, v->sizes);
  }
  if (tp_view_contiguous(v)) {
    int64_t lo = v->offset, hi = v->offset + numel;
    return tp_hlo_reshape(b, tp_hlo_slice(b, x, &lo, &hi, &one), v->ndim, v->sizes);
  }
  /* The view with broadcast (stride 0) dims kept at size 1; broadcast at the end. */
  tp_view_t kv = *v;
  for (int d = 0; d < v->ndim; d++) kv.sizes[d] = v->strides[d] == 0 ? 1 : v->sizes[d];
  tp_hlo_value_t core;
  if (!read_sliced(b, x, &kv, UNROLL_MAX, &core)) /* irregular: an index per element */
    core = tp_hlo_gather_1d(b, x, view_indices(b, &kv, index_type(x.dims[0])));
  return tp_hlo_broadcast_in_dim(b, core, v->ndim, v->sizes,
                                 (int64_t[]){0, 1, 2, 3, 4, 5, 6, 7});
}

tp_hlo_value_t tp_program_write_view(tp_hlo_builder_t *b, tp_hlo_value_t x, const tp_view_t *v,
                                     tp_hlo_value_t value) {
  int64_t numel = tp_view_numel(v);
  if (numel == 0) return x;
  if (tp_view_contiguous(v)) {
    tp_hlo_value_t flat = tp_hlo_reshape(b, value, 1, &numel);
    return tp_hlo_update_slice(b, x, flat, &v->offset);
  }
  window_t w;
  bool nonoverlap;
  w.n = core_dims(v, w.order, &nonoverlap);
  bool broadcast = false;
  for (int d = 0; d < v->ndim; d++) broadcast = broadcast || (v->strides[d] == 0 && v->sizes[d] > 1);
  if (nonoverlap && !broadcast && w.n > 0) {
    /* The value into the window, in core order. */
    tp_hlo_value_t levels[TP_MAX_DIMS];
    (void)window_read(b, x, v, &w, levels);
    int64_t cs[TP_MAX_DIMS + 1], to_view[TP_MAX_DIMS], to_core[TP_MAX_DIMS], pv[TP_MAX_DIMS];
    for (int k = 0; k < w.n; k++) cs[k] = v->sizes[w.order[k]];
    core_perm(v, w.order, w.n, to_view, to_core);
    for (int k = 0; k < w.n; k++) pv[k] = v->sizes[w.order[to_view[k]]];
    tp_hlo_value_t core = tp_hlo_transpose(b, tp_hlo_reshape(b, value, w.n, pv), to_core);
    cs[w.n] = 1;
    return window_write(b, x, v, &w, levels, tp_hlo_reshape(b, core, w.n + 1, cs));
  }
  tp_hlo_value_t idx = view_indices(b, v, index_type(x.dims[0]));
  return tp_hlo_scatter_1d(b, x, idx, value);
}

tp_hlo_value_t tp_program_scalar_constant(tp_hlo_builder_t *b, const tp_op_arg_t *a) {
  tp_dtype_t dt = a->scalar_dtype;
  bool src_c = tp_dtype_is_complex(a->meta.dtype);
  double re = tp_dtype_is_float(a->meta.dtype) || src_c ? a->f : (double)a->i;
  if (tp_dtype_is_complex(dt)) return tp_hlo_constant_c(b, dt, re, src_c ? a->fi : 0.0);
  if (tp_dtype_is_float(dt)) return tp_hlo_constant(b, dt, re);
  unsigned char bytes[16];
  tp_scalar_bytes(a, dt, bytes);
  int64_t v = 0;
  switch (tp_dtype_size(dt)) { /* sign-extend the narrowed value (u8 and bool stay positive) */
    case 1: v = dt == TP_DTYPE_I8 ? (int64_t)(int8_t)bytes[0] : (int64_t)bytes[0]; break;
    case 2: { int16_t x; memcpy(&x, bytes, 2); v = x; break; }
    case 4: { int32_t x; memcpy(&x, bytes, 4); v = x; break; }
    default: memcpy(&v, bytes, 8); break;
  }
  return tp_hlo_constant_i(b, dt, v);
}

bool tp_program_slot_partial(const tp_view_t *outs, const int *out_slot, int n_out, int slot) {
  int writes = 0;
  for (int k = 0; k < n_out; k++) {
    if (out_slot[k] != slot) continue;
    if (++writes > 1 || !(tp_view_is_whole(&outs[k]) || tp_view_is_whole_permuted(&outs[k], NULL)))
      return true;
  }
  return false;
}

void tp_program_slot_after(const tp_storage_t *s, bool has, tp_dtype_t dtype, int64_t numel,
                           const tp_view_t *outs, const int *out_slot, int n_out, int slot,
                           tp_dtype_t *new_dtype, int64_t *new_numel) {
  bool retyped = !has;
  for (int k = 0; k < n_out; k++)
    if (out_slot[k] == slot) {
      retyped = retyped || outs[k].dtype != dtype;
      *new_dtype = tp_dtype_storage(outs[k].dtype);
    }
  *new_numel = tp_program_slot_partial(outs, out_slot, n_out, slot) && !retyped
                   ? numel
                   : tp_storage_elems(s, *new_dtype);
}

void tp_program_emit_call(tp_hlo_builder_t *b, const tp_op_def_t *op, const tp_eager_arg_t *args,
                          int n_args, const int *arg_slot, const tp_hlo_value_t *scalars,
                          const tp_meta_t *out_metas, const tp_view_t *outs, const int *out_slot,
                          int n_out, tp_storage_t *const *storages, tp_hlo_value_t *cur, bool *has) {
  tp_op_arg_t op_args[TP_MAX_ARGS];
  tp_hlo_value_t in[TP_MAX_ARGS];
  memset(in, 0, sizeof(in));
  for (int i = 0, n_scalars = 0; i < n_args; i++) {
    const tp_eager_arg_t *a = &args[i];
    op_args[i] = a->arg;
    if (a->arg.kind == TP_ARG_SCALAR) {
      in[i] = scalars[n_scalars++];
    } else if (a->arg.kind == TP_ARG_TENSOR) {
      int s = arg_slot[i];
      in[i] = tp_program_read_view(
          b, tp_program_storage(b, has[s] ? &cur[s] : NULL, storages[s], a->view.dtype), &a->view);
    }
  }
  tp_hlo_value_t results[TP_MAX_OUTS];
  op->emit(op, b, op_args, n_args, in, out_metas, results);
  /* Each result into its storage's new contents. */
  for (int k = 0; k < n_out; k++) {
    int s = out_slot[k];
    const tp_view_t *v = &outs[k];
    tp_hlo_value_t val = tp_hlo_convert(b, results[k], v->dtype);
    if (!tp_program_slot_partial(outs, out_slot, n_out, s)) {
      int64_t perm[TP_MAX_DIMS];
      if (!tp_view_is_whole(v) && tp_view_is_whole_permuted(v, perm))
        val = tp_hlo_transpose(b, val, perm); /* into the order the storage holds the dims */
      cur[s] = tp_program_to_storage(b, val);
      has[s] = true;
      continue;
    }
    bool started = false; /* an earlier output of this call wrote the slot */
    for (int j = 0; j < k; j++) started = started || out_slot[j] == s;
    tp_hlo_value_t x = started ? cur[s] : tp_program_storage(b, has[s] ? &cur[s] : NULL, storages[s], v->dtype);
    cur[s] = tp_program_write_view(
        b, tp_program_as_dtype(b, x, v->dtype, (int64_t)tp_storage_nbytes(storages[s])), v, val);
    has[s] = true;
  }
}
