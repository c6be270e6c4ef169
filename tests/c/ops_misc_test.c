/* Stand-alone ops that once shared misc.c (equal, glu, mode, median, searchsorted, index_copy,
 * masked_scatter): shape/dtype inference, the calls left to CPU, and that each emits a program.
 * Needs no device. */
#include <string.h>

#include "hlo/builder.h"
#include "ops/op.h"
#include "op_args.h"
#include "test.h"

static void test_equal(void) {
  int64_t s[2] = {3, 4}, t[1] = {4};
  tp_op_arg_t a[2] = {tensor(TP_DTYPE_BF16, 2, s), tensor(TP_DTYPE_BF16, 2, s)};
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  CHECK(emits("equal", a, 2, out, &n, "stablehlo.reduce"));
  CHECK(n == 1 && out[0].dtype == TP_DTYPE_BOOL && out[0].ndim == 0);
  a[1] = tensor(TP_DTYPE_BF16, 1, t); /* other shapes: a constant false */
  CHECK(emits("equal", a, 2, out, &n, "stablehlo.constant"));
  a[1] = tensor(TP_DTYPE_F32, 2, s); /* CPU raises on differing dtypes */
  CHECK(unimplemented("equal", a, 2));
}

static void test_glu_mode_median(void) {
  int64_t s[3] = {2, 6, 5}, odd[2] = {3, 5};
  tp_op_arg_t a[3] = {tensor(TP_DTYPE_F32, 3, s), int_arg(1), int_arg(1)};
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  CHECK(emits("glu", a, 2, out, &n, "stablehlo.logistic"));
  CHECK(n == 1 && out[0].sizes[1] == 3 && out[0].sizes[2] == 5);
  tp_op_arg_t o[2] = {tensor(TP_DTYPE_F32, 2, odd), int_arg(1)};
  CHECK(unimplemented("glu", o, 2)); /* CPU words the odd-size error */
  CHECK(emits("mode", a, 3, out, &n, "stablehlo.sort"));
  CHECK(n == 2 && out[0].ndim == 3 && out[0].sizes[1] == 1 && out[1].dtype == TP_DTYPE_I64);
  a[0].meta.dtype = TP_DTYPE_BF16;
  CHECK(emits("median.dim", a, 2, out, &n, "stablehlo.sort"));
  CHECK(n == 2 && out[0].ndim == 2 && out[0].dtype == TP_DTYPE_BF16);
  CHECK(emits("nanmedian", a, 1, out, &n, "stablehlo.sort"));
  CHECK(n == 1 && out[0].ndim == 0);
}

static void test_search_and_copies(void) {
  int64_t seq[1] = {9}, v[2] = {3, 4};
  tp_op_arg_t a[6] = {tensor(TP_DTYPE_F32, 1, seq), tensor(TP_DTYPE_F32, 2, v), int_arg(1), int_arg(0)};
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  CHECK(emits("searchsorted.Tensor", a, 4, out, &n, "stablehlo.reduce"));
  CHECK(n == 1 && out[0].dtype == TP_DTYPE_I32 && out[0].ndim == 2 && out[0].sizes[1] == 4);
  a[1].meta.dtype = TP_DTYPE_I64; /* mixed dtypes: CPU's rules */
  CHECK(unimplemented("searchsorted.Tensor", a, 4));
  int64_t x[2] = {5, 3}, idx[1] = {2}, src[2] = {2, 3};
  tp_op_arg_t c[4] = {tensor(TP_DTYPE_BF16, 2, x), int_arg(0), tensor(TP_DTYPE_I64, 1, idx), tensor(TP_DTYPE_BF16, 2, src)};
  CHECK(emits("index_copy", c, 4, out, &n, "stablehlo.scatter"));
  CHECK(n == 1 && out[0].sizes[0] == 5);
  int64_t mk[1] = {3}, ns[1] = {7};
  tp_op_arg_t m[3] = {tensor(TP_DTYPE_F32, 2, x), tensor(TP_DTYPE_BOOL, 1, mk), tensor(TP_DTYPE_F32, 1, ns)};
  CHECK(emits("masked_scatter", m, 3, out, &n, "stablehlo.reduce_window"));
  CHECK(n == 1 && out[0].ndim == 2 && out[0].sizes[0] == 5);
}

int main(void) {
  test_equal();
  test_glu_mode_median();
  test_search_and_copies();
  TEST_MAIN_END("ops_misc_test");
}
