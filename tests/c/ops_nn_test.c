/* Neural-net rows (conv.c, activation.c, norm.c): the dtype rules of convolution, dropout backward and batch norm
 * that follow CPU. Needs no device. */
#include "ops/op.h"
#include "op_args.h"
#include "test.h"

/* Dtype rules that follow CPU: int64 convolution is native, other integer types fall back; an
 * integer grad of dropout backward promotes to float; half batch norm with float parameters keeps
 * float statistics. */
static void test_conv_nn_dtypes(void) {
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  tp_op_arg_t none = {0}, ints = {0};
  ints.kind = TP_ARG_INTS;
  const tp_op_def_t *cv = op("convolution");
  tp_op_arg_t ca[9] = {tensor(TP_DTYPE_I64, 3, (int64_t[]){2, 3, 7}), tensor(TP_DTYPE_I64, 3, (int64_t[]){4, 3, 2}),
                       none, ints, ints, ints, int_arg(0), ints, int_arg(1)};
  CHECK_OK(cv->infer(cv, ca, 9, out, &n));
  CHECK(n == 1 && out[0].dtype == TP_DTYPE_I64 && out[0].sizes[1] == 4 && out[0].sizes[2] == 6);
  ca[0].meta.dtype = ca[1].meta.dtype = TP_DTYPE_I32;
  tp_status_t *st = cv->infer(cv, ca, 9, out, &n);
  CHECK(st && tp_status_code(st) == TP_UNIMPLEMENTED);
  tp_status_free(st);
  ca[1].meta.dtype = TP_DTYPE_F32;
  st = cv->infer(cv, ca, 9, out, &n);
  CHECK(st && tp_status_code(st) == TP_INVALID_ARGUMENT);
  tp_status_free(st);

  const tp_op_def_t *db = op("native_dropout_backward");
  tp_op_arg_t da[3] = {tensor(TP_DTYPE_I64, 1, (int64_t[]){5}), tensor(TP_DTYPE_BOOL, 1, (int64_t[]){5}), none};
  da[2].kind = TP_ARG_FLOAT;
  da[2].f = 1.5;
  CHECK_OK(db->infer(db, da, 3, out, &n));
  CHECK(n == 1 && out[0].dtype == TP_DTYPE_F32);
  da[0].meta.dtype = TP_DTYPE_BF16;
  CHECK_OK(db->infer(db, da, 3, out, &n));
  CHECK(out[0].dtype == TP_DTYPE_BF16);

  const tp_op_def_t *bn = op("native_batch_norm");
  tp_op_arg_t ba[8] = {tensor(TP_DTYPE_BF16, 3, (int64_t[]){2, 3, 4}), tensor(TP_DTYPE_BF16, 1, (int64_t[]){3}),
                       none, none, none, int_arg(1), none, none};
  CHECK_OK(bn->infer(bn, ba, 8, out, &n));
  CHECK(n == 3 && out[1].dtype == TP_DTYPE_BF16 && out[2].dtype == TP_DTYPE_BF16);
  ba[1].meta.dtype = TP_DTYPE_F32;
  CHECK_OK(bn->infer(bn, ba, 8, out, &n));
  CHECK(n == 3 && out[0].dtype == TP_DTYPE_BF16 && out[1].dtype == TP_DTYPE_F32 && out[2].dtype == TP_DTYPE_F32);
}

int main(void) {
  test_conv_nn_dtypes();
  TEST_MAIN_END("ops_nn_test");
}
