/* Which rows may run on padded values, and what their padding must read as (op.h: tp_pad_t), by
 * family. The executor pads only dims whose sizes change from call to call (exec/bucket.h); a
 * size that an argument names (layer norm's normalized_shape, a view's sizes) is part of the
 * call's kind, so it never changes within one and is never padded. Depends on ops/ only. */
#include <string.h>

#include "ops/families.h"

static bool any_padded(const uint32_t *padded, int n_args) {
  for (int i = 0; i < n_args; i++)
    if (padded[i]) return true;
  return false;
}

/* Whether only the arguments in |may| (a bit each) are padded, and those only in dim 0. */
static bool batch_only(const uint32_t *padded, int n_args, uint32_t may) {
  for (int i = 0; i < n_args; i++)
    if (padded[i] & ~((may >> i & 1) ? 1u : 0u)) return false;
  return true;
}

/* A reduction: the fill that keeps it exact when a dim it reduces is padded; *live when its
 * result needs the live count (mean). */
static tp_pad_t reduce_pad(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                           const uint32_t *padded, bool *live) {
  if (!any_padded(padded, n_args)) return TP_PAD_ANY;
  bool mask[TP_MAX_DIMS] = {false};
  if (!tp_reduce_dims(op, args, n_args, mask)) return TP_PAD_NONE;
  bool reduced_padded = false;
  int n_reduced = 0;
  for (int d = 0; d < args[0].meta.ndim; d++) {
    reduced_padded |= mask[d] && (padded[0] >> d & 1);
    n_reduced += mask[d];
  }
  switch ((tp_reduce_t)op->code) {
    case TP_R_CUMSUM: case TP_R_CUMPROD: case TP_R_CUMMAX: case TP_R_CUMMIN:
      return TP_PAD_ANY; /* a scan: the padding comes after every live position it reaches */
    case TP_R_ARGMAX: case TP_R_ARGMIN:
      /* An index over several dims counts the padding of the later ones. */
      if (n_reduced > 1) return TP_PAD_NONE;
      break;
    default: break;
  }
  if (!reduced_padded) return TP_PAD_ANY;
  switch ((tp_reduce_t)op->code) {
    case TP_R_SUM: case TP_R_NANSUM: case TP_R_ANY: case TP_R_COUNT_NONZERO: return TP_PAD_ZERO;
    case TP_R_MEAN: /* the sum over the live elements, over their count */
      if (!tp_dtype_is_float(args[0].meta.dtype)) return TP_PAD_NONE;
      *live = true;
      return TP_PAD_ZERO;
    case TP_R_PROD: case TP_R_ALL: return TP_PAD_ONE;
    case TP_R_AMAX: case TP_R_MAX: case TP_R_ARGMAX: return TP_PAD_LOWEST;
    case TP_R_AMIN: case TP_R_MIN: case TP_R_ARGMIN: return TP_PAD_HIGHEST;
    case TP_R_LOGSUMEXP: /* exp(-inf) adds nothing; an integer or bool input has no -inf */
      return tp_dtype_is_float(args[0].meta.dtype) ? TP_PAD_LOWEST : TP_PAD_NONE;
    default: return TP_PAD_NONE; /* counts (var, std, norms' orders), aminmax, trace */
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

/* A contraction's two sides: dim |da| of argument |a| against dim |db| of argument |b|, padded
 * both or neither. */
static bool sides_agree(const tp_op_arg_t *args, int n_args, const uint32_t *padded, int a, int da,
                        int b, int db) {
  if (b >= n_args || args[a].kind != TP_ARG_TENSOR || args[b].kind != TP_ARG_TENSOR) return false;
  int ka = args[a].meta.ndim + da, kb = db < 0 ? args[b].meta.ndim + db : db;
  return ka >= 0 && kb >= 0 && (padded[a] >> ka & 1) == (padded[b] >> kb & 1);
}

/* Whether argument |i| is a tensor not padded in dim |d| (or has no such dim). */
static bool unpadded_dim(const tp_op_arg_t *args, int n_args, const uint32_t *padded, int i, int d) {
  return i < n_args && args[i].kind == TP_ARG_TENSOR && d >= 0 && !(padded[i] >> d & 1);
}

/* The fill of every argument but those the rule below names: one for all. */
static bool all_args(tp_pad_rule_t *r, int n_args, tp_pad_t f) {
  for (int i = 0; i < n_args; i++) r->fill[i] = f;
  return f != TP_PAD_NONE;
}

/* The indexing rows: indices read as 0 where padded (in range whenever any index is), and the
 * dims they index must not be padded in the tensor indexed (an index past its live size must
 * still be an error). */
static bool index_rule(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                       const uint32_t *padded, tp_pad_rule_t *r) {
  const tp_op_infer_fn f = op->infer;
  if (f == tp_infer_shape && op->code == TP_S_EMBEDDING) /* (weight, indices, ...) */
    return n_args > 1 && !padded[0] && (r->fill[1] = TP_PAD_ZERO);
  if (f != tp_infer_index) return false;
  int nd = args[0].kind == TP_ARG_TENSOR ? args[0].meta.ndim : 0;
  switch ((tp_index_t)op->code) {
    case TP_X_MASKED_FILL: return true; /* position-wise */
    case TP_X_INDEX_SELECT: case TP_X_GATHER: { /* (self, dim, index) */
      if (n_args < 3 || args[1].kind != TP_ARG_INT) return false;
      int d = nd ? tp_norm_dim(args[1].i, nd) : 0;
      r->fill[2] = TP_PAD_ZERO;
      return unpadded_dim(args, n_args, padded, 0, d);
    }
    case TP_X_EMBEDDING_BACKWARD: /* (grad, indices, num_weights, padding_idx, scale_by_freq):
                                     padded rows add 0 to row 0, unless rows are counted */
      if (n_args > 4 && args[4].kind == TP_ARG_INT && args[4].i && any_padded(padded, n_args))
        return false;
      return all_args(r, n_args, TP_PAD_ZERO);
    case TP_X_INDEX: case TP_X_INDEX_PUT: {
      /* (self, n, indices...[, values, accumulate]): integer indices, each over the next dim;
       * a write's padded index would write its value at 0. A read may index a padded dim
       * (mask[b, arange(s)]): its row is a counted one, which only graphs run padded. */
      if (n_args < 2 || args[1].kind != TP_ARG_INT) return false;
      for (int j = 0; j < args[1].i && 2 + j < n_args; j++) {
        const tp_op_arg_t *ix = &args[2 + j];
        if (ix->kind == TP_ARG_NONE) continue;
        if (ix->kind != TP_ARG_TENSOR || ix->meta.dtype == TP_DTYPE_BOOL ||
            ix->meta.dtype == TP_DTYPE_U8 ||
            (op->code == TP_X_INDEX_PUT && (padded[2 + j] || !unpadded_dim(args, n_args, padded, 0, j))))
          return false;
        r->fill[2 + j] = TP_PAD_ZERO;
      }
      return true;
    }
    default: return false;
  }
}

/* The rows that compute each sample (dim 0) from the same sample: positional with only the batch
 * padded. Convolution's backward sums its weight's and bias's gradients over the batch. */
static bool per_sample_rule(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                            const uint32_t *padded, tp_pad_rule_t *r) {
  const tp_op_infer_fn f = op->infer;
  /* A batch dim: the input of a convolution has its weight's rank (unbatched, dim 0 is the
   * channels, which it sums); pooling keeps every leading dim apart. */
  if (f == tp_infer_conv)
    return n_args > 1 && args[0].meta.ndim == args[1].meta.ndim && batch_only(padded, n_args, 1u);
  if (f == tp_infer_conv_backward)
    return n_args > 2 && args[1].meta.ndim == args[2].meta.ndim &&
           batch_only(padded, n_args, 3u) && all_args(r, n_args, TP_PAD_ZERO);
  if (f == tp_infer_max_pool || f == tp_infer_avg_pool) {
    uint32_t tensors = 0;
    for (int i = 0; i < n_args; i++)
      if (args[i].kind == TP_ARG_TENSOR) tensors |= 1u << i;
    return batch_only(padded, n_args, tensors);
  }
  if (f == tp_infer_batch_norm && op->code == TP_BN_NO_TRAINING) /* running statistics */
    return batch_only(padded, n_args, 1u);
  if (f == tp_infer_nll) { /* a padded sample's target is ignore_index: it counts nowhere */
    int s = op->code == TP_DIR_BACKWARD ? 1 : 0;
    if (n_args < s + 5 || args[s + 3].kind != TP_ARG_INT || args[s + 4].kind != TP_ARG_INT ||
        args[s].meta.ndim != 2)
      return false;
    if (op->code != TP_DIR_BACKWARD && args[s + 3].i == 0 && any_padded(padded, n_args))
      return false; /* no reduction: PyTorch's result for a padded sample */
    r->fill[s + 1] = TP_PAD_VALUE;
    r->value[s + 1] = args[s + 4].i;
    return batch_only(padded, n_args, s ? 7u : 3u);
  }
  return false;
}

bool tp_op_pad_rule(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                    const uint32_t *padded, tp_pad_rule_t *r) {
  memset(r, 0, sizeof(*r));
  all_args(r, n_args, TP_PAD_ANY);
  if (op->flags & (TP_OPF_RANDOM | TP_OPF_LIST_ZIP))
    return false; /* random streams follow the exact shape */
  if (n_args < 1) return false;
  const tp_op_infer_fn f = op->infer;
  /* Elementwise: each output position reads the same (broadcast) position of each input. */
  if (elementwise(f)) return !(op->flags & TP_OPF_COUNTED);
  /* Normalized dims are named by normalized_shape: never padded. The backward sums the rows. */
  if (f == tp_infer_layer_norm || f == tp_infer_layer_norm_backward) {
    int x = f == tp_infer_layer_norm ? 0 : 1, at = x + 1;
    if (n_args <= at || args[at].kind != TP_ARG_INTS || args[x].kind != TP_ARG_TENSOR) return false;
    for (int d = args[x].meta.ndim - args[at].n; d < args[x].meta.ndim; d++)
      if (d >= 0 && padded[x] >> d & 1) return false;
    return f == tp_infer_layer_norm || all_args(r, n_args, TP_PAD_ZERO);
  }
  /* Contractions (and the backward of softmax, a sum of products) add padding in as 0. */
  if (f == tp_infer_mm || f == tp_infer_matvec)
    return sides_agree(args, n_args, padded, 0, -1, 1, 0) && all_args(r, n_args, TP_PAD_ZERO);
  if (f == tp_infer_addmm)
    return sides_agree(args, n_args, padded, 1, -1, 2, 0) && all_args(r, n_args, TP_PAD_ZERO);
  if (f == tp_infer_bmm) {
    int a = op->code == TP_BMM_BADDBMM ? 1 : 0;
    return sides_agree(args, n_args, padded, a, -1, a + 1, -2) && all_args(r, n_args, TP_PAD_ZERO);
  }
  if (f == tp_infer_softmax_backward) return all_args(r, n_args, TP_PAD_ZERO);
  if (f == tp_infer_softmax) return all_args(r, n_args, TP_PAD_LOWEST);
  /* Position-wise: a band of the last two dims (a live position keeps its row and column), isin
   * of padded elements against whole test elements. */
  if (f == tp_infer_band || (f == tp_infer_lookup && op->code == TP_LK_ISIN && n_args > 1 &&
                             !padded[1]))
    return true;
  /* index_copy: the rows of source and index past their live count are dropped (the live sizes
   * it needs); an index past self's live rows is an error where tp_op_emit_live serves. Not
   * when self and source are padded differently besides the indexed dim. */
  if (f == tp_infer_index_copy) {
    int d = index_copy_dim(args, n_args);
    if (d < 0 || (padded[2] & 1) != (padded[3] >> d & 1) ||
        (padded[0] & ~(1u << d)) != (padded[3] & ~(1u << d)))
      return false;
    r->live = padded[2] & 1;
    return true;
  }
  /* arange at the bucket's length: its live values are the front (tp_op_pads_outputs). */
  if (f == tp_infer_arange) return true;
  /* cat: tp_op_emit_live joins the parts where their live values end. */
  if (f == tp_infer_arrange && op->code == TP_AR_CAT) {
    int nd = 0;
    for (int i = 0; i < n_args; i++)
      if (args[i].kind == TP_ARG_TENSOR && args[i].meta.ndim > nd) nd = args[i].meta.ndim;
    int dim = tp_cat_dim(args, n_args, nd);
    for (int i = 0; i < n_args && dim >= 0; i++)
      r->live |= args[i].kind == TP_ARG_TENSOR && args[i].meta.ndim > dim && (padded[i] >> dim & 1);
    return true;
  }
  /* constant_pad_nd: its pad value belongs after each padded dim's live end. */
  if (f == tp_infer_constant_pad) {
    r->live = any_padded(padded, n_args);
    return true;
  }
  if (f == tp_infer_reduce) return all_args(r, n_args, reduce_pad(op, args, n_args, padded, &r->live));
  if (op->flags & TP_OPF_COUNTED && (f != tp_infer_index || op->code != TP_X_INDEX)) return false;
  return index_rule(op, args, n_args, padded, r) || per_sample_rule(op, args, n_args, padded, r);
}

bool tp_op_pads_outputs(const tp_op_def_t *op) { return op->infer == tp_infer_arange; }

bool tp_op_emits_live(const tp_op_def_t *op) {
  return op->infer == tp_infer_index_copy || (op->infer == tp_infer_arrange && op->code == TP_AR_CAT) ||
         (op->infer == tp_infer_reduce && op->code == TP_R_MEAN);
}

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
  if (op->infer == tp_infer_reduce && op->code == TP_R_MEAN) {
    bool mask[TP_MAX_DIMS] = {false};
    if (!tp_reduce_dims(op, args, n_args, mask)) return false;
    /* The count: each reduced dim's live size (its size where it is not padded). */
    bool along = false;
    int64_t whole = 1;
    for (int d = 0; d < args[0].meta.ndim; d++)
      if (mask[d]) {
        along |= padded[0] >> d & 1;
        if (!(padded[0] >> d & 1)) whole *= args[0].meta.sizes[d];
      }
    if (!along) return false; /* padded elsewhere only: the op's own emitter */
    tp_hlo_value_t count = {0};
    bool have = false;
    for (int d = 0; d < args[0].meta.ndim; d++) {
      if (!mask[d] || !(padded[0] >> d & 1)) continue;
      tp_hlo_value_t n = live(live_ctx, 0, d);
      count = have ? tp_hlo_binary(b, TP_HLO_MUL, count, n) : n;
      have = true;
    }
    count = tp_hlo_binary(b, TP_HLO_MUL, count, tp_hlo_constant_i(b, count.dtype, whole));
    out[0] = tp_emit_mean_live(op, b, args, n_args, in, count, out_meta);
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
