/* Which rows may run on padded values, and what their padding must read as (op.h: tp_pad_t), by
 * family. The executor pads only dims whose sizes change from call to call (exec/bucket.h); a
 * size that an argument names (layer norm's normalized_shape, a view's sizes) is part of the
 * call's kind, so it never changes within one and is never padded. Depends on ops/ only. */
#include "ops/families.h"

static bool any_padded(const uint32_t *padded, int n_args) {
  for (int i = 0; i < n_args; i++)
    if (padded[i]) return true;
  return false;
}

/* A reduction: the fill that keeps it exact when a dim it reduces is padded. */
static tp_pad_t reduce_pad(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                           const uint32_t *padded) {
  bool mask[TP_MAX_DIMS] = {false};
  if (!tp_reduce_dims(op, args, n_args, mask)) return TP_PAD_NONE;
  bool reduced_padded = false;
  for (int d = 0; d < args[0].meta.ndim; d++) reduced_padded |= mask[d] && (padded[0] >> d & 1);
  switch ((tp_reduce_t)op->code) {
    case TP_R_CUMSUM: case TP_R_CUMPROD: case TP_R_CUMMAX: case TP_R_CUMMIN:
      return TP_PAD_ANY; /* a scan: the padding comes after every live position it reaches */
    default: break;
  }
  if (!reduced_padded) return TP_PAD_ANY;
  switch ((tp_reduce_t)op->code) {
    case TP_R_SUM: case TP_R_NANSUM: case TP_R_ANY: case TP_R_COUNT_NONZERO: return TP_PAD_ZERO;
    case TP_R_PROD: case TP_R_ALL: return TP_PAD_ONE;
    case TP_R_AMAX: case TP_R_MAX: case TP_R_ARGMAX: return TP_PAD_LOWEST;
    case TP_R_AMIN: case TP_R_MIN: case TP_R_ARGMIN: return TP_PAD_HIGHEST;
    case TP_R_LOGSUMEXP: /* exp(-inf) adds nothing; an integer or bool input has no -inf */
      return tp_dtype_is_float(args[0].meta.dtype) ? TP_PAD_LOWEST : TP_PAD_NONE;
    default: return TP_PAD_NONE; /* counts (mean, var, std, norms' orders), aminmax, trace */
  }
}

/* index_copy's dim, when self, index and source are tensors of the same rank as each other
 * (index 1-D), else -1. */
static int index_copy_dim(const tp_op_arg_t *args, int n_args) {
  if (n_args < 4 || args[0].kind != TP_ARG_TENSOR || args[1].kind != TP_ARG_INT ||
      args[2].kind != TP_ARG_TENSOR || args[3].kind != TP_ARG_TENSOR || args[2].meta.ndim != 1 ||
      args[0].meta.ndim < 1 || args[3].meta.ndim != args[0].meta.ndim)
    return -1;
  return tp_norm_dim(args[1].i, args[0].meta.ndim);
}

static bool elementwise(tp_op_infer_fn f) {
  return f == tp_infer_unary || f == tp_infer_binary || f == tp_infer_ternary ||
         f == tp_infer_activation || f == tp_infer_threshold_backward || f == tp_infer_copy ||
         f == tp_infer_fill;
}

bool tp_op_rowwise(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args, int k,
                   uint32_t *whole) {
  *whole = 0;
  const tp_op_infer_fn f = op->infer;
  if (op->flags & (TP_OPF_RANDOM | TP_OPF_COUNTED | TP_OPF_LIST_ZIP | TP_OPF_GRAPH)) return false;
  if (n_args < 1 || args[0].kind != TP_ARG_TENSOR) return elementwise(f);
  int nd = args[0].meta.ndim;
  if (elementwise(f)) return true;
  if (f == tp_infer_layer_norm) return n_args > 1 && args[1].kind == TP_ARG_INTS && k <= nd - args[1].n;
  if (f == tp_infer_softmax || f == tp_infer_softmax_backward) {
    int at = f == tp_infer_softmax ? 1 : 2;
    return n_args > at && args[at].kind == TP_ARG_INT && tp_norm_dim(args[at].i, nd) >= k;
  }
  if (f == tp_infer_mm && k == 1 && n_args >= 2) {
    *whole = 1u << 1;
    return true;
  }
  if (f == tp_infer_addmm && k == 1 && n_args >= 3) {
    *whole = 1u << 2;
    return true;
  }
  if (f == tp_infer_reduce) {
    bool mask[TP_MAX_DIMS] = {false};
    if (!tp_reduce_dims(op, args, n_args, mask)) return false;
    for (int d = 0; d < k && d < nd; d++)
      if (mask[d]) return false;
    return true;
  }
  return false;
}

tp_pad_t tp_op_pad(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                   const uint32_t *padded) {
  if (op->flags & (TP_OPF_RANDOM | TP_OPF_COUNTED | TP_OPF_LIST_ZIP | TP_OPF_GRAPH))
    return TP_PAD_NONE; /* random streams and value-dependent sizes follow the exact shape */
  const tp_op_infer_fn f = op->infer;
  /* Elementwise: each output position reads the same (broadcast) position of each input. */
  if (elementwise(f)) return TP_PAD_ANY;
  /* Normalized dims are named by normalized_shape: never padded. The backward sums the rows. */
  if (f == tp_infer_layer_norm) return TP_PAD_ANY;
  if (f == tp_infer_layer_norm_backward) return TP_PAD_ZERO;
  /* Contractions (and the backward of softmax, a sum of products) add padding in as 0. */
  if (f == tp_infer_mm || f == tp_infer_addmm || f == tp_infer_bmm || f == tp_infer_matvec ||
      f == tp_infer_softmax_backward)
    return TP_PAD_ZERO;
  if (f == tp_infer_softmax) return TP_PAD_LOWEST;
  /* Position-wise: masked_fill, a band of the last two dims (a live position keeps its row and
   * column), isin of padded elements against whole test elements. */
  if ((f == tp_infer_index && op->code == TP_X_MASKED_FILL) || f == tp_infer_band ||
      (f == tp_infer_lookup && op->code == TP_LK_ISIN && n_args > 1 && !padded[1]))
    return TP_PAD_ANY;
  /* index_select: padded indices read row 0, in range whenever any row is. Not when the rows
   * selected from are padded: an index past the live rows must still be an error. */
  if (f == tp_infer_index && op->code == TP_X_INDEX_SELECT && n_args > 2 &&
      args[0].kind == TP_ARG_TENSOR && args[1].kind == TP_ARG_INT) {
    int d = args[0].meta.ndim ? tp_norm_dim(args[1].i, args[0].meta.ndim) : 0;
    return d >= 0 && !(padded[0] >> d & 1) ? TP_PAD_ZERO : TP_PAD_NONE;
  }
  /* index_copy: the rows of source and index past their live count are dropped, an index past
   * self's live rows is an error (tp_op_emit_live). Not when self and source are padded
   * differently besides the indexed dim. */
  if (f == tp_infer_index_copy) {
    int d = index_copy_dim(args, n_args);
    if (d < 0 || (padded[2] & 1) != (padded[3] >> d & 1) ||
        (padded[0] & ~(1u << d)) != (padded[3] & ~(1u << d)))
      return TP_PAD_NONE;
    return TP_PAD_ANY;
  }
  /* arange at the bucket's length: its live values are the front (tp_op_pads_outputs). */
  if (f == tp_infer_arange) return TP_PAD_ANY;
  /* cat: tp_op_emit_live joins the parts where their live values end. */
  if (f == tp_infer_arrange && op->code == TP_AR_CAT) return TP_PAD_ANY;
  if (f == tp_infer_reduce) return any_padded(padded, n_args) ? reduce_pad(op, args, n_args, padded)
                                                              : TP_PAD_ANY;
  return TP_PAD_NONE;
}

bool tp_op_pads_outputs(const tp_op_def_t *op) { return op->infer == tp_infer_arange; }

bool tp_op_emit_live(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                     int n_args, const uint32_t *padded, const tp_hlo_value_t *in,
                     tp_live_size_fn live, void *live_ctx, const tp_meta_t *out_meta,
                     tp_hlo_value_t *out) {
  if (op->infer == tp_infer_index_copy) {
    int d = index_copy_dim(args, n_args);
    bool entries = padded[2] & 1, rows = padded[0] >> d & 1;
    if (!entries && !rows) return false; /* padded elsewhere only: the op's own emitter */
    tp_hlo_value_t k = entries ? live(live_ctx, 2, 0) : (tp_hlo_value_t){0};
    tp_hlo_value_t n = rows ? live(live_ctx, 0, d) : (tp_hlo_value_t){0};
    out[0] = tp_emit_index_copy_live(b, args, in, entries ? &k : NULL, rows ? &n : NULL, out_meta);
    return true;
  }
  if (op->infer != tp_infer_arrange || op->code != TP_AR_CAT) return false;
  int dim = tp_cat_dim(args, n_args, out_meta->ndim);
  if (dim < 0) return false;
  bool along = false;
  for (int i = 0; i < n_args; i++)
    along = along || (args[i].kind == TP_ARG_TENSOR && args[i].meta.ndim > dim && padded[i] >> dim & 1);
  if (!along) return false; /* padded elsewhere: the parts' padding lines up */
  tp_hlo_value_t sizes[TP_MAX_ARGS];
  for (int i = 0; i < n_args; i++) /* a skipped part (legacy 1-D empty) joins nothing */
    if (args[i].kind == TP_ARG_TENSOR) sizes[i] = live(live_ctx, i, args[i].meta.ndim > dim ? dim : 0);
  out[0] = tp_emit_cat_live(b, args, n_args, in, sizes, out_meta);
  return true;
}
