/* Pooling (avgpool.c, maxpool.c): average pooling's output sizes, dtypes and golden text; max pooling,
 * adaptive max pooling and max_unpool's inference, the calls left to CPU, and that each emits a
 * program. Needs no device. */
#include <string.h>

#include "hlo/builder.h"
#include "ops/op.h"
#include "op_args.h"
#include "test.h"

/* Average pooling: PyTorch's output sizes (ceil_mode drops a window starting in the right
 * padding), CPU's dtypes (others fall back), and the emitted separable window sums. */
static void test_avg_pool(void) {
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  const tp_op_def_t *ap = op("avg_pool2d");
  tp_op_arg_t none = {0};
  /* avg_pool2d(x[1,2,5,6], kernel 3, stride 2, padding 1, ceil_mode, count_include_pad) */
  tp_op_arg_t a[7] = {tensor(TP_DTYPE_F32, 4, (int64_t[]){1, 2, 5, 6}), ints_arg(1, (int64_t[]){3}),
                      ints_arg(1, (int64_t[]){2}), ints_arg(1, (int64_t[]){1}), int_arg(1), int_arg(1), none};
  CHECK_OK(ap->infer(ap, a, 7, out, &n));
  CHECK(n == 1 && out[0].ndim == 4 && out[0].sizes[2] == 3 && out[0].sizes[3] == 4);
  a[0].meta.dtype = TP_DTYPE_I32; /* CPU has no int32 kernel */
  tp_status_t *st = ap->infer(ap, a, 7, out, &n);
  CHECK(st && tp_status_code(st) == TP_UNIMPLEMENTED);
  tp_status_free(st);
  a[0].meta.dtype = TP_DTYPE_F32;
  a[3] = ints_arg(1, (int64_t[]){2}); /* padding over half the kernel: CPU words the error */
  st = ap->infer(ap, a, 7, out, &n);
  CHECK(st && tp_status_code(st) == TP_UNIMPLEMENTED);
  tp_status_free(st);
  /* _adaptive_avg_pool2d(x[1,3,2], [2,1]): windows [0,2) and [1,3) overlap */
  tp_op_arg_t ad[2] = {tensor(TP_DTYPE_F32, 3, (int64_t[]){1, 3, 2}), ints_arg(2, (int64_t[]){2, 1})};
  check_golden("_adaptive_avg_pool2d", ad, 2, "adaptive_avg_pool2d_f32.mlir");
}

static void test_max_pool_family(void) {
  int64_t s[5] = {2, 3, 5, 6, 7}, k3[3] = {2, 3, 2}, os[3] = {2, 4, 3};
  tp_op_arg_t none;
  memset(&none, 0, sizeof(none));
  none.kind = TP_ARG_INTS;
  tp_op_arg_t a[6] = {tensor(TP_DTYPE_BF16, 5, s), ints_arg(3, k3), none, ints_arg(1, (int64_t[]){1}),
                      ints_arg(1, (int64_t[]){1}), int_arg(0)};
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  CHECK(emits("max_pool3d_with_indices", a, 6, out, &n, "stablehlo.select"));
  CHECK(n == 2 && out[0].sizes[2] == 3 && out[0].sizes[3] == 2 && out[0].sizes[4] == 4 &&
        out[1].dtype == TP_DTYPE_I64);
  tp_op_arg_t ad[2] = {tensor(TP_DTYPE_F32, 5, s), ints_arg(3, os)};
  CHECK(emits("adaptive_max_pool3d", ad, 2, out, &n, "stablehlo.gather"));
  CHECK(n == 2 && out[0].sizes[2] == 2 && out[0].sizes[3] == 4 && out[0].sizes[4] == 3);
  ad[0].meta.dtype = TP_DTYPE_I64; /* CPU's adaptive kernels take floats only */
  CHECK(unimplemented("adaptive_max_pool3d", ad, 2));
  int64_t us[4] = {2, 3, 4, 3}, o2[2] = {8, 7};
  tp_op_arg_t u[3] = {tensor(TP_DTYPE_F32, 4, us), tensor(TP_DTYPE_I64, 4, us), ints_arg(2, o2)};
  CHECK(emits("max_unpool2d", u, 3, out, &n, "stablehlo.scatter"));
  CHECK(n == 1 && out[0].sizes[2] == 8 && out[0].sizes[3] == 7);
  u[1].meta.dtype = TP_DTYPE_I32; /* CPU requires int64 indices and says so */
  CHECK(unimplemented("max_unpool2d", u, 3));
}

int main(void) {
  test_avg_pool();
  test_max_pool_family();
  TEST_MAIN_END("ops_pool_test");
}
