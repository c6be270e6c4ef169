/* Optimizer steps and gradient scaling (optim.c), one index of their tensor lists: the fused
 * Adam/AdamW step and GradScaler's kernels write every output into an argument, take the learning
 * rate as a program input, reject mismatched arguments with INVALID_ARGUMENT and emit a program.
 * Needs no device. */
#include <string.h>

#include "ops/op.h"
#include "op_args.h"
#include "test.h"

static tp_op_arg_t none_arg(void) {
  tp_op_arg_t a;
  memset(&a, 0, sizeof(a));
  return a;
}

static tp_op_arg_t float_arg(double v) {
  tp_op_arg_t a;
  memset(&a, 0, sizeof(a));
  a.kind = TP_ARG_FLOAT;
  a.f = v;
  return a;
}

/* (param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1, beta2, weight_decay, eps,
 * amsgrad, maximize, grad_scale, found_inf) for a parameter of |dt| and shape [4, 3]. */
static void adam_args(tp_op_arg_t *a, tp_dtype_t dt, bool amsgrad) {
  static const int64_t shape[2] = {4, 3};
  for (int i = 0; i < 4; i++) a[i] = tensor(dt, 2, shape);
  a[4] = amsgrad ? tensor(dt, 2, shape) : none_arg();
  a[5] = tensor(TP_DTYPE_F32, 0, NULL);
  a[6] = float_arg(1e-3);
  a[7] = float_arg(0.9);
  a[8] = float_arg(0.999);
  a[9] = float_arg(0.01);
  a[10] = float_arg(1e-8);
  a[11] = int_arg(amsgrad);
  a[12] = int_arg(0);
  a[13] = none_arg();
  a[14] = none_arg();
}

static bool writes(const tp_meta_t *out, int n, const int *args) {
  for (int k = 0; k < n; k++)
    if (out[k].writes_arg != args[k] + 1) return false;
  return true;
}

static void test_fused_adam(void) {
  tp_op_arg_t a[15];
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  for (int w = 0; w < 2; w++) {
    const char *name = w ? "_fused_adamw_" : "_fused_adam_";
    CHECK((tp_op_table[tp_op_lookup(name, NULL)].flags & TP_OPF_LIST_ZIP) != 0);
    adam_args(a, TP_DTYPE_BF16, false);
    CHECK(emits(name, a, 15, out, &n, "stablehlo.power")); /* the bias corrections */
    CHECK(n == 3 && writes(out, 3, (const int[]){0, 2, 3})); /* param, exp_avg, exp_avg_sq */
    CHECK(out[0].dtype == TP_DTYPE_BF16 && out[0].ndim == 2 && out[0].sizes[1] == 3);
    /* The learning rate became an f64 program input: a new value compiles nothing. */
    CHECK(a[6].kind == TP_ARG_SCALAR && a[6].scalar_dtype == TP_DTYPE_F64 && a[6].f == 1e-3);

    adam_args(a, TP_DTYPE_F32, true);
    a[13] = tensor(TP_DTYPE_F32, 0, NULL);                  /* grad_scale */
    a[14] = tensor(TP_DTYPE_F32, 1, (const int64_t[]){1}); /* found_inf: a select */
    CHECK(emits(name, a, 15, out, &n, "stablehlo.select"));
    CHECK(n == 5 && writes(out, 5, (const int[]){0, 1, 2, 3, 4})); /* grads are unscaled in place */

    adam_args(a, TP_DTYPE_F32, true);
    a[4] = none_arg(); /* amsgrad without max_exp_avg_sqs */
    CHECK(infer_status(name, a, 15) == TP_INVALID_ARGUMENT);
    adam_args(a, TP_DTYPE_F32, false);
    a[4] = tensor(TP_DTYPE_F32, 2, (const int64_t[]){4, 3}); /* ... and with them, not amsgrad */
    CHECK(infer_status(name, a, 15) == TP_INVALID_ARGUMENT);
    adam_args(a, TP_DTYPE_F32, false);
    a[1] = tensor(TP_DTYPE_F32, 1, (const int64_t[]){12}); /* a gradient of another shape */
    CHECK(infer_status(name, a, 15) == TP_INVALID_ARGUMENT);
    adam_args(a, TP_DTYPE_F32, false);
    a[2] = tensor(TP_DTYPE_F16, 2, (const int64_t[]){4, 3}); /* state of another dtype */
    CHECK(infer_status(name, a, 15) == TP_INVALID_ARGUMENT);
    adam_args(a, TP_DTYPE_I64, false);
    CHECK(infer_status(name, a, 15) == TP_INVALID_ARGUMENT);
    adam_args(a, TP_DTYPE_F32, false);
    a[5] = tensor(TP_DTYPE_F32, 1, (const int64_t[]){2}); /* a step of two elements */
    CHECK(infer_status(name, a, 15) == TP_INVALID_ARGUMENT);
    adam_args(a, TP_DTYPE_F32, false);
    a[14] = tensor(TP_DTYPE_F64, 0, NULL); /* found_inf must be f32 */
    CHECK(infer_status(name, a, 15) == TP_INVALID_ARGUMENT);
  }
  /* The .tensor_lr forms: lr a device tensor, or a CPU scalar read as f64. */
  adam_args(a, TP_DTYPE_F32, false);
  a[6] = tensor(TP_DTYPE_F32, 0, NULL);
  CHECK(emits("_fused_adamw_.tensor_lr", a, 15, out, &n, "stablehlo.sqrt"));
  adam_args(a, TP_DTYPE_F32, false);
  a[6] = scalar(TP_DTYPE_F32, 0.5, false);
  CHECK(infer_status("_fused_adam_.tensor_lr", a, 15) == 0 && a[6].scalar_dtype == TP_DTYPE_F32);
  adam_args(a, TP_DTYPE_F32, false);
  a[6] = tensor(TP_DTYPE_F32, 1, (const int64_t[]){3});
  CHECK(infer_status("_fused_adam_.tensor_lr", a, 15) == TP_INVALID_ARGUMENT);
}

static void test_unscale(void) {
  const char *name = "_amp_foreach_non_finite_check_and_unscale_";
  CHECK((tp_op_table[tp_op_lookup(name, NULL)].flags & TP_OPF_LIST_ZIP) != 0);
  tp_op_arg_t a[3] = {tensor(TP_DTYPE_F16, 2, (const int64_t[]){2, 5}),
                      tensor(TP_DTYPE_F32, 1, (const int64_t[]){1}), tensor(TP_DTYPE_F32, 0, NULL)};
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  CHECK(emits(name, a, 3, out, &n, "stablehlo.is_finite"));
  CHECK(n == 2 && writes(out, 2, (const int[]){0, 1}) && out[0].dtype == TP_DTYPE_F16 &&
        out[1].dtype == TP_DTYPE_F32 && out[1].ndim == 1);
  a[0] = tensor(TP_DTYPE_F64, 0, NULL); /* a 0-d gradient: nothing to reduce */
  CHECK(emits(name, a, 3, out, &n, "stablehlo.multiply"));
  a[2] = tensor(TP_DTYPE_F64, 0, NULL); /* inv_scale must be f32 */
  CHECK(infer_status(name, a, 3) == TP_INVALID_ARGUMENT);
  a[2] = tensor(TP_DTYPE_F32, 1, (const int64_t[]){2}); /* ... and one element */
  CHECK(infer_status(name, a, 3) == TP_INVALID_ARGUMENT);
  a[2] = tensor(TP_DTYPE_F32, 0, NULL);
  a[1] = scalar(TP_DTYPE_F32, 0, false); /* found_inf is written: a tensor */
  CHECK(infer_status(name, a, 3) == TP_INVALID_ARGUMENT);
  a[1] = tensor(TP_DTYPE_F32, 0, NULL);
  a[0] = tensor(TP_DTYPE_I32, 1, (const int64_t[]){3});
  CHECK(infer_status(name, a, 3) == TP_INVALID_ARGUMENT);
}

static void test_update_scale(void) {
  const char *name = "_amp_update_scale_";
  tp_op_arg_t a[6] = {tensor(TP_DTYPE_F32, 1, (const int64_t[]){1}),
                      tensor(TP_DTYPE_I32, 1, (const int64_t[]){1}), tensor(TP_DTYPE_F32, 0, NULL),
                      float_arg(2.0), float_arg(0.5), int_arg(2000)};
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  CHECK(emits(name, a, 6, out, &n, "stablehlo.select"));
  CHECK(n == 2 && writes(out, 2, (const int[]){0, 1}) && out[1].dtype == TP_DTYPE_I32);
  a[1] = tensor(TP_DTYPE_I64, 1, (const int64_t[]){1}); /* the tracker is int32 */
  CHECK(infer_status(name, a, 6) == TP_INVALID_ARGUMENT);
  a[1] = tensor(TP_DTYPE_I32, 1, (const int64_t[]){1});
  a[0] = tensor(TP_DTYPE_F32, 1, (const int64_t[]){2});
  CHECK(infer_status(name, a, 6) == TP_INVALID_ARGUMENT);
}

int main(void) {
  test_fused_adam();
  test_unscale();
  test_update_scale();
  TEST_MAIN_END("ops_optim_test");
}
