/* Ranges: arange (at the end of the file), linspace and logspace (TP_LIN_LOGSPACE: base ** the linspace, the power taken in double as CPU's
 * std::pow(double, scalar_t) does). linspace: CPU's formula, in the output type (double for integer outputs, truncated at the
 * end): step = (end - start) / (steps - 1); start + step * i for the first half, end - step *
 * (steps - 1 - i) for the rest, so both ends are exact. start and end are program inputs; only
 * steps shapes the program. Depends on ops/ helpers and hlo/ only. */
#include <math.h>
#include <string.h>

#include "ops/families.h"

/* linspace(start, end, steps, dtype?, ...) / linspace.out(start, end, steps) */
tp_status_t *tp_infer_linspace(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                               int *n_out) {
  if (n_args < 3 || args[0].kind != TP_ARG_SCALAR || args[1].kind != TP_ARG_SCALAR ||
      args[2].kind != TP_ARG_INT)
    return tp_make_status(TP_UNIMPLEMENTED, "%s: tensor start/end", op->name);
  if (args[2].i < 0) return tp_make_status(TP_INVALID_ARGUMENT, "number of steps must be non-negative");
  if (!tp_dtype_is_float(args[0].meta.dtype) && !tp_dtype_is_int(args[0].meta.dtype))
    return tp_make_status(TP_UNIMPLEMENTED, "%s: complex or bool bounds", op->name);
  if (!tp_dtype_is_float(args[1].meta.dtype) && !tp_dtype_is_int(args[1].meta.dtype))
    return tp_make_status(TP_UNIMPLEMENTED, "%s: complex or bool bounds", op->name);
  /* 16-bit floats past one vector: CPU's vectorized loop adds j * step to each chunk's first
   * value, rounding differently from the per-element formula, at chunk bounds this library
   * cannot know; logspace's 16-bit exponents also differ there. Those fall back. (An out=
   * tensor's type is not seen here.) */
  int di = op->code == TP_LIN_LOGSPACE ? 4 : 3; /* logspace has base before dtype */
  if (op->code == TP_LIN_LOGSPACE && (n_args < 4 || args[3].kind != TP_ARG_FLOAT))
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected base", op->name);
  tp_dtype_t want = n_args > di && args[di].kind == TP_ARG_INT ? (tp_dtype_t)args[di].i : TP_DTYPE_F32;
  if ((want == TP_DTYPE_BF16 || want == TP_DTYPE_F16) && args[2].i > 16)
    return tp_make_status(TP_UNIMPLEMENTED, "%s: 16-bit float over 16 steps", op->name);
  memset(&out[0], 0, sizeof(out[0]));
  out[0].dtype = want;
  out[0].ndim = 1;
  out[0].sizes[0] = args[2].i;
  args[0].scalar_dtype = args[1].scalar_dtype = TP_DTYPE_F64;
  *n_out = 1;
  return NULL;
}

void tp_emit_linspace(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                      int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                      tp_hlo_value_t *out) {
  tp_dtype_t dt = out_meta[0].dtype;
  if (dt == TP_DTYPE_BOOL || !(tp_dtype_is_float(dt) || tp_dtype_is_int(dt))) {
    tp_hlo_fail(b, tp_make_status(TP_UNIMPLEMENTED, "%s: output type", op->name));
    return;
  }
  int64_t n = args[2].i;
  if (n == 0) {
    out[0] = tp_hlo_broadcast_to(b, tp_hlo_constant(b, dt, 0), 1, &n);
    return;
  }
  tp_dtype_t st = tp_dtype_is_float(dt) ? dt : TP_DTYPE_F64; /* step_t */
  /* start.to<scalar_t>() then to step_t */
  tp_hlo_value_t s = tp_hlo_convert(b, tp_hlo_convert(b, in[0], dt), st);
  tp_hlo_value_t e = tp_hlo_convert(b, tp_hlo_convert(b, in[1], dt), st);
  if (n == 1) { /* logspace: pow(base, start as double), start not rounded to the type */
    tp_hlo_value_t v = op->code == TP_LIN_LOGSPACE ? tp_hlo_convert(b, in[0], TP_DTYPE_F64) : s;
    if (op->code == TP_LIN_LOGSPACE) v = tp_hlo_binary(b, TP_HLO_POW, tp_k(b, args[3].f, v), v);
    out[0] = tp_hlo_convert(b, tp_hlo_broadcast_to(b, v, 1, &n), dt);
    return;
  }
  tp_hlo_value_t step = tp_hlo_binary(b, TP_HLO_DIV, tp_hlo_binary(b, TP_HLO_SUB, e, s),
                                      tp_hlo_constant(b, st, (double)(n - 1)));
  tp_hlo_value_t idx = tp_hlo_iota(b, TP_DTYPE_I64, 1, &n, 0);
  tp_hlo_value_t first = tp_hlo_compare(b, TP_CMP_LT, idx, tp_k(b, (double)(n / 2), idx));
  tp_hlo_value_t back = tp_hlo_binary(b, TP_HLO_SUB, tp_k(b, (double)(n - 1), idx), idx);
  tp_hlo_value_t stepv = tp_hlo_broadcast_to(b, step, 1, &n);
  tp_hlo_value_t lo = tp_hlo_binary(b, TP_HLO_ADD, tp_hlo_broadcast_to(b, s, 1, &n),
                                    tp_hlo_binary(b, TP_HLO_MUL, stepv, tp_hlo_convert(b, idx, st)));
  tp_hlo_value_t hi = tp_hlo_binary(b, TP_HLO_SUB, tp_hlo_broadcast_to(b, e, 1, &n),
                                    tp_hlo_binary(b, TP_HLO_MUL, stepv, tp_hlo_convert(b, back, st)));
  tp_hlo_value_t v = tp_hlo_select(b, first, lo, hi);
  if (op->code == TP_LIN_LOGSPACE) {
    v = tp_hlo_convert(b, v, TP_DTYPE_F64);
    v = tp_hlo_binary(b, TP_HLO_POW, tp_k(b, args[3].f, v), v);
  }
  out[0] = tp_hlo_convert(b, v, dt);
}

/* arange.start_step(start, end, step, dtype?, ...) / arange.start_out(start, end, step): start +
 * step * i in double, ceil((end - start) / step) elements, converted to the output type (float32
 * by default when a bound is a float, else int64). */
tp_status_t *tp_infer_arange(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                             int *n_out) {
  (void)op;
  double v[3];
  bool any_float = false;
  for (int i = 0; i < 3; i++) {
    if (i >= n_args || args[i].kind != TP_ARG_SCALAR)
      return tp_make_status(TP_INVALID_ARGUMENT, "arange: expected start, end and step");
    bool f = tp_dtype_is_float(args[i].meta.dtype);
    any_float = any_float || f;
    v[i] = f ? args[i].f : (double)args[i].i;
  }
  if (v[2] == 0) return tp_make_status(TP_INVALID_ARGUMENT, "step must be nonzero");
  if ((v[2] > 0 && v[1] < v[0]) || (v[2] < 0 && v[1] > v[0]))
    return tp_make_status(TP_INVALID_ARGUMENT, "upper bound and larger bound inconsistent with step sign");
  tp_dtype_t dt = n_args > 3 && args[3].kind == TP_ARG_INT ? (tp_dtype_t)args[3].i
                  : any_float ? TP_DTYPE_F32 : TP_DTYPE_I64;
  *n_out = 1;
  out[0].dtype = dt;
  out[0].ndim = 1;
  out[0].sizes[0] = (int64_t)ceil((v[1] - v[0]) / v[2]);
  for (int i = 0; i < 3; i++) args[i].scalar_dtype = TP_DTYPE_F64;
  return NULL;
}

void tp_emit_arange(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                    const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  (void)op, (void)args, (void)n_args;
  const tp_meta_t *om = out_meta;
  tp_meta_t f64 = {.dtype = TP_DTYPE_F64, .ndim = 1, .sizes = {om->sizes[0]}};
  tp_hlo_value_t io = tp_hlo_iota(b, TP_DTYPE_F64, 1, om->sizes, 0);
  tp_hlo_value_t v = tp_add(b, tp_emit_cast_to(b, in[0], &f64), tp_mul(b, io, tp_emit_cast_to(b, in[2], &f64)));
  out[0] = tp_hlo_convert(b, v, om->dtype);
}
