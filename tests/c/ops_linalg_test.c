/* Linear algebra rows (linalg.c, linalg_lu.c, linalg_qr.c, linalg_eigh.c): the factorizations'
 * output shapes, the calls left to CPU, and one program's golden text. Needs no device. */
#include "ops/op.h"
#include "op_args.h"
#include "test.h"

/* Factorization family: output shapes, the calls left to CPU, and one program's text. */
static void test_factor(void) {
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  const tp_op_def_t *lf = op("linalg_lu_factor_ex");
  tp_op_arg_t la[3] = {tensor(TP_DTYPE_F32, 3, (int64_t[]){2, 5, 3}), int_arg(1), int_arg(0)};
  CHECK_OK(lf->infer(lf, la, 3, out, &n));
  CHECK(n == 3 && out[0].ndim == 3 && out[1].dtype == TP_DTYPE_I32 && out[1].ndim == 2 &&
        out[1].sizes[1] == 3 && out[2].ndim == 1 && out[2].sizes[0] == 2);
  la[1] = int_arg(0); /* no pivoting: CPU raises */
  tp_status_t *st = lf->infer(lf, la, 3, out, &n);
  CHECK(st && tp_status_code(st) == TP_UNIMPLEMENTED);
  tp_status_free(st);
  la[0] = tensor(TP_DTYPE_I64, 2, (int64_t[]){3, 3}), la[1] = int_arg(1);
  st = lf->infer(lf, la, 3, out, &n);
  CHECK(st && tp_status_code(st) == TP_UNIMPLEMENTED);
  tp_status_free(st);
  /* A batch of vectors on the right-hand side of solve: result [2, 4], LU [2, 4, 4]. */
  const tp_op_def_t *se = op("_linalg_solve_ex");
  tp_op_arg_t sa[4] = {tensor(TP_DTYPE_F64, 3, (int64_t[]){2, 4, 4}),
                       tensor(TP_DTYPE_F64, 2, (int64_t[]){2, 4}), int_arg(1), int_arg(0)};
  CHECK_OK(se->infer(se, sa, 4, out, &n));
  CHECK(n == 4 && out[0].ndim == 2 && out[0].sizes[1] == 4 && out[1].ndim == 3 &&
        out[2].sizes[1] == 4 && out[3].ndim == 1);
  const tp_op_def_t *qr = op("linalg_qr");
  tp_op_arg_t qa[2] = {tensor(TP_DTYPE_F32, 2, (int64_t[]){5, 3}), str_arg("complete")};
  CHECK_OK(qr->infer(qr, qa, 2, out, &n));
  CHECK(n == 2 && out[0].sizes[0] == 5 && out[0].sizes[1] == 5 && out[1].sizes[0] == 5 &&
        out[1].sizes[1] == 3);
  qa[1] = str_arg("r");
  CHECK_OK(qr->infer(qr, qa, 2, out, &n));
  CHECK(out[0].ndim == 1 && out[0].sizes[0] == 0 && out[1].sizes[0] == 3);
  /* Values only: eigenvectors and singular vectors (unique only up to sign) stay on CPU. */
  const tp_op_def_t *eh = op("_linalg_eigh");
  tp_op_arg_t ea[3] = {tensor(TP_DTYPE_F32, 3, (int64_t[]){2, 4, 4}), str_arg("L"), int_arg(0)};
  CHECK_OK(eh->infer(eh, ea, 3, out, &n));
  CHECK(n == 2 && out[0].ndim == 2 && out[0].sizes[1] == 4 && out[1].ndim == 1 && out[1].sizes[0] == 0);
  ea[2] = int_arg(1);
  st = eh->infer(eh, ea, 3, out, &n);
  CHECK(st && tp_status_code(st) == TP_UNIMPLEMENTED);
  tp_status_free(st);
  const tp_op_def_t *sv = op("_linalg_svd");
  tp_op_arg_t va[4] = {tensor(TP_DTYPE_F32, 2, (int64_t[]){3, 5}), int_arg(0), int_arg(0), {0}};
  CHECK_OK(sv->infer(sv, va, 4, out, &n));
  CHECK(n == 3 && out[1].ndim == 1 && out[1].sizes[0] == 3);
  va[2] = int_arg(1);
  st = sv->infer(sv, va, 4, out, &n);
  CHECK(st && tp_status_code(st) == TP_UNIMPLEMENTED);
  tp_status_free(st);
  tp_op_arg_t g[3] = {tensor(TP_DTYPE_F32, 3, (int64_t[]){2, 3, 3}), int_arg(1), int_arg(0)};
  check_golden("linalg_lu_factor_ex", g, 3, "lu_factor_ex_f32.mlir");
}

int main(void) {
  test_factor();
  TEST_MAIN_END("ops_linalg_test");
}
