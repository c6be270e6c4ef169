/* Random family: uniform, normal, integer random_, bernoulli (float p) and native_dropout from
 * the device generator.
 * Counter-based: every element hashes (key, its index) with splitmix64, so results depend only
 * on the generator's seed and offset (the glue passes key = f(seed, offset) as the last argument
 * and advances the offset per call), never on execution order. Streams differ from PyTorch's CPU
 * generator: tests compare distributions, not values. */
#include <stdint.h>

#include "ops/families.h"

/* splitmix64 over int64 (wrapping multiply, logical shifts). */
static tp_hlo_value_t mix(tp_hlo_builder_t *b, tp_hlo_value_t z) {
  const int64_t m1 = (int64_t)0xBF58476D1CE4E5B9ull, m2 = (int64_t)0x94D049BB133111EBull;
  tp_hlo_value_t s30 = tp_emit_full_like(b, 30, &z), s27 = tp_emit_full_like(b, 27, &z),
                 s31 = tp_emit_full_like(b, 31, &z);
  z = tp_hlo_binary(b, TP_HLO_MUL, tp_hlo_binary(b, TP_HLO_XOR, z, tp_hlo_binary(b, TP_HLO_SHR_L, z, s30)),
                    tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, m1), z.ndim, z.dims));
  z = tp_hlo_binary(b, TP_HLO_MUL, tp_hlo_binary(b, TP_HLO_XOR, z, tp_hlo_binary(b, TP_HLO_SHR_L, z, s27)),
                    tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, m2), z.ndim, z.dims));
  return tp_hlo_binary(b, TP_HLO_XOR, z, tp_hlo_binary(b, TP_HLO_SHR_L, z, s31));
}

/* 64 random bits (as i64) per element of a flat [numel(shape)], from scalar i64 |key|. */
static tp_hlo_value_t random_bits(tp_hlo_builder_t *b, tp_hlo_value_t key, const tp_meta_t *shape) {
  int64_t n = tp_meta_numel(shape);
  tp_hlo_value_t idx = tp_hlo_iota(b, TP_DTYPE_I64, 1, &n, 0);
  const int64_t golden = (int64_t)0x9E3779B97F4A7C15ull;
  tp_hlo_value_t z = tp_hlo_binary(
      b, TP_HLO_ADD, tp_hlo_broadcast_to(b, key, 1, &n),
      tp_hlo_binary(b, TP_HLO_MUL, tp_hlo_binary(b, TP_HLO_ADD, idx, tp_emit_full_like(b, 1, &idx)),
                    tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, golden), 1, &n)));
  return mix(b, z);
}

/* Uniform [0, 1) numbers of |dtype| (f64 or f32 precision) in |shape|, from scalar i64 |key|. */
static tp_hlo_value_t uniform01(tp_hlo_builder_t *b, tp_hlo_value_t key, const tp_meta_t *shape,
                                tp_dtype_t dtype) {
  tp_hlo_value_t z = random_bits(b, key, shape);
  bool wide = dtype == TP_DTYPE_F64;
  tp_hlo_value_t top = tp_hlo_binary(b, TP_HLO_SHR_L, z, tp_emit_full_like(b, wide ? 11 : 40, &z));
  tp_hlo_value_t u = tp_hlo_convert(b, top, wide ? TP_DTYPE_F64 : TP_DTYPE_F32);
  u = tp_hlo_binary(b, TP_HLO_MUL, u, tp_emit_full_like(b, wide ? 0x1p-53 : 0x1p-24, &u));
  return tp_hlo_reshape(b, u, shape->ndim, shape->sizes);
}

/* uniform(self, from, to, *, generator), bernoulli.p(self, p, *, generator),
 * native_dropout(input, p, train): each with the generator key appended as the last argument. */
tp_status_t *tp_infer_random(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                             int *n_out) {
  if (n_args < 2 || args[0].kind != TP_ARG_TENSOR || args[n_args - 1].kind != TP_ARG_SCALAR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: unexpected arguments", op->name);
  args[n_args - 1].scalar_dtype = TP_DTYPE_I64;
  out[0] = args[0].meta;
  *n_out = 1;
  tp_random_t code = (tp_random_t)op->code;
  if (code == TP_RAND_INT) {
    /* random.from(self, from, to) / random.to(self, to): integers in [from, to) */
    bool has_from = n_args > 4; /* (self, [from,] to, generator, key) */
    int64_t from = has_from && args[1].kind == TP_ARG_INT ? args[1].i : 0;
    const tp_op_arg_t *to = &args[has_from ? 2 : 1];
    if (to->kind != TP_ARG_INT) /* to=None: the type's own range */
      return tp_make_status(TP_UNIMPLEMENTED, "%s without an upper bound", op->name);
    if (from >= to->i)
      return tp_make_status(TP_INVALID_ARGUMENT,
                            "random_ expects 'from' to be less than 'to', but got from=%lld >= to=%lld",
                            (long long)from, (long long)to->i);
    return NULL;
  }
  if (code == TP_RAND_UNIFORM && n_args > 3 && args[1].kind == TP_ARG_FLOAT &&
      args[2].kind == TP_ARG_FLOAT && !(args[1].f <= args[2].f))
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "uniform_ expects to return a [from, to) range, but found from=%g > to=%g",
                          args[1].f, args[2].f);
  if (code == TP_RAND_NORMAL && n_args > 3 && args[2].kind == TP_ARG_FLOAT && args[2].f < 0)
    return tp_make_status(TP_INVALID_ARGUMENT, "normal expects std >= 0.0, but found std %g",
                          args[2].f);
  if (code != TP_RAND_BERNOULLI && !tp_dtype_is_float(out[0].dtype))
    return tp_make_status(TP_UNIMPLEMENTED, "%s on an integer tensor", op->name);
  if (code == TP_RAND_DROPOUT) {
    if (args[1].kind != TP_ARG_FLOAT || args[1].f < 0 || args[1].f > 1)
      return tp_make_status(TP_INVALID_ARGUMENT,
                            "dropout probability has to be between 0 and 1, but got %g", args[1].f);
    out[1] = out[0];
    out[1].dtype = TP_DTYPE_BOOL;
    *n_out = 2;
  }
  if (code == TP_RAND_BERNOULLI && (args[1].kind != TP_ARG_FLOAT || args[1].f < 0 || args[1].f > 1))
    return tp_make_status(TP_INVALID_ARGUMENT, "bernoulli_ expects p to be in [0, 1], but got p=%g",
                          args[1].f);
  return NULL;
}

void tp_emit_random(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                    int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                    tp_hlo_value_t *out) {
  tp_hlo_value_t key = in[n_args - 1];
  const tp_meta_t *m = &out_meta[0];
  if (op->code == TP_RAND_INT) {
    bool has_from = n_args > 4; /* (self, [from,] to, generator, key) */
    int64_t from = has_from ? args[1].i : 0, to = args[has_from ? 2 : 1].i;
    tp_hlo_value_t z = random_bits(b, key, m);
    z = tp_hlo_binary(b, TP_HLO_SHR_L, z, tp_emit_full_like(b, 1, &z));
    z = tp_hlo_binary(b, TP_HLO_REM, z, tp_emit_full_like(b, (double)(to - from), &z));
    z = tp_hlo_binary(b, TP_HLO_ADD, z, tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, from), z.ndim, z.dims));
    out[0] = tp_hlo_convert(b, tp_hlo_reshape(b, z, m->ndim, m->sizes), m->dtype);
    return;
  }
  if (op->code == TP_RAND_NORMAL) {
    /* Box-Muller over two independent uniform streams (the second from a shifted key). */
    tp_dtype_t ud = m->dtype == TP_DTYPE_F64 ? TP_DTYPE_F64 : TP_DTYPE_F32;
    tp_hlo_value_t u1 = uniform01(b, key, m, ud);
    tp_hlo_value_t key2 = tp_hlo_binary(b, TP_HLO_ADD, key,
                                        tp_hlo_constant_i(b, TP_DTYPE_I64, (int64_t)0x5851F42D4C957F2Dull));
    tp_hlo_value_t u2 = uniform01(b, key2, m, ud);
    tp_hlo_value_t r = tp_hlo_unary(b, TP_HLO_SQRT, tp_hlo_binary(
        b, TP_HLO_MUL, tp_emit_full_like(b, -2, &u1),
        tp_hlo_unary(b, TP_HLO_LOG, tp_hlo_binary(b, TP_HLO_SUB, tp_emit_full_like(b, 1, &u1), u1))));
    tp_hlo_value_t z = tp_hlo_binary(b, TP_HLO_MUL, r, tp_hlo_unary(b, TP_HLO_COS, tp_hlo_binary(
        b, TP_HLO_MUL, u2, tp_emit_full_like(b, 6.283185307179586, &u2))));
    double mean = n_args > 2 && args[1].kind == TP_ARG_FLOAT ? args[1].f : 0;
    double std = n_args > 3 && args[2].kind == TP_ARG_FLOAT ? args[2].f : 1;
    z = tp_hlo_binary(b, TP_HLO_ADD, tp_hlo_binary(b, TP_HLO_MUL, z, tp_emit_full_like(b, std, &z)),
                      tp_emit_full_like(b, mean, &z));
    out[0] = tp_hlo_convert(b, z, m->dtype);
    return;
  }
  tp_dtype_t ud = m->dtype == TP_DTYPE_F64 ? TP_DTYPE_F64 : TP_DTYPE_F32;
  tp_hlo_value_t u = uniform01(b, key, m, ud);
  switch ((tp_random_t)op->code) {
    case TP_RAND_UNIFORM: {
      double from = args[1].kind == TP_ARG_FLOAT ? args[1].f : 0, to = args[2].kind == TP_ARG_FLOAT ? args[2].f : 1;
      u = tp_hlo_binary(b, TP_HLO_ADD, tp_emit_full_like(b, from, &u),
                        tp_hlo_binary(b, TP_HLO_MUL, u, tp_emit_full_like(b, to - from, &u)));
      out[0] = tp_hlo_convert(b, u, m->dtype);
      return;
    }
    case TP_RAND_BERNOULLI:
      out[0] = tp_hlo_convert(b, tp_hlo_compare(b, TP_CMP_LT, u, tp_emit_full_like(b, args[1].f, &u)),
                              m->dtype);
      return;
    case TP_RAND_DROPOUT: {
      double p = args[1].f;
      bool train = !(n_args > 2 && args[2].kind == TP_ARG_INT && !args[2].i);
      tp_hlo_value_t x = tp_hlo_convert(b, in[0], tp_math_dtype(m->dtype));
      if (!train || p == 0) {
        out[0] = in[0];
        out[1] = tp_hlo_convert(b, tp_emit_full_like(b, 1, &x), TP_DTYPE_BOOL);
        return;
      }
      tp_hlo_value_t keep = tp_hlo_compare(b, TP_CMP_GE, u, tp_emit_full_like(b, p, &u));
      tp_hlo_value_t scale = tp_emit_full_like(b, p < 1 ? 1.0 / (1.0 - p) : 0.0, &x);
      tp_hlo_value_t y = tp_hlo_select(b, keep, tp_hlo_binary(b, TP_HLO_MUL, x, scale),
                                       tp_emit_full_like(b, 0, &x));
      out[0] = tp_hlo_convert(b, y, m->dtype);
      out[1] = keep;
      return;
    }
    default: return; /* normal and the integer draws returned above */
  }
}
