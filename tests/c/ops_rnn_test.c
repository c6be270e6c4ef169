/* Recurrent cells (rnn.c): the fused LSTM and GRU cells and their backwards infer CUDA's output
 * and workspace shapes, reject mismatched arguments with INVALID_ARGUMENT, and emit a program.
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

static bool shape_is(const tp_meta_t *m, tp_dtype_t dt, int ndim, int64_t d0, int64_t d1) {
  return m->dtype == dt && m->ndim == ndim && m->sizes[0] == d0 && (ndim < 2 || m->sizes[1] == d1);
}

static void test_lstm_cell(void) {
  int64_t g[2] = {3, 8}, h[2] = {3, 2}, bias[1] = {8};
  tp_op_arg_t a[5] = {tensor(TP_DTYPE_BF16, 2, g), tensor(TP_DTYPE_BF16, 2, g),
                      tensor(TP_DTYPE_BF16, 2, h), tensor(TP_DTYPE_BF16, 1, bias),
                      tensor(TP_DTYPE_BF16, 1, bias)};
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  CHECK(emits("_thnn_fused_lstm_cell", a, 5, out, &n, "stablehlo.logistic"));
  CHECK(n == 3 && shape_is(&out[0], TP_DTYPE_BF16, 2, 3, 2) && shape_is(&out[1], TP_DTYPE_BF16, 2, 3, 2) &&
        shape_is(&out[2], TP_DTYPE_BF16, 2, 3, 8)); /* workspace: the four gates */
  CHECK(emits("_thnn_fused_lstm_cell", a, 3, out, &n, "stablehlo.tanh")); /* no biases */
  a[4] = none_arg(); /* one bias without the other */
  CHECK(infer_status("_thnn_fused_lstm_cell", a, 5) == TP_INVALID_ARGUMENT);
  a[4] = tensor(TP_DTYPE_BF16, 1, (int64_t[]){6});
  CHECK(infer_status("_thnn_fused_lstm_cell", a, 5) == TP_INVALID_ARGUMENT);
  a[1] = tensor(TP_DTYPE_BF16, 2, (int64_t[]){3, 4});
  CHECK(infer_status("_thnn_fused_lstm_cell", a, 3) == TP_INVALID_ARGUMENT);
  a[1] = tensor(TP_DTYPE_F32, 2, g); /* dtypes must agree */
  CHECK(infer_status("_thnn_fused_lstm_cell", a, 3) == TP_INVALID_ARGUMENT);
  a[0] = a[1] = tensor(TP_DTYPE_F32, 2, (int64_t[]){3, 7}); /* not 4 gates */
  CHECK(infer_status("_thnn_fused_lstm_cell", a, 3) == TP_INVALID_ARGUMENT);

  /* backward_impl(grad_hy?, grad_cy?, cx, cy, workspace, has_bias) */
  tp_op_arg_t bw[6] = {tensor(TP_DTYPE_F32, 2, h), none_arg(), tensor(TP_DTYPE_F32, 2, h),
                       tensor(TP_DTYPE_F32, 2, h), tensor(TP_DTYPE_F32, 2, g), int_arg(1)};
  CHECK(emits("_thnn_fused_lstm_cell_backward_impl", bw, 6, out, &n, "stablehlo.reduce"));
  CHECK(n == 3 && shape_is(&out[0], TP_DTYPE_F32, 2, 3, 8) && shape_is(&out[1], TP_DTYPE_F32, 2, 3, 2) &&
        shape_is(&out[2], TP_DTYPE_F32, 1, 8, 0));
  bw[4] = tensor(TP_DTYPE_F32, 2, (int64_t[]){3, 6});
  CHECK(infer_status("_thnn_fused_lstm_cell_backward_impl", bw, 6) == TP_INVALID_ARGUMENT);
}

static void test_gru_cell(void) {
  int64_t g[2] = {2, 9}, h[2] = {2, 3}, bias[1] = {9};
  tp_op_arg_t a[5] = {tensor(TP_DTYPE_F16, 2, g), tensor(TP_DTYPE_F16, 2, g), tensor(TP_DTYPE_F16, 2, h),
                      tensor(TP_DTYPE_F16, 1, bias), tensor(TP_DTYPE_F16, 1, bias)};
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  CHECK(emits("_thnn_fused_gru_cell", a, 5, out, &n, "stablehlo.concatenate"));
  CHECK(n == 2 && shape_is(&out[0], TP_DTYPE_F16, 2, 2, 3) &&
        shape_is(&out[1], TP_DTYPE_F16, 2, 2, 15)); /* workspace: r, z, n, hx, hn */
  a[2] = tensor(TP_DTYPE_F16, 2, (int64_t[]){2, 4});
  CHECK(infer_status("_thnn_fused_gru_cell", a, 5) == TP_INVALID_ARGUMENT);
  a[0] = a[1] = tensor(TP_DTYPE_I64, 2, g);
  a[2] = tensor(TP_DTYPE_I64, 2, h);
  CHECK(infer_status("_thnn_fused_gru_cell", a, 3) == TP_INVALID_ARGUMENT);

  /* backward(grad_hy, workspace, has_bias) */
  tp_op_arg_t bw[3] = {tensor(TP_DTYPE_F64, 2, h), tensor(TP_DTYPE_F64, 2, (int64_t[]){2, 15}), int_arg(0)};
  CHECK(emits("_thnn_fused_gru_cell_backward", bw, 3, out, &n, "stablehlo.multiply"));
  CHECK(n == 5 && shape_is(&out[0], TP_DTYPE_F64, 2, 2, 9) && shape_is(&out[1], TP_DTYPE_F64, 2, 2, 9) &&
        shape_is(&out[2], TP_DTYPE_F64, 2, 2, 3) && shape_is(&out[3], TP_DTYPE_F64, 1, 9, 0) &&
        shape_is(&out[4], TP_DTYPE_F64, 1, 9, 0));
  bw[1] = tensor(TP_DTYPE_F64, 2, (int64_t[]){2, 12});
  CHECK(infer_status("_thnn_fused_gru_cell_backward", bw, 3) == TP_INVALID_ARGUMENT);
}

int main(void) {
  test_lstm_cell();
  test_gru_cell();
  TEST_MAIN_END("ops_rnn_test");
}
