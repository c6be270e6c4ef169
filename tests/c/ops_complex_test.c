/* complex64/complex128: dtype tables and promotion, the complex gate, FFT and complex-op inference, and the
 * StableHLO the builder writes for complex values. Needs no device. */
#include <string.h>

#include "hlo/builder.h"
#include "ops/op.h"
#include "op_args.h"
#include "test.h"

static tp_status_code_t infer_code(const char *name, tp_op_arg_t *args, int n, tp_meta_t *out) {
  const tp_op_def_t *d = op(name);
  int n_out = 0;
  tp_status_t *st = tp_op_check_complex(d, args, n, NULL, 0);
  if (!st) st = d->infer(d, args, n, out, &n_out);
  if (!st) st = tp_op_check_complex(d, NULL, 0, out, n_out);
  tp_status_code_t c = st ? tp_status_code(st) : TP_OK;
  tp_status_free(st);
  return c;
}

static void test_dtype(void) {
  CHECK(tp_dtype_size(TP_DTYPE_C64) == 8);
  CHECK(strcmp(tp_dtype_hlo_name(TP_DTYPE_C64), "complex<f32>") == 0);
  CHECK(strcmp(tp_dtype_name(TP_DTYPE_C64), "complex64") == 0);
  CHECK(tp_dtype_is_complex(TP_DTYPE_C64) && !tp_dtype_is_float(TP_DTYPE_C64));
  CHECK(!tp_dtype_is_int(TP_DTYPE_C64));
  CHECK(tp_dtype_storage(TP_DTYPE_C64) == TP_DTYPE_F32);
  CHECK(tp_dtype_storage(TP_DTYPE_I64) == TP_DTYPE_I64);
  CHECK(tp_dtype_promote(TP_DTYPE_F32, TP_DTYPE_C64) == TP_DTYPE_C64);
  CHECK(tp_dtype_promote(TP_DTYPE_C64, TP_DTYPE_I64) == TP_DTYPE_C64);
  CHECK(tp_dtype_promote(TP_DTYPE_BOOL, TP_DTYPE_C64) == TP_DTYPE_C64);
  CHECK(tp_dtype_promote(TP_DTYPE_BF16, TP_DTYPE_C64) == TP_DTYPE_C64);
  CHECK(tp_dtype_promote(TP_DTYPE_F64, TP_DTYPE_C64) == TP_DTYPE_C128);
  CHECK(tp_dtype_promote(TP_DTYPE_C64, TP_DTYPE_C128) == TP_DTYPE_C128);
  CHECK(tp_dtype_promote(TP_DTYPE_C128, TP_DTYPE_F32) == TP_DTYPE_C128);
  CHECK(tp_dtype_size(TP_DTYPE_C128) == 16 && tp_dtype_storage(TP_DTYPE_C128) == TP_DTYPE_F64);
  CHECK(tp_dtype_to_complex(TP_DTYPE_F64) == TP_DTYPE_C128);
  CHECK(tp_dtype_to_complex(TP_DTYPE_I32) == TP_DTYPE_INVALID);
  CHECK(tp_dtype_can_cast(TP_DTYPE_F32, TP_DTYPE_C64));
  CHECK(!tp_dtype_can_cast(TP_DTYPE_C64, TP_DTYPE_F32));
}

static void test_result_type(void) {
  /* a complex Python number with a float tensor: complex64 */
  tp_op_arg_t a[2] = {tensor(TP_DTYPE_F32, 1, (int64_t[]){3}), {0}};
  a[1].kind = TP_ARG_SCALAR;
  a[1].wrapped = true;
  a[1].meta.dtype = TP_DTYPE_C64;
  CHECK(tp_result_type(a, 2) == TP_DTYPE_C64);
  a[0].meta.dtype = TP_DTYPE_I64;
  CHECK(tp_result_type(a, 2) == TP_DTYPE_C64);
  a[0].meta.dtype = TP_DTYPE_F64; /* a float keeps its width */
  CHECK(tp_result_type(a, 2) == TP_DTYPE_C128);
  a[0].meta.dtype = TP_DTYPE_BF16; /* no complex bfloat16 */
  CHECK(tp_result_type(a, 2) == TP_DTYPE_INVALID);
}

static void test_gate(void) {
  tp_meta_t out[TP_MAX_OUTS];
  tp_op_arg_t z[1] = {tensor(TP_DTYPE_C64, 1, (int64_t[]){4})};
  CHECK(infer_code("exp", z, 1, out) == TP_UNIMPLEMENTED); /* no complex lowering */
  CHECK(infer_code("neg", z, 1, out) == TP_OK && out[0].dtype == TP_DTYPE_C64);
  CHECK(infer_code("abs", z, 1, out) == TP_OK && out[0].dtype == TP_DTYPE_F32);
  tp_op_arg_t zz[2] = {tensor(TP_DTYPE_C64, 1, (int64_t[]){4}), tensor(TP_DTYPE_F32, 1, (int64_t[]){4})};
  CHECK(infer_code("mul.Tensor", zz, 2, out) == TP_OK && out[0].dtype == TP_DTYPE_C64);
  CHECK(infer_code("maximum", zz, 2, out) == TP_UNIMPLEMENTED);
  tp_op_arg_t ff[2] = {tensor(TP_DTYPE_F32, 2, (int64_t[]){2, 1}), tensor(TP_DTYPE_F32, 1, (int64_t[]){3})};
  CHECK(infer_code("complex", ff, 2, out) == TP_OK && out[0].dtype == TP_DTYPE_C64 &&
        out[0].ndim == 2 && out[0].sizes[0] == 2 && out[0].sizes[1] == 3);
  ff[0].meta.dtype = TP_DTYPE_F64; /* parts of two types: CPU's error */
  CHECK(infer_code("polar", ff, 2, out) == TP_UNIMPLEMENTED);
  ff[1].meta.dtype = TP_DTYPE_F64;
  CHECK(infer_code("polar", ff, 2, out) == TP_OK && out[0].dtype == TP_DTYPE_C128);
}

static void test_fft_infer(void) {
  tp_meta_t out[TP_MAX_OUTS];
  tp_op_arg_t r2c[4] = {tensor(TP_DTYPE_F32, 3, (int64_t[]){2, 6, 9}),
                        ints_arg(2, (int64_t[]){2, 1}), int_arg(0), int_arg(1)};
  CHECK(infer_code("_fft_r2c", r2c, 4, out) == TP_OK);
  /* onesided halves the last dim listed (1), not the tensor's last dim */
  CHECK(out[0].dtype == TP_DTYPE_C64 && out[0].sizes[0] == 2 && out[0].sizes[1] == 4 &&
        out[0].sizes[2] == 9);
  r2c[3] = int_arg(0);
  CHECK(infer_code("_fft_r2c", r2c, 4, out) == TP_OK && out[0].sizes[1] == 6);
  r2c[0].meta.dtype = TP_DTYPE_F64;
  CHECK(infer_code("_fft_r2c", r2c, 4, out) == TP_OK && out[0].dtype == TP_DTYPE_C128);
  r2c[0].meta.dtype = TP_DTYPE_F16; /* CPU's error */
  CHECK(infer_code("_fft_r2c", r2c, 4, out) == TP_UNIMPLEMENTED);
  tp_op_arg_t c2r[4] = {tensor(TP_DTYPE_C64, 2, (int64_t[]){5, 4}), ints_arg(1, (int64_t[]){-1}),
                        int_arg(2), int_arg(7)};
  CHECK(infer_code("_fft_c2r", c2r, 4, out) == TP_OK && out[0].dtype == TP_DTYPE_F32 &&
        out[0].sizes[0] == 5 && out[0].sizes[1] == 7);
  tp_op_arg_t c2c[4] = {tensor(TP_DTYPE_C64, 2, (int64_t[]){5, 0}), ints_arg(1, (int64_t[]){1}),
                        int_arg(0), int_arg(1)};
  CHECK(infer_code("_fft_c2c", c2c, 4, out) == TP_UNIMPLEMENTED); /* CPU's error for n = 0 */
}

static void test_emit(void) {
  /* _fft_c2c(x, [0], norm=0, forward=false) on [4, 3]: dim 0 moves last, IFFT, moves back,
   * and XLA's 1/n is undone. */
  const tp_op_def_t *d = op("_fft_c2c");
  tp_op_arg_t args[4] = {tensor(TP_DTYPE_C64, 2, (int64_t[]){4, 3}), ints_arg(1, (int64_t[]){0}),
                         int_arg(0), int_arg(0)};
  tp_meta_t out[TP_MAX_OUTS];
  int n_out = 0;
  CHECK_OK(d->infer(d, args, 4, out, &n_out));
  tp_hlo_builder_t *b = NULL;
  CHECK_OK(tp_hlo_builder_create(&b));
  tp_hlo_value_t in[4] = {tp_hlo_param(b, TP_DTYPE_C64, 2, (int64_t[]){4, 3}, -1)};
  tp_hlo_value_t res[1];
  d->emit(d, b, args, 4, in, out, res);
  char *text = NULL;
  CHECK_OK(tp_hlo_finish(b, res, 1, &text));
  CHECK(text && strstr(text, "fft_type = #stablehlo<fft_type IFFT>, fft_length = array<i64: 4>"));
  CHECK(text && strstr(text, "tensor<3x4xcomplex<f32>>"));
  CHECK(text && strstr(text, "stablehlo.multiply"));
  free(text);
  tp_hlo_builder_free(b);
  /* complex constants come from their parts; real/imag/complex round trip */
  CHECK_OK(tp_hlo_builder_create(&b));
  tp_hlo_value_t c = tp_hlo_constant_c(b, TP_DTYPE_C64, 1.5, -2.0);
  tp_hlo_value_t r = tp_hlo_convert(b, c, TP_DTYPE_F32);
  tp_hlo_value_t z = tp_hlo_convert(b, r, TP_DTYPE_C64);
  tp_hlo_value_t bl = tp_hlo_convert(b, c, TP_DTYPE_BOOL);
  CHECK(c.dtype == TP_DTYPE_C64 && r.dtype == TP_DTYPE_F32 && z.dtype == TP_DTYPE_C64 &&
        bl.dtype == TP_DTYPE_BOOL);
  tp_hlo_value_t outs[3] = {r, z, bl};
  CHECK_OK(tp_hlo_finish(b, outs, 3, &text));
  CHECK(text && strstr(text, "stablehlo.complex") && strstr(text, "stablehlo.real") &&
        strstr(text, "stablehlo.imag"));
  free(text);
  tp_hlo_builder_free(b);
}

int main(void) {
  test_dtype();
  test_result_type();
  test_gate();
  test_fft_infer();
  test_emit();
  TEST_MAIN_END("ops_complex_test");
}
