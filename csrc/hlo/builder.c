/* StableHLO text builder. Emits the generic op form, which every plugin's parser accepts across
 * StableHLO versions. Depends on base/ only. */
#include "hlo/builder.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char *data;
  size_t len, cap;
} strbuf_t;

struct tp_hlo_builder {
  strbuf_t params;
  strbuf_t body;
  strbuf_t functions; /* tp_hlo_add_functions': placed after @main */
  int64_t function_keys[16]; /* the keys of what |functions| holds */
  int n_function_keys;
  int next_id;
  int n_params;
  tp_status_t *error;
  /* Open stablehlo.while loops, innermost last: the op's id and its carried values' types. */
  struct {
    int id, n;
    tp_hlo_value_t carried[TP_HLO_WHILE_MAX];
  } loops[TP_HLO_WHILE_DEPTH];
  int n_loops;
  bool has_check; /* |check| holds the OR of the values given to tp_hlo_check */
  tp_hlo_value_t check;
  bool xla_cpu; /* tp_hlo_builder_set_xla_cpu */
  bool whole_graph; /* tp_hlo_builder_set_whole_graph */
  int replicas; /* tp_hlo_builder_set_replicas; 0 reads as 1 */
};

static void sb_vappend(tp_hlo_builder_t *b, strbuf_t *s, const char *fmt, va_list ap) {
  if (b->error) return;
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (s->len + (size_t)n + 1 > s->cap) {
    size_t cap = s->cap ? s->cap : 1024;
    while (cap < s->len + (size_t)n + 1) cap *= 2;
    char *d = realloc(s->data, cap);
    if (!d) {
      b->error = tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory building StableHLO");
      return;
    }
    s->data = d;
    s->cap = cap;
  }
  vsnprintf(s->data + s->len, (size_t)n + 1, fmt, ap);
  s->len += (size_t)n;
}

static void sb_append(tp_hlo_builder_t *b, strbuf_t *s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void sb_append(tp_hlo_builder_t *b, strbuf_t *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sb_vappend(b, s, fmt, ap);
  va_end(ap);
}

#define EMIT(...) sb_append(b, &b->body, __VA_ARGS__)

tp_status_t *tp_hlo_builder_create(tp_hlo_builder_t **out_builder) {
  tp_hlo_builder_t *b = calloc(1, sizeof(*b));
  if (!b) return tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
  *out_builder = b;
  return NULL;
}

void tp_hlo_builder_set_xla_cpu(tp_hlo_builder_t *b, bool on) { b->xla_cpu = on; }
bool tp_hlo_builder_xla_cpu(const tp_hlo_builder_t *b) { return b->xla_cpu; }
void tp_hlo_builder_set_whole_graph(tp_hlo_builder_t *b, bool on) { b->whole_graph = on; }
bool tp_hlo_builder_whole_graph(const tp_hlo_builder_t *b) { return b->whole_graph; }
void tp_hlo_builder_set_replicas(tp_hlo_builder_t *b, int n) { b->replicas = n; }
int tp_hlo_builder_replicas(const tp_hlo_builder_t *b) { return b->replicas > 1 ? b->replicas : 1; }

void tp_hlo_builder_free(tp_hlo_builder_t *b) {
  if (!b) return;
  free(b->params.data);
  free(b->body.data);
  free(b->functions.data);
  tp_status_free(b->error);
  free(b);
}

void tp_hlo_fail(tp_hlo_builder_t *b, tp_status_t *status) {
  b->error = tp_status_join(b->error, status);
}

bool tp_hlo_ok(const tp_hlo_builder_t *b) { return b->error == NULL; }

int64_t tp_hlo_numel(const tp_hlo_value_t *v) {
  int64_t n = 1;
  for (int i = 0; i < v->ndim; i++) n *= v->dims[i];
  return n;
}

void tp_hlo_type_str(char *buf, size_t size, tp_dtype_t dtype, int ndim, const int64_t *dims) {
  size_t off = (size_t)snprintf(buf, size, "tensor<");
  for (int i = 0; i < ndim && off < size; i++)
    off += (size_t)snprintf(buf + off, size - off, "%" PRId64 "x", dims[i]);
  if (off < size) snprintf(buf + off, size - off, "%s>", tp_dtype_hlo_name(dtype));
}

/* Type strings are built into small rotating buffers so one EMIT can use several. */
#define TYPE_BUF 192
typedef struct {
  char s[TYPE_BUF];
} tstr_t;
static tstr_t ty(const tp_hlo_value_t *v) {
  tstr_t t;
  tp_hlo_type_str(t.s, sizeof(t.s), v->dtype, v->ndim, v->dims);
  return t;
}
static tstr_t ty_of(tp_dtype_t dtype, int ndim, const int64_t *dims) {
  tstr_t t;
  tp_hlo_type_str(t.s, sizeof(t.s), dtype, ndim, dims);
  return t;
}

/* "array<i64: 1, 2>" */
typedef struct {
  char s[32 * TP_MAX_DIMS + 16];
} astr_t;
static astr_t i64_array(const int64_t *v, int n, int list_form) {
  astr_t a;
  size_t off = (size_t)snprintf(a.s, sizeof(a.s), list_form ? "[" : "array<i64");
  for (int i = 0; i < n; i++)
    off += (size_t)snprintf(a.s + off, sizeof(a.s) - off, "%s%" PRId64,
                            list_form ? (i ? ", " : "") : (i ? ", " : ": "), v[i]);
  snprintf(a.s + off, sizeof(a.s) - off, list_form ? "]" : ">");
  return a;
}

static tp_hlo_value_t bad_value(void) {
  tp_hlo_value_t v;
  memset(&v, 0, sizeof(v));
  v.id = -1;
  v.dtype = TP_DTYPE_INVALID;
  return v;
}

static tp_hlo_value_t new_value(tp_hlo_builder_t *b, tp_dtype_t dtype, int ndim,
                                const int64_t *dims) {
  if (ndim < 0 || ndim > TP_MAX_DIMS) {
    tp_hlo_fail(b, tp_make_status(TP_UNIMPLEMENTED, "rank %d exceeds the supported %d", ndim,
                                  TP_MAX_DIMS));
    return bad_value();
  }
  tp_hlo_value_t v;
  memset(&v, 0, sizeof(v));
  v.id = b->next_id++;
  v.dtype = dtype;
  v.ndim = ndim;
  for (int i = 0; i < ndim; i++) v.dims[i] = dims[i];
  return v;
}

static bool check(tp_hlo_builder_t *b, bool cond, const char *what) {
  if (!cond && !b->error) b->error = tp_make_status(TP_INTERNAL, "StableHLO builder: %s", what);
  return cond && !b->error;
}

static bool same_type(const tp_hlo_value_t *x, const tp_hlo_value_t *y);

static bool live(tp_hlo_builder_t *b, const tp_hlo_value_t *v) {
  return check(b, v->id >= 0, "use of an invalid value");
}

tp_hlo_value_t tp_hlo_param(tp_hlo_builder_t *b, tp_dtype_t dtype, int ndim, const int64_t *dims,
                            int alias_output) {
  tp_hlo_value_t v = new_value(b, dtype, ndim, dims);
  if (v.id < 0) return v;
  sb_append(b, &b->params, "%s%%v%d: %s", b->n_params ? ", " : "", v.id, ty(&v).s);
  if (alias_output >= 0) sb_append(b, &b->params, " {tf.aliasing_output = %d : i32}", alias_output);
  b->n_params++;
  return v;
}

void tp_hlo_check(tp_hlo_builder_t *b, tp_hlo_value_t bad, tp_hlo_value_t code) {
  if (b->n_loops || !live(b, &bad)) return; /* a loop body's values do not reach `main`'s return */
  int64_t dims[TP_MAX_DIMS];
  for (int i = 0; i < bad.ndim; i++) dims[i] = i;
  tp_hlo_value_t any = tp_hlo_reduce(b, bad, tp_hlo_constant_i(b, TP_DTYPE_BOOL, 0), TP_HLO_OR, bad.ndim, dims);
  tp_hlo_value_t hit = tp_hlo_select(b, any, tp_hlo_convert(b, code, TP_DTYPE_I32),
                                     tp_hlo_constant_i(b, TP_DTYPE_I32, TP_CHECK_NONE));
  b->check = b->has_check ? tp_hlo_binary(b, TP_HLO_MAX, b->check, hit) : hit;
  b->has_check = true;
}

bool tp_hlo_check_flag(tp_hlo_builder_t *b, tp_hlo_value_t *out_flag) {
  if (!b->has_check) return false;
  *out_flag = b->check;
  return true;
}

tp_status_t *tp_hlo_finish(tp_hlo_builder_t *b, const tp_hlo_value_t *outs, int n_outs,
                           char **out_text) {
  *out_text = NULL;
  for (int i = 0; i < n_outs; i++) live(b, &outs[i]);
  check(b, b->n_loops == 0, "while loop left open");
  if (b->error) {
    tp_status_t *s = b->error;
    b->error = NULL;
    return s;
  }
  strbuf_t m = {0};
  sb_append(b, &m, "module @tp {\n  func.func public @main(%s) -> (",
            b->params.data ? b->params.data : "");
  for (int i = 0; i < n_outs; i++) sb_append(b, &m, "%s%s", i ? ", " : "", ty(&outs[i]).s);
  sb_append(b, &m, ") {\n%s    \"func.return\"(", b->body.data ? b->body.data : "");
  for (int i = 0; i < n_outs; i++) sb_append(b, &m, "%s%%v%d", i ? ", " : "", outs[i].id);
  sb_append(b, &m, ") : (");
  for (int i = 0; i < n_outs; i++) sb_append(b, &m, "%s%s", i ? ", " : "", ty(&outs[i]).s);
  sb_append(b, &m, ") -> ()\n  }\n%s}\n", b->functions.data ? b->functions.data : "");
  if (b->error) {
    free(m.data);
    tp_status_t *s = b->error;
    b->error = NULL;
    return s;
  }
  *out_text = m.data;
  return NULL;
}

/* A float literal MLIR parses exactly: decimal for finite values, the bit pattern otherwise. */
static void float_literal(char *buf, size_t n, tp_dtype_t dtype, double value) {
  if (isfinite(value)) {
    /* MLIR wants a digit after a point before any exponent: 1e-08 must read 1.0e-08. */
    char digits[40];
    snprintf(digits, sizeof(digits), "%.17g", value);
    char *e = strpbrk(digits, "eE");
    if (strchr(digits, '.') || strpbrk(digits, "n")) snprintf(buf, n, "%s", digits);
    else if (e) snprintf(buf, n, "%.*s.0%s", (int)(e - digits), digits, e);
    else snprintf(buf, n, "%s.0", digits);
    return;
  }
  uint64_t bits;
  int neg = signbit(value) != 0;
  if (isnan(value)) {
    bits = dtype == TP_DTYPE_F64 ? 0x7FF8000000000000ull
         : dtype == TP_DTYPE_F32 ? 0x7FC00000u
         : dtype == TP_DTYPE_BF16 ? 0x7FC0u : 0x7E00u;
    neg = 0;
  } else {
    bits = dtype == TP_DTYPE_F64 ? 0x7FF0000000000000ull
         : dtype == TP_DTYPE_F32 ? 0x7F800000u
         : dtype == TP_DTYPE_BF16 ? 0x7F80u : 0x7C00u;
  }
  if (neg) bits |= 1ull << (tp_dtype_size(dtype) * 8 - 1);
  snprintf(buf, n, "0x%" PRIX64, bits);
}

tp_hlo_value_t tp_hlo_constant(tp_hlo_builder_t *b, tp_dtype_t dtype, double value) {
  if (tp_dtype_is_complex(dtype)) return tp_hlo_constant_c(b, dtype, value, 0);
  if (!tp_dtype_is_float(dtype)) return tp_hlo_constant_i(b, dtype, (int64_t)value);
  tp_hlo_value_t v = new_value(b, dtype, 0, NULL);
  char lit[64];
  float_literal(lit, sizeof(lit), dtype, value);
  EMIT("    %%v%d = \"stablehlo.constant\"() {value = dense<%s> : %s} : () -> %s\n", v.id, lit,
       ty(&v).s, ty(&v).s);
  return v;
}

tp_hlo_value_t tp_hlo_constant_c(tp_hlo_builder_t *b, tp_dtype_t dtype, double re, double im) {
  /* Built from its parts, so non-finite components need no complex literal syntax. */
  tp_dtype_t part = tp_dtype_real_part(dtype);
  return tp_hlo_complex(b, tp_hlo_constant(b, part, re), tp_hlo_constant(b, part, im));
}

tp_hlo_value_t tp_hlo_constant_i(tp_hlo_builder_t *b, tp_dtype_t dtype, int64_t value) {
  if (tp_dtype_is_float(dtype) || tp_dtype_is_complex(dtype)) return tp_hlo_constant(b, dtype, (double)value);
  tp_hlo_value_t v = new_value(b, dtype, 0, NULL);
  char lit[64];
  if (dtype == TP_DTYPE_BOOL)
    snprintf(lit, sizeof(lit), "%s", value ? "true" : "false");
  else if (dtype == TP_DTYPE_U8)
    snprintf(lit, sizeof(lit), "%" PRIu64, (uint64_t)(uint8_t)value);
  else
    snprintf(lit, sizeof(lit), "%" PRId64, value);
  EMIT("    %%v%d = \"stablehlo.constant\"() {value = dense<%s> : %s} : () -> %s\n", v.id, lit,
       ty(&v).s, ty(&v).s);
  return v;
}

tp_hlo_value_t tp_hlo_iota(tp_hlo_builder_t *b, tp_dtype_t dtype, int ndim, const int64_t *dims,
                           int dim) {
  if (!check(b, dim >= 0 && dim < ndim, "iota dimension out of range")) return bad_value();
  tp_hlo_value_t v = new_value(b, dtype, ndim, dims);
  EMIT("    %%v%d = \"stablehlo.iota\"() {iota_dimension = %d : i64} : () -> %s\n", v.id, dim,
       ty(&v).s);
  return v;
}

static tp_hlo_value_t unary_generic(tp_hlo_builder_t *b, const char *name, tp_hlo_value_t x,
                                    tp_dtype_t dtype, int ndim, const int64_t *dims) {
  if (!live(b, &x)) return bad_value();
  tp_hlo_value_t v = new_value(b, dtype, ndim, dims);
  EMIT("    %%v%d = \"%s\"(%%v%d) : (%s) -> %s\n", v.id, name, x.id, ty(&x).s, ty(&v).s);
  return v;
}

tp_hlo_value_t tp_hlo_convert(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_dtype_t to) {
  if (x.dtype == to) return x;
  if (tp_dtype_is_complex(x.dtype) && !tp_dtype_is_complex(to) && x.id >= 0) {
    if (to == TP_DTYPE_BOOL) { /* PyTorch: true when either part is nonzero */
      tp_hlo_value_t re = tp_hlo_convert(b, tp_hlo_real(b, x), to);
      tp_hlo_value_t im = tp_hlo_convert(b, tp_hlo_imag(b, x), to);
      return tp_hlo_binary(b, TP_HLO_OR, re, im);
    }
    return tp_hlo_convert(b, tp_hlo_real(b, x), to); /* PyTorch drops the imaginary part */
  }
  if (tp_dtype_is_complex(to) && x.id >= 0) {
    tp_dtype_t part = tp_dtype_real_part(to);
    if (tp_dtype_is_complex(x.dtype)) /* another complex width */
      return tp_hlo_complex(b, tp_hlo_convert(b, tp_hlo_real(b, x), part),
                            tp_hlo_convert(b, tp_hlo_imag(b, x), part));
    tp_hlo_value_t re = tp_hlo_convert(b, x, part);
    tp_hlo_value_t zero = tp_hlo_broadcast_to(b, tp_hlo_constant(b, part, 0), re.ndim, re.dims);
    return tp_hlo_complex(b, re, zero);
  }
  if (to == TP_DTYPE_BOOL && x.id >= 0) {
    /* PyTorch's bool cast is "!= 0"; StableHLO convert to i1 is not specified that way. */
    tp_hlo_value_t zero = tp_hlo_broadcast_to(b, tp_hlo_constant(b, x.dtype, 0), x.ndim, x.dims);
    return tp_hlo_compare(b, TP_CMP_NE, x, zero);
  }
  return unary_generic(b, "stablehlo.convert", x, to, x.ndim, x.dims);
}

tp_hlo_value_t tp_hlo_bitcast(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_dtype_t to, int ndim,
                              const int64_t *dims) {
  return unary_generic(b, "stablehlo.bitcast_convert", x, to, ndim, dims);
}

tp_hlo_value_t tp_hlo_complex(tp_hlo_builder_t *b, tp_hlo_value_t re, tp_hlo_value_t im) {
  if (!live(b, &re) || !live(b, &im)) return bad_value();
  if (!check(b, same_type(&re, &im) && (re.dtype == TP_DTYPE_F32 || re.dtype == TP_DTYPE_F64),
             "complex parts must be f32 or f64 of one shape"))
    return bad_value();
  tp_hlo_value_t v = new_value(b, tp_dtype_to_complex(re.dtype), re.ndim, re.dims);
  EMIT("    %%v%d = \"stablehlo.complex\"(%%v%d, %%v%d) : (%s, %s) -> %s\n", v.id, re.id, im.id,
       ty(&re).s, ty(&im).s, ty(&v).s);
  return v;
}

tp_hlo_value_t tp_hlo_real(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  if (!tp_dtype_is_complex(x.dtype)) return x;
  return unary_generic(b, "stablehlo.real", x, tp_dtype_real_part(x.dtype), x.ndim, x.dims);
}

tp_hlo_value_t tp_hlo_imag(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  if (!live(b, &x)) return bad_value();
  if (!tp_dtype_is_complex(x.dtype)) /* a real value's imaginary part is zero */
    return tp_hlo_broadcast_to(b, tp_hlo_constant(b, x.dtype, 0), x.ndim, x.dims);
  return unary_generic(b, "stablehlo.imag", x, tp_dtype_real_part(x.dtype), x.ndim, x.dims);
}

tp_hlo_value_t tp_hlo_fft(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_fft_t type, int n,
                          const int64_t *lengths) {
  static const char *const names[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
  if (!live(b, &x)) return bad_value();
  if (!check(b, n >= 1 && n <= 3 && n <= x.ndim, "fft over 1 to 3 trailing dims")) return bad_value();
  bool real_in = type == TP_HLO_RFFT;
  tp_dtype_t cdt = tp_dtype_to_complex(x.dtype);
  if (!check(b, real_in ? tp_dtype_is_float(x.dtype) && cdt != TP_DTYPE_INVALID
                        : tp_dtype_is_complex(x.dtype),
             "fft operand type"))
    return bad_value();
  int64_t dims[TP_MAX_DIMS];
  for (int i = 0; i < x.ndim; i++) dims[i] = x.dims[i];
  int last = x.ndim - 1;
  for (int i = 0; i < n; i++) {
    int d = x.ndim - n + i;
    bool ok = type == TP_HLO_IRFFT && d == last ? x.dims[d] == lengths[i] / 2 + 1
                                                : x.dims[d] == lengths[i];
    if (!check(b, ok, "fft length does not match the operand")) return bad_value();
  }
  if (type == TP_HLO_RFFT) dims[last] = lengths[n - 1] / 2 + 1;
  if (type == TP_HLO_IRFFT) dims[last] = lengths[n - 1];
  tp_hlo_value_t v = new_value(b, type == TP_HLO_IRFFT ? tp_dtype_real_part(x.dtype) : cdt,
                               x.ndim, dims);
  EMIT("    %%v%d = \"stablehlo.fft\"(%%v%d) {fft_type = #stablehlo<fft_type %s>, fft_length = %s} "
       ": (%s) -> %s\n",
       v.id, x.id, names[type], i64_array(lengths, n, 0).s, ty(&x).s, ty(&v).s);
  return v;
}

tp_hlo_value_t tp_hlo_reshape(tp_hlo_builder_t *b, tp_hlo_value_t x, int ndim,
                              const int64_t *dims) {
  if (!live(b, &x)) return bad_value();
  bool same = ndim == x.ndim;
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    n *= dims[i];
    if (same && dims[i] != x.dims[i]) same = false;
  }
  if (same) return x;
  if (!check(b, n == tp_hlo_numel(&x), "reshape changes the element count")) return bad_value();
  return unary_generic(b, "stablehlo.reshape", x, x.dtype, ndim, dims);
}

tp_hlo_value_t tp_hlo_broadcast_in_dim(tp_hlo_builder_t *b, tp_hlo_value_t x, int ndim,
                                       const int64_t *dims, const int64_t *bcast_dims) {
  if (!live(b, &x)) return bad_value();
  for (int i = 0; i < x.ndim; i++)
    if (!check(b, bcast_dims[i] >= 0 && bcast_dims[i] < ndim &&
                      (x.dims[i] == 1 || x.dims[i] == dims[bcast_dims[i]]),
               "broadcast_in_dim shapes do not match"))
      return bad_value();
  tp_hlo_value_t v = new_value(b, x.dtype, ndim, dims);
  EMIT("    %%v%d = \"stablehlo.broadcast_in_dim\"(%%v%d) {broadcast_dimensions = %s} : (%s) -> "
       "%s\n",
       v.id, x.id, i64_array(bcast_dims, x.ndim, 0).s, ty(&x).s, ty(&v).s);
  return v;
}

tp_hlo_value_t tp_hlo_broadcast_to(tp_hlo_builder_t *b, tp_hlo_value_t x, int ndim,
                                   const int64_t *dims) {
  if (!live(b, &x)) return bad_value();
  if (!check(b, x.ndim <= ndim, "broadcast to a lower rank")) return bad_value();
  bool same = x.ndim == ndim;
  for (int i = 0; same && i < ndim; i++) same = x.dims[i] == dims[i];
  if (same) return x;
  int64_t bd[TP_MAX_DIMS];
  for (int i = 0; i < x.ndim; i++) bd[i] = ndim - x.ndim + i;
  return tp_hlo_broadcast_in_dim(b, x, ndim, dims, bd);
}

tp_hlo_value_t tp_hlo_slice(tp_hlo_builder_t *b, tp_hlo_value_t x, const int64_t *start,
                            const int64_t *limit, const int64_t *stride) {
  if (!live(b, &x)) return bad_value();
  int64_t dims[TP_MAX_DIMS];
  bool whole = true;
  for (int i = 0; i < x.ndim; i++) {
    if (!check(b, start[i] >= 0 && limit[i] <= x.dims[i] && start[i] <= limit[i] && stride[i] > 0,
               "slice out of bounds"))
      return bad_value();
    dims[i] = (limit[i] - start[i] + stride[i] - 1) / stride[i];
    whole = whole && start[i] == 0 && limit[i] == x.dims[i] && stride[i] == 1;
  }
  if (whole) return x;
  tp_hlo_value_t v = new_value(b, x.dtype, x.ndim, dims);
  EMIT("    %%v%d = \"stablehlo.slice\"(%%v%d) {start_indices = %s, limit_indices = %s, "
       "strides = %s} : (%s) -> %s\n",
       v.id, x.id, i64_array(start, x.ndim, 0).s, i64_array(limit, x.ndim, 0).s,
       i64_array(stride, x.ndim, 0).s, ty(&x).s, ty(&v).s);
  return v;
}

tp_hlo_value_t tp_hlo_transpose(tp_hlo_builder_t *b, tp_hlo_value_t x, const int64_t *perm) {
  if (!live(b, &x)) return bad_value();
  int64_t dims[TP_MAX_DIMS];
  bool identity = true;
  for (int i = 0; i < x.ndim; i++) {
    if (!check(b, perm[i] >= 0 && perm[i] < x.ndim, "bad permutation")) return bad_value();
    dims[i] = x.dims[perm[i]];
    identity = identity && perm[i] == i;
  }
  if (identity) return x;
  tp_hlo_value_t v = new_value(b, x.dtype, x.ndim, dims);
  EMIT("    %%v%d = \"stablehlo.transpose\"(%%v%d) {permutation = %s} : (%s) -> %s\n", v.id, x.id,
       i64_array(perm, x.ndim, 0).s, ty(&x).s, ty(&v).s);
  return v;
}

static const char *const kUnaryNames[] = {
    [TP_HLO_NEG] = "stablehlo.negate",      [TP_HLO_ABS] = "stablehlo.abs",
    [TP_HLO_EXP] = "stablehlo.exponential", [TP_HLO_EXPM1] = "stablehlo.exponential_minus_one",
    [TP_HLO_LOG] = "stablehlo.log",         [TP_HLO_LOG1P] = "stablehlo.log_plus_one",
    [TP_HLO_SQRT] = "stablehlo.sqrt",       [TP_HLO_RSQRT] = "stablehlo.rsqrt",
    [TP_HLO_CBRT] = "stablehlo.cbrt",       [TP_HLO_TANH] = "stablehlo.tanh",
    [TP_HLO_LOGISTIC] = "stablehlo.logistic", [TP_HLO_SIN] = "stablehlo.sine",
    [TP_HLO_COS] = "stablehlo.cosine",      [TP_HLO_TAN] = "stablehlo.tan",
    [TP_HLO_FLOOR] = "stablehlo.floor",     [TP_HLO_CEIL] = "stablehlo.ceil",
    [TP_HLO_ROUND_EVEN] = "stablehlo.round_nearest_even", [TP_HLO_SIGN] = "stablehlo.sign",
    [TP_HLO_NOT] = "stablehlo.not",         [TP_HLO_IS_FINITE] = "stablehlo.is_finite",
    [TP_HLO_ASIN] = "chlo.asin",   [TP_HLO_ACOS] = "chlo.acos",   [TP_HLO_ATAN] = "chlo.atan",
    [TP_HLO_SINH] = "chlo.sinh",   [TP_HLO_COSH] = "chlo.cosh",   [TP_HLO_ASINH] = "chlo.asinh",
    [TP_HLO_ACOSH] = "chlo.acosh", [TP_HLO_ATANH] = "chlo.atanh", [TP_HLO_ERF] = "chlo.erf",
    [TP_HLO_ERFC] = "chlo.erfc",   [TP_HLO_ERF_INV] = "chlo.erf_inv",
    [TP_HLO_LGAMMA] = "chlo.lgamma", [TP_HLO_DIGAMMA] = "chlo.digamma",
    [TP_HLO_IS_INF] = "chlo.is_inf", [TP_HLO_IS_POS_INF] = "chlo.is_pos_inf",
    [TP_HLO_IS_NEG_INF] = "chlo.is_neg_inf", [TP_HLO_BESSEL_I1E] = "chlo.bessel_i1e",
};

tp_hlo_value_t tp_hlo_optimization_barrier(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  return unary_generic(b, "stablehlo.optimization_barrier", x, x.dtype, x.ndim, x.dims);
}

tp_hlo_value_t tp_hlo_unary(tp_hlo_builder_t *b, tp_hlo_unary_t op, tp_hlo_value_t x) {
  bool to_bool = op == TP_HLO_IS_FINITE || op == TP_HLO_IS_INF || op == TP_HLO_IS_POS_INF ||
                 op == TP_HLO_IS_NEG_INF;
  tp_dtype_t rt = to_bool ? TP_DTYPE_BOOL : op == TP_HLO_ABS ? tp_dtype_real_part(x.dtype) : x.dtype;
  return unary_generic(b, kUnaryNames[op], x, rt, x.ndim, x.dims);
}

static const char *const kBinaryNames[] = {
    [TP_HLO_ADD] = "stablehlo.add",      [TP_HLO_SUB] = "stablehlo.subtract",
    [TP_HLO_MUL] = "stablehlo.multiply", [TP_HLO_DIV] = "stablehlo.divide",
    [TP_HLO_REM] = "stablehlo.remainder", [TP_HLO_MAX] = "stablehlo.maximum",
    [TP_HLO_MIN] = "stablehlo.minimum",  [TP_HLO_POW] = "stablehlo.power",
    [TP_HLO_AND] = "stablehlo.and",      [TP_HLO_OR] = "stablehlo.or",
    [TP_HLO_XOR] = "stablehlo.xor",      [TP_HLO_ATAN2] = "stablehlo.atan2",
    [TP_HLO_SHL] = "stablehlo.shift_left", [TP_HLO_SHR_A] = "stablehlo.shift_right_arithmetic",
    [TP_HLO_SHR_L] = "stablehlo.shift_right_logical", [TP_HLO_NEXT_AFTER] = "chlo.next_after",
    [TP_HLO_POLYGAMMA] = "chlo.polygamma", [TP_HLO_ZETA] = "chlo.zeta",
};

static bool same_type(const tp_hlo_value_t *x, const tp_hlo_value_t *y) {
  if (x->dtype != y->dtype || x->ndim != y->ndim) return false;
  for (int i = 0; i < x->ndim; i++)
    if (x->dims[i] != y->dims[i]) return false;
  return true;
}

tp_hlo_value_t tp_hlo_binary(tp_hlo_builder_t *b, tp_hlo_binary_t op, tp_hlo_value_t x,
                             tp_hlo_value_t y) {
  if (!live(b, &x) || !live(b, &y)) return bad_value();
  if (!check(b, same_type(&x, &y), "binary operands differ in type")) return bad_value();
  tp_hlo_value_t v = new_value(b, x.dtype, x.ndim, x.dims);
  EMIT("    %%v%d = \"%s\"(%%v%d, %%v%d) : (%s, %s) -> %s\n", v.id, kBinaryNames[op],
       x.id, y.id, ty(&x).s, ty(&y).s, ty(&v).s);
  return v;
}

tp_hlo_value_t tp_hlo_compare(tp_hlo_builder_t *b, tp_hlo_cmp_t dir, tp_hlo_value_t x,
                              tp_hlo_value_t y) {
  static const char *const names[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
  if (!live(b, &x) || !live(b, &y)) return bad_value();
  if (!check(b, same_type(&x, &y), "compare operands differ in type")) return bad_value();
  const char *kind = tp_dtype_is_float(x.dtype) || tp_dtype_is_complex(x.dtype) ? "FLOAT"
                     : tp_dtype_is_unsigned(x.dtype) ? "UNSIGNED" : "SIGNED";
  tp_hlo_value_t v = new_value(b, TP_DTYPE_BOOL, x.ndim, x.dims);
  EMIT("    %%v%d = \"stablehlo.compare\"(%%v%d, %%v%d) {comparison_direction = "
       "#stablehlo<comparison_direction %s>, compare_type = #stablehlo<comparison_type %s>} : "
       "(%s, %s) -> %s\n",
       v.id, x.id, y.id, names[dir], kind, ty(&x).s, ty(&y).s, ty(&v).s);
  return v;
}

tp_hlo_value_t tp_hlo_select(tp_hlo_builder_t *b, tp_hlo_value_t pred, tp_hlo_value_t on_true,
                             tp_hlo_value_t on_false) {
  if (!live(b, &pred) || !live(b, &on_true) || !live(b, &on_false)) return bad_value();
  if (!check(b, same_type(&on_true, &on_false) && pred.dtype == TP_DTYPE_BOOL,
             "select operands differ in type"))
    return bad_value();
  tp_hlo_value_t v = new_value(b, on_true.dtype, on_true.ndim, on_true.dims);
  EMIT("    %%v%d = \"stablehlo.select\"(%%v%d, %%v%d, %%v%d) : (%s, %s, %s) -> %s\n", v.id,
       pred.id, on_true.id, on_false.id, ty(&pred).s, ty(&on_true).s, ty(&on_false).s,
       ty(&v).s);
  return v;
}

static bool contains(const int64_t *v, int n, int64_t x) {
  for (int i = 0; i < n; i++)
    if (v[i] == x) return true;
  return false;
}

tp_hlo_value_t tp_hlo_cholesky(tp_hlo_builder_t *b, tp_hlo_value_t x, bool lower) {
  if (!live(b, &x)) return bad_value();
  if (!check(b, x.ndim >= 2 && x.dims[x.ndim - 1] == x.dims[x.ndim - 2], "cholesky of a non-square"))
    return bad_value();
  tp_hlo_value_t v = new_value(b, x.dtype, x.ndim, x.dims);
  EMIT("    %%v%d = \"stablehlo.cholesky\"(%%v%d) {lower = %s} : (%s) -> %s\n", v.id, x.id,
       lower ? "true" : "false", ty(&x).s, ty(&v).s);
  return v;
}

tp_hlo_value_t tp_hlo_triangular_solve(tp_hlo_builder_t *b, tp_hlo_value_t a, tp_hlo_value_t rhs,
                                       bool left_side, bool lower, bool unit_diagonal,
                                       bool transpose_a) {
  if (!live(b, &a) || !live(b, &rhs)) return bad_value();
  if (!check(b, a.ndim >= 2 && a.ndim == rhs.ndim && a.dtype == rhs.dtype,
             "triangular_solve operands differ in rank or type"))
    return bad_value();
  tp_hlo_value_t v = new_value(b, rhs.dtype, rhs.ndim, rhs.dims);
  EMIT("    %%v%d = \"stablehlo.triangular_solve\"(%%v%d, %%v%d) {left_side = %s, lower = %s, "
       "unit_diagonal = %s, transpose_a = #stablehlo<transpose %s>} : (%s, %s) -> %s\n",
       v.id, a.id, rhs.id, left_side ? "true" : "false", lower ? "true" : "false",
       unit_diagonal ? "true" : "false", transpose_a ? "TRANSPOSE" : "NO_TRANSPOSE", ty(&a).s,
       ty(&rhs).s, ty(&v).s);
  return v;
}

tp_hlo_value_t tp_hlo_dot_general(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t y,
                                  int n_batch, const int64_t *x_batch, const int64_t *y_batch,
                                  int n_contract, const int64_t *x_contract,
                                  const int64_t *y_contract, tp_dtype_t out_dtype) {
  if (!live(b, &x) || !live(b, &y)) return bad_value();
  int64_t dims[TP_MAX_DIMS];
  int nd = 0;
  for (int i = 0; i < n_batch; i++) {
    if (!check(b, x.dims[x_batch[i]] == y.dims[y_batch[i]], "dot batch dims differ"))
      return bad_value();
    dims[nd++] = x.dims[x_batch[i]];
  }
  for (int i = 0; i < n_contract; i++)
    if (!check(b, x.dims[x_contract[i]] == y.dims[y_contract[i]], "dot contracting dims differ"))
      return bad_value();
  for (int i = 0; i < x.ndim; i++)
    if (!contains(x_batch, n_batch, i) && !contains(x_contract, n_contract, i))
      dims[nd++] = x.dims[i];
  for (int i = 0; i < y.ndim; i++)
    if (!contains(y_batch, n_batch, i) && !contains(y_contract, n_contract, i))
      dims[nd++] = y.dims[i];
  tp_hlo_value_t v = new_value(b, out_dtype, nd, dims);
  EMIT("    %%v%d = \"stablehlo.dot_general\"(%%v%d, %%v%d) {dot_dimension_numbers = "
       "#stablehlo.dot<lhs_batching_dimensions = %s, rhs_batching_dimensions = %s, "
       "lhs_contracting_dimensions = %s, rhs_contracting_dimensions = %s>} : (%s, %s) -> %s\n",
       v.id, x.id, y.id, i64_array(x_batch, n_batch, 1).s, i64_array(y_batch, n_batch, 1).s,
       i64_array(x_contract, n_contract, 1).s, i64_array(y_contract, n_contract, 1).s, ty(&x).s,
       ty(&y).s, ty(&v).s);
  return v;
}

/* Emits a region `^bb0(a, b): r = op(a, b); return r` over scalars of |dtype|, or, when |op| is
 * negative, a region returning its second argument (overwrite). */
static void emit_scalar_region(tp_hlo_builder_t *b, tp_dtype_t dtype, int op) {
  int a = b->next_id++, c = b->next_id++;
  tstr_t s = ty_of(dtype, 0, NULL);
  EMIT("      ^bb0(%%v%d: %s, %%v%d: %s):\n", a, s.s, c, s.s);
  if (op < 0) {
    EMIT("        \"stablehlo.return\"(%%v%d) : (%s) -> ()\n", c, s.s);
    return;
  }
  int r = b->next_id++;
  EMIT("        %%v%d = \"%s\"(%%v%d, %%v%d) : (%s, %s) -> %s\n", r, kBinaryNames[op], a,
       c, s.s, s.s, s.s);
  EMIT("        \"stablehlo.return\"(%%v%d) : (%s) -> ()\n", r, s.s);
}

tp_hlo_value_t tp_hlo_reduce(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t init,
                             tp_hlo_binary_t op, int n_dims, const int64_t *dims) {
  if (!live(b, &x) || !live(b, &init)) return bad_value();
  if (!check(b, init.ndim == 0 && init.dtype == x.dtype, "reduce init must be a scalar of x's type"))
    return bad_value();
  if (n_dims == 0) return x;
  int64_t odims[TP_MAX_DIMS];
  int nd = 0;
  for (int i = 0; i < x.ndim; i++)
    if (!contains(dims, n_dims, i)) odims[nd++] = x.dims[i];
  /* Adjacent dims that are both reduced (or both kept) merge into one, a free reshape: XLA's CPU
   * backend reduces [8,32,256] over {0,1} element by element, but [256,256] over {0} a vector
   * at a time (measured 45 us against 5). A fused producer would bring the slow form back, so
   * on that backend the input of a reduction that keeps the innermost dim is materialized. */
  int64_t mdims[TP_MAX_DIMS] = {0}, mred[TP_MAX_DIMS] = {0};
  int m = 0, n_mred = 0;
  for (int i = 0; i < x.ndim; i++) {
    bool red = contains(dims, n_dims, i);
    if (i > 0 && red == contains(dims, n_dims, i - 1)) {
      mdims[m - 1] *= x.dims[i];
      continue;
    }
    if (red) mred[n_mred++] = m;
    mdims[m++] = x.dims[i];
  }
  if (b->xla_cpu && mred[n_mred - 1] != m - 1)
    x = tp_hlo_optimization_barrier(b, x);
  x = tp_hlo_reshape(b, x, m, mdims);
  int64_t kdims[TP_MAX_DIMS];
  int nk = 0;
  for (int i = 0; i < m; i++)
    if (!contains(mred, n_mred, i)) kdims[nk++] = mdims[i];
  tp_hlo_value_t v = new_value(b, x.dtype, nk, kdims);
  EMIT("    %%v%d = \"stablehlo.reduce\"(%%v%d, %%v%d) ({\n", v.id, x.id, init.id);
  emit_scalar_region(b, x.dtype, (int)op);
  EMIT("    }) {dimensions = %s} : (%s, %s) -> %s\n", i64_array(mred, n_mred, 0).s, ty(&x).s,
       ty(&init).s, ty(&v).s);
  return tp_hlo_reshape(b, v, nd, odims);
}

tp_hlo_value_t tp_hlo_reduce_window(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t init,
                                    tp_hlo_binary_t op, const int64_t *window,
                                    const int64_t *pad_lo, const int64_t *pad_hi) {
  if (!live(b, &x) || !live(b, &init)) return bad_value();
  int64_t dims[TP_MAX_DIMS] = {0};
  for (int i = 0; i < x.ndim; i++) dims[i] = x.dims[i] + pad_lo[i] + pad_hi[i] - window[i] + 1;
  tp_hlo_value_t v = new_value(b, x.dtype, x.ndim, dims);
  char pad[64 * TP_MAX_DIMS] = "dense<[";
  size_t off = strlen(pad);
  for (int i = 0; i < x.ndim; i++)
    off += (size_t)snprintf(pad + off, sizeof(pad) - off, "%s[%" PRId64 ", %" PRId64 "]",
                            i ? ", " : "", pad_lo[i], pad_hi[i]);
  snprintf(pad + off, sizeof(pad) - off, "]> : tensor<%dx2xi64>", x.ndim);
  EMIT("    %%v%d = \"stablehlo.reduce_window\"(%%v%d, %%v%d) ({\n", v.id, x.id, init.id);
  emit_scalar_region(b, x.dtype, (int)op);
  EMIT("    }) {window_dimensions = %s, padding = %s} : (%s, %s) -> %s\n",
       i64_array(window, x.ndim, 0).s, pad, ty(&x).s, ty(&init).s, ty(&v).s);
  return v;
}

tp_hlo_value_t tp_hlo_convolution(tp_hlo_builder_t *b, tp_hlo_value_t lhs, tp_hlo_value_t rhs,
                                  const char *spec, int n_spatial, const int64_t *strides,
                                  const int64_t *pad_lo, const int64_t *pad_hi,
                                  const int64_t *lhs_dil, const int64_t *rhs_dil,
                                  int64_t feature_groups, int64_t batch_groups, tp_dtype_t out_dtype,
                                  const int64_t *out_dims) {
  if (!live(b, &lhs) || !live(b, &rhs)) return bad_value();
  for (int i = 0; i < lhs.ndim; i++)
    if (!check(b, out_dims[i] >= 0, "convolution output size is negative")) return bad_value();
  tp_hlo_value_t v = new_value(b, out_dtype, lhs.ndim, out_dims);
  char pad[64 * TP_MAX_DIMS] = "dense<[";
  size_t off = strlen(pad);
  for (int i = 0; i < n_spatial; i++)
    off += (size_t)snprintf(pad + off, sizeof(pad) - off, "%s[%" PRId64 ", %" PRId64 "]",
                            i ? ", " : "", pad_lo[i], pad_hi[i]);
  snprintf(pad + off, sizeof(pad) - off, "]> : tensor<%dx2xi64>", n_spatial);
  EMIT("    %%v%d = \"stablehlo.convolution\"(%%v%d, %%v%d) {batch_group_count = %" PRId64
       " : i64, dimension_numbers = #stablehlo.conv<%s>, feature_group_count = %" PRId64
       " : i64, lhs_dilation = %s, padding = %s, rhs_dilation = %s, window_strides = %s} : "
       "(%s, %s) -> %s\n",
       v.id, lhs.id, rhs.id, batch_groups, spec, feature_groups,
       i64_array(lhs_dil, n_spatial, 0).s, pad, i64_array(rhs_dil, n_spatial, 0).s,
       i64_array(strides, n_spatial, 0).s, ty(&lhs).s, ty(&rhs).s, ty(&v).s);
  return v;
}

tp_hlo_value_t tp_hlo_reverse(tp_hlo_builder_t *b, tp_hlo_value_t x, int n_dims,
                              const int64_t *dims) {
  if (!live(b, &x)) return bad_value();
  if (n_dims == 0) return x;
  tp_hlo_value_t v = new_value(b, x.dtype, x.ndim, x.dims);
  EMIT("    %%v%d = \"stablehlo.reverse\"(%%v%d) {dimensions = %s} : (%s) -> %s\n", v.id, x.id,
       i64_array(dims, n_dims, 0).s, ty(&x).s, ty(&v).s);
  return v;
}

tp_hlo_value_t tp_hlo_gather_1d(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t indices) {
  if (!live(b, &x) || !live(b, &indices)) return bad_value();
  if (!check(b, x.ndim == 1 && tp_dtype_is_int(indices.dtype), "gather_1d needs 1-D x"))
    return bad_value();
  /* An empty operand has no slice to take (XLA rejects the gather): the result, empty whenever
   * the indices are in range, is zeros of its shape. */
  if (x.dims[0] == 0)
    return tp_hlo_broadcast_to(b, tp_hlo_constant(b, x.dtype, 0), indices.ndim, indices.dims);
  tp_hlo_value_t v = new_value(b, x.dtype, indices.ndim, indices.dims);
  EMIT("    %%v%d = \"stablehlo.gather\"(%%v%d, %%v%d) {dimension_numbers = "
       "#stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0], "
       "index_vector_dim = %d>, slice_sizes = array<i64: 1>, indices_are_sorted = false} : "
       "(%s, %s) -> %s\n",
       v.id, x.id, indices.id, indices.ndim, ty(&x).s, ty(&indices).s, ty(&v).s);
  return v;
}

static tp_hlo_value_t scatter_1d(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t indices,
                                 tp_hlo_value_t updates, int op) {
  if (!live(b, &x) || !live(b, &indices) || !live(b, &updates)) return bad_value();
  if (!check(b, x.ndim == 1 && updates.dtype == x.dtype && updates.ndim == indices.ndim,
             "scatter_1d operand types"))
    return bad_value();
  tp_hlo_value_t v = new_value(b, x.dtype, 1, x.dims);
  EMIT("    %%v%d = \"stablehlo.scatter\"(%%v%d, %%v%d, %%v%d) ({\n", v.id, x.id, indices.id,
       updates.id);
  emit_scalar_region(b, x.dtype, op);
  EMIT("    }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], "
       "scatter_dims_to_operand_dims = [0], index_vector_dim = %d>, indices_are_sorted = false, "
       "unique_indices = false} : (%s, %s, %s) -> %s\n",
       indices.ndim, ty(&x).s, ty(&indices).s, ty(&updates).s, ty(&v).s);
  return v;
}

tp_hlo_value_t tp_hlo_scatter_1d(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t indices,
                                 tp_hlo_value_t updates) {
  return scatter_1d(b, x, indices, updates, -1);
}

tp_hlo_value_t tp_hlo_scatter_1d_op(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t indices,
                                    tp_hlo_value_t updates, tp_hlo_binary_t op) {
  return scatter_1d(b, x, indices, updates, (int)op);
}

tp_hlo_value_t tp_hlo_pad(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t value,
                          const int64_t *lo, const int64_t *hi) {
  static const int64_t none[TP_MAX_DIMS] = {0};
  return tp_hlo_pad_interior(b, x, value, lo, hi, none);
}

tp_hlo_value_t tp_hlo_pad_interior(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t value,
                                   const int64_t *lo, const int64_t *hi, const int64_t *interior) {
  if (!live(b, &x) || !live(b, &value)) return bad_value();
  int64_t dims[TP_MAX_DIMS] = {0};
  for (int i = 0; i < x.ndim; i++) {
    if (!check(b, interior[i] >= 0, "negative interior padding")) return bad_value();
    dims[i] = x.dims[i] + (x.dims[i] > 0 ? (x.dims[i] - 1) * interior[i] : 0) + lo[i] + hi[i];
    if (!check(b, dims[i] >= 0, "pad to a negative size")) return bad_value();
  }
  tp_hlo_value_t v = new_value(b, x.dtype, x.ndim, dims);
  EMIT("    %%v%d = \"stablehlo.pad\"(%%v%d, %%v%d) {edge_padding_low = %s, edge_padding_high = %s, "
       "interior_padding = %s} : (%s, %s) -> %s\n",
       v.id, x.id, value.id, i64_array(lo, x.ndim, 0).s, i64_array(hi, x.ndim, 0).s,
       i64_array(interior, x.ndim, 0).s, ty(&x).s, ty(&value).s, ty(&v).s);
  return v;
}

tp_hlo_value_t tp_hlo_update_slice(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t update,
                                   const int64_t *start) {
  if (!live(b, &x) || !live(b, &update)) return bad_value();
  if (!check(b, x.ndim == update.ndim && x.dtype == update.dtype, "update_slice types"))
    return bad_value();
  int idx[TP_MAX_DIMS];
  for (int i = 0; i < x.ndim; i++) {
    if (!check(b, start[i] >= 0 && start[i] + update.dims[i] <= x.dims[i],
               "update_slice out of bounds"))
      return bad_value();
    idx[i] = tp_hlo_constant_i(b, TP_DTYPE_I64, start[i]).id;
  }
  tp_hlo_value_t v = new_value(b, x.dtype, x.ndim, x.dims);
  EMIT("    %%v%d = \"stablehlo.dynamic_update_slice\"(%%v%d, %%v%d", v.id, x.id, update.id);
  for (int i = 0; i < x.ndim; i++) EMIT(", %%v%d", idx[i]);
  EMIT(") : (%s, %s", ty(&x).s, ty(&update).s);
  for (int i = 0; i < x.ndim; i++) EMIT(", tensor<i64>");
  EMIT(") -> %s\n", ty(&v).s);
  return v;
}

tp_hlo_value_t tp_hlo_concatenate(tp_hlo_builder_t *b, const tp_hlo_value_t *xs, int n, int dim) {
  if (!check(b, n > 0, "concatenate of nothing")) return bad_value();
  if (n == 1) return xs[0];
  int64_t dims[TP_MAX_DIMS];
  for (int i = 0; i < xs[0].ndim; i++) dims[i] = xs[0].dims[i];
  dims[dim] = 0;
  for (int i = 0; i < n; i++) {
    if (!live(b, &xs[i])) return bad_value();
    dims[dim] += xs[i].dims[dim];
  }
  tp_hlo_value_t v = new_value(b, xs[0].dtype, xs[0].ndim, dims);
  EMIT("    %%v%d = \"stablehlo.concatenate\"(", v.id);
  for (int i = 0; i < n; i++) EMIT("%s%%v%d", i ? ", " : "", xs[i].id);
  EMIT(") {dimension = %d : i64} : (", dim);
  for (int i = 0; i < n; i++) EMIT("%s%s", i ? ", " : "", ty(&xs[i]).s);
  EMIT(") -> %s\n", ty(&v).s);
  return v;
}

tp_hlo_value_t tp_hlo_sort(tp_hlo_builder_t *b, const tp_hlo_value_t *xs, int n, int dim,
                           bool descending, tp_hlo_value_t *outs) {
  for (int i = 0; i < n; i++) {
    bool same_shape = xs[i].ndim == xs[0].ndim &&
                      !memcmp(xs[i].dims, xs[0].dims, sizeof(int64_t) * (size_t)xs[0].ndim);
    if (!live(b, &xs[i]) || !check(b, same_shape, "sort operands differ in shape"))
      return bad_value();
  }
  if (!check(b, n >= 1 && n <= 4 && dim >= 0 && dim < xs[0].ndim, "sort arguments")) return bad_value();
  int id = b->next_id++;
  char types[4 * TYPE_BUF + 8] = "", ops[64] = "", res[4 * TYPE_BUF + 8] = "";
  for (int i = 0; i < n; i++) {
    size_t l = strlen(types);
    snprintf(types + l, sizeof(types) - l, "%s%s", i ? ", " : "", ty(&xs[i]).s);
    l = strlen(ops);
    snprintf(ops + l, sizeof(ops) - l, "%s%%v%d", i ? ", " : "", xs[i].id);
  }
  snprintf(res, sizeof(res), "%s", types);
  EMIT("    %%v%d:%d = \"stablehlo.sort\"(%s) ({\n", id, n, ops);
  /* The comparator sees scalars (a_0, b_0, a_1, b_1, ...) and orders by operand 0. */
  int args0 = b->next_id;
  b->next_id += 2 * n;
  EMIT("      ^bb0(");
  for (int i = 0; i < 2 * n; i++) {
    tstr_t s = ty_of(xs[i / 2].dtype, 0, NULL);
    EMIT("%s%%v%d: %s", i ? ", " : "", args0 + i, s.s);
  }
  EMIT("):\n");
  tp_dtype_t dt = xs[0].dtype;
  tstr_t s = ty_of(dt, 0, NULL), bt = ty_of(TP_DTYPE_BOOL, 0, NULL);
  const char *kind = tp_dtype_is_float(dt) ? "FLOAT" : tp_dtype_is_unsigned(dt) ? "UNSIGNED" : "SIGNED";
  int a = args0, c = args0 + 1;
  int r = b->next_id++;
  EMIT("        %%v%d = \"stablehlo.compare\"(%%v%d, %%v%d) {comparison_direction = "
       "#stablehlo<comparison_direction %s>, compare_type = #stablehlo<comparison_type %s>} : "
       "(%s, %s) -> %s\n", r, a, c, descending ? "GT" : "LT", kind, s.s, s.s, bt.s);
  if (tp_dtype_is_float(dt)) {
    /* NaN sorts as the largest value: ascending, a < b also when only b is NaN; descending,
     * a > b also when only a is NaN. */
    int na = b->next_id++, nb = b->next_id++, nn = b->next_id++, t = b->next_id++, r2 = b->next_id++;
    EMIT("        %%v%d = \"stablehlo.compare\"(%%v%d, %%v%d) {comparison_direction = "
         "#stablehlo<comparison_direction NE>, compare_type = #stablehlo<comparison_type FLOAT>} : "
         "(%s, %s) -> %s\n", na, a, a, s.s, s.s, bt.s);
    EMIT("        %%v%d = \"stablehlo.compare\"(%%v%d, %%v%d) {comparison_direction = "
         "#stablehlo<comparison_direction NE>, compare_type = #stablehlo<comparison_type FLOAT>} : "
         "(%s, %s) -> %s\n", nb, c, c, s.s, s.s, bt.s);
    EMIT("        %%v%d = \"stablehlo.not\"(%%v%d) : (%s) -> %s\n", nn, descending ? nb : na, bt.s, bt.s);
    EMIT("        %%v%d = \"stablehlo.and\"(%%v%d, %%v%d) : (%s, %s) -> %s\n", t,
         descending ? na : nb, nn, bt.s, bt.s, bt.s);
    EMIT("        %%v%d = \"stablehlo.or\"(%%v%d, %%v%d) : (%s, %s) -> %s\n", r2, r, t, bt.s, bt.s, bt.s);
    r = r2;
  }
  EMIT("        \"stablehlo.return\"(%%v%d) : (%s) -> ()\n", r, bt.s);
  EMIT("    }) {dimension = %d : i64, is_stable = true} : (%s) -> (%s)\n", dim, types, res);
  /* Name each result as a plain value (an identity reshape XLA folds away). */
  for (int i = 0; i < n; i++) {
    outs[i] = new_value(b, xs[i].dtype, xs[i].ndim, xs[i].dims);
    EMIT("    %%v%d = \"stablehlo.reshape\"(%%v%d#%d) : (%s) -> %s\n", outs[i].id, id, i,
         ty(&xs[i]).s, ty(&xs[i]).s);
  }
  return outs[0];
}

void tp_hlo_add_functions(tp_hlo_builder_t *b, int64_t key, const char *text) {
  for (int i = 0; i < b->n_function_keys; i++)
    if (b->function_keys[i] == key) return;
  if (!check(b, b->n_function_keys < 16, "more than 16 modules in one program")) return;
  b->function_keys[b->n_function_keys++] = key;
  sb_append(b, &b->functions, "%s\n", text);
}

void tp_hlo_call(tp_hlo_builder_t *b, const char *callee, const tp_hlo_value_t *args, int n_args,
                 const tp_hlo_value_t *result_types, int n_results, tp_hlo_value_t *outs) {
  for (int i = 0; i < n_args; i++)
    if (!live(b, &args[i])) {
      for (int k = 0; k < n_results; k++) outs[k] = bad_value();
      return;
    }
  const int id = b->next_id++;
  if (n_results > 1) EMIT("    %%v%d:%d = func.call @%s(", id, n_results, callee);
  else EMIT("    %%v%d = func.call @%s(", id, callee);
  for (int i = 0; i < n_args; i++) EMIT("%s%%v%d", i ? ", " : "", args[i].id);
  EMIT(") : (");
  for (int i = 0; i < n_args; i++) EMIT("%s%s", i ? ", " : "", ty(&args[i]).s);
  EMIT(") -> (");
  for (int k = 0; k < n_results; k++) EMIT("%s%s", k ? ", " : "", ty(&result_types[k]).s);
  EMIT(")\n");
  for (int k = 0; k < n_results; k++) {
    /* Each result as a plain value (an identity reshape XLA folds away). */
    outs[k] = new_value(b, result_types[k].dtype, result_types[k].ndim, result_types[k].dims);
    if (n_results > 1)
      EMIT("    %%v%d = \"stablehlo.reshape\"(%%v%d#%d) : (%s) -> %s\n", outs[k].id, id, k,
           ty(&outs[k]).s, ty(&outs[k]).s);
    else
      EMIT("    %%v%d = \"stablehlo.reshape\"(%%v%d) : (%s) -> %s\n", outs[k].id, id,
           ty(&outs[k]).s, ty(&outs[k]).s);
  }
}

/* ---- stablehlo.while: the caller builds the condition, then the body, between the calls. ---- */

static void while_block_args(tp_hlo_builder_t *b, int n, const tp_hlo_value_t *types,
                             tp_hlo_value_t *args) {
  EMIT("      ^bb0(");
  for (int i = 0; i < n; i++) {
    args[i] = new_value(b, types[i].dtype, types[i].ndim, types[i].dims);
    EMIT("%s%%v%d: %s", i ? ", " : "", args[i].id, ty(&types[i]).s);
  }
  EMIT("):\n");
}

static void while_types(tp_hlo_builder_t *b, int n, const tp_hlo_value_t *vs) {
  for (int i = 0; i < n; i++) EMIT("%s%s", i ? ", " : "", ty(&vs[i]).s);
}

void tp_hlo_while_begin(tp_hlo_builder_t *b, const tp_hlo_value_t *init, int n,
                        tp_hlo_value_t *args) {
  bool ok = check(b, n >= 1 && n <= TP_HLO_WHILE_MAX && b->n_loops < TP_HLO_WHILE_DEPTH,
                  "while: too many carried values or nested loops");
  for (int i = 0; ok && i < n; i++) ok = live(b, &init[i]);
  if (!ok) {
    for (int i = 0; i < n && i < TP_HLO_WHILE_MAX; i++) args[i] = bad_value();
    return;
  }
  int id = b->next_id++;
  b->loops[b->n_loops].id = id;
  b->loops[b->n_loops].n = n;
  memcpy(b->loops[b->n_loops].carried, init, sizeof(*init) * (size_t)n);
  b->n_loops++;
  EMIT("    %%v%d:%d = \"stablehlo.while\"(", id, n);
  for (int i = 0; i < n; i++) EMIT("%s%%v%d", i ? ", " : "", init[i].id);
  EMIT(") ({\n");
  while_block_args(b, n, init, args);
}

void tp_hlo_while_body(tp_hlo_builder_t *b, tp_hlo_value_t pred, tp_hlo_value_t *args) {
  if (!check(b, b->n_loops > 0, "while: body without begin")) return;
  int n = b->loops[b->n_loops - 1].n;
  const tp_hlo_value_t *c = b->loops[b->n_loops - 1].carried;
  if (!live(b, &pred) ||
      !check(b, pred.dtype == TP_DTYPE_BOOL && pred.ndim == 0, "while condition must be a scalar i1")) {
    for (int i = 0; i < n; i++) args[i] = bad_value();
    return;
  }
  EMIT("        \"stablehlo.return\"(%%v%d) : (tensor<i1>) -> ()\n    }, {\n", pred.id);
  while_block_args(b, n, c, args);
}

void tp_hlo_while_end(tp_hlo_builder_t *b, const tp_hlo_value_t *next, tp_hlo_value_t *outs) {
  if (!check(b, b->n_loops > 0, "while: end without begin")) return;
  b->n_loops--;
  int id = b->loops[b->n_loops].id, n = b->loops[b->n_loops].n;
  const tp_hlo_value_t *c = b->loops[b->n_loops].carried;
  bool ok = true;
  for (int i = 0; ok && i < n; i++)
    ok = live(b, &next[i]) &&
         check(b, next[i].dtype == c[i].dtype && next[i].ndim == c[i].ndim &&
                      !memcmp(next[i].dims, c[i].dims, sizeof(int64_t) * (size_t)c[i].ndim),
               "while body result differs from the carried value's type");
  if (!ok) {
    for (int i = 0; i < n; i++) outs[i] = bad_value();
    return;
  }
  EMIT("        \"stablehlo.return\"(");
  for (int i = 0; i < n; i++) EMIT("%s%%v%d", i ? ", " : "", next[i].id);
  EMIT(") : (");
  while_types(b, n, next);
  EMIT(") -> ()\n    }) : (");
  while_types(b, n, c);
  EMIT(") -> (");
  while_types(b, n, c);
  EMIT(")\n");
  for (int i = 0; i < n; i++) {
    outs[i] = new_value(b, c[i].dtype, c[i].ndim, c[i].dims);
    EMIT("    %%v%d = \"stablehlo.reshape\"(%%v%d#%d) : (%s) -> %s\n", outs[i].id, id, i,
         ty(&c[i]).s, ty(&c[i]).s);
  }
}

/* Start indices: one scalar of an integer type per dim of |x|. */
static bool dyn_starts(tp_hlo_builder_t *b, const tp_hlo_value_t *x, const tp_hlo_value_t *start,
                       char *ops, size_t n_ops, char *types, size_t n_types) {
  ops[0] = types[0] = 0;
  for (int i = 0; i < x->ndim; i++) {
    if (!live(b, &start[i]) ||
        !check(b, start[i].ndim == 0 && tp_dtype_is_int(start[i].dtype) &&
                      start[i].dtype == start[0].dtype,
               "dynamic slice starts must be integer scalars of one type"))
      return false;
    size_t l = strlen(ops);
    snprintf(ops + l, n_ops - l, ", %%v%d", start[i].id);
    l = strlen(types);
    snprintf(types + l, n_types - l, ", %s", ty(&start[i]).s);
  }
  return true;
}

tp_hlo_value_t tp_hlo_dynamic_slice(tp_hlo_builder_t *b, tp_hlo_value_t x,
                                    const tp_hlo_value_t *start, const int64_t *sizes) {
  char ops[16 * TP_MAX_DIMS + 8], types[TYPE_BUF * TP_MAX_DIMS / 4 + 64];
  if (!live(b, &x) || !dyn_starts(b, &x, start, ops, sizeof(ops), types, sizeof(types)))
    return bad_value();
  for (int i = 0; i < x.ndim; i++)
    if (!check(b, sizes[i] >= 0 && sizes[i] <= x.dims[i], "dynamic slice larger than its operand"))
      return bad_value();
  tp_hlo_value_t v = new_value(b, x.dtype, x.ndim, sizes);
  EMIT("    %%v%d = \"stablehlo.dynamic_slice\"(%%v%d%s) {slice_sizes = %s} : (%s%s) -> %s\n", v.id,
       x.id, ops, i64_array(sizes, x.ndim, 0).s, ty(&x).s, types, ty(&v).s);
  return v;
}

tp_hlo_value_t tp_hlo_dynamic_update_slice(tp_hlo_builder_t *b, tp_hlo_value_t x,
                                           tp_hlo_value_t update, const tp_hlo_value_t *start) {
  char ops[16 * TP_MAX_DIMS + 8], types[TYPE_BUF * TP_MAX_DIMS / 4 + 64];
  if (!live(b, &x) || !live(b, &update) ||
      !check(b, update.ndim == x.ndim && update.dtype == x.dtype,
             "dynamic update slice operands differ in rank or type") ||
      !dyn_starts(b, &x, start, ops, sizeof(ops), types, sizeof(types)))
    return bad_value();
  tp_hlo_value_t v = new_value(b, x.dtype, x.ndim, x.dims);
  EMIT("    %%v%d = \"stablehlo.dynamic_update_slice\"(%%v%d, %%v%d%s) : (%s, %s%s) -> %s\n", v.id,
       x.id, update.id, ops, ty(&x).s, ty(&update).s, types, ty(&v).s);
  return v;
}

/* ---- collectives ---- */

tp_hlo_value_t tp_hlo_collective(tp_hlo_builder_t *b, tp_hlo_collective_t kind, tp_hlo_value_t x,
                                 int n, tp_hlo_binary_t op) {
  if (!live(b, &x) || !check(b, x.ndim == 1 && n >= 1, "collectives take 1-D values, n >= 1"))
    return bad_value();
  int64_t m = x.dims[0];
  if (kind == TP_HLO_REDUCE_SCATTER || kind == TP_HLO_ALL_TO_ALL)
    if (!check(b, m % n == 0, "collective operand does not split evenly")) return bad_value();
  int64_t out = kind == TP_HLO_ALL_GATHER ? m * n : kind == TP_HLO_REDUCE_SCATTER ? m / n : m;
  /* One replica group of every replica: dense<[[0, 1, ..., n-1]]>. */
  char groups[16 * 64 + 64];
  size_t off = (size_t)snprintf(groups, sizeof(groups), "replica_groups = dense<[[");
  if (!check(b, n <= 64, "more than 64 replicas")) return bad_value();
  for (int r = 0; r < n; r++)
    off += (size_t)snprintf(groups + off, sizeof(groups) - off, "%s%d", r ? ", " : "", r);
  snprintf(groups + off, sizeof(groups) - off, "]]> : tensor<1x%dxi64>", n);
  tp_hlo_value_t v = new_value(b, x.dtype, 1, &out);
  switch (kind) {
    case TP_HLO_ALL_REDUCE:
    case TP_HLO_REDUCE_SCATTER:
      EMIT("    %%v%d = \"stablehlo.%s\"(%%v%d) ({\n", v.id,
           kind == TP_HLO_ALL_REDUCE ? "all_reduce" : "reduce_scatter", x.id);
      emit_scalar_region(b, x.dtype, (int)op);
      EMIT("    }) {%s%s} : (%s) -> %s\n",
           kind == TP_HLO_REDUCE_SCATTER ? "scatter_dimension = 0 : i64, " : "", groups, ty(&x).s,
           ty(&v).s);
      break;
    case TP_HLO_ALL_GATHER:
      EMIT("    %%v%d = \"stablehlo.all_gather\"(%%v%d) {all_gather_dim = 0 : i64, %s} : (%s) -> %s\n",
           v.id, x.id, groups, ty(&x).s, ty(&v).s);
      break;
    case TP_HLO_ALL_TO_ALL:
      EMIT("    %%v%d = \"stablehlo.all_to_all\"(%%v%d) {split_dimension = 0 : i64, "
           "concat_dimension = 0 : i64, split_count = %d : i64, %s} : (%s) -> %s\n",
           v.id, x.id, n, groups, ty(&x).s, ty(&v).s);
      break;
  }
  return v;
}

tp_hlo_value_t tp_hlo_replica_id(tp_hlo_builder_t *b) {
  int raw = b->next_id++;
  tp_hlo_value_t v = new_value(b, TP_DTYPE_I32, 0, NULL);
  EMIT("    %%v%d = \"stablehlo.replica_id\"() : () -> tensor<ui32>\n", raw);
  EMIT("    %%v%d = \"stablehlo.convert\"(%%v%d) : (tensor<ui32>) -> tensor<i32>\n", v.id, raw);
  return v;
}
