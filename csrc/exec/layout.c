/* Output strides as PyTorch's CPU kernels choose them. See layout.h. */
#include "exec/layout.h"

#include <string.h>

static bool row_major(int ndim, const int64_t *sizes, const int64_t *strides) {
  int64_t expect = 1, numel = 1;
  for (int d = 0; d < ndim; d++) numel *= sizes[d];
  if (numel == 0) return true;
  for (int d = ndim - 1; d >= 0; d--) {
    if (sizes[d] != 1 && strides[d] != expect) return false;
    expect *= sizes[d];
  }
  return true;
}

/* Dense in channels-last order (C, W, H, N), size-1 dims aside. */
static bool channels_last_dense(int ndim, const int64_t *sizes, const int64_t *strides) {
  static const int order[4] = {1, 3, 2, 0};
  if (ndim != 4) return false;
  int64_t expect = 1;
  for (int i = 0; i < 4; i++) {
    int d = order[i];
    if (sizes[d] == 1) continue;
    if (strides[d] != expect) return false;
    expect *= sizes[d];
  }
  return true;
}

bool tp_layout_non_overlapping_dense(int ndim, const int64_t *sizes, const int64_t *strides) {
  if (ndim == 1) return sizes[0] < 2 || strides[0] == 1;
  /* Dims of size >= 2 by increasing stride must tile memory exactly. */
  int order[TP_MAX_DIMS], n = 0;
  for (int d = 0; d < ndim; d++)
    if (sizes[d] >= 2) order[n++] = d;
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && strides[order[j - 1]] > strides[order[j]]; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  int64_t require = 1;
  for (int i = 0; i < n; i++) {
    if (strides[order[i]] != require) return false;
    require *= sizes[order[i]];
  }
  return true;
}

bool tp_layout_suggests_channels_last(int ndim, const int64_t *sizes, const int64_t *strides) {
  /* The channel dim innermost, then the spatial dims from the last, then the batch; ambiguous
   * cases (a trivial channel stride, N111, N1H1) read as row-major. */
  static const int order4[4] = {1, 3, 2, 0}, order5[5] = {1, 4, 3, 2, 0};
  if (ndim != 4 && ndim != 5) return false;
  const int *order = ndim == 4 ? order4 : order5;
  if (strides[1] == 0) return false;
  int64_t min = 0;
  for (int i = 0; i < ndim; i++) {
    int d = order[i];
    if (sizes[d] == 0 || strides[d] < min) return false;
    if (d == 0 && min == strides[1]) return false;
    min = strides[d];
    if (sizes[d] > 1) min *= sizes[d];
  }
  return true;
}

void tp_layout_channels_last_strides(int ndim, const int64_t *sizes, int64_t *out_strides) {
  /* C innermost, then the spatial dims from the last, then N. */
  out_strides[1] = 1;
  int64_t s = sizes[1];
  for (int d = ndim - 1; d >= 2; d--) {
    out_strides[d] = s;
    s *= sizes[d];
  }
  out_strides[0] = s;
}

/* An operand of TensorIterator: a tensor argument's strides against the output's shape, with
 * broadcast dims (added, or size 1 where the output's is not) at stride 0. */
static bool operand_strides(const tp_view_t *v, const tp_meta_t *out, int64_t *st) {
  if (v->ndim > out->ndim) return false;
  int off = out->ndim - v->ndim;
  for (int d = 0; d < off; d++) st[d] = 0;
  for (int d = 0; d < v->ndim; d++) {
    int64_t want = out->sizes[off + d];
    if (v->sizes[d] != want && v->sizes[d] != 1) return false; /* not an elementwise operand */
    st[off + d] = v->sizes[d] == 1 && want != 1 ? 0 : v->strides[d];
  }
  return true;
}

static bool iterator_strides(const tp_eager_arg_t *args, int n_args, const tp_meta_t *out,
                             int64_t *out_strides) {
  const int nd = out->ndim;
  if (nd <= 1) return false;
  const tp_view_t *ops[TP_MAX_ARGS];
  int n = 0;
  bool same_shape = true;
  for (int i = 0; i < n_args; i++) {
    if (args[i].arg.kind == TP_ARG_SCALAR) same_shape = false; /* a 0-d operand */
    if (args[i].arg.kind != TP_ARG_TENSOR) continue;
    const tp_view_t *v = &args[i].view;
    ops[n++] = v;
    if (v->ndim != nd || memcmp(v->sizes, out->sizes, sizeof(int64_t) * (size_t)nd) != 0)
      same_shape = false;
  }
  if (n == 0) return false;
  if (same_shape) {
    /* TensorIterator's fast set-up: all row-major, all channels-last, or all dense alike. */
    bool contiguous = true, cl = true, dense = true, alike = true;
    for (int i = 0; i < n; i++) {
      contiguous = contiguous && row_major(nd, ops[i]->sizes, ops[i]->strides);
      cl = cl && channels_last_dense(nd, ops[i]->sizes, ops[i]->strides);
      dense = dense && tp_layout_non_overlapping_dense(nd, ops[i]->sizes, ops[i]->strides);
      alike = alike && memcmp(ops[i]->strides, ops[n - 1]->strides, sizeof(int64_t) * (size_t)nd) == 0;
    }
    if (contiguous) return false;
    if (cl) {
      tp_layout_channels_last_strides(nd, out->sizes, out_strides);
      return true;
    }
    if (dense && alike) {
      memcpy(out_strides, ops[n - 1]->strides, sizeof(int64_t) * (size_t)nd);
      return true;
    }
  }
  /* The general case: order the dims from fastest to slowest by the operands' strides, the first
   * operand that tells two dims apart deciding (broadcast dims tell nothing; equal strides put the
   * smaller dim first), then lay the output out densely in that order. */
  int64_t st[TP_MAX_ARGS][TP_MAX_DIMS];
  int m = 0;
  for (int i = 0; i < n; i++)
    if (operand_strides(ops[i], out, st[m])) m++;
    else return false;
  int perm[TP_MAX_DIMS]; /* perm[0]: the fastest dim */
  for (int i = 0; i < nd; i++) perm[i] = nd - 1 - i;
  for (int i = 1; i < nd; i++) {
    int d1 = i;
    for (int d0 = i - 1; d0 >= 0; d0--) {
      int a = perm[d0], b = perm[d1], cmp = 0; /* > 0: a goes after b */
      for (int k = 0; k < m && cmp == 0; k++) {
        int64_t sa = st[k][a], sb = st[k][b];
        if (sa == 0 || sb == 0) continue;
        if (sa != sb) cmp = sa < sb ? -1 : 1;
        else if (out->sizes[a] > out->sizes[b]) cmp = 1;
      }
      if (cmp > 0) {
        perm[d0] = b;
        perm[d1] = a;
        d1 = d0;
      } else if (cmp < 0) {
        break;
      }
    }
  }
  bool inverted = true;
  for (int i = 0; i < nd; i++) inverted = inverted && perm[i] == nd - 1 - i;
  if (inverted) return false;
  int64_t next = 1;
  for (int i = 0; i < nd; i++) {
    out_strides[perm[i]] = next;
    next *= out->sizes[perm[i]];
  }
  return true;
}

bool tp_exec_output_strides(int op, const tp_eager_arg_t *args, int n_args, const tp_meta_t *out,
                            int64_t *out_strides) {
  if (op < 0 || op >= tp_op_count) return false;
  tp_layout_t l = tp_op_layout(&tp_op_table[op]);
  switch (l.kind) {
    case TP_LAYOUT_ITERATOR:
      return iterator_strides(args, n_args, out, out_strides);
    case TP_LAYOUT_SUGGESTED:
      if (out->ndim != 4 && out->ndim != 5) return false;
      for (int i = l.first; i < l.first + l.count && i < n_args; i++) {
        const tp_view_t *v = &args[i].view;
        if (args[i].arg.kind == TP_ARG_TENSOR && v->ndim == out->ndim &&
            tp_layout_suggests_channels_last(v->ndim, v->sizes, v->strides)) {
          tp_layout_channels_last_strides(out->ndim, out->sizes, out_strides);
          return true;
        }
      }
      return false;
    default:
      return false;
  }
}
