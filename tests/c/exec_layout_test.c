/* Output layouts (exec/layout.c, ops/layout.c): the strides PyTorch's CPU kernels give fresh
 * outputs, from argument views alone. Needs no device: views here have no storage. */
#include <string.h>

#include "exec/layout.h"
#include "op_args.h"
#include "test.h"

static tp_eager_arg_t view_arg(int ndim, const int64_t *sizes, const int64_t *strides) {
  tp_eager_arg_t a;
  memset(&a, 0, sizeof(a));
  a.arg = tensor(TP_DTYPE_F32, ndim, sizes);
  a.view.dtype = TP_DTYPE_F32;
  a.view.ndim = ndim;
  memcpy(a.view.sizes, sizes, sizeof(int64_t) * (size_t)ndim);
  memcpy(a.view.strides, strides, sizeof(int64_t) * (size_t)ndim);
  return a;
}

static bool strides_are(const char *op, const tp_eager_arg_t *args, int n, const tp_meta_t *out,
                        const int64_t *want) {
  int64_t got[TP_MAX_DIMS];
  int i = tp_op_lookup(op, NULL);
  CHECK(i >= 0);
  if (!tp_exec_output_strides(i, args, n, out, got)) return want == NULL;
  return want && memcmp(got, want, sizeof(int64_t) * (size_t)out->ndim) == 0;
}

static void test_predicates(void) {
  int64_t s[4] = {2, 4, 6, 6}, cl[4] = {144, 1, 24, 4}, rm[4] = {144, 36, 6, 1};
  CHECK(tp_layout_suggests_channels_last(4, s, cl));
  CHECK(!tp_layout_suggests_channels_last(4, s, rm));
  int64_t n111[4] = {3, 1, 1, 1}, ones[4] = {1, 1, 1, 1}; /* ambiguous: row-major */
  CHECK(!tp_layout_suggests_channels_last(4, n111, ones));
  int64_t s5[5] = {2, 3, 4, 5, 6}, cl5[5] = {360, 1, 90, 18, 3}, got[5];
  CHECK(tp_layout_suggests_channels_last(5, s5, cl5));
  tp_layout_channels_last_strides(5, s5, got);
  CHECK(memcmp(got, cl5, sizeof(got)) == 0);
  CHECK(tp_layout_non_overlapping_dense(4, s, cl));
  int64_t gap[4] = {288, 1, 24, 4}; /* a batch-strided slice: not dense */
  CHECK(!tp_layout_non_overlapping_dense(4, s, gap));
}

static void test_elementwise(void) {
  int64_t s[4] = {2, 4, 6, 6}, cl[4] = {144, 1, 24, 4}, rm[4] = {144, 36, 6, 1};
  tp_meta_t out = {.dtype = TP_DTYPE_F32, .ndim = 4, .sizes = {2, 4, 6, 6}};
  tp_eager_arg_t a[3] = {view_arg(4, s, cl), view_arg(4, s, cl)};
  a[2].arg = scalar(TP_DTYPE_F64, 1, true);
  CHECK(strides_are("add.Tensor", a, 3, &out, cl));      /* both channels-last */
  CHECK(strides_are("relu", a, 1, &out, cl));
  a[1] = view_arg(4, s, rm);
  CHECK(strides_are("add.Tensor", a, 3, &out, cl));      /* the first operand decides */
  tp_eager_arg_t b[2] = {view_arg(4, s, rm), view_arg(4, s, cl)};
  CHECK(strides_are("add.Tensor", b, 2, &out, NULL));    /* ... both ways */
  int64_t bs[3] = {4, 1, 1}, bst[3] = {1, 1, 1};          /* a per-channel bias broadcasts */
  tp_eager_arg_t c[2] = {view_arg(4, s, cl), view_arg(3, bs, bst)};
  CHECK(strides_are("add.Tensor", c, 2, &out, cl));
  int64_t t[2] = {6, 5}, tst[2] = {1, 6};                 /* a transposed matrix stays so */
  tp_meta_t out2 = {.dtype = TP_DTYPE_F32, .ndim = 2, .sizes = {6, 5}};
  tp_eager_arg_t d[1] = {view_arg(2, t, tst)};
  CHECK(strides_are("exp", d, 1, &out2, tst));
  /* An output that is not the operands' shape (a reduction) is row-major. */
  tp_meta_t sum = {.dtype = TP_DTYPE_F32, .ndim = 2, .sizes = {2, 4}};
  CHECK(strides_are("sum.dim_IntList", a, 1, &sum, NULL));
}

static void test_suggested(void) {
  int64_t s[4] = {2, 4, 6, 6}, cl[4] = {144, 1, 24, 4}, rm[4] = {144, 36, 6, 1};
  int64_t ws[4] = {5, 4, 3, 3}, wrm[4] = {36, 9, 3, 1}, wcl[4] = {36, 1, 12, 4};
  tp_meta_t out = {.dtype = TP_DTYPE_F32, .ndim = 4, .sizes = {2, 5, 4, 4}};
  int64_t out_cl[4] = {80, 1, 20, 5};
  tp_eager_arg_t a[2] = {view_arg(4, s, cl), view_arg(4, ws, wrm)};
  CHECK(strides_are("convolution", a, 2, &out, out_cl));
  a[0] = view_arg(4, s, rm);
  CHECK(strides_are("convolution", a, 2, &out, NULL));
  a[1] = view_arg(4, ws, wcl);                            /* a channels-last weight suffices */
  CHECK(strides_are("convolution", a, 2, &out, out_cl));
  /* Batch norm's backward follows its input (argument 1), not the incoming gradient. */
  tp_meta_t gi = {.dtype = TP_DTYPE_F32, .ndim = 4, .sizes = {2, 4, 6, 6}}, mean = {.ndim = 1, .sizes = {4}};
  tp_eager_arg_t g[2] = {view_arg(4, s, cl), view_arg(4, s, rm)};
  CHECK(strides_are("native_batch_norm_backward", g, 2, &gi, NULL));
  g[0] = view_arg(4, s, rm);
  g[1] = view_arg(4, s, cl);
  CHECK(strides_are("native_batch_norm_backward", g, 2, &gi, cl));
  CHECK(strides_are("native_batch_norm_backward", g, 2, &mean, NULL));
  CHECK(strides_are("_softmax", g + 1, 1, &gi, NULL)); /* not a channels-last kernel */
}

int main(void) {
  test_predicates();
  test_elementwise();
  test_suggested();
  TEST_MAIN_END("exec_layout_test");
}
