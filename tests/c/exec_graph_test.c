/* The graph executor: several table ops as one program, on strided inputs, against values
 * computed here; reruns hit the cache; bad graphs are errors, not crashes. Needs a PJRT plugin. */
#include <math.h>
#include <string.h>

#include "exec/eager.h"
#include "exec/exec.h"
#include "exec/graph.h"
#include "op_args.h"
#include "runtime_helpers.h"
#include "test.h"

static tp_op_arg_t tensor_arg(void) {
  tp_op_arg_t a;
  memset(&a, 0, sizeof(a));
  a.kind = TP_ARG_TENSOR;
  a.scalar_dtype = TP_DTYPE_INVALID;
  return a;
}

static tp_op_arg_t scalar_arg(double v) {
  tp_op_arg_t a;
  memset(&a, 0, sizeof(a));
  a.kind = TP_ARG_SCALAR;
  a.meta.dtype = TP_DTYPE_F64;
  a.f = v;
  a.wrapped = true;
  a.scalar_dtype = TP_DTYPE_INVALID;
  return a;
}

/* A dense [rows, cols] f32 view over a fresh storage holding |data|. */
static tp_view_t dense(tp_storage_t **s, int64_t rows, int64_t cols, const float *data) {
  CHECK_OK(tp_storage_create(tp_exec_client(), 0, (size_t)(rows * cols) * 4, s));
  tp_view_t v = {*s, TP_DTYPE_F32, 2, {rows, cols}, {cols, 1}, 0};
  if (data) CHECK_OK(tp_eager_copy_from_host(&v, data));
  return v;
}

/* y = (x.t() + w * 2).sum(0) with x [3, 2] given as a transposed view of a [2, 3] storage, so
 * the program reads a strided input; also returns x.t() itself. */
static void test_graph_run(void) {
  tp_graph_t *g = NULL;
  CHECK_OK(tp_graph_create(&g));
  tp_meta_t m32 = {TP_DTYPE_F32, 2, {3, 2}, 0}, m23 = {TP_DTYPE_F32, 2, {2, 3}, 0};
  int x = tp_graph_input(g, &m32), w = tp_graph_input(g, &m23);
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0, xt = -1, sum = -1, y = -1;
  tp_op_arg_t t[1] = {tensor_arg()};
  CHECK_OK(tp_graph_node(g, tp_op_lookup("t", NULL), t, (int[]){x}, 1, out, &n, &xt));
  CHECK(n == 1 && out[0].sizes[0] == 2 && out[0].sizes[1] == 3);
  tp_op_arg_t add[3] = {tensor_arg(), tensor_arg(), scalar_arg(2.0)};
  CHECK_OK(tp_graph_node(g, tp_op_lookup("add.Tensor", NULL), add, (int[]){xt, w, -1}, 3, out,
                         &n, &sum));
  tp_op_arg_t red[4] = {tensor_arg(), ints_arg(1, (int64_t[]){0}), {0}, {0}};
  red[2].kind = TP_ARG_INT;
  CHECK_OK(tp_graph_node(g, tp_op_lookup("sum.dim_IntList", NULL), red, (int[]){sum, -1, -1, -1},
                         4, out, &n, &y));
  CHECK(n == 1 && out[0].ndim == 1 && out[0].sizes[0] == 3);
  /* A node with no lowering leaves the graph unchanged. */
  int nodes = tp_graph_node_count(g), junk = -1;
  tp_op_arg_t bad[1] = {tensor_arg()};
  tp_status_t *st = tp_graph_node(g, tp_op_lookup("view", NULL), bad, (int[]){x}, 1, out, &n, &junk);
  CHECK(st != NULL && tp_graph_node_count(g) == nodes);
  tp_status_free(st);
  st = tp_graph_set_outputs(g, (int[]){99}, 1);
  CHECK(st && strstr(tp_status_message(st), "names no value"));
  tp_status_free(st);
  CHECK_OK(tp_graph_set_outputs(g, (int[]){y, xt}, 2));

  const float xs[6] = {1, 2, 3, 4, 5, 6}, ws[6] = {0.5f, -1, 2, 0, 1, -2};
  tp_storage_t *sx, *sw, *sy, *sxt;
  tp_view_t vx = dense(&sx, 2, 3, xs);
  tp_view_t xview = {sx, TP_DTYPE_F32, 2, {3, 2}, {1, 3}, 0}; /* x = storage.t() */
  (void)vx;
  dense(&sw, 2, 3, ws);
  tp_view_t vw = {sw, TP_DTYPE_F32, 2, {2, 3}, {3, 1}, 0};
  tp_view_t vy = {NULL, TP_DTYPE_F32, 1, {3}, {1}, 0};
  CHECK_OK(tp_storage_create(tp_exec_client(), 0, 3 * 4, &sy));
  vy.storage = sy;
  tp_view_t vxt = dense(&sxt, 2, 3, NULL);
  tp_view_t ins[2] = {xview, vw};
  tp_storage_t *outs[2] = {sy, sxt};
  for (int run = 0; run < 2; run++) {
    tp_graph_outcome_t outcome;
    CHECK_OK(tp_graph_run(g, 0, ins, NULL, outs, &outcome));
    CHECK(outcome.compiled == (run == 0));  /* the rerun finds its program */
    CHECK(!outcome.build_failed);
    float got[3], gxt[6];
    CHECK_OK(tp_eager_copy_to_host(&vy, got));
    CHECK_OK(tp_eager_copy_to_host(&vxt, gxt));
    for (int j = 0; j < 3; j++) {
      /* x.t()[i][j] = storage[i][j]: the transposed view read back is the storage itself. */
      float want = (xs[j] + 2 * ws[j]) + (xs[3 + j] + 2 * ws[3 + j]);
      CHECK(fabsf(got[j] - want) < 1e-5f);
    }
    CHECK(memcmp(gxt, xs, sizeof(xs)) == 0);
  }
  /* An input of the wrong shape is refused. */
  tp_view_t wrong[2] = {vx, vw};
  tp_graph_outcome_t outcome;
  st = tp_graph_run(g, 0, wrong, NULL, outs, &outcome);
  CHECK(st && strstr(tp_status_message(st), "does not match") && !outcome.build_failed);
  tp_status_free(st);
  tp_storage_release(sx);
  tp_storage_release(sw);
  tp_storage_release(sy);
  tp_storage_release(sxt);
  tp_graph_free(g);
}

int main(void) {
  if (!start_exec(64)) {
    TEST_MAIN_END("exec_graph_test");
  }
  test_graph_run();
  CHECK_OK(tp_client_synchronize(tp_exec_client()));
  TEST_MAIN_END("exec_graph_test");
}
