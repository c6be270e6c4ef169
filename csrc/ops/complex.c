/* Complex family: building complex tensors (complex, polar), conjugation, angle, and the discrete
 * Fourier transforms ATen's torch.fft functions reduce to (_fft_r2c, _fft_c2c, _fft_c2r).
 * StableHLO's fft transforms at most the 3 trailing dims, and its inverse forms divide by the
 * signal size; ATen's transforms take any dims and a normalization mode, so the emitters move the
 * dims to the end (in groups of up to 3) and rescale once. */
#include <math.h>
#include <string.h>

#include "ops/families.h"

/* A float32/float64 tensor (|complex|: complex64/complex128); others are CPU's own error. */
static tp_status_t *need_dtype(const tp_op_def_t *op, const tp_op_arg_t *a, bool complex) {
  tp_dtype_t dt = a->meta.dtype;
  bool ok = a->kind == TP_ARG_TENSOR && (complex ? tp_dtype_is_complex(dt)
                                                 : dt == TP_DTYPE_F32 || dt == TP_DTYPE_F64);
  if (!ok)
    return tp_make_status(TP_UNIMPLEMENTED, "%s: needs a %s tensor", op->name,
                          complex ? "complex" : "float32 or float64");
  return NULL;
}

/* ---- FFT ---- */

typedef struct {
  int n;                  /* transformed dims */
  int64_t dims[TP_MAX_DIMS];
  int norm;               /* 0 none, 1 1/sqrt(n), 2 1/n */
} fft_args_t;

static tp_status_t *fft_args(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                             fft_args_t *f) {
  if (n_args < 4 || args[0].kind != TP_ARG_TENSOR || args[1].kind != TP_ARG_INTS ||
      args[2].kind != TP_ARG_INT || args[3].kind != TP_ARG_INT)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected (self, dim, normalization, ...)",
                          op->name);
  const tp_meta_t *m = &args[0].meta;
  f->n = args[1].n;
  f->norm = (int)args[2].i;
  if (f->norm < 0 || f->norm > 2)
    return tp_make_status(TP_UNIMPLEMENTED, "%s: normalization %d", op->name, f->norm);
  bool seen[TP_MAX_DIMS] = {false};
  for (int i = 0; i < f->n; i++) {
    int d = m->ndim ? tp_norm_dim(args[1].ints[i], m->ndim) : -1;
    if (d < 0 || seen[d]) return tp_make_status(TP_UNIMPLEMENTED, "%s: bad dim list", op->name);
    seen[d] = true;
    f->dims[i] = d;
    if (m->sizes[d] == 0) /* CPU raises "Invalid number of data points" */
      return tp_make_status(TP_UNIMPLEMENTED, "%s of an empty dim", op->name);
  }
  return NULL;
}

tp_status_t *tp_infer_fft(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                          int *n_out) {
  fft_args_t f;
  TP_RETURN_IF_ERROR(fft_args(op, args, n_args, &f));
  tp_meta_t m = args[0].meta;
  switch ((tp_complex_t)op->code) {
    case TP_CX_FFT_R2C:
      TP_RETURN_IF_ERROR(need_dtype(op, &args[0], false));
      if (f.n == 0) return tp_make_status(TP_UNIMPLEMENTED, "%s over no dims", op->name);
      if (args[3].i) m.sizes[f.dims[f.n - 1]] = m.sizes[f.dims[f.n - 1]] / 2 + 1;
      m.dtype = tp_dtype_to_complex(m.dtype);
      break;
    case TP_CX_FFT_C2C:
      TP_RETURN_IF_ERROR(need_dtype(op, &args[0], true));
      break;
    case TP_CX_FFT_C2R:
      TP_RETURN_IF_ERROR(need_dtype(op, &args[0], true));
      if (f.n == 0 || args[3].i < 1)
        return tp_make_status(TP_UNIMPLEMENTED, "%s: no last dim to size", op->name);
      m.sizes[f.dims[f.n - 1]] = args[3].i;
      m.dtype = tp_dtype_real_part(m.dtype);
      break;
    default:
      return tp_make_status(TP_INTERNAL, "%s: not an fft", op->name);
  }
  out[0] = m;
  *n_out = 1;
  return NULL;
}

/* One stablehlo.fft over |k| (1..3) dims of |x|, in that order: they move to the end, get
 * transformed with |lengths|, and move back. */
static tp_hlo_value_t fft_group(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_fft_t type,
                                const int64_t *dims, int k, const int64_t *lengths) {
  int64_t perm[TP_MAX_DIMS], inv[TP_MAX_DIMS];
  int np = 0;
  for (int d = 0; d < x.ndim; d++) {
    bool t = false;
    for (int i = 0; i < k; i++) t = t || dims[i] == d;
    if (!t) perm[np++] = d;
  }
  for (int i = 0; i < k; i++) perm[np++] = dims[i];
  for (int i = 0; i < x.ndim; i++) inv[perm[i]] = i;
  tp_hlo_value_t y = tp_hlo_fft(b, tp_hlo_transpose(b, x, perm), type, k, lengths);
  return tp_hlo_transpose(b, y, inv);
}

/* Complex FFT (or unscaled-by-XLA IFFT) over dims[0..n), up to 3 at a time. */
static tp_hlo_value_t fft_all(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_fft_t type,
                              const int64_t *dims, int n) {
  for (int s = 0; s < n; s += 3) {
    int k = n - s < 3 ? n - s : 3;
    int64_t len[3];
    for (int i = 0; i < k; i++) len[i] = x.dims[dims[s + i]];
    x = fft_group(b, x, type, dims + s, k, len);
  }
  return x;
}

static tp_hlo_value_t scale(tp_hlo_builder_t *b, tp_hlo_value_t x, double factor) {
  if (factor == 1.0) return x;
  return tp_hlo_binary(b, TP_HLO_MUL, x, tp_k(b, factor, x));
}

void tp_emit_fft(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                 const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  fft_args_t f;
  tp_status_t *st = fft_args(op, args, n_args, &f);
  if (st) {
    tp_hlo_fail(b, st);
    out[0] = in[0];
    return;
  }
  tp_hlo_value_t x = in[0];
  /* The signal size: the input's transformed sizes, or for c2r the output's. */
  double n = 1;
  for (int i = 0; i < f.n; i++) n *= (double)out_meta->sizes[f.dims[i]];
  if (op->code == TP_CX_FFT_R2C) {
    n = 1;
    for (int i = 0; i < f.n; i++) n *= (double)x.dims[f.dims[i]];
  }
  double norm = f.norm == 0 ? 1.0 : f.norm == 1 ? 1.0 / sqrt(n) : 1.0 / n;
  bool inverse = false;
  switch ((tp_complex_t)op->code) {
    case TP_CX_FFT_R2C:
      if (!args[3].i) { /* the full spectrum: a complex transform of the real input */
        x = fft_all(b, tp_hlo_convert(b, x, tp_dtype_to_complex(x.dtype)), TP_HLO_FFT, f.dims, f.n);
      } else {
        /* RFFT over the last (up to) 3 dims, which halves the last one; FFT over the rest. */
        int k = f.n < 3 ? f.n : 3;
        int64_t len[3];
        for (int i = 0; i < k; i++) len[i] = x.dims[f.dims[f.n - k + i]];
        x = fft_group(b, x, TP_HLO_RFFT, f.dims + f.n - k, k, len);
        x = fft_all(b, x, TP_HLO_FFT, f.dims, f.n - k);
      }
      break;
    case TP_CX_FFT_C2C:
      inverse = !args[3].i;
      x = fft_all(b, x, inverse ? TP_HLO_IFFT : TP_HLO_FFT, f.dims, f.n);
      break;
    case TP_CX_FFT_C2R: {
      inverse = true;
      /* The last dim holds last_dim_size/2+1 terms: crop or zero-pad it to that. */
      int last = (int)f.dims[f.n - 1];
      int64_t want = out_meta->sizes[last] / 2 + 1;
      if (x.dims[last] != want) {
        int64_t lo[TP_MAX_DIMS] = {0}, hi[TP_MAX_DIMS] = {0};
        hi[last] = want - x.dims[last];
        x = tp_hlo_pad(b, x, tp_hlo_constant(b, x.dtype, 0), lo, hi);
      }
      int k = f.n < 3 ? f.n : 3;
      x = fft_all(b, x, TP_HLO_IFFT, f.dims, f.n - k);
      int64_t len[3];
      for (int i = 0; i < k; i++) len[i] = out_meta->sizes[f.dims[f.n - k + i]];
      x = fft_group(b, x, TP_HLO_IRFFT, f.dims + f.n - k, k, len);
      break;
    }
    default:
      break;
  }
  /* XLA's inverse transforms already divide by n; ATen's are unnormalized before |norm|. */
  out[0] = scale(b, x, inverse ? n * norm : norm);
}

/* ---- complex, polar, conj_physical, angle ---- */

tp_status_t *tp_infer_complex(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                              int *n_out) {
  if (op->code == TP_CX_CONJ || op->code == TP_CX_ANGLE) {
    if (n_args < 1 || args[0].kind != TP_ARG_TENSOR)
      return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected a tensor", op->name);
    out[0] = args[0].meta;
    if (op->code == TP_CX_ANGLE) { /* real: integers and bool give the default float */
      tp_dtype_t dt = args[0].meta.dtype;
      out[0].dtype = tp_dtype_is_complex(dt) ? tp_dtype_real_part(dt)
                     : tp_dtype_is_float(dt) ? dt : TP_DTYPE_F32;
    }
    *n_out = 1;
    return NULL;
  }
  if (n_args < 2) return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected two tensors", op->name);
  /* float32 or float64 parts of one type: others are CPU's error */
  TP_RETURN_IF_ERROR(need_dtype(op, &args[0], false));
  TP_RETURN_IF_ERROR(need_dtype(op, &args[1], false));
  if (args[0].meta.dtype != args[1].meta.dtype)
    return tp_make_status(TP_UNIMPLEMENTED, "%s: parts of two types", op->name);
  tp_meta_t m;
  TP_RETURN_IF_ERROR(tp_broadcast_shapes(&args[0].meta, &args[1].meta, &m));
  m.dtype = tp_dtype_to_complex(args[0].meta.dtype);
  out[0] = m;
  *n_out = 1;
  return NULL;
}

void tp_emit_complex(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                     int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                     tp_hlo_value_t *out) {
  (void)args, (void)n_args;
  if (op->code == TP_CX_ANGLE) {
    tp_hlo_value_t x = in[0];
    if (tp_dtype_is_complex(x.dtype)) {
      out[0] = tp_hlo_binary(b, TP_HLO_ATAN2, tp_hlo_imag(b, x), tp_hlo_real(b, x));
      return;
    }
    /* real: pi for negative values, 0 otherwise, NaN kept (CPU's angle) */
    tp_dtype_t md = tp_math_dtype(out_meta->dtype);
    x = tp_hlo_convert(b, x, md);
    tp_hlo_value_t zero = tp_k(b, 0, x);
    tp_hlo_value_t r = tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_LT, x, zero),
                                     tp_k(b, M_PI, x), zero);
    r = tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_NE, x, x), x, r);
    out[0] = tp_hlo_convert(b, r, out_meta->dtype);
    return;
  }
  if (op->code == TP_CX_CONJ) {
    tp_hlo_value_t x = in[0];
    out[0] = tp_dtype_is_complex(x.dtype)
                 ? tp_hlo_complex(b, tp_hlo_real(b, x), tp_hlo_unary(b, TP_HLO_NEG, tp_hlo_imag(b, x)))
                 : x;
    return;
  }
  tp_dtype_t part = tp_dtype_real_part(out_meta->dtype);
  tp_hlo_value_t x = tp_emit_cast_shape(b, in[0], part, out_meta);
  tp_hlo_value_t y = tp_emit_cast_shape(b, in[1], part, out_meta);
  if (op->code == TP_CX_POLAR) { /* abs * (cos(angle), sin(angle)) */
    tp_hlo_value_t re = tp_hlo_binary(b, TP_HLO_MUL, x, tp_hlo_unary(b, TP_HLO_COS, y));
    tp_hlo_value_t im = tp_hlo_binary(b, TP_HLO_MUL, x, tp_hlo_unary(b, TP_HLO_SIN, y));
    x = re, y = im;
  }
  out[0] = tp_hlo_complex(b, x, y);
}
