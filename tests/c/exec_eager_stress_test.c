/* Stress of the eager executor's caches in one process: many shapes, many scalar values and
 * calls with several scalars (clamp, arange, add with alpha), with an executable cache small
 * enough to evict on most calls and more distinct scalar values than the scalar-buffer cache
 * has slots, every result checked against values computed here. Two scalars of one call that
 * share a cache slot once made the second evict the first's buffer before the program ran (a
 * use-after-free inside PJRT's execute). Run under ASan by `make test-asan`. Needs a plugin. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "exec/eager.h"
#include "exec/exec.h"
#include "op_args.h"
#include "runtime_helpers.h"
#include "test.h"

static uint64_t g_rng = 0x243F6A8885A308D3ull;
static uint64_t next_u64(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}
/* A value on a grid of 1/8: exact in float32, and thousands of distinct values. */
static double grid_value(int span) { return (double)((int64_t)(next_u64() % (uint64_t)(16 * span)) - 8 * span) / 8.0; }

static tp_eager_arg_t targ(const tp_view_t *v) {
  tp_eager_arg_t a;
  memset(&a, 0, sizeof(a));
  a.arg = tensor(v->dtype, v->ndim, v->sizes);
  a.view = *v;
  return a;
}

static tp_eager_arg_t sarg(tp_dtype_t dt, double value) {
  tp_eager_arg_t a;
  memset(&a, 0, sizeof(a));
  a.arg = scalar(dt, value, true);
  return a;
}

static tp_eager_arg_t none_arg(void) {
  tp_eager_arg_t a;
  memset(&a, 0, sizeof(a));
  return a;
}

/* A dense 1-D view over a fresh storage of n float32 elements. */
static tp_view_t fresh(tp_storage_t **s, int64_t n) {
  CHECK_OK(tp_storage_create(tp_exec_client(), 0, (size_t)n * 4, s));
  tp_view_t v = {*s, TP_DTYPE_F32, 1, {n}, {1}, 0};
  return v;
}

/* Runs table op |name| on |args| into one fresh float32 output of |n| elements; returns the
 * output's storage (caller releases) or NULL after a failed check. */
static tp_storage_t *run(const char *name, tp_eager_arg_t *args, int n_args, int64_t n) {
  int op = tp_op_lookup(name, NULL);
  CHECK(op >= 0);
  tp_meta_t metas[TP_MAX_OUTS];
  int n_out = 0;
  tp_status_t *st = tp_eager_infer(op, args, n_args, metas, &n_out);
  CHECK_OK(st);
  if (st || n_out != 1 || metas[0].ndim != 1 || metas[0].sizes[0] != n) {
    CHECK(!"unexpected output meta");
    return NULL;
  }
  metas[0].dtype = TP_DTYPE_F32;
  tp_storage_t *s = NULL;
  tp_view_t out = fresh(&s, n);
  st = tp_eager_run(op, args, n_args, metas, &out, 1);
  CHECK_OK(st);
  return s;
}

static int g_mismatches;

static void expect(tp_storage_t *s, const float *want, int64_t n, const char *what) {
  if (!s) return;
  float got[64];
  tp_view_t v = {s, TP_DTYPE_F32, 1, {n}, {1}, 0};
  CHECK_OK(tp_eager_copy_to_host(&v, got));
  for (int64_t i = 0; i < n; i++)
    if (got[i] != want[i]) {
      if (g_mismatches++ < 5)
        fprintf(stderr, "%s: element %lld is %g, expected %g\n", what, (long long)i, got[i],
                want[i]);
      CHECK(got[i] == want[i]);
      return;
    }
}

static void one_round(int iter) {
  int64_t n = 1 + (int64_t)(next_u64() % 8);
  float x[64], y[64], want[64];
  for (int64_t i = 0; i < n; i++) {
    x[i] = (float)grid_value(64);
    y[i] = (float)grid_value(64);
  }
  tp_storage_t *sx = NULL, *sy = NULL;
  tp_view_t vx = fresh(&sx, n), vy = fresh(&sy, n);
  CHECK_OK(tp_eager_copy_from_host(&vx, x));
  CHECK_OK(tp_eager_copy_from_host(&vy, y));

  /* clamp(x, lo, hi): two scalars of one call. */
  double lo = grid_value(256), hi = lo + fabs(grid_value(256));
  tp_eager_arg_t c[3] = {targ(&vx), sarg(TP_DTYPE_F64, lo), sarg(TP_DTYPE_F64, hi)};
  for (int64_t i = 0; i < n; i++) want[i] = fminf(fmaxf(x[i], (float)lo), (float)hi);
  tp_storage_t *r = run("clamp", c, 3, n);
  expect(r, want, n, "clamp");
  tp_storage_release(r);

  /* add(x, y, alpha): a tensor pair and one scalar. */
  double alpha = grid_value(32);
  tp_eager_arg_t a[3] = {targ(&vx), targ(&vy), sarg(TP_DTYPE_F64, alpha)};
  for (int64_t i = 0; i < n; i++) want[i] = x[i] + (float)alpha * y[i];
  r = run("add.Tensor", a, 3, n);
  expect(r, want, n, "add");
  tp_storage_release(r);

  /* arange(start, start + n * step, step, dtype=float32): three scalars, no tensor input. */
  double start = grid_value(512), step = 0.125 * (double)(1 + next_u64() % 16);
  tp_eager_arg_t g[4] = {sarg(TP_DTYPE_F64, start), sarg(TP_DTYPE_F64, start + (double)n * step),
                         sarg(TP_DTYPE_F64, step), none_arg()};
  g[3].arg.kind = TP_ARG_INT;
  g[3].arg.i = TP_DTYPE_F32;
  for (int64_t i = 0; i < n; i++) want[i] = (float)(start + (double)i * step);
  r = run("arange.start_step", g, 4, n);
  expect(r, want, n, "arange");
  tp_storage_release(r);

  tp_storage_release(sx);
  tp_storage_release(sy);
  if (iter % 64 == 0) CHECK_OK(tp_client_synchronize(tp_exec_client()));
}

int main(void) {
  /* 16 executables for 8 shapes x 3 ops: calls often miss, compile and evict. */
  if (!start_exec(16)) {
    TEST_MAIN_END("exec_eager_stress_test");
  }
  const char *rounds_env = getenv("TP_STRESS_ROUNDS");
  int rounds = rounds_env ? atoi(rounds_env) : 400;
  for (int i = 0; i < rounds; i++) one_round(i);
  CHECK_OK(tp_client_synchronize(tp_exec_client()));
  TEST_MAIN_END("exec_eager_stress_test");
}
