/* Collectives as replicated programs. See collective.h.
 * The program is the same on every participant, so it works on dense 1-D arrays: an input that is
 * a whole storage of its own element type is passed as it is, any other view is first copied
 * into a dense temporary on its device; an output that is a whole storage takes the program's
 * result buffer (a handle swap, as an in-place op does), any other view is written by a copy. */
#include "exec/collective.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/bucket.h"
#include "exec/eager.h"
#include "exec/exec.h"
#include "exec/key.h"

#define MAX_PARTICIPANTS 64

/* The program: kind, reduction, root, participants, element type and elements per input. */
typedef struct {
  tp_coll_kind_t kind;
  tp_coll_op_t op;
  int root, n;
  tp_dtype_t dtype; /* the buffers' (a complex tensor's parts) */
  int64_t m, out_m; /* elements per input and per output */
  int reuse; /* REUSE_*: which buffer the result is written into */
} program_t;

/* Where the result goes. A fresh result buffer costs as much as the collective itself at large
 * sizes (the host allocator maps new pages), so the program writes into a buffer the call is
 * done with, donated: the input's, when the output replaces it (in place, or a temporary), or the
 * output storage's current buffer, passed as a second, unread parameter. The choice is part of
 * the program, so it must hold on every participant; otherwise the result is fresh. */
enum { REUSE_NONE, REUSE_INPUT, REUSE_OUTPUT };

typedef struct {
  const program_t *p;
  tp_dtype_t dtype; /* the tensors' own */
} build_ctx_t;

static tp_status_t *build(void *ctx, char **out_text) {
  const build_ctx_t *c = ctx;
  const program_t *p = c->p;
  tp_hlo_builder_t *b = NULL;
  TP_RETURN_IF_ERROR(tp_exec_builder_create(&b));
  tp_hlo_value_t x = tp_hlo_param(b, p->dtype, 1, &p->m, p->reuse == REUSE_INPUT ? 0 : -1), y;
  if (p->reuse == REUSE_OUTPUT) tp_hlo_param(b, p->dtype, 1, &p->out_m, 0);
  y = tp_coll_emit(b, p->kind, p->op, p->root, p->n, c->dtype, x);
  tp_status_t *st = tp_hlo_finish(b, &y, 1, out_text);
  tp_hlo_builder_free(b);
  return st;
}

/* Checks |c| and fills |p| and each participant's device. */
static tp_status_t *plan(const tp_collective_t *c, program_t *p, int *devices) {
  if (c->n < 1 || c->n > MAX_PARTICIPANTS)
    return tp_make_status(TP_INVALID_ARGUMENT, "a collective takes 1..%d devices, not %d",
                          MAX_PARTICIPANTS, c->n);
  const char *name = tp_coll_kind_names[c->kind];
  const tp_view_t *in0 = &c->inputs[0];
  int64_t k = tp_view_numel(in0);
  for (int r = 0; r < c->n; r++) {
    const tp_view_t *in = &c->inputs[r], *out = &c->outputs[r];
    TP_RETURN_IF_ERROR(tp_view_check_bounds(in));
    TP_RETURN_IF_ERROR(tp_view_check_bounds(out));
    devices[r] = tp_storage_device(in->storage);
    for (int q = 0; q < r; q++)
      if (devices[q] == devices[r])
        return tp_make_status(TP_INVALID_ARGUMENT,
                              "%s: participants %d and %d are both on tpu:%d; each needs a device "
                              "of its own (torch.tpu.set_device(rank))", name, q, r, devices[r]);
    if (tp_storage_device(out->storage) != devices[r])
      return tp_make_status(TP_INVALID_ARGUMENT, "%s: participant %d's output is on tpu:%d, its "
                            "input on tpu:%d", name, r, tp_storage_device(out->storage), devices[r]);
    if (in->dtype != in0->dtype || out->dtype != in0->dtype)
      return tp_make_status(TP_INVALID_ARGUMENT, "%s: participant %d has %s/%s tensors, "
                            "participant 0 %s", name, r, tp_dtype_name(in->dtype),
                            tp_dtype_name(out->dtype), tp_dtype_name(in0->dtype));
    int64_t want_out = c->kind == TP_COLL_ALL_GATHER       ? k * c->n
                       : c->kind == TP_COLL_REDUCE_SCATTER ? k / c->n
                                                           : k;
    if (tp_view_numel(in) != k || tp_view_numel(out) != want_out ||
        ((c->kind == TP_COLL_REDUCE_SCATTER || c->kind == TP_COLL_ALL_TO_ALL) && k % c->n != 0))
      return tp_make_status(TP_INVALID_ARGUMENT,
                            "%s: participant %d has %lld input and %lld output elements; "
                            "participant 0's input has %lld, over %d participants",
                            name, r, (long long)tp_view_numel(in), (long long)tp_view_numel(out),
                            (long long)k, c->n);
  }
  if (c->kind == TP_COLL_BROADCAST && (c->root < 0 || c->root >= c->n))
    return tp_make_status(TP_INVALID_ARGUMENT, "broadcast: root %d is not a participant", c->root);
  TP_RETURN_IF_ERROR(tp_coll_check(c->kind, c->op, in0->dtype));
  memset(p, 0, sizeof(*p));
  p->kind = c->kind;
  p->op = c->kind == TP_COLL_ALL_REDUCE || c->kind == TP_COLL_REDUCE_SCATTER ? c->op : TP_COLL_SUM;
  p->root = c->kind == TP_COLL_BROADCAST ? c->root : 0;
  p->n = c->n;
  p->dtype = tp_dtype_storage(in0->dtype);
  int64_t parts = (int64_t)(tp_dtype_size(in0->dtype) / tp_dtype_size(p->dtype));
  p->m = k * parts;
  p->out_m = tp_view_numel(&c->outputs[0]) * parts;
  return NULL;
}

/* Whether |v| can be a program argument or result as it is: a whole storage whose buffer (if
 * any) holds |v|'s own element type. */
static bool direct(const tp_view_t *v) {
  tp_storage_t *s = v->storage;
  tp_dtype_t sdt = tp_dtype_storage(v->dtype);
  return tp_view_is_whole(v) &&
         (!tp_storage_buffer(s) || (tp_storage_buffer_dtype(s) == sdt &&
                                    tp_storage_buffer_numel(s) == tp_storage_elems(s, sdt)));
}

/* One execute of a collective program and what follows it under the executor lock: each
 * participant's result becomes its output storage's buffer. The job owns |exe| and a reference
 * to every storage it names (temporaries included), so they outlive the caller's. */
typedef struct {
  tp_executable_t *exe;
  const char *op_name;
  int n, n_args;
  PJRT_Buffer *args[2 * MAX_PARTICIPANTS];
  tp_storage_t *keep[2 * MAX_PARTICIPANTS]; /* participant r's input (2r), output (2r + 1) */
  tp_dtype_t dtype;
  int64_t out_m;
} job_t;

static tp_status_t *run_job(job_t *j, bool blocking) {
  PJRT_Buffer *results[MAX_PARTICIPANTS] = {NULL};
  int devices[MAX_PARTICIPANTS];
  for (int r = 0; r < j->n; r++) devices[r] = tp_storage_device(j->keep[2 * r]);
  tp_status_t *st = tp_executable_execute(j->exe, &(tp_execute_args_t){.replicas = j->n,
                                                                       .replica_devices = devices,
                                                                       .args = j->args,
                                                                       .n_args = (size_t)j->n_args,
                                                                       .out_buffers = results,
                                                                       .op_name = j->op_name,
                                                                       .blocking = blocking,
                                                                       .check_output = -1});
  for (int r = 0; r < j->n; r++)
    if (results[r]) tp_storage_set_buffer(j->keep[2 * r + 1], results[r], j->dtype, j->out_m);
  tp_executable_release(j->exe);
  for (int i = 0; i < 2 * j->n; i++) tp_storage_release(j->keep[i]);
  return st;
}

/* The collective thread: runs one handed-off job at a time (the executor lock, held by the job
 * from its caller on, admits no second), then releases the lock. An execute returns only when
 * every participant's part has run on XLA's CPU plugin, so the ranks, which do not wait for it,
 * go on meanwhile with their Python work up to their next use of the device. */
static struct {
  pthread_once_t once;
  pthread_mutex_t mu;
  pthread_cond_t posted;
  job_t job;
  bool has_job, started;
} g_worker = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER, .posted = PTHREAD_COND_INITIALIZER};

static void *worker_main(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&g_worker.mu);
    while (!g_worker.has_job) pthread_cond_wait(&g_worker.posted, &g_worker.mu);
    job_t j = g_worker.job;
    g_worker.has_job = false;
    pthread_mutex_unlock(&g_worker.mu);
    tp_client_t *client = tp_exec_client();
    tp_status_t *st = run_job(&j, false);
    tp_client_handed(client, st, j.op_name);
    tp_exec_unlock();
  }
  return NULL;
}

static void start_worker(void) {
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  g_worker.started = pthread_create(&t, &attr, worker_main, NULL) == 0;
  pthread_attr_destroy(&attr);
}

/* Hands |j| to the collective thread with the executor lock held; false (nothing handed) if the
 * thread could not be started. */
static bool hand_off(const job_t *j) {
  pthread_once(&g_worker.once, start_worker);
  if (!g_worker.started) return false;
  tp_client_hand_off(tp_exec_client());
  pthread_mutex_lock(&g_worker.mu);
  g_worker.job = *j;
  g_worker.has_job = true;
  pthread_cond_signal(&g_worker.posted);
  pthread_mutex_unlock(&g_worker.mu);
  return true;
}

tp_status_t *tp_exec_collective(const tp_collective_t *c) {
  if (!tp_exec_client()) return tp_exec_unavailable();
  program_t p;
  int devices[MAX_PARTICIPANTS];
  TP_RETURN_IF_ERROR(plan(c, &p, devices));
  if (p.m == 0) return NULL; /* nothing moves */
  int n = c->n;
  /* Inputs the program cannot take as they are, and outputs it cannot write as they are, go
   * through dense temporaries (copies are enqueued outside the executor lock, which they take). */
  tp_storage_t *temp_in[MAX_PARTICIPANTS] = {NULL}, *temp_out[MAX_PARTICIPANTS] = {NULL};
  tp_view_t in_v[MAX_PARTICIPANTS], out_v[MAX_PARTICIPANTS];
  tp_status_t *st = NULL;
  bool was_paused = tp_bucket_pause(true); /* the temporaries' buffers must be exactly dense */
  bool any_temp_out = false;
  for (int r = 0; r < n && !st; r++) {
    in_v[r] = c->inputs[r];
    out_v[r] = c->outputs[r];
    if (!direct(&c->inputs[r]) || !tp_storage_buffer(c->inputs[r].storage)) {
      st = tp_eager_temp_storage(devices[r], in_v[r].dtype, &c->inputs[r], &temp_in[r], &in_v[r]);
      if (!st) st = tp_eager_copy(&in_v[r], &c->inputs[r]);
    }
    if (!st && !direct(&c->outputs[r])) {
      st = tp_eager_temp_storage(devices[r], out_v[r].dtype, &c->outputs[r], &temp_out[r], &out_v[r]);
      any_temp_out = true;
    }
  }
  tp_bucket_pause(was_paused);
  if (!st) {
    tp_exec_lock();
    int can_in = 0, can_out = 0;
    for (int r = 0; r < n; r++) {
      tp_storage_t *i = in_v[r].storage, *o = out_v[r].storage;
      can_in += (temp_in[r] || i == o) && p.m == p.out_m;
      can_out += o != i && tp_storage_buffer(o) && tp_storage_buffer_dtype(o) == p.dtype &&
                 tp_storage_buffer_numel(o) == p.out_m;
    }
    p.reuse = can_in == n ? REUSE_INPUT : can_out == n ? REUSE_OUTPUT : REUSE_NONE;
    tp_key_t key = {0};
    tp_key_put(&key, "tp-collective", 13);
    tp_key_put(&key, &p, sizeof(p));
    tp_key_put(&key, devices, sizeof(int) * (size_t)n);
    char what[64];
    snprintf(what, sizeof(what), "%s(%d devices)", tp_coll_kind_names[p.kind], n);
    tp_exec_origin_t origin = {what, c->inputs, 1, false};
    build_ctx_t ctx = {&p, c->inputs[0].dtype};
    job_t j = {.op_name = tp_coll_kind_names[p.kind], .n = n,
               .n_args = p.reuse == REUSE_OUTPUT ? 2 : 1, .dtype = p.dtype, .out_m = p.out_m};
    bool compiled;
    if (key.failed) st = tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
    else
      st = tp_status_annotate(
          tp_exec_program(key.data, key.len, tp_hash_bytes(key.data, key.len, 0), build, &ctx,
                          &origin,
                          &(tp_compile_options_t){.replicas = n, .devices = devices,
                                                  .backend_opt_level = -1},
                          &j.exe, &compiled),
          "compiling %s", what);
    tp_key_free(&key);
    if (st) {
      tp_exec_unlock();
    } else {
      for (int r = 0; r < n; r++) {
        j.args[r * j.n_args] = tp_storage_buffer(in_v[r].storage);
        if (j.n_args == 2) j.args[r * j.n_args + 1] = tp_storage_buffer(out_v[r].storage);
        j.keep[2 * r] = in_v[r].storage;
        j.keep[2 * r + 1] = out_v[r].storage;
        tp_storage_retain(in_v[r].storage);
        tp_storage_retain(out_v[r].storage);
      }
      /* Results written straight into the outputs, and no waiting asked for: the collective
       * thread runs the execute, and the executor lock it holds orders every later use of the
       * device after it (a synchronize waits for it too). */
      bool blocking = tp_exec_blocking();
      if (blocking || any_temp_out || !hand_off(&j)) {
        st = run_job(&j, blocking);
        tp_exec_unlock();
      }
    }
  }
  for (int r = 0; r < n; r++) {
    if (temp_out[r] && !st) st = tp_eager_copy(&c->outputs[r], &out_v[r]);
    if (temp_in[r]) tp_storage_release(temp_in[r]);
    if (temp_out[r]) tp_storage_release(temp_out[r]);
  }
  return st;
}
