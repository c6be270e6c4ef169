/* Optimizer steps and gradient scaling: the fused Adam and AdamW steps (torch.optim.Adam/AdamW
 * with fused=True) and GradScaler's two kernels, the non-finite check with unscale and the scale
 * update. Their ATen forms take tensor lists; the rows carry TP_OPF_LIST_ZIP, so infer and emit
 * here see one index of the lists at a time (one parameter with its gradient and state) and every
 * output is written into an argument. What a step computes follows PyTorch's CPU kernels: the
 * per-step factors (bias corrections, step size, AdamW's decay) in f64 from the f32 step count,
 * then rounded to the parameter's math type; half types compute in f32 and round only what they
 * store. A found_inf of exactly 1 skips the step: every output keeps its input (a select in the
 * program, so no host read). Emits through hlo/ only. */
#include <math.h>
#include <string.h>

#include "ops/families.h"

/* The fused Adam/AdamW argument list, one index of the lists. */
enum {
  A_PARAM, A_GRAD, A_EXP_AVG, A_EXP_AVG_SQ, A_MAX_EXP_AVG_SQ, A_STEP, A_LR, A_BETA1, A_BETA2,
  A_WEIGHT_DECAY, A_EPS, A_AMSGRAD, A_MAXIMIZE, A_GRAD_SCALE, A_FOUND_INF, A_COUNT,
};
/* _amp_foreach_non_finite_check_and_unscale_(grad, found_inf, inv_scale). */
enum { U_GRAD, U_FOUND_INF, U_INV_SCALE, U_COUNT };
/* _amp_update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
 * growth_interval). */
enum { S_SCALE, S_TRACKER, S_FOUND_INF, S_GROWTH, S_BACKOFF, S_INTERVAL, S_COUNT };

static bool is_real_float(tp_dtype_t t) {
  return t == TP_DTYPE_F16 || t == TP_DTYPE_BF16 || t == TP_DTYPE_F32 || t == TP_DTYPE_F64;
}

/* Argument |i| must be a one-element value (a tensor, or a CPU scalar tensor, when |scalar_ok|)
 * of dtype |dt|: f32, i32, or any real type when TP_DTYPE_INVALID. */
static tp_status_t *expect_one(const tp_op_def_t *op, tp_op_arg_t *args, int i, const char *name,
                               tp_dtype_t dt, bool scalar_ok) {
  const tp_op_arg_t *a = &args[i];
  if (a->kind != TP_ARG_TENSOR && !(scalar_ok && a->kind == TP_ARG_SCALAR))
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: %s must be a tensor", op->name, name);
  if (tp_meta_numel(&a->meta) != 1)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: %s must be a 1-element tensor.", op->name,
                          name);
  if (dt != TP_DTYPE_INVALID && a->meta.dtype != dt)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: %s must be %s tensor.", op->name, name,
                          dt == TP_DTYPE_F32 ? "a float" : "an int");
  if (dt == TP_DTYPE_INVALID &&
      (tp_dtype_is_complex(a->meta.dtype) || a->meta.dtype == TP_DTYPE_INVALID))
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: %s must be a real tensor", op->name, name);
  if (a->kind == TP_ARG_SCALAR) args[i].scalar_dtype = a->meta.dtype;
  return NULL;
}

static tp_status_t *expect_kind(const tp_op_def_t *op, const tp_op_arg_t *args, int i,
                                tp_arg_kind_t kind, const char *name) {
  if (args[i].kind != kind)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: bad %s argument", op->name, name);
  return NULL;
}

static bool same_shape(const tp_meta_t *a, const tp_meta_t *b) {
  if (a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->sizes[d] != b->sizes[d]) return false;
  return true;
}

/* State tensor |i| (named |name|) must be a tensor of the parameter's dtype and shape. */
static tp_status_t *expect_like_param(const tp_op_def_t *op, const tp_op_arg_t *args, int i,
                                      const char *name) {
  const tp_meta_t *p = &args[A_PARAM].meta, *m = &args[i].meta;
  if (args[i].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected a tensor in %s for each parameter",
                          op->name, name);
  if (m->dtype != p->dtype)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected %s to have the dtype of their "
                          "parameters, %s, but got %s", op->name, name, tp_dtype_name(p->dtype),
                          tp_dtype_name(m->dtype));
  if (!same_shape(m, p)) {
    char want[160], got[160];
    tp_format_ints(want, sizeof(want), p->sizes, p->ndim);
    tp_format_ints(got, sizeof(got), m->sizes, m->ndim);
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected %s to have the shape of their "
                          "parameters, %s, but got %s", op->name, name, want, got);
  }
  return NULL;
}

static tp_status_t *expect_count(const tp_op_def_t *op, int n_args, int count) {
  if (n_args == count) return NULL;
  return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected %d arguments, got %d", op->name, count,
                        n_args);
}

/* Argument |i| must be a tensor (|what|: the error's words for it) of a real floating type. */
static tp_status_t *expect_float_tensor(const tp_op_def_t *op, const tp_op_arg_t *args, int i,
                                        const char *what) {
  if (args[i].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected %s", op->name, what);
  if (!is_real_float(args[i].meta.dtype))
    return tp_make_status(TP_INVALID_ARGUMENT, "\"%s\" not implemented for '%s'", op->name,
                          tp_dtype_name(args[i].meta.dtype));
  return NULL;
}

static tp_meta_t written(const tp_op_arg_t *args, int i) {
  tp_meta_t m = args[i].meta;
  m.writes_arg = i + 1;
  return m;
}

static tp_status_t *infer_adam(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                               tp_meta_t *out, int *n_out) {
  TP_RETURN_IF_ERROR(expect_count(op, n_args, A_COUNT));
  TP_RETURN_IF_ERROR(expect_float_tensor(op, args, A_PARAM, "a tensor for each parameter"));
  TP_RETURN_IF_ERROR(expect_like_param(op, args, A_GRAD, "grads"));
  TP_RETURN_IF_ERROR(expect_like_param(op, args, A_EXP_AVG, "exp_avgs"));
  TP_RETURN_IF_ERROR(expect_like_param(op, args, A_EXP_AVG_SQ, "exp_avg_sqs"));
  static const struct { int i; tp_arg_kind_t kind; const char *name; } attrs[] = {
      {A_BETA1, TP_ARG_FLOAT, "beta1"}, {A_BETA2, TP_ARG_FLOAT, "beta2"},
      {A_WEIGHT_DECAY, TP_ARG_FLOAT, "weight_decay"}, {A_EPS, TP_ARG_FLOAT, "eps"},
      {A_AMSGRAD, TP_ARG_INT, "amsgrad"}, {A_MAXIMIZE, TP_ARG_INT, "maximize"}};
  for (size_t k = 0; k < sizeof(attrs) / sizeof(attrs[0]); k++)
    TP_RETURN_IF_ERROR(expect_kind(op, args, attrs[k].i, attrs[k].kind, attrs[k].name));
  const bool amsgrad = args[A_AMSGRAD].i != 0;
  if (amsgrad) {
    TP_RETURN_IF_ERROR(expect_like_param(op, args, A_MAX_EXP_AVG_SQ, "max_exp_avg_sqs"));
  } else if (args[A_MAX_EXP_AVG_SQ].kind != TP_ARG_NONE) {
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: max_exp_avg_sqs must be empty when amsgrad "
                          "is False", op->name);
  }
  if (args[A_STEP].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected a tensor in state_steps for each "
                          "parameter", op->name);
  TP_RETURN_IF_ERROR(expect_one(op, args, A_STEP, "state_steps", TP_DTYPE_INVALID, false));
  /* The learning rate is a program input, so that a schedule changing it every step compiles
   * nothing new: a float becomes an f64 scalar; a tensor (the .tensor_lr forms) stays one. */
  if (args[A_LR].kind == TP_ARG_FLOAT) {
    double lr = args[A_LR].f;
    memset(&args[A_LR], 0, sizeof(args[A_LR]));
    args[A_LR].kind = TP_ARG_SCALAR;
    args[A_LR].meta.dtype = args[A_LR].scalar_dtype = TP_DTYPE_F64;
    args[A_LR].f = lr;
  } else {
    TP_RETURN_IF_ERROR(expect_one(op, args, A_LR, "lr", TP_DTYPE_INVALID, true));
  }
  const int opt[2] = {A_GRAD_SCALE, A_FOUND_INF};
  for (int k = 0; k < 2; k++)
    if (args[opt[k]].kind != TP_ARG_NONE)
      TP_RETURN_IF_ERROR(expect_one(op, args, opt[k], k ? "found_inf" : "grad_scale",
                                    TP_DTYPE_F32, true));
  int n = 0;
  out[n++] = written(args, A_PARAM);
  if (args[A_GRAD_SCALE].kind != TP_ARG_NONE) out[n++] = written(args, A_GRAD); /* unscaled */
  out[n++] = written(args, A_EXP_AVG);
  out[n++] = written(args, A_EXP_AVG_SQ);
  if (amsgrad) out[n++] = written(args, A_MAX_EXP_AVG_SQ);
  *n_out = n;
  return NULL;
}

static tp_status_t *infer_unscale(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                  tp_meta_t *out, int *n_out) {
  TP_RETURN_IF_ERROR(expect_count(op, n_args, U_COUNT));
  TP_RETURN_IF_ERROR(expect_float_tensor(op, args, U_GRAD, "a list of tensors"));
  TP_RETURN_IF_ERROR(expect_one(op, args, U_INV_SCALE, "inv_scale", TP_DTYPE_F32, true));
  TP_RETURN_IF_ERROR(expect_one(op, args, U_FOUND_INF, "found_inf", TP_DTYPE_F32, false));
  out[0] = written(args, U_GRAD);
  out[1] = written(args, U_FOUND_INF);
  *n_out = 2;
  return NULL;
}

static tp_status_t *infer_update_scale(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                       tp_meta_t *out, int *n_out) {
  TP_RETURN_IF_ERROR(expect_count(op, n_args, S_COUNT));
  TP_RETURN_IF_ERROR(expect_one(op, args, S_TRACKER, "growth_tracker", TP_DTYPE_I32, false));
  TP_RETURN_IF_ERROR(expect_one(op, args, S_SCALE, "current_scale", TP_DTYPE_F32, false));
  TP_RETURN_IF_ERROR(expect_one(op, args, S_FOUND_INF, "found_inf", TP_DTYPE_F32, true));
  TP_RETURN_IF_ERROR(expect_kind(op, args, S_GROWTH, TP_ARG_FLOAT, "scale_growth_factor"));
  TP_RETURN_IF_ERROR(expect_kind(op, args, S_BACKOFF, TP_ARG_FLOAT, "scale_backoff_factor"));
  TP_RETURN_IF_ERROR(expect_kind(op, args, S_INTERVAL, TP_ARG_INT, "growth_interval"));
  out[0] = written(args, S_SCALE);
  out[1] = written(args, S_TRACKER);
  *n_out = 2;
  return NULL;
}

tp_status_t *tp_infer_optim(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                            int *n_out) {
  switch ((tp_optim_t)op->code) {
    case TP_OPT_ADAM: case TP_OPT_ADAMW: return infer_adam(op, args, n_args, out, n_out);
    case TP_OPT_UNSCALE: return infer_unscale(op, args, n_args, out, n_out);
    case TP_OPT_UPDATE_SCALE: return infer_update_scale(op, args, n_args, out, n_out);
  }
  return tp_make_status(TP_INTERNAL, "%s: bad optimizer code %d", op->name, op->code);
}

/* ---- emission ---- */

/* A one-element value as a rank-0 value of |dt|. */
static tp_hlo_value_t one(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_dtype_t dt) {
  if (x.ndim) x = tp_hlo_reshape(b, x, 0, NULL);
  return tp_hlo_convert(b, x, dt);
}

/* The host value |v| rounded to |dt| (f32 or f64), as the CPU kernels' scalar_t(v). */
static double round_to(tp_dtype_t dt, double v) {
  return dt == TP_DTYPE_F32 ? (double)(float)v : v;
}

/* A rank-0 program value rounded to |dt| and broadcast over |like|. */
static tp_hlo_value_t spread(tp_hlo_builder_t *b, tp_hlo_value_t s, tp_dtype_t dt,
                             const tp_hlo_value_t *like) {
  return tp_hlo_broadcast_to(b, tp_hlo_convert(b, s, dt), like->ndim, like->dims);
}

/* |v| as a constant of |like|'s type and shape. */

/* A result rounded to its output's dtype and shaped as its meta (a 1-element state may be [1]). */
static tp_hlo_value_t store(tp_hlo_builder_t *b, tp_hlo_value_t x, const tp_meta_t *m) {
  x = tp_hlo_convert(b, x, m->dtype);
  if (x.ndim != m->ndim) x = tp_hlo_reshape(b, x, m->ndim, m->sizes);
  return x;
}

static void emit_adam(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                      const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  const bool adamw = op->code == TP_OPT_ADAMW, amsgrad = args[A_AMSGRAD].i != 0,
             maximize = args[A_MAXIMIZE].i != 0, scaled = args[A_GRAD_SCALE].kind != TP_ARG_NONE;
  const double beta1 = args[A_BETA1].f, beta2 = args[A_BETA2].f, wd = args[A_WEIGHT_DECAY].f,
               eps = args[A_EPS].f;
  const tp_dtype_t md = tp_math_dtype(args[A_PARAM].meta.dtype), f64 = TP_DTYPE_F64;
  /* The step's factors, in f64 from the step count read as f32 (the CPU kernel's
   * double(step.item<float>())). */
  tp_hlo_value_t step = tp_hlo_convert(b, one(b, in[A_STEP], TP_DTYPE_F32), f64);
  tp_hlo_value_t lr = one(b, in[A_LR], f64), one64 = tp_hlo_constant(b, f64, 1);
  tp_hlo_value_t pow1 = tp_hlo_binary(b, TP_HLO_POW, tp_hlo_constant(b, f64, beta1), step);
  tp_hlo_value_t pow2 = tp_hlo_binary(b, TP_HLO_POW, tp_hlo_constant(b, f64, beta2), step);
  tp_hlo_value_t bc1 = tp_sub(b, one64, pow1), bc2 = tp_sub(b, one64, pow2);
  tp_hlo_value_t neg_step_size = tp_hlo_unary(b, TP_HLO_NEG, tp_div(b, lr, bc1));
  tp_hlo_value_t bc2_sqrt = tp_hlo_unary(b, TP_HLO_SQRT, bc2);

  tp_hlo_value_t p = tp_hlo_convert(b, in[A_PARAM], md), g = tp_hlo_convert(b, in[A_GRAD], md);
  tp_hlo_value_t m = tp_hlo_convert(b, in[A_EXP_AVG], md);
  tp_hlo_value_t v = tp_hlo_convert(b, in[A_EXP_AVG_SQ], md);
  tp_hlo_value_t unscaled = g;
  if (scaled) {
    g = tp_div(b, g, spread(b, one(b, in[A_GRAD_SCALE], TP_DTYPE_F32), md, &g));
    unscaled = g;
  }
  if (maximize) g = tp_hlo_unary(b, TP_HLO_NEG, g);
  if (wd != 0) {
    if (adamw) { /* decoupled: the parameter decays by 1 - lr * weight_decay */
      tp_hlo_value_t decay = tp_sub(b, one64, tp_mul(b, lr, tp_hlo_constant(b, f64, wd)));
      p = tp_mul(b, p, spread(b, decay, md, &p));
    } else {     /* L2: added to the gradient */
      g = tp_add(b, g, tp_mul(b, p, tp_k(b, round_to(md, wd), p)));
    }
  }
  /* exp_avg.lerp_(grad, 1 - beta1), in lerp's two forms by the weight's size. */
  const double w = round_to(md, 1 - beta1);
  tp_hlo_value_t diff = tp_sub(b, g, m);
  if (fabs(w) < 0.5)
    m = tp_add(b, m, tp_mul(b, tp_k(b, w, m), diff));
  else
    m = tp_sub(b, g, tp_mul(b, diff, tp_k(b, round_to(md, 1 - w), m)));
  v = tp_add(b, tp_mul(b, v, tp_k(b, round_to(md, beta2), v)),
          tp_mul(b, tp_mul(b, tp_k(b, round_to(md, 1 - beta2), g), g), g));
  tp_hlo_value_t vmax = v;
  if (amsgrad) vmax = tp_hlo_binary(b, TP_HLO_MAX, tp_hlo_convert(b, in[A_MAX_EXP_AVG_SQ], md), v);
  tp_hlo_value_t denom = tp_div(b, tp_hlo_unary(b, TP_HLO_SQRT, vmax), spread(b, bc2_sqrt, md, &v));
  denom = tp_add(b, denom, tp_k(b, round_to(md, eps), v));
  p = tp_add(b, p, tp_div(b, tp_mul(b, spread(b, neg_step_size, md, &m), m), denom));

  tp_hlo_value_t results[5], olds[5];
  int n = 0;
  results[n] = p, olds[n++] = in[A_PARAM];
  if (scaled) results[n] = unscaled, olds[n++] = in[A_GRAD];
  results[n] = m, olds[n++] = in[A_EXP_AVG];
  results[n] = v, olds[n++] = in[A_EXP_AVG_SQ];
  if (amsgrad) results[n] = vmax, olds[n++] = in[A_MAX_EXP_AVG_SQ];
  tp_hlo_value_t skip = {0};
  const bool skippable = args[A_FOUND_INF].kind != TP_ARG_NONE;
  if (skippable) { /* found_inf == 1: the step is skipped, everything keeps its value */
    tp_hlo_value_t fi = one(b, in[A_FOUND_INF], TP_DTYPE_F32);
    skip = tp_hlo_compare(b, TP_CMP_EQ, fi, tp_hlo_constant(b, TP_DTYPE_F32, 1));
  }
  for (int k = 0; k < n; k++) {
    out[k] = tp_hlo_convert(b, results[k], out_meta[k].dtype);
    if (skippable)
      out[k] = tp_hlo_select(b, tp_hlo_broadcast_to(b, skip, out[k].ndim, out[k].dims), olds[k],
                             out[k]);
  }
}

static void emit_unscale(tp_hlo_builder_t *b, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                         tp_hlo_value_t *out) {
  const tp_dtype_t md = tp_math_dtype(in[U_GRAD].dtype);
  tp_hlo_value_t x = tp_hlo_convert(b, in[U_GRAD], md);
  tp_hlo_value_t inv = spread(b, one(b, in[U_INV_SCALE], TP_DTYPE_F32), md, &x);
  out[0] = tp_hlo_convert(b, tp_mul(b, x, inv), out_meta[0].dtype);
  tp_hlo_value_t bad = tp_hlo_unary(b, TP_HLO_NOT, tp_hlo_unary(b, TP_HLO_IS_FINITE, x));
  if (bad.ndim) {
    int64_t dims[TP_MAX_DIMS];
    for (int d = 0; d < bad.ndim; d++) dims[d] = d;
    bad = tp_hlo_reduce(b, bad, tp_hlo_constant_i(b, TP_DTYPE_BOOL, 0), TP_HLO_OR, bad.ndim, dims);
  }
  /* found_inf becomes 1 when this gradient has a NaN or an infinity; it is never cleared. */
  tp_hlo_value_t fi = one(b, in[U_FOUND_INF], TP_DTYPE_F32);
  out[1] = store(b, tp_hlo_select(b, bad, tp_hlo_constant(b, TP_DTYPE_F32, 1), fi), &out_meta[1]);
}

static void emit_update_scale(tp_hlo_builder_t *b, const tp_op_arg_t *args,
                              const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                              tp_hlo_value_t *out) {
  const tp_dtype_t f32 = TP_DTYPE_F32, f64 = TP_DTYPE_F64, i64 = TP_DTYPE_I64;
  tp_hlo_value_t scale = one(b, in[S_SCALE], f32), scale64 = tp_hlo_convert(b, scale, f64);
  tp_hlo_value_t found = tp_hlo_compare(b, TP_CMP_NE, one(b, in[S_FOUND_INF], f32),
                                        tp_hlo_constant(b, f32, 0)); /* NaN counts as found */
  /* The factors multiply in f64 (the kernel's float * double) and round once to f32. */
  tp_hlo_value_t backed_off =
      tp_hlo_convert(b, tp_mul(b, scale64, tp_hlo_constant(b, f64, args[S_BACKOFF].f)), f32);
  tp_hlo_value_t grown =
      tp_hlo_convert(b, tp_mul(b, scale64, tp_hlo_constant(b, f64, args[S_GROWTH].f)), f32);
  tp_hlo_value_t successful = tp_add(b, one(b, in[S_TRACKER], i64), tp_hlo_constant_i(b, i64, 1));
  tp_hlo_value_t due = tp_hlo_compare(b, TP_CMP_EQ, successful,
                                      tp_hlo_constant_i(b, i64, args[S_INTERVAL].i));
  /* Growing never takes the scale past f32's range to infinity. */
  tp_hlo_value_t grow = tp_hlo_binary(b, TP_HLO_AND, due, tp_hlo_unary(b, TP_HLO_IS_FINITE, grown));
  tp_hlo_value_t zero = tp_hlo_constant_i(b, i64, 0);
  tp_hlo_value_t new_scale =
      tp_hlo_select(b, found, backed_off, tp_hlo_select(b, grow, grown, scale));
  tp_hlo_value_t tracker = tp_hlo_select(b, found, zero, tp_hlo_select(b, due, zero, successful));
  out[0] = store(b, new_scale, &out_meta[0]);
  out[1] = store(b, tracker, &out_meta[1]);
}

void tp_emit_optim(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                   const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out) {
  (void)n_args;
  switch ((tp_optim_t)op->code) {
    case TP_OPT_ADAM: case TP_OPT_ADAMW: emit_adam(op, b, args, in, out_meta, out); break;
    case TP_OPT_UNSCALE: emit_unscale(b, in, out_meta, out); break;
    case TP_OPT_UPDATE_SCALE: emit_update_scale(b, args, in, out_meta, out); break;
  }
}
