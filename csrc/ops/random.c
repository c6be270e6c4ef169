/* Random family: uniform, normal, integer random_, bernoulli (float p), native_dropout and
 * multinomial from the device generator.
 * Counter-based: every element hashes (key, its index) with splitmix64, so results depend only
 * on the generator's seed and offset (the glue passes key = f(seed, offset) as the last argument
 * and advances the offset per call), never on execution order. Streams differ from PyTorch's CPU
 * generator: tests compare distributions, not values. */
#include <math.h>
#include <stdint.h>

#include "ops/families.h"

/* splitmix64 over int64 (wrapping multiply, logical shifts). */
static tp_hlo_value_t mix(tp_hlo_builder_t *b, tp_hlo_value_t z) {
  const int64_t m1 = (int64_t)0xBF58476D1CE4E5B9ull, m2 = (int64_t)0x94D049BB133111EBull;
  tp_hlo_value_t s30 = tp_k(b, 30, z), s27 = tp_k(b, 27, z),
                 s31 = tp_k(b, 31, z);
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
      tp_hlo_binary(b, TP_HLO_MUL, tp_hlo_binary(b, TP_HLO_ADD, idx, tp_k(b, 1, idx)),
                    tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, golden), 1, &n)));
  return mix(b, z);
}

/* Uniform numbers of |dtype| (f64 or f32 precision) in |shape|, from scalar i64 |key|: in
 * [0, 1) as k 2^-bits (53 or 24 bits), or with |open| strictly inside (0, 1) as the midpoints
 * (k + 1/2) 2^-bits (52 or 23 bits), so that log(u) and log(-log(u)) are finite. */
static tp_hlo_value_t uniform_bits(tp_hlo_builder_t *b, tp_hlo_value_t key, const tp_meta_t *shape,
                                   tp_dtype_t dtype, bool open) {
  tp_hlo_value_t z = random_bits(b, key, shape);
  bool wide = dtype == TP_DTYPE_F64;
  int bits = (wide ? 53 : 24) - open;
  tp_hlo_value_t top = tp_hlo_binary(b, TP_HLO_SHR_L, z, tp_k(b, 64 - bits, z));
  tp_hlo_value_t u = tp_hlo_convert(b, top, wide ? TP_DTYPE_F64 : TP_DTYPE_F32);
  if (open) u = tp_hlo_binary(b, TP_HLO_ADD, u, tp_k(b, 0.5, u));
  u = tp_hlo_binary(b, TP_HLO_MUL, u, tp_k(b, ldexp(1, -bits), u));
  return tp_hlo_reshape(b, u, shape->ndim, shape->sizes);
}

static tp_hlo_value_t uniform01(tp_hlo_builder_t *b, tp_hlo_value_t key, const tp_meta_t *shape,
                                tp_dtype_t dtype) {
  return uniform_bits(b, key, shape, dtype, false);
}

static tp_hlo_value_t uniform_open(tp_hlo_builder_t *b, tp_hlo_value_t key, const tp_meta_t *shape,
                                   tp_dtype_t dtype) {
  return uniform_bits(b, key, shape, dtype, true);
}

/* multinomial(self, num_samples, replacement, generator, key, count): self is [R, K] or [K].
 * Sampling is the exponential race: category k wins a draw with probability p_k / sum(p) when
 * it maximizes log p_k - log E_k over independent E_k ~ Exp(1) (E = -log u); the n best of one
 * race are n draws without replacement, n races are n draws with it. The count pass (op.h) is
 * not a count but CPU's checks of the values, which CPU makes before sampling: its verdict is 0,
 * or the code of the check that fails first (multinomial_error). */
enum { MN_NEGATIVE = 1, MN_INFINITE = 2, MN_ZERO_SUM = 3 };

static bool multinomial_race_once(const tp_op_arg_t *args) { return !args[2].i || args[1].i == 1; }

static tp_status_t *multinomial_error(const tp_op_arg_t *args, int64_t code) {
  /* Without replacement (and for one sample) CPU checks the whole tensor, then the row sums; with
   * it, each row in turn, its elements in order, then its sum. */
  bool once = multinomial_race_once(args);
  const char *what = code == MN_ZERO_SUM ? "invalid multinomial distribution (sum of probabilities <= 0)"
                     : once ? "probability tensor contains either `inf`, `nan` or element < 0"
                     : code == MN_NEGATIVE ? "invalid multinomial distribution (encountering probability entry < 0)"
                                           : "invalid multinomial distribution (encountering probability entry = infinity or NaN)";
  return tp_make_status(TP_INVALID_ARGUMENT, "%s", what);
}

static tp_status_t *infer_multinomial(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                      tp_meta_t *out, int *n_out) {
  if (n_args < 6 || args[0].kind != TP_ARG_TENSOR || args[1].kind != TP_ARG_INT ||
      args[2].kind != TP_ARG_INT || args[n_args - 2].kind != TP_ARG_SCALAR)
    return tp_make_status(TP_UNIMPLEMENTED, "%s: unexpected arguments", op->name);
  args[n_args - 2].scalar_dtype = TP_DTYPE_I64;
  const tp_meta_t *p = &args[0].meta;
  int64_t n = args[1].i, k = p->ndim > 0 ? p->sizes[p->ndim - 1] : 0;
  if (p->ndim < 1 || p->ndim > 2)
    return tp_make_status(TP_INVALID_ARGUMENT, "prob_dist must be 1 or 2 dim");
  if (!tp_dtype_is_float(p->dtype))
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "multinomial only supports floating-point dtypes for input, got: %s",
                          tp_dtype_scalar_type_name(p->dtype));
  if (n <= 0) return tp_make_status(TP_INVALID_ARGUMENT, "cannot sample n_sample <= 0 samples");
  if (!args[2].i && n > k)
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  if (k > ((int64_t)1 << 24))
    return tp_make_status(TP_INVALID_ARGUMENT, "number of categories cannot exceed 2^24");
  /* The checks of the values: a count pass whose "count" is the verdict. */
  tp_op_arg_t *verdict = args[n_args - 1].kind == TP_ARG_INT ? &args[n_args - 1] : NULL;
  int64_t rows;
  TP_RETURN_IF_ERROR(tp_infer_count(op, verdict, 0, true, out, n_out, &rows));
  if (rows < 0) return NULL;
  if (verdict->i != 0) return multinomial_error(args, verdict->i);
  out[0] = (tp_meta_t){.dtype = TP_DTYPE_I64, .ndim = p->ndim};
  if (p->ndim == 2) out[0].sizes[0] = p->sizes[0];
  out[0].sizes[p->ndim - 1] = n;
  *n_out = 1;
  return NULL;
}

/* Reduces dim |d| of |x| with |op| from scalar |init|. */
static tp_hlo_value_t reduce1(tp_hlo_builder_t *b, tp_hlo_value_t x, double init, tp_hlo_binary_t op, int d) {
  int64_t dim = d;
  tp_hlo_value_t i = tp_dtype_is_float(x.dtype) ? tp_hlo_constant(b, x.dtype, init)
                                                : tp_hlo_constant_i(b, x.dtype, (int64_t)init);
  return tp_hlo_reduce(b, x, i, op, 1, &dim);
}

/* The first index of the largest element along the last dim of |x| (no NaN). */
static tp_hlo_value_t argmax_last(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  int last = x.ndim - 1;
  int64_t bd[TP_MAX_DIMS];
  for (int i = 0; i < last; i++) bd[i] = i;
  tp_hlo_value_t m = tp_hlo_broadcast_in_dim(b, reduce1(b, x, -INFINITY, TP_HLO_MAX, last), x.ndim, x.dims, bd);
  tp_hlo_value_t iota = tp_hlo_iota(b, TP_DTYPE_I64, x.ndim, x.dims, last);
  tp_hlo_value_t at = tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_EQ, x, m), iota,
                                    tp_k(b, (double)x.dims[last], iota));
  return reduce1(b, at, (double)x.dims[last], TP_HLO_MIN, last);
}

/* The verdict of CPU's checks of probabilities |p| ([R, K]): 0 or an MN_ code, as 0-d i64. */
static tp_hlo_value_t multinomial_verdict(tp_hlo_builder_t *b, tp_hlo_value_t p, bool once) {
  int64_t r = p.dims[0], k = p.dims[1];
  tp_hlo_value_t negative = tp_hlo_unary(b, TP_HLO_NOT, tp_hlo_compare(b, TP_CMP_GE, p, tp_k(b, 0, p)));
  tp_hlo_value_t infinite = tp_hlo_unary(b, TP_HLO_IS_INF, p);
  tp_hlo_value_t zero_sum = tp_hlo_compare(b, TP_CMP_LE, reduce1(b, p, 0, TP_HLO_ADD, 1),
                                           tp_hlo_broadcast_to(b, tp_hlo_constant(b, p.dtype, 0), 1, &r));
  tp_hlo_value_t none = tp_hlo_constant_i(b, TP_DTYPE_I64, 0);
  if (once) {
    tp_hlo_value_t bad = reduce1(b, tp_hlo_binary(b, TP_HLO_OR, negative, infinite), 0, TP_HLO_OR, 1);
    bad = reduce1(b, bad, 0, TP_HLO_OR, 0);
    tp_hlo_value_t zero = reduce1(b, zero_sum, 0, TP_HLO_OR, 0);
    return tp_hlo_select(b, bad, tp_hlo_constant_i(b, TP_DTYPE_I64, MN_NEGATIVE),
                         tp_hlo_select(b, zero, tp_hlo_constant_i(b, TP_DTYPE_I64, MN_ZERO_SUM), none));
  }
  /* Each check is an event at a place in CPU's order (row r: its elements r(K+1) + j, then its
   * sum at r(K+1) + K); the first failing one, place * 4 + code, is the least. */
  const double never = 9.0e18;
  tp_hlo_value_t place = tp_hlo_binary(
      b, TP_HLO_ADD, tp_hlo_iota(b, TP_DTYPE_I64, 2, p.dims, 1),
      tp_hlo_binary(b, TP_HLO_MUL, tp_hlo_iota(b, TP_DTYPE_I64, 2, p.dims, 0),
                    tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, k + 1), 2, p.dims)));
  place = tp_hlo_binary(b, TP_HLO_MUL, place, tp_k(b, 4, place));
  tp_hlo_value_t code = tp_hlo_select(b, negative, tp_k(b, MN_NEGATIVE, place),
                                      tp_hlo_select(b, infinite, tp_k(b, MN_INFINITE, place),
                                                    tp_k(b, never, place)));
  tp_hlo_value_t first = reduce1(b, reduce1(b, tp_hlo_binary(b, TP_HLO_ADD, place, code), never, TP_HLO_MIN, 1),
                                 never, TP_HLO_MIN, 0);
  tp_hlo_value_t row_place = tp_hlo_binary(
      b, TP_HLO_MUL, tp_hlo_iota(b, TP_DTYPE_I64, 1, &r, 0),
      tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, 4 * (k + 1)), 1, &r));
  row_place = tp_hlo_binary(b, TP_HLO_ADD, row_place, tp_k(b, (double)(4 * k + MN_ZERO_SUM), row_place));
  tp_hlo_value_t row_first = reduce1(b, tp_hlo_select(b, zero_sum, row_place, tp_k(b, never, row_place)),
                                     never, TP_HLO_MIN, 0);
  first = tp_hlo_binary(b, TP_HLO_MIN, first, row_first);
  tp_hlo_value_t four = tp_hlo_constant_i(b, TP_DTYPE_I64, 4);
  return tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_LT, first, tp_hlo_constant_i(b, TP_DTYPE_I64, (int64_t)never)),
                       tp_hlo_binary(b, TP_HLO_REM, first, four), none);
}

static void emit_multinomial(tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                             const tp_hlo_value_t *in, const tp_meta_t *om, tp_hlo_value_t *out) {
  const tp_meta_t *pm = &args[0].meta;
  tp_dtype_t md = pm->dtype == TP_DTYPE_F64 ? TP_DTYPE_F64 : TP_DTYPE_F32;
  int64_t k = pm->sizes[pm->ndim - 1], r = pm->ndim == 2 ? pm->sizes[0] : 1, n = args[1].i;
  int64_t rk[2] = {r, k};
  tp_hlo_value_t p = tp_hlo_reshape(b, tp_hlo_convert(b, in[0], md), 2, rk);
  bool once = multinomial_race_once(args);
  if (tp_count_pass(&args[n_args - 1])) {
    out[0] = multinomial_verdict(b, p, once);
    return;
  }
  tp_hlo_value_t key = in[n_args - 2], logp = tp_hlo_unary(b, TP_HLO_LOG, p), idx;
  if (once) {
    tp_meta_t shape = {.dtype = md, .ndim = 2, .sizes = {r, k}};
    tp_hlo_value_t u = uniform_open(b, key, &shape, md);
    tp_hlo_value_t score = tp_hlo_binary(b, TP_HLO_SUB, logp,
                                         tp_hlo_unary(b, TP_HLO_LOG, tp_hlo_unary(b, TP_HLO_NEG, tp_hlo_unary(b, TP_HLO_LOG, u))));
    if (n == 1) {
      idx = argmax_last(b, score);
    } else {
      tp_hlo_value_t ops[2] = {score, tp_hlo_iota(b, TP_DTYPE_I64, 2, rk, 1)}, sorted[2];
      tp_hlo_sort(b, ops, 2, 1, true, sorted);
      int64_t lo[2] = {0, 0}, hi[2] = {r, n}, step[2] = {1, 1};
      idx = tp_hlo_slice(b, sorted[1], lo, hi, step);
    }
  } else {
    tp_meta_t shape = {.dtype = md, .ndim = 3, .sizes = {r, n, k}};
    tp_hlo_value_t u = uniform_open(b, key, &shape, md);
    int64_t bd[2] = {0, 2};
    tp_hlo_value_t score = tp_hlo_binary(b, TP_HLO_SUB, tp_hlo_broadcast_in_dim(b, logp, 3, shape.sizes, bd),
                                         tp_hlo_unary(b, TP_HLO_LOG, tp_hlo_unary(b, TP_HLO_NEG, tp_hlo_unary(b, TP_HLO_LOG, u))));
    idx = argmax_last(b, score);
  }
  out[0] = tp_hlo_reshape(b, idx, om->ndim, om->sizes);
}

/* uniform(self, from, to, *, generator), bernoulli.p(self, p, *, generator),
 * native_dropout(input, p, train): each with the generator key appended as the last argument. */
tp_status_t *tp_infer_random(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                             int *n_out) {
  if (op->code == TP_RAND_MULTINOMIAL) return infer_multinomial(op, args, n_args, out, n_out);
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
  if (op->code == TP_RAND_MULTINOMIAL) {
    emit_multinomial(b, args, n_args, in, out_meta, out);
    return;
  }
  tp_hlo_value_t key = in[n_args - 1];
  const tp_meta_t *m = &out_meta[0];
  if (op->code == TP_RAND_INT) {
    bool has_from = n_args > 4; /* (self, [from,] to, generator, key) */
    int64_t from = has_from ? args[1].i : 0, to = args[has_from ? 2 : 1].i;
    tp_hlo_value_t z = random_bits(b, key, m);
    z = tp_hlo_binary(b, TP_HLO_SHR_L, z, tp_k(b, 1, z));
    z = tp_hlo_binary(b, TP_HLO_REM, z, tp_k(b, (double)(to - from), z));
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
        b, TP_HLO_MUL, tp_k(b, -2, u1),
        tp_hlo_unary(b, TP_HLO_LOG, tp_hlo_binary(b, TP_HLO_SUB, tp_k(b, 1, u1), u1))));
    tp_hlo_value_t z = tp_hlo_binary(b, TP_HLO_MUL, r, tp_hlo_unary(b, TP_HLO_COS, tp_hlo_binary(
        b, TP_HLO_MUL, u2, tp_k(b, 6.283185307179586, u2))));
    double mean = n_args > 2 && args[1].kind == TP_ARG_FLOAT ? args[1].f : 0;
    double std = n_args > 3 && args[2].kind == TP_ARG_FLOAT ? args[2].f : 1;
    z = tp_hlo_binary(b, TP_HLO_ADD, tp_hlo_binary(b, TP_HLO_MUL, z, tp_k(b, std, z)),
                      tp_k(b, mean, z));
    out[0] = tp_hlo_convert(b, z, m->dtype);
    return;
  }
  tp_dtype_t ud = m->dtype == TP_DTYPE_F64 ? TP_DTYPE_F64 : TP_DTYPE_F32;
  tp_hlo_value_t u = uniform01(b, key, m, ud);
  switch ((tp_random_t)op->code) {
    case TP_RAND_UNIFORM: {
      double from = args[1].kind == TP_ARG_FLOAT ? args[1].f : 0, to = args[2].kind == TP_ARG_FLOAT ? args[2].f : 1;
      u = tp_hlo_binary(b, TP_HLO_ADD, tp_k(b, from, u),
                        tp_hlo_binary(b, TP_HLO_MUL, u, tp_k(b, to - from, u)));
      out[0] = tp_hlo_convert(b, u, m->dtype);
      return;
    }
    case TP_RAND_BERNOULLI:
      out[0] = tp_hlo_convert(b, tp_hlo_compare(b, TP_CMP_LT, u, tp_k(b, args[1].f, u)),
                              m->dtype);
      return;
    case TP_RAND_DROPOUT: {
      double p = args[1].f;
      bool train = !(n_args > 2 && args[2].kind == TP_ARG_INT && !args[2].i);
      tp_hlo_value_t x = tp_hlo_convert(b, in[0], tp_math_dtype(m->dtype));
      if (!train || p == 0) {
        out[0] = in[0];
        out[1] = tp_hlo_convert(b, tp_k(b, 1, x), TP_DTYPE_BOOL);
        return;
      }
      tp_hlo_value_t keep = tp_hlo_compare(b, TP_CMP_GE, u, tp_k(b, p, u));
      tp_hlo_value_t scale = tp_k(b, p < 1 ? 1.0 / (1.0 - p) : 0.0, x);
      tp_hlo_value_t y = tp_hlo_select(b, keep, tp_hlo_binary(b, TP_HLO_MUL, x, scale),
                                       tp_k(b, 0, x));
      out[0] = tp_hlo_convert(b, y, m->dtype);
      out[1] = keep;
      return;
    }
    default: return; /* normal, the integer draws and multinomial returned above */
  }
}
