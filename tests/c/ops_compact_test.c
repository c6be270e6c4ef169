/* Results of a data-dependent size (compact.c), boolean-mask indexing (index.c) and
 * multinomial's checks of its probabilities (random.c): the count protocol of op.h as infer
 * speaks it, shapes, CPU's errors, and that each pass emits a program. Needs no device. */
#include <string.h>

#include "hlo/builder.h"
#include "ops/op.h"
#include "op_args.h"
#include "test.h"

static tp_status_code_t infer_code(const char *name, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                                   int *n) {
  const tp_op_def_t *d = op(name);
  tp_status_t *st = d->infer(d, args, n_args, out, n);
  tp_status_code_t c = st ? tp_status_code(st) : TP_OK;
  tp_status_free(st);
  return c;
}

static void test_capacity(void) {
  CHECK(tp_op_count_capacity(0) == 0);
  CHECK(tp_op_count_capacity(1) == 1);
  CHECK(tp_op_count_capacity(5) == 8);
  CHECK(tp_op_count_capacity(64) == 64);
  CHECK(tp_op_count_capacity(65) == 128);
}

static void test_nonzero(void) {
  int64_t s[3] = {2, 3, 4};
  tp_op_arg_t a[2] = {tensor(TP_DTYPE_F32, 3, s), int_arg(TP_COUNT_UNKNOWN)};
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  /* First the count pass: one 0-d i64. */
  CHECK(emits("nonzero", a, 2, out, &n, "stablehlo.reduce"));
  CHECK(a[1].i == TP_COUNT_PASS && n == 1 && out[0].dtype == TP_DTYPE_I64 && out[0].ndim == 0);
  /* Then the compaction, for the rows the caller sets (at most the elements there are). */
  a[1] = int_arg(16);
  CHECK(emits("nonzero", a, 2, out, &n, "stablehlo.sort"));
  CHECK(n == 1 && out[0].ndim == 2 && out[0].sizes[0] == 16 && out[0].sizes[1] == 3);
  a[1] = int_arg(32);
  CHECK(infer_code("nonzero", a, 2, out, &n) == TP_OK && out[0].sizes[0] == 24);
  /* No count argument (a whole graph): no native lowering. */
  CHECK(infer_code("nonzero", a, 1, out, &n) == TP_UNIMPLEMENTED);
  /* A 0-d input has rows of no coordinates. */
  tp_op_arg_t z[2] = {tensor(TP_DTYPE_BOOL, 0, NULL), int_arg(1)};
  CHECK(emits("nonzero", z, 2, out, &n, "stablehlo.sort"));
  CHECK(out[0].sizes[0] == 1 && out[0].sizes[1] == 0);
}

static void test_masked_select(void) {
  int64_t s[2] = {3, 4}, row[1] = {4}, bad[2] = {5, 4};
  tp_op_arg_t a[3] = {tensor(TP_DTYPE_BF16, 2, s), tensor(TP_DTYPE_BOOL, 1, row),
                      int_arg(TP_COUNT_UNKNOWN)};
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  CHECK(emits("masked_select", a, 3, out, &n, "stablehlo.reduce"));
  CHECK(a[2].i == TP_COUNT_PASS && out[0].dtype == TP_DTYPE_I64);
  a[2] = int_arg(8);
  CHECK(emits("masked_select", a, 3, out, &n, "stablehlo.gather"));
  CHECK(out[0].dtype == TP_DTYPE_BF16 && out[0].ndim == 1 && out[0].sizes[0] == 8);
  a[1].meta.dtype = TP_DTYPE_U8; /* CPU wants a bool mask */
  CHECK(infer_code("masked_select", a, 3, out, &n) == TP_INVALID_ARGUMENT);
  a[1] = tensor(TP_DTYPE_BOOL, 2, bad);
  CHECK(infer_code("masked_select", a, 3, out, &n) == TP_INVALID_ARGUMENT);
}

static void test_nonzero_static(void) {
  int64_t s[2] = {3, 4};
  tp_op_arg_t a[3] = {tensor(TP_DTYPE_I32, 2, s), int_arg(20), int_arg(-1)};
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  CHECK(emits("nonzero_static", a, 3, out, &n, "stablehlo.sort"));
  CHECK(out[0].sizes[0] == 20 && out[0].sizes[1] == 2 && out[0].dtype == TP_DTYPE_I64);
  a[1] = int_arg(-1);
  CHECK(infer_code("nonzero_static", a, 3, out, &n) == TP_INVALID_ARGUMENT);
}

static void test_mask_indexing(void) {
  int64_t s[3] = {4, 5, 3}, m[2] = {4, 5}, m1[1] = {4}, wrong[1] = {5}, one[1] = {1};
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  /* x[mask]: (self, 1, mask, count); its rows lead, so they may pad to a capacity. */
  tp_op_arg_t a[4] = {tensor(TP_DTYPE_F32, 3, s), int_arg(1), tensor(TP_DTYPE_BOOL, 2, m),
                      int_arg(TP_COUNT_UNKNOWN)};
  CHECK(emits("index.Tensor", a, 4, out, &n, "stablehlo.reduce"));
  CHECK(a[3].i == TP_COUNT_PASS && out[0].ndim == 0);
  a[3] = int_arg(8);
  CHECK(emits("index.Tensor", a, 4, out, &n, "stablehlo.sort"));
  CHECK(out[0].ndim == 2 && out[0].sizes[0] == 8 && out[0].sizes[1] == 3);
  /* x[mask, :, idx]: the rows broadcast with idx, so they are counted exactly. */
  tp_op_arg_t b[6] = {tensor(TP_DTYPE_F32, 3, s), int_arg(3), tensor(TP_DTYPE_BOOL, 1, m1),
                      (tp_op_arg_t){.kind = TP_ARG_NONE}, tensor(TP_DTYPE_I64, 1, one),
                      int_arg(TP_COUNT_UNKNOWN)};
  CHECK(infer_code("index.Tensor", b, 6, out, &n) == TP_OK && b[5].i == TP_COUNT_PASS_EXACT);
  b[5] = int_arg(3);
  CHECK(emits("index.Tensor", b, 6, out, &n, "stablehlo.sort"));
  CHECK(out[0].ndim == 2 && out[0].sizes[0] == 3 && out[0].sizes[1] == 5);
  /* A mask of the wrong shape, or too many indices: IndexError (OUT_OF_RANGE) before any count. */
  a[2] = tensor(TP_DTYPE_BOOL, 1, wrong);
  a[3] = int_arg(TP_COUNT_UNKNOWN);
  CHECK(infer_code("index.Tensor", a, 4, out, &n) == TP_OUT_OF_RANGE);
  int64_t big[4] = {4, 5, 3, 2};
  a[2] = tensor(TP_DTYPE_BOOL, 4, big);
  CHECK(infer_code("index.Tensor", a, 4, out, &n) == TP_OUT_OF_RANGE);
  /* Integer indices need no count; a uint8 mask (deprecated) stays on CPU. */
  tp_op_arg_t c[4] = {tensor(TP_DTYPE_F32, 3, s), int_arg(1), tensor(TP_DTYPE_I64, 1, one),
                      int_arg(TP_COUNT_UNKNOWN)};
  CHECK(infer_code("index.Tensor", c, 4, out, &n) == TP_OK && c[3].i == TP_COUNT_UNKNOWN);
  CHECK(out[0].ndim == 3 && out[0].sizes[0] == 1);
  c[2].meta.dtype = TP_DTYPE_U8;
  CHECK(infer_code("index.Tensor", c, 4, out, &n) == TP_UNIMPLEMENTED);
}

static void test_multinomial_verdict(void) {
  int64_t s[2] = {3, 5};
  /* (self, num_samples, replacement, generator, key, count) */
  tp_op_arg_t a[6] = {tensor(TP_DTYPE_F32, 2, s), int_arg(4), int_arg(1),
                      (tp_op_arg_t){.kind = TP_ARG_NONE}, scalar(TP_DTYPE_I64, 7, false),
                      int_arg(TP_COUNT_UNKNOWN)};
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  /* The checks of the values come first, exactly (a verdict, not a count to round up). */
  CHECK(emits("multinomial", a, 6, out, &n, "stablehlo.reduce"));
  CHECK(a[5].i == TP_COUNT_PASS_EXACT && out[0].ndim == 0 && out[0].dtype == TP_DTYPE_I64);
  a[5] = int_arg(0);
  CHECK(emits("multinomial", a, 6, out, &n, "stablehlo.log"));
  CHECK(out[0].dtype == TP_DTYPE_I64 && out[0].ndim == 2 && out[0].sizes[0] == 3 && out[0].sizes[1] == 4);
  a[5] = int_arg(1); /* a failed check: CPU's error */
  CHECK(infer_code("multinomial", a, 6, out, &n) == TP_INVALID_ARGUMENT);
  a[5] = int_arg(0);
  a[2] = int_arg(0);
  a[1] = int_arg(6); /* more samples than categories without replacement */
  CHECK(infer_code("multinomial", a, 6, out, &n) == TP_INVALID_ARGUMENT);
  a[1] = int_arg(2); /* no count argument (a whole graph): not native there */
  tp_op_arg_t g[5] = {a[0], a[1], a[2], a[3], a[4]};
  CHECK(infer_code("multinomial", g, 5, out, &n) == TP_UNIMPLEMENTED);
}

int main(void) {
  test_capacity();
  test_nonzero();
  test_masked_select();
  test_nonzero_static();
  test_mask_indexing();
  test_multinomial_verdict();
  TEST_MAIN_END("ops_compact_test");
}
