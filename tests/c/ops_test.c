/* The op table (sorted, every variant found), dtype promotion, inference of the binary, reduction,
 * matmul and other rows that have no family test of their own, and one golden StableHLO text per
 * common op. Needs no device. */
#include <string.h>

#include "hlo/builder.h"
#include "ops/op.h"
#include "op_args.h"
#include "test.h"

static void test_table(void) {
  for (int i = 1; i < tp_op_count; i++) CHECK(strcmp(tp_op_table[i - 1].name, tp_op_table[i].name) < 0);
  for (int i = 0; i < tp_op_count; i++) {
    tp_op_variant_t v = (tp_op_variant_t)-1;
    CHECK(tp_op_lookup(tp_op_table[i].name, &v) == i && v == TP_VARIANT_FUNCTIONAL);
    if (tp_op_table[i].inplace) CHECK(tp_op_lookup(tp_op_table[i].inplace, &v) == i && v == TP_VARIANT_INPLACE);
    if (tp_op_table[i].out) CHECK(tp_op_lookup(tp_op_table[i].out, &v) == i && v == TP_VARIANT_OUT);
  }
  CHECK(tp_op_lookup("no_such_op", NULL) == -1);
}

static void test_promotion(void) {
  CHECK(tp_dtype_promote(TP_DTYPE_U8, TP_DTYPE_I8) == TP_DTYPE_I16);
  CHECK(tp_dtype_promote(TP_DTYPE_BF16, TP_DTYPE_F16) == TP_DTYPE_F32);
  CHECK(tp_dtype_promote(TP_DTYPE_BOOL, TP_DTYPE_I32) == TP_DTYPE_I32);
  CHECK(tp_dtype_promote(TP_DTYPE_I64, TP_DTYPE_F16) == TP_DTYPE_F16);
  CHECK(!tp_dtype_can_cast(TP_DTYPE_F32, TP_DTYPE_I64));
  CHECK(tp_dtype_can_cast(TP_DTYPE_I64, TP_DTYPE_F32));
}

static void test_binary_infer(void) {
  const tp_op_def_t *add = op("add.Tensor");
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  /* (2,3) f32 + (3) i64 -> (2,3) f32 */
  tp_op_arg_t args[3] = {tensor(TP_DTYPE_F32, 2, (int64_t[]){2, 3}),
                         tensor(TP_DTYPE_I64, 1, (int64_t[]){3}), scalar(TP_DTYPE_I64, 1, false)};
  CHECK_OK(add->infer(add, args, 3, out, &n));
  CHECK(n == 1 && out[0].dtype == TP_DTYPE_F32 && out[0].ndim == 2 && out[0].sizes[1] == 3);
  CHECK(args[2].scalar_dtype == TP_DTYPE_F32);
  /* int tensor * python float -> default float; 0-dim f64 tensor does not widen a f32 tensor */
  const tp_op_def_t *mul = op("mul.Tensor");
  tp_op_arg_t a2[2] = {tensor(TP_DTYPE_I64, 1, (int64_t[]){4}), scalar(TP_DTYPE_F64, 0.5, true)};
  CHECK_OK(mul->infer(mul, a2, 2, out, &n));
  CHECK(out[0].dtype == TP_DTYPE_F32);
  tp_op_arg_t a3[2] = {tensor(TP_DTYPE_F32, 1, (int64_t[]){4}), tensor(TP_DTYPE_F64, 0, NULL)};
  CHECK_OK(mul->infer(mul, a3, 2, out, &n));
  CHECK(out[0].dtype == TP_DTYPE_F32);
  /* mismatched shapes */
  tp_op_arg_t a4[2] = {tensor(TP_DTYPE_F32, 1, (int64_t[]){4}), tensor(TP_DTYPE_F32, 1, (int64_t[]){5})};
  tp_status_t *st = mul->infer(mul, a4, 2, out, &n);
  CHECK(st && tp_status_code(st) == TP_INVALID_ARGUMENT && strstr(tp_status_message(st), "must match"));
  tp_status_free(st);
  /* integer division promotes to float */
  const tp_op_def_t *div = op("div.Tensor");
  tp_op_arg_t a5[2] = {tensor(TP_DTYPE_I32, 1, (int64_t[]){4}), tensor(TP_DTYPE_I32, 1, (int64_t[]){4})};
  CHECK_OK(div->infer(div, a5, 2, out, &n));
  CHECK(out[0].dtype == TP_DTYPE_F32);
}

static void test_reduce_linalg_infer(void) {
  const tp_op_def_t *sum = op("sum.dim_IntList");
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  tp_op_arg_t dim;
  memset(&dim, 0, sizeof(dim));
  dim.kind = TP_ARG_INTS;
  dim.n = 1;
  dim.ints[0] = -1;
  tp_op_arg_t keep = {0};
  keep.kind = TP_ARG_INT;
  keep.i = 1;
  tp_op_arg_t none = {0};
  tp_op_arg_t args[4] = {tensor(TP_DTYPE_I32, 3, (int64_t[]){2, 3, 4}), dim, keep, none};
  CHECK_OK(sum->infer(sum, args, 4, out, &n));
  CHECK(out[0].dtype == TP_DTYPE_I64 && out[0].ndim == 3 && out[0].sizes[2] == 1);
  args[1].ints[0] = 3;
  tp_status_t *st = sum->infer(sum, args, 4, out, &n);
  CHECK(st && strstr(tp_status_message(st), "Dimension out of range"));
  tp_status_free(st);

  const tp_op_def_t *mm = op("mm");
  tp_op_arg_t m[2] = {tensor(TP_DTYPE_F32, 2, (int64_t[]){2, 3}), tensor(TP_DTYPE_F32, 2, (int64_t[]){4, 5})};
  st = mm->infer(mm, m, 2, out, &n);
  CHECK(st && strstr(tp_status_message(st), "cannot be multiplied (2x3 and 4x5)"));
  tp_status_free(st);
  m[1] = tensor(TP_DTYPE_F32, 2, (int64_t[]){3, 5});
  CHECK_OK(mm->infer(mm, m, 2, out, &n));
  CHECK(out[0].sizes[0] == 2 && out[0].sizes[1] == 5);
}

static void test_golden(void) {
  tp_op_arg_t add[3] = {tensor(TP_DTYPE_BF16, 2, (int64_t[]){2, 3}),
                        tensor(TP_DTYPE_BF16, 1, (int64_t[]){3}), scalar(TP_DTYPE_F64, 2.0, false)};
  check_golden("add.Tensor", add, 3, "add_bf16_alpha.mlir");
  tp_op_arg_t mm[2] = {tensor(TP_DTYPE_F32, 2, (int64_t[]){2, 3}), tensor(TP_DTYPE_F32, 2, (int64_t[]){3, 4})};
  check_golden("mm", mm, 2, "mm_f32.mlir");
  tp_op_arg_t none = {0};
  tp_op_arg_t sum[2] = {tensor(TP_DTYPE_F16, 2, (int64_t[]){2, 3}), none};
  check_golden("sum", sum, 2, "sum_f16.mlir");
  tp_op_arg_t relu[1] = {tensor(TP_DTYPE_F32, 1, (int64_t[]){5})};
  check_golden("relu", relu, 1, "relu_f32.mlir");
  /* sort.stable(self, stable=True, dim=1, descending=True): the comparator puts NaN first. */
  tp_op_arg_t sort[4] = {tensor(TP_DTYPE_F32, 2, (int64_t[]){2, 5}), int_arg(1), int_arg(1), int_arg(1)};
  check_golden("sort.stable", sort, 4, "sort_stable_f32_desc.mlir");
  /* scatter_reduce.two(self, 0, index, src, "amax", include_self=False) */
  tp_op_arg_t sr[6] = {tensor(TP_DTYPE_I32, 1, (int64_t[]){4}), int_arg(0),
                       tensor(TP_DTYPE_I64, 1, (int64_t[]){3}), tensor(TP_DTYPE_I32, 1, (int64_t[]){3}),
                       str_arg("amax"), int_arg(0)};
  check_golden("scatter_reduce.two", sr, 6, "scatter_reduce_amax_i32.mlir");
}

/* Inference of the special-function, index-reduction, reduction and sorting rows. */
static void test_added_ops_infer(void) {
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  const tp_op_def_t *pg = op("polygamma");
  tp_op_arg_t pa[2] = {int_arg(-1), tensor(TP_DTYPE_I64, 1, (int64_t[]){3})};
  tp_status_t *st = pg->infer(pg, pa, 2, out, &n);
  CHECK(st && strstr(tp_status_message(st), "does not support negative n"));
  tp_status_free(st);
  pa[0] = int_arg(2);
  CHECK_OK(pg->infer(pg, pa, 2, out, &n));
  CHECK(n == 1 && out[0].dtype == TP_DTYPE_F32);

  const tp_op_def_t *vm = op("var_mean.correction");
  tp_op_arg_t none = {0};
  tp_op_arg_t va[4] = {tensor(TP_DTYPE_BF16, 2, (int64_t[]){3, 4}), none, none, int_arg(1)};
  CHECK_OK(vm->infer(vm, va, 4, out, &n));
  CHECK(n == 2 && out[1].dtype == TP_DTYPE_BF16 && out[0].ndim == 2 && out[0].sizes[1] == 1);

  const tp_op_def_t *cm = op("_cummax_helper");
  tp_op_arg_t ca[4] = {tensor(TP_DTYPE_F32, 1, (int64_t[]){5}), tensor(TP_DTYPE_F32, 1, (int64_t[]){5}),
                       tensor(TP_DTYPE_I64, 1, (int64_t[]){5}), int_arg(0)};
  CHECK_OK(cm->infer(cm, ca, 4, out, &n));
  CHECK(n == 2 && out[0].writes_arg == 2 && out[1].writes_arg == 3);

  const tp_op_def_t *tk = op("topk");
  tp_op_arg_t ta[3] = {tensor(TP_DTYPE_F32, 2, (int64_t[]){2, 5}), int_arg(6), int_arg(-1)};
  st = tk->infer(tk, ta, 3, out, &n);
  CHECK(st && strstr(tp_status_message(st), "out of range"));
  tp_status_free(st);
  ta[0].meta.dtype = TP_DTYPE_I64; /* CPU's tie order: falls back */
  ta[1] = int_arg(2);
  st = tk->infer(tk, ta, 3, out, &n);
  CHECK(st && tp_status_code(st) == TP_UNIMPLEMENTED);
  tp_status_free(st);

  const tp_op_def_t *ir = op("index_reduce");
  tp_op_arg_t ia[5] = {tensor(TP_DTYPE_F32, 2, (int64_t[]){4, 3}), int_arg(0),
                       tensor(TP_DTYPE_I64, 1, (int64_t[]){2}), tensor(TP_DTYPE_F32, 2, (int64_t[]){2, 3}),
                       str_arg("sum")};
  st = ir->infer(ir, ia, 5, out, &n);
  CHECK(st && strstr(tp_status_message(st), "prod, mean, amax or amin"));
  tp_status_free(st);
}

int main(void) {
  test_table();
  test_promotion();
  test_binary_infer();
  test_reduce_linalg_infer();
  test_golden();
  test_added_ops_infer();
  TEST_MAIN_END("ops_test");
}
