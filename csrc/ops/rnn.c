/* Recurrent cells: the fused LSTM and GRU cell kernels PyTorch's recurrent modules (nn.LSTM,
 * nn.GRU, LSTMCell, GRUCell) call on accelerators, and their backwards. The gate matmuls stay
 * outside (PyTorch computes them with linear); a cell takes the two gate pre-activations, the
 * biases and the previous state, and saves a workspace for its backward in CUDA's layout:
 *   LSTM: the activated gates [i, f, g, o], [B, 4H];
 *   GRU:  [r, z, n, hx, hn] with hn the hidden gates' n part plus its bias (before the reset
 *         multiplication), [B, 5H].
 * Half types compute in f32 and round each result (and the workspace) to the input dtype, as
 * CUDA's kernels do; bias gradients sum the rounded gate gradients. They are returned even when
 * has_bias is false (CUDA then returns undefined tensors; autograd drops gradients of absent
 * biases either way). Emits through hlo/ only. */
#include <stdio.h>
#include <string.h>

#include "ops/families.h"

/* A cell call's arguments by role (-1: absent or None) and its sizes. */
typedef struct {
  bool lstm, backward;
  int factor;           /* gates per cell: LSTM 4 (i, f, g, o), GRU 3 (r, z, n) */
  int64_t batch, hidden;
  tp_dtype_t dtype;
  int input_gates, hidden_gates, prev, input_bias, hidden_bias; /* forward */
  int grad_hy, grad_cy, cx, cy, workspace;                       /* backward */
} rnn_cell_t;

static int tensor_at(const tp_op_arg_t *args, int n_args, int i) {
  return i < n_args && args[i].kind == TP_ARG_TENSOR ? i : -1;
}

static void shape_str(char *buf, size_t n, const tp_meta_t *m) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < m->ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)m->sizes[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

/* Argument |i| (named |name|) must be a tensor of the cell's dtype and shape [d0] or [d0, d1]. */
static tp_status_t *expect(const tp_op_def_t *op, const tp_op_arg_t *args, int i,
                           const char *name, const rnn_cell_t *c, int ndim, int64_t d0, int64_t d1) {
  const tp_meta_t *m = &args[i].meta;
  if (m->dtype != c->dtype)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected %s to have dtype %s (as the other "
                          "tensors), but got %s", op->name, name, tp_dtype_name(c->dtype),
                          tp_dtype_name(m->dtype));
  if (m->ndim != ndim || m->sizes[0] != d0 || (ndim == 2 && m->sizes[1] != d1)) {
    char got[160];
    shape_str(got, sizeof(got), m);
    if (ndim == 1)
      return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected %s of shape [%lld], but got %s",
                            op->name, name, (long long)d0, got);
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected %s of shape [%lld, %lld], but got %s",
                          op->name, name, (long long)d0, (long long)d1, got);
  }
  return NULL;
}

static tp_status_t *parse_cell(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                               rnn_cell_t *c) {
  memset(c, 0, sizeof(*c));
  c->lstm = op->code == TP_RNN_LSTM_CELL || op->code == TP_RNN_LSTM_CELL_BACKWARD;
  c->backward = op->code == TP_RNN_LSTM_CELL_BACKWARD || op->code == TP_RNN_GRU_CELL_BACKWARD;
  c->factor = c->lstm ? 4 : 3;
  c->input_gates = c->hidden_gates = c->prev = c->input_bias = c->hidden_bias = -1;
  c->grad_hy = c->grad_cy = c->cx = c->cy = c->workspace = -1;
  const int ws_factor = c->lstm ? 4 : 5;
  const tp_meta_t *lead; /* the tensor that fixes batch, hidden size and dtype */
  if (!c->backward) {
    c->input_gates = tensor_at(args, n_args, 0);
    c->hidden_gates = tensor_at(args, n_args, 1);
    c->prev = tensor_at(args, n_args, 2);
    if (c->input_gates < 0 || c->hidden_gates < 0 || c->prev < 0)
      return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected tensors (input_gates, "
                            "hidden_gates, %s)", op->name, c->lstm ? "cx" : "hx");
    c->input_bias = tensor_at(args, n_args, 3);
    c->hidden_bias = tensor_at(args, n_args, 4);
    if ((c->input_bias < 0) != (c->hidden_bias < 0))
      return tp_make_status(TP_INVALID_ARGUMENT, "%s: input_bias and hidden_bias must both be "
                            "given or both be None", op->name);
    lead = &args[0].meta;
    if (lead->ndim != 2 || lead->sizes[1] % c->factor != 0) {
      char got[160];
      shape_str(got, sizeof(got), lead);
      return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected input_gates of shape [batch, %d * "
                            "hidden_size], but got %s", op->name, c->factor, got);
    }
    c->batch = lead->sizes[0];
    c->hidden = lead->sizes[1] / c->factor;
  } else if (c->lstm) { /* (grad_hy?, grad_cy?, cx, cy, workspace, has_bias) */
    c->grad_hy = tensor_at(args, n_args, 0);
    c->grad_cy = tensor_at(args, n_args, 1);
    c->cx = tensor_at(args, n_args, 2);
    c->cy = tensor_at(args, n_args, 3);
    c->workspace = tensor_at(args, n_args, 4);
    if (c->cx < 0 || c->cy < 0 || c->workspace < 0)
      return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected tensors (cx, cy, workspace)", op->name);
    lead = &args[c->cx].meta;
  } else { /* (grad_hy, workspace, has_bias) */
    c->grad_hy = tensor_at(args, n_args, 0);
    c->workspace = tensor_at(args, n_args, 1);
    if (c->grad_hy < 0 || c->workspace < 0)
      return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected tensors (grad_hy, workspace)", op->name);
    lead = &args[c->grad_hy].meta;
  }
  if (c->backward) {
    if (lead->ndim != 2) {
      char got[160];
      shape_str(got, sizeof(got), lead);
      return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected %s of shape [batch, hidden_size], "
                            "but got %s", op->name, c->lstm ? "cx" : "grad_hy", got);
    }
    c->batch = lead->sizes[0];
    c->hidden = lead->sizes[1];
  }
  c->dtype = lead->dtype;
  if (!tp_dtype_is_float(c->dtype))
    return tp_make_status(TP_INVALID_ARGUMENT, "\"%s\" not implemented for '%s'", op->name,
                          tp_dtype_name(c->dtype));
  const int64_t B = c->batch, H = c->hidden, G = c->factor * H;
  if (!c->backward) {
    TP_RETURN_IF_ERROR(expect(op, args, c->hidden_gates, "hidden_gates", c, 2, B, G));
    TP_RETURN_IF_ERROR(expect(op, args, c->prev, c->lstm ? "cx" : "hx", c, 2, B, H));
    if (c->input_bias >= 0) {
      TP_RETURN_IF_ERROR(expect(op, args, c->input_bias, "input_bias", c, 1, G, 0));
      TP_RETURN_IF_ERROR(expect(op, args, c->hidden_bias, "hidden_bias", c, 1, G, 0));
    }
    return NULL;
  }
  if (c->grad_hy >= 0) TP_RETURN_IF_ERROR(expect(op, args, c->grad_hy, "grad_hy", c, 2, B, H));
  if (c->grad_cy >= 0) TP_RETURN_IF_ERROR(expect(op, args, c->grad_cy, "grad_cy", c, 2, B, H));
  if (c->cy >= 0) TP_RETURN_IF_ERROR(expect(op, args, c->cy, "cy", c, 2, B, H));
  return expect(op, args, c->workspace, "workspace", c, 2, B, ws_factor * H);
}

tp_status_t *tp_infer_rnn(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                          int *n_out) {
  rnn_cell_t c;
  TP_RETURN_IF_ERROR(parse_cell(op, args, n_args, &c));
  const int64_t B = c.batch, H = c.hidden;
  tp_meta_t state = {c.dtype, 2, {B, H}, 0};
  tp_meta_t gates = {c.dtype, 2, {B, c.factor * H}, 0};
  tp_meta_t bias = {c.dtype, 1, {c.factor * H}, 0};
  switch ((tp_rnn_t)op->code) {
    case TP_RNN_LSTM_CELL: /* (hy, cy, workspace) */
      out[0] = out[1] = state;
      out[2] = gates;
      *n_out = 3;
      break;
    case TP_RNN_GRU_CELL: /* (hy, workspace) */
      out[0] = state;
      out[1] = (tp_meta_t){c.dtype, 2, {B, 5 * H}, 0};
      *n_out = 2;
      break;
    case TP_RNN_LSTM_CELL_BACKWARD: /* (grad_gates, grad_cx, grad_bias) */
      out[0] = gates;
      out[1] = state;
      out[2] = bias;
      *n_out = 3;
      break;
    case TP_RNN_GRU_CELL_BACKWARD: /* (grad_input_gates, grad_hidden_gates, grad_hx, two bias grads) */
      out[0] = out[1] = gates;
      out[2] = state;
      out[3] = out[4] = bias;
      *n_out = 5;
      break;
  }
  return NULL;
}

/* Columns [k*H, (k+1)*H) of a [B, n*H] value. */
static tp_hlo_value_t part(tp_hlo_builder_t *b, tp_hlo_value_t x, int k, int64_t H) {
  int64_t start[2] = {0, k * H}, limit[2] = {x.dims[0], (k + 1) * H}, stride[2] = {1, 1};
  return tp_hlo_slice(b, x, start, limit, stride);
}

/* 1 - x, and the derivatives through an activation's output y: sigmoid (1 - y) y, tanh 1 - y^2. */
static tp_hlo_value_t one_minus(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  return tp_sub(b, tp_k(b, 1, x), x);
}
static tp_hlo_value_t dsigmoid(tp_hlo_builder_t *b, tp_hlo_value_t g, tp_hlo_value_t y) {
  return tp_mul(b, tp_mul(b, g, one_minus(b, y)), y);
}
static tp_hlo_value_t dtanh(tp_hlo_builder_t *b, tp_hlo_value_t g, tp_hlo_value_t y) {
  return tp_mul(b, g, one_minus(b, tp_mul(b, y, y)));
}

/* The |n| parts, each rounded to |dtype|, side by side: a [B, n*H] value. */
static tp_hlo_value_t join(tp_hlo_builder_t *b, tp_hlo_value_t *parts, int n, tp_dtype_t dtype) {
  for (int i = 0; i < n; i++) parts[i] = tp_hlo_convert(b, parts[i], dtype);
  return tp_hlo_concatenate(b, parts, n, 1);
}

/* A bias gradient: the (already rounded) gate gradients summed over the batch in |md|. */
static tp_hlo_value_t bias_grad(tp_hlo_builder_t *b, tp_hlo_value_t gates, tp_dtype_t md) {
  int64_t d = 0;
  tp_hlo_value_t s = tp_hlo_reduce(b, tp_hlo_convert(b, gates, md), tp_hlo_constant(b, md, 0),
                                   TP_HLO_ADD, 1, &d);
  return tp_hlo_convert(b, s, gates.dtype);
}

/* [B, G] gate pre-activations: input_gates + hidden_gates, then each bias, broadcast over B. */
static tp_hlo_value_t gate_sum(tp_hlo_builder_t *b, const rnn_cell_t *c, const tp_hlo_value_t *in,
                               tp_dtype_t md) {
  tp_hlo_value_t s = tp_add(b, tp_hlo_convert(b, in[c->input_gates], md),
                         tp_hlo_convert(b, in[c->hidden_gates], md));
  if (c->input_bias >= 0)
    for (int k = 0; k < 2; k++) {
      tp_hlo_value_t bias = tp_hlo_convert(b, in[k ? c->hidden_bias : c->input_bias], md);
      s = tp_add(b, s, tp_hlo_broadcast_to(b, bias, 2, s.dims));
    }
  return s;
}

static void emit_lstm(tp_hlo_builder_t *b, const rnn_cell_t *c, const tp_hlo_value_t *in,
                      tp_dtype_t md, tp_hlo_value_t *out) {
  const int64_t H = c->hidden;
  tp_hlo_value_t s = gate_sum(b, c, in, md);
  tp_hlo_value_t g[4] = {
      tp_hlo_unary(b, TP_HLO_LOGISTIC, part(b, s, 0, H)), tp_hlo_unary(b, TP_HLO_LOGISTIC, part(b, s, 1, H)),
      tp_hlo_unary(b, TP_HLO_TANH, part(b, s, 2, H)), tp_hlo_unary(b, TP_HLO_LOGISTIC, part(b, s, 3, H))};
  tp_hlo_value_t cx = tp_hlo_convert(b, in[c->prev], md);
  tp_hlo_value_t cy = tp_add(b, tp_mul(b, g[1], cx), tp_mul(b, g[0], g[2]));
  tp_hlo_value_t hy = tp_mul(b, g[3], tp_hlo_unary(b, TP_HLO_TANH, cy));
  out[0] = tp_hlo_convert(b, hy, c->dtype);
  out[1] = tp_hlo_convert(b, cy, c->dtype);
  out[2] = join(b, g, 4, c->dtype);
}

static void emit_gru(tp_hlo_builder_t *b, const rnn_cell_t *c, const tp_hlo_value_t *in,
                     tp_dtype_t md, tp_hlo_value_t *out) {
  const int64_t H = c->hidden;
  tp_hlo_value_t s = gate_sum(b, c, in, md); /* r and z read all four terms */
  tp_hlo_value_t r = tp_hlo_unary(b, TP_HLO_LOGISTIC, part(b, s, 0, H));
  tp_hlo_value_t z = tp_hlo_unary(b, TP_HLO_LOGISTIC, part(b, s, 1, H));
  /* n = tanh(in + b_in + r * (hn + b_hn)): the reset gate scales the hidden part only. */
  tp_hlo_value_t xn = tp_hlo_convert(b, part(b, in[c->input_gates], 2, H), md);
  tp_hlo_value_t hn = tp_hlo_convert(b, part(b, in[c->hidden_gates], 2, H), md);
  if (c->input_bias >= 0) {
    int64_t one = 1;
    tp_hlo_value_t bias[2];
    for (int k = 0; k < 2; k++) {
      tp_hlo_value_t v = tp_hlo_convert(b, in[k ? c->hidden_bias : c->input_bias], md);
      int64_t lo = 2 * H, hi = 3 * H;
      v = tp_hlo_slice(b, v, &lo, &hi, &one);
      bias[k] = tp_hlo_broadcast_to(b, v, 2, xn.dims);
    }
    xn = tp_add(b, xn, bias[0]);
    hn = tp_add(b, hn, bias[1]);
  }
  tp_hlo_value_t n = tp_hlo_unary(b, TP_HLO_TANH, tp_add(b, xn, tp_mul(b, r, hn)));
  tp_hlo_value_t hx = tp_hlo_convert(b, in[c->prev], md);
  out[0] = tp_hlo_convert(b, tp_add(b, n, tp_mul(b, z, tp_sub(b, hx, n))), c->dtype);
  tp_hlo_value_t ws[5] = {r, z, n, in[c->prev], hn};
  out[1] = join(b, ws, 5, c->dtype);
}

static void emit_lstm_backward(tp_hlo_builder_t *b, const rnn_cell_t *c, const tp_hlo_value_t *in,
                               tp_dtype_t md, tp_hlo_value_t *out) {
  const int64_t H = c->hidden;
  tp_hlo_value_t ws = tp_hlo_convert(b, in[c->workspace], md);
  tp_hlo_value_t ig = part(b, ws, 0, H), fg = part(b, ws, 1, H), cg = part(b, ws, 2, H),
                 og = part(b, ws, 3, H);
  tp_hlo_value_t cx = tp_hlo_convert(b, in[c->cx], md), cy = tp_hlo_convert(b, in[c->cy], md);
  tp_hlo_value_t zero = tp_k(b, 0, cx);
  /* An absent gradient (the output was unused) is zero. */
  tp_hlo_value_t go = c->grad_hy >= 0 ? tp_hlo_convert(b, in[c->grad_hy], md) : zero;
  tp_hlo_value_t gc = c->grad_cy >= 0 ? tp_hlo_convert(b, in[c->grad_cy], md) : zero;
  tp_hlo_value_t t = tp_hlo_unary(b, TP_HLO_TANH, cy);
  /* The gradient reaching cy: through hy = o * tanh(cy), plus grad_cy. */
  tp_hlo_value_t dcy = tp_add(b, dtanh(b, tp_mul(b, go, og), t), gc);
  tp_hlo_value_t g[4] = {dsigmoid(b, tp_mul(b, dcy, cg), ig), dsigmoid(b, tp_mul(b, dcy, cx), fg),
                         dtanh(b, tp_mul(b, dcy, ig), cg), dsigmoid(b, tp_mul(b, go, t), og)};
  out[0] = join(b, g, 4, c->dtype);
  out[1] = tp_hlo_convert(b, tp_mul(b, dcy, fg), c->dtype);
  out[2] = bias_grad(b, out[0], md);
}

static void emit_gru_backward(tp_hlo_builder_t *b, const rnn_cell_t *c, const tp_hlo_value_t *in,
                              tp_dtype_t md, tp_hlo_value_t *out) {
  const int64_t H = c->hidden;
  tp_hlo_value_t ws = tp_hlo_convert(b, in[c->workspace], md);
  tp_hlo_value_t r = part(b, ws, 0, H), z = part(b, ws, 1, H), n = part(b, ws, 2, H),
                 hx = part(b, ws, 3, H), hn = part(b, ws, 4, H);
  tp_hlo_value_t go = tp_hlo_convert(b, in[c->grad_hy], md);
  /* hy = n + z (hx - n) = (1 - z) n + z hx. */
  tp_hlo_value_t dz = dsigmoid(b, tp_mul(b, go, tp_sub(b, hx, n)), z);
  tp_hlo_value_t dn = dtanh(b, tp_mul(b, go, one_minus(b, z)), n); /* the pre-tanh n, input side */
  tp_hlo_value_t dr = dsigmoid(b, tp_mul(b, dn, hn), r);
  tp_hlo_value_t gi[3] = {dr, dz, dn}, gh[3] = {dr, dz, tp_mul(b, dn, r)};
  out[0] = join(b, gi, 3, c->dtype);
  out[1] = join(b, gh, 3, c->dtype);
  out[2] = tp_hlo_convert(b, tp_mul(b, go, z), c->dtype);
  out[3] = bias_grad(b, out[0], md);
  out[4] = bias_grad(b, out[1], md);
}

void tp_emit_rnn(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                 const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  rnn_cell_t c;
  tp_status_t *st = parse_cell(op, args, n_args, &c);
  if (st) { /* infer accepted these arguments: only a caller skipping it gets here */
    tp_hlo_fail(b, st);
    return;
  }
  tp_dtype_t md = tp_math_dtype(c.dtype);
  switch ((tp_rnn_t)op->code) {
    case TP_RNN_LSTM_CELL: emit_lstm(b, &c, in, md, out); break;
    case TP_RNN_GRU_CELL: emit_gru(b, &c, in, md, out); break;
    case TP_RNN_LSTM_CELL_BACKWARD: emit_lstm_backward(b, &c, in, md, out); break;
    case TP_RNN_GRU_CELL_BACKWARD: emit_gru_backward(b, &c, in, md, out); break;
  }
}
