/* Collectives across the devices of one client (exec/collective.h), on 4 devices of the test
 * plugin: every kind against values computed here, reductions per dtype, strided and partial
 * views, a rerun that compiles nothing, and bad calls that are errors, not crashes or hangs.
 * Needs a PJRT plugin that takes cpu_device_count (XLA's CPU plugin). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/collective.h"
#include "exec/eager.h"
#include "exec/exec.h"
#include "exec/graph.h"
#include "ops/op.h"
#include "runtime/executable.h"
#include "runtime_helpers.h"
#include "test.h"

#define N 4

static tp_storage_t *g_storages[128];
static int g_n_storages;

/* A dense 1-D view of |n| elements of |dtype| over a fresh storage on |device|, holding |data|
 * (NULL: unwritten). */
static tp_view_t vec(int device, tp_dtype_t dtype, int64_t n, const void *data) {
  tp_storage_t *s = NULL;
  CHECK_OK(tp_storage_create(tp_exec_client(), device, (size_t)n * tp_dtype_size(dtype), &s));
  g_storages[g_n_storages++] = s;
  tp_view_t v = {s, dtype, 1, {n}, {1}, 0};
  if (data) CHECK_OK(tp_eager_copy_from_host(&v, data));
  return v;
}

static void read(const tp_view_t *v, void *out) { CHECK_OK(tp_eager_copy_to_host(v, out)); }

static tp_status_t *run(tp_coll_kind_t kind, tp_coll_op_t op, int root, const tp_view_t *in,
                        const tp_view_t *out) {
  tp_collective_t c = {kind, op, root, N, in, out};
  return tp_exec_collective(&c);
}

static void test_all_reduce_in_place(void) {
  tp_view_t t[N];
  float x[N][5];
  for (int r = 0; r < N; r++) {
    for (int i = 0; i < 5; i++) x[r][i] = (float)(r * 10 + i) - 7.5f;
    t[r] = vec(r, TP_DTYPE_F32, 5, x[r]);
  }
  const tp_coll_op_t ops[] = {TP_COLL_SUM, TP_COLL_AVG, TP_COLL_MAX, TP_COLL_MIN, TP_COLL_PRODUCT};
  for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
    for (int r = 0; r < N; r++) CHECK_OK(tp_eager_copy_from_host(&t[r], x[r]));
    CHECK_OK(run(TP_COLL_ALL_REDUCE, ops[k], 0, t, t));
    for (int i = 0; i < 5; i++) {
      double want = ops[k] == TP_COLL_PRODUCT ? 1 : ops[k] == TP_COLL_MAX ? -1e30 :
                    ops[k] == TP_COLL_MIN ? 1e30 : 0;
      for (int r = 0; r < N; r++) {
        double v = x[r][i];
        want = ops[k] == TP_COLL_PRODUCT ? want * v : ops[k] == TP_COLL_MAX ? fmax(want, v) :
               ops[k] == TP_COLL_MIN ? fmin(want, v) : want + v;
      }
      if (ops[k] == TP_COLL_AVG) want /= N;
      for (int r = 0; r < N; r++) {
        float got[5];
        read(&t[r], got);
        CHECK(fabs(got[i] - want) <= 1e-4 * fmax(1, fabs(want)));
      }
    }
  }
}

static void test_integer_and_bool_reductions(void) {
  tp_view_t t[N], b[N];
  int64_t x[N][3];
  uint8_t bits[N][2];
  for (int r = 0; r < N; r++) {
    x[r][0] = -7 + r; x[r][1] = 3 * r + 1; x[r][2] = 1 << r;
    bits[r][0] = 1; bits[r][1] = r == 2;
    t[r] = vec(r, TP_DTYPE_I64, 3, x[r]);
    b[r] = vec(r, TP_DTYPE_BOOL, 2, bits[r]);
  }
  /* AVG floors, as integer division rounding down: (-7-6-5-4)/4 = -5.5 -> -6. */
  CHECK_OK(run(TP_COLL_ALL_REDUCE, TP_COLL_AVG, 0, t, t));
  int64_t got[3];
  read(&t[3], got);
  CHECK(got[0] == -6 && got[1] == (1 + 4 + 7 + 10) / 4 && got[2] == 3);
  for (int r = 0; r < N; r++) CHECK_OK(tp_eager_copy_from_host(&t[r], x[r]));
  CHECK_OK(run(TP_COLL_ALL_REDUCE, TP_COLL_BOR, 0, t, t));
  read(&t[1], got);
  CHECK(got[2] == 15);
  /* On bool, MIN is AND and SUM is OR. */
  CHECK_OK(run(TP_COLL_ALL_REDUCE, TP_COLL_MIN, 0, b, b));
  uint8_t gb[2];
  read(&b[0], gb);
  CHECK(gb[0] == 1 && gb[1] == 0);
  for (int r = 0; r < N; r++) CHECK_OK(tp_eager_copy_from_host(&b[r], bits[r]));
  CHECK_OK(run(TP_COLL_ALL_REDUCE, TP_COLL_SUM, 0, b, b));
  read(&b[3], gb);
  CHECK(gb[0] == 1 && gb[1] == 1);
}

static void test_broadcast_is_bitwise(void) {
  tp_view_t t[N];
  for (int r = 0; r < N; r++) {
    float x[3] = {r == 2 ? -0.0f : 1.0f, r == 2 ? NAN : 2.0f, (float)r};
    t[r] = vec(r, TP_DTYPE_F32, 3, x);
  }
  CHECK_OK(run(TP_COLL_BROADCAST, TP_COLL_SUM, 2, t, t));
  for (int r = 0; r < N; r++) {
    float got[3];
    read(&t[r], got);
    CHECK(got[0] == 0.0f && signbit(got[0]) && isnan(got[1]) && got[2] == 2.0f);
  }
}

static void test_gather_scatter_and_all_to_all(void) {
  tp_view_t in[N], gathered[N], scattered[N], exchanged[N];
  float x[N][8];
  for (int r = 0; r < N; r++) {
    for (int i = 0; i < 8; i++) x[r][i] = (float)(100 * r + i);
    in[r] = vec(r, TP_DTYPE_F32, 8, x[r]);
    gathered[r] = vec(r, TP_DTYPE_F32, 8 * N, NULL);
    scattered[r] = vec(r, TP_DTYPE_F32, 8 / N, NULL);
    exchanged[r] = vec(r, TP_DTYPE_F32, 8, NULL);
  }
  /* Twice: into unwritten outputs (fresh results), then into written ones (which the program
   * writes over, donated). */
  for (int pass = 0; pass < 2; pass++) {
    CHECK_OK(run(TP_COLL_ALL_GATHER, TP_COLL_SUM, 0, in, gathered));
    CHECK_OK(run(TP_COLL_REDUCE_SCATTER, TP_COLL_SUM, 0, in, scattered));
    CHECK_OK(run(TP_COLL_ALL_TO_ALL, TP_COLL_SUM, 0, in, exchanged));
    for (int r = 0; r < N; r++) {
      float g[8 * N], s[8 / N], e[8];
      read(&gathered[r], g);
      read(&scattered[r], s);
      read(&exchanged[r], e);
      for (int q = 0; q < N; q++)
        for (int i = 0; i < 8; i++) CHECK(g[q * 8 + i] == x[q][i]);
      for (int i = 0; i < 8 / N; i++) {
        float want = 0;
        for (int q = 0; q < N; q++) want += x[q][r * (8 / N) + i];
        CHECK(s[i] == want);
      }
      /* chunk q of the result is chunk r of participant q's input */
      for (int q = 0; q < N; q++)
        for (int i = 0; i < 2; i++) CHECK(e[q * 2 + i] == x[q][r * 2 + i]);
    }
  }
}

/* Inputs and outputs that are parts of larger storages (a transposed view, a slice) go through
 * temporaries; the rest of the output storage is left as it was. */
static void test_strided_views(void) {
  tp_view_t in[N], out[N];
  float x[N][6], base[N][10];
  for (int r = 0; r < N; r++) {
    for (int i = 0; i < 6; i++) x[r][i] = (float)(r + 1) * (float)(i + 1);
    for (int i = 0; i < 10; i++) base[r][i] = -1;
    tp_view_t whole = vec(r, TP_DTYPE_F32, 6, x[r]);
    in[r] = (tp_view_t){whole.storage, TP_DTYPE_F32, 2, {3, 2}, {1, 3}, 0}; /* [2,3].t() */
    tp_view_t o = vec(r, TP_DTYPE_F32, 10, base[r]);
    out[r] = (tp_view_t){o.storage, TP_DTYPE_F32, 2, {3, 2}, {2, 1}, 3};
  }
  CHECK_OK(run(TP_COLL_ALL_REDUCE, TP_COLL_SUM, 0, in, out));
  float got[10];
  tp_view_t all = {out[1].storage, TP_DTYPE_F32, 1, {10}, {1}, 0};
  read(&all, got);
  CHECK(got[0] == -1 && got[1] == -1 && got[2] == -1 && got[9] == -1);
  /* out[i][j] = sum_r x_r[j * 3 + i] = 10 * (j * 3 + i + 1) */
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++) CHECK(got[3 + i * 2 + j] == 10.0f * (float)(j * 3 + i + 1));
}

/* Waits for a call still on the collective thread, which holds the executor lock until its
 * execute has returned and been counted. */
static void settle(void) {
  tp_exec_lock();
  tp_exec_unlock();
}

static void test_rerun_compiles_nothing(void) {
  tp_view_t t[N];
  float x[7] = {0};
  for (int r = 0; r < N; r++) t[r] = vec(r, TP_DTYPE_F32, 7, x);
  CHECK_OK(run(TP_COLL_ALL_REDUCE, TP_COLL_SUM, 0, t, t));
  tp_runtime_stats_t before, after;
  settle();
  tp_runtime_stats(tp_exec_client(), &before);
  for (int k = 0; k < 3; k++) CHECK_OK(run(TP_COLL_ALL_REDUCE, TP_COLL_SUM, 0, t, t));
  settle();
  tp_runtime_stats(tp_exec_client(), &after);
  CHECK(after.compiles == before.compiles && after.executes == before.executes + 3);
}

static void expect_error(tp_status_t *st, const char *what) {
  CHECK(st != NULL && strstr(tp_status_message(st), what) != NULL);
  if (st && !strstr(tp_status_message(st), what)) fprintf(stderr, "  got: %s\n", tp_status_message(st));
  tp_status_free(st);
}

static void test_bad_calls(void) {
  tp_view_t t[N], same[N], odd[N];
  float x[4] = {1, 2, 3, 4};
  for (int r = 0; r < N; r++) {
    t[r] = vec(r, TP_DTYPE_F32, 4, x);
    same[r] = vec(0, TP_DTYPE_F32, 4, x);
    odd[r] = vec(r, TP_DTYPE_F32, r == 3 ? 3 : 4, x);
  }
  expect_error(run(TP_COLL_ALL_REDUCE, TP_COLL_SUM, 0, same, same), "both on tpu:0");
  expect_error(run(TP_COLL_ALL_REDUCE, TP_COLL_SUM, 0, odd, odd), "participant 3 has 3 input");
  expect_error(run(TP_COLL_ALL_REDUCE, TP_COLL_BXOR, 0, t, t), "BXOR is not supported for float32");
  expect_error(run(TP_COLL_BROADCAST, TP_COLL_SUM, 7, t, t), "root 7");
  tp_view_t ints[N], quarter[N];
  int32_t xi[4] = {1, 2, 3, 4};
  for (int r = 0; r < N; r++) {
    ints[r] = vec(r, TP_DTYPE_I32, 4, xi);
    quarter[r] = vec(r, TP_DTYPE_I32, 1, NULL);
  }
  expect_error(run(TP_COLL_REDUCE_SCATTER, TP_COLL_BXOR, 0, ints, quarter), "all_reduce takes it");
  tp_view_t t3[N];
  for (int r = 0; r < N; r++) t3[r] = vec(r, TP_DTYPE_F32, 3, x);
  expect_error(run(TP_COLL_REDUCE_SCATTER, TP_COLL_SUM, 0, t3, t3), "input and");
  tp_collective_t c = {TP_COLL_ALL_REDUCE, TP_COLL_SUM, 0, 0, t, t};
  expect_error(tp_exec_collective(&c), "1..64 devices");
}

static tp_op_arg_t str_arg(const char *v) {
  tp_op_arg_t a;
  memset(&a, 0, sizeof(a));
  a.kind = TP_ARG_STR;
  strncpy(a.s, v, sizeof(a.s) - 1);
  a.text = v;
  return a;
}

/* Runs test_replicated_graph's graph over |in| into fresh |outs| and checks each participant's
 * outputs against |xs|, the values its input holds. */
static tp_status_t *run_replicated(tp_graph_t *g, const int *devices, const tp_view_t *in,
                                   float xs[N][6], tp_storage_t **outs,
                                   tp_graph_outcome_t *outcome) {
  for (int r = 0; r < N; r++) {
    CHECK_OK(tp_storage_create(tp_exec_client(), r, 6 * 4, &outs[r * 2]));
    CHECK_OK(tp_storage_create(tp_exec_client(), r, N * 6 * 4, &outs[r * 2 + 1]));
    g_storages[g_n_storages++] = outs[r * 2];
    g_storages[g_n_storages++] = outs[r * 2 + 1];
  }
  tp_status_t *st = tp_graph_run_replicated(g, N, devices, in, NULL, outs, outcome);
  if (st) return st;
  for (int r = 0; r < N; r++) {
    float yv[6], zv[N * 6];
    tp_view_t yo = {outs[r * 2], TP_DTYPE_F32, 1, {6}, {1}, 0};
    tp_view_t zo = {outs[r * 2 + 1], TP_DTYPE_F32, 1, {N * 6}, {1}, 0};
    read(&yo, yv);
    read(&zo, zv);
    for (int i = 0; i < 6; i++) {
      float mean = 0;
      for (int q = 0; q < N; q++) mean += xs[q][i];
      CHECK(fabsf(yv[i] - mean / N * xs[r][i]) < 1e-4f);
    }
    for (int i = 0; i < N * 6; i++) CHECK(zv[i] == xs[i / 6][i % 6]);
  }
  return NULL;
}

/* A graph with _c10d_functional collectives in it, run as one replicated program over the N
 * devices: y = all_reduce(x, "avg") * x, z = all_gather_into_tensor(x) ([N*2, 3]); each
 * participant's outputs against values computed here. A second run compiles nothing; an input
 * laid out differently on one participant (another offset) is read through dense copies: the
 * same program, the right values. */
static void test_replicated_graph(void) {
  tp_graph_t *g = NULL;
  CHECK_OK(tp_graph_create(&g));
  tp_meta_t m = {TP_DTYPE_F32, 2, {2, 3}, 0}, out[TP_MAX_OUTS];
  int x = tp_graph_input(g, &m), n = 0, avg = -1, y = -1, z = -1;
  tp_op_arg_t ar[3] = {{.kind = TP_ARG_TENSOR}, str_arg("avg"), str_arg("a-long-group-name-0")};
  CHECK_OK(tp_graph_node(g, tp_op_lookup("_c10d_functional::all_reduce", NULL), ar,
                         (int[]){x, -1, -1}, 3, out, &n, &avg));
  tp_op_arg_t mul[2] = {{.kind = TP_ARG_TENSOR}, {.kind = TP_ARG_TENSOR}};
  CHECK_OK(tp_graph_node(g, tp_op_lookup("mul.Tensor", NULL), mul, (int[]){avg, x}, 2, out, &n, &y));
  tp_op_arg_t ag[3] = {{.kind = TP_ARG_TENSOR}, {.kind = TP_ARG_INT, .i = N}, str_arg("0")};
  CHECK_OK(tp_graph_node(g, tp_op_lookup("_c10d_functional::all_gather_into_tensor", NULL), ag,
                         (int[]){x, -1, -1}, 3, out, &n, &z));
  CHECK(n == 1 && out[0].sizes[0] == N * 2 && out[0].sizes[1] == 3);
  CHECK_OK(tp_graph_set_outputs(g, (int[]){y, z}, 2));
  float xs[N][6];
  tp_view_t in[N];
  tp_storage_t *outs[N * 2];
  int devices[N];
  for (int r = 0; r < N; r++) {
    for (int i = 0; i < 6; i++) xs[r][i] = (float)(r * 6 + i) - 5;
    in[r] = vec(r, TP_DTYPE_F32, 6, xs[r]);
    in[r].ndim = 2, in[r].sizes[0] = 2, in[r].sizes[1] = 3, in[r].strides[0] = 3, in[r].strides[1] = 1;
    devices[r] = r;
  }
  tp_graph_outcome_t outcome;
  for (int run = 0; run < 2; run++) {
    CHECK_OK(run_replicated(g, devices, in, xs, outs, &outcome));
    CHECK(outcome.compiled == (run == 0));
  }
  /* Participant 2 reads its input at another offset: a different program would be needed. */
  float at1[7] = {99};
  for (int i = 0; i < 6; i++) at1[i + 1] = xs[2][i] + 100;
  tp_view_t moved = vec(2, TP_DTYPE_F32, 7, at1);
  moved.ndim = 2, moved.sizes[0] = 2, moved.sizes[1] = 3, moved.strides[0] = 3, moved.strides[1] = 1;
  moved.offset = 1;
  tp_view_t mixed[N] = {in[0], in[1], moved, in[3]};
  for (int i = 0; i < 6; i++) xs[2][i] = at1[i + 1]; /* participant 2's values, from element 1 */
  CHECK_OK(run_replicated(g, devices, mixed, xs, outs, &outcome));
  CHECK(!outcome.compiled); /* the copies lie as the others: the same program */
  expect_error(tp_graph_run_replicated(g, N, (int[]){0, 1, 1, 3}, in, NULL, outs, &outcome),
               "both on tpu:1");
  tp_graph_free(g);
}

int main(void) {
  setenv("TORCH_PJRT_CPU_DEVICES", "4", 1);
  if (!start_exec(64)) {
    TEST_MAIN_END("exec_collective_test");
  }
  if (tp_exec_device_count() < N) {
    printf("exec_collective_test: skipped, the plugin has %d devices\n", tp_exec_device_count());
    return 0;
  }
  test_all_reduce_in_place();
  test_integer_and_bool_reductions();
  test_broadcast_is_bitwise();
  test_gather_scatter_and_all_to_all();
  test_strided_views();
  test_rerun_compiles_nothing();
  test_bad_calls();
  test_replicated_graph();
  CHECK_OK(tp_client_synchronize(tp_exec_client()));
  for (int i = 0; i < g_n_storages; i++) tp_storage_release(g_storages[i]);
  TEST_MAIN_END("exec_collective_test");
}
