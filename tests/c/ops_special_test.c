/* The special-function rows (special.c): inference of their dtypes and fallbacks, and that every row
 * builds a program. Needs no device. */
#include <string.h>

#include "hlo/builder.h"
#include "ops/op.h"
#include "op_args.h"
#include "test.h"

/* The special functions (special.c): integers and bool compute in float32, 16-bit floats fall
 * back (igamma: integers fall back, 16-bit floats compute in float32), the polynomials broadcast
 * x with n and take a Python number for either; every row builds, the polynomials and igamma
 * with their loops. */
static void test_special(void) {
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  const tp_op_def_t *j0 = op("special_bessel_j0");
  tp_op_arg_t a = tensor(TP_DTYPE_I64, 1, (int64_t[]){3});
  CHECK_OK(j0->infer(j0, &a, 1, out, &n));
  CHECK(n == 1 && out[0].dtype == TP_DTYPE_F32);
  a.meta.dtype = TP_DTYPE_BF16;
  tp_status_t *st = j0->infer(j0, &a, 1, out, &n);
  CHECK(st && tp_status_code(st) == TP_UNIMPLEMENTED);
  tp_status_free(st);
  const tp_op_def_t *t = op("special_chebyshev_polynomial_t");
  tp_op_arg_t p[2] = {tensor(TP_DTYPE_F64, 2, (int64_t[]){3, 1}), tensor(TP_DTYPE_I64, 1, (int64_t[]){4})};
  CHECK_OK(t->infer(t, p, 2, out, &n));
  CHECK(out[0].dtype == TP_DTYPE_F64 && out[0].ndim == 2 && out[0].sizes[0] == 3 && out[0].sizes[1] == 4);
  const tp_op_def_t *xs = op("special_chebyshev_polynomial_t.x_scalar");
  tp_op_arg_t q[2] = {scalar(TP_DTYPE_F64, 0.5, true), tensor(TP_DTYPE_I32, 1, (int64_t[]){4})};
  CHECK_OK(xs->infer(xs, q, 2, out, &n));
  CHECK(out[0].dtype == TP_DTYPE_F32 && q[0].scalar_dtype == TP_DTYPE_F32);
  const tp_op_def_t *ig = op("igamma");
  tp_op_arg_t g[2] = {tensor(TP_DTYPE_BF16, 1, (int64_t[]){4}), tensor(TP_DTYPE_BF16, 1, (int64_t[]){4})};
  CHECK_OK(ig->infer(ig, g, 2, out, &n));
  CHECK(out[0].dtype == TP_DTYPE_BF16);
  g[0].meta.dtype = g[1].meta.dtype = TP_DTYPE_I64;
  st = ig->infer(ig, g, 2, out, &n);
  CHECK(st && tp_status_code(st) == TP_UNIMPLEMENTED);
  tp_status_free(st);
  for (int i = 0; i < tp_op_count; i++) {
    const tp_op_def_t *d = &tp_op_table[i];
    if (d->infer != j0->infer) continue;
    bool poly = strstr(d->name, "polynomial") != NULL, igamma = strstr(d->name, "igamma") != NULL;
    tp_op_arg_t args[2] = {tensor(TP_DTYPE_F32, 1, (int64_t[]){5}), tensor(TP_DTYPE_F32, 0, NULL)};
    if (strstr(d->name, ".x_scalar")) args[0] = scalar(TP_DTYPE_F64, 0.5, true);
    if (strstr(d->name, ".n_scalar")) args[1] = scalar(TP_DTYPE_I64, 3, true);
    char *text = emit_text(d->name, args, poly || igamma ? 2 : 1);
    CHECK(text && (strstr(text, "stablehlo.while") != NULL) == (poly || igamma));
    if (!text) fprintf(stderr, "no program for %s\n", d->name);
    free(text);
  }
}

int main(void) {
  test_special();
  TEST_MAIN_END("ops_special_test");
}
