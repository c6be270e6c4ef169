/* Collectives as replicated programs. See collective.h.
 * The program is the same on every participant, so it works on dense 1-D arrays: an input that is
 * a whole storage of its own element type is passed as it is, any other view is first copied
 * into a dense temporary on its device; an output that is a whole storage takes the program's
 * result buffer (a handle swap, as an in-place op does), any other view is written by a copy. */
#include "exec/collective.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/bucket.h"
#include "exec/eager.h"
#include "exec/exec.h"
#include "exec/key.h"

#define MAX_PARTICIPANTS 64

static const char *const kKindNames[] = {"all_reduce", "broadcast", "all_gather",
                                         "reduce_scatter", "all_to_all"};
static const char *const kOpNames[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX",
                                       "BAND", "BOR", "BXOR"};

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

/* The elementwise combination of |op| on a view of |dt|, or an error naming what is missing. */
static tp_status_t *combiner(tp_dtype_t dt, tp_coll_op_t op, tp_hlo_binary_t *out) {
  bool is_bool = dt == TP_DTYPE_BOOL, bitwise = op == TP_COLL_BAND || op == TP_COLL_BOR ||
                                                op == TP_COLL_BXOR;
  if ((tp_dtype_is_complex(dt) && op != TP_COLL_SUM && op != TP_COLL_AVG) ||
      (bitwise && !is_bool && !tp_dtype_is_int(dt)) || (is_bool && op == TP_COLL_AVG))
    return tp_make_status(TP_INVALID_ARGUMENT, "ReduceOp.%s is not supported for %s tensors",
                          kOpNames[op], tp_dtype_name(dt));
  switch (op) {
    case TP_COLL_SUM: case TP_COLL_AVG: *out = is_bool ? TP_HLO_OR : TP_HLO_ADD; break;
    case TP_COLL_PRODUCT: *out = is_bool ? TP_HLO_AND : TP_HLO_MUL; break;
    case TP_COLL_MIN: *out = is_bool ? TP_HLO_AND : TP_HLO_MIN; break;
    case TP_COLL_MAX: *out = is_bool ? TP_HLO_OR : TP_HLO_MAX; break;
    case TP_COLL_BAND: *out = TP_HLO_AND; break;
    case TP_COLL_BOR: *out = TP_HLO_OR; break;
    case TP_COLL_BXOR: *out = TP_HLO_XOR; break;
  }
  return NULL;
}

/* AVG's division of a sum by |n|: floored for integers, as the host transport does. */
static tp_hlo_value_t average(tp_hlo_builder_t *b, tp_hlo_value_t sum, int n) {
  if (tp_dtype_is_float(sum.dtype))
    return tp_hlo_binary(b, TP_HLO_DIV, sum,
                         tp_hlo_broadcast_to(b, tp_hlo_constant(b, sum.dtype, n), 1, sum.dims));
  tp_hlo_value_t by = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, sum.dtype, n), 1, sum.dims);
  tp_hlo_value_t q = tp_hlo_binary(b, TP_HLO_DIV, sum, by);
  tp_hlo_value_t zero = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, sum.dtype, 0), 1, sum.dims);
  tp_hlo_value_t one = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, sum.dtype, 1), 1, sum.dims);
  tp_hlo_value_t neg_rem = tp_hlo_compare(b, TP_CMP_LT, tp_hlo_binary(b, TP_HLO_REM, sum, by), zero);
  return tp_hlo_select(b, neg_rem, tp_hlo_binary(b, TP_HLO_SUB, q, one), q);
}

/* Broadcast as a sum of the root's bits (as integers) and every other participant's zeros:
 * exact for every value (NaN payloads, -0.0), where a sum of the values would not be. */
static tp_hlo_value_t broadcast(tp_hlo_builder_t *b, tp_hlo_value_t x, int root, int n) {
  tp_dtype_t bits = x.dtype;
  if (tp_dtype_is_float(x.dtype))
    bits = tp_dtype_size(x.dtype) == 2 ? TP_DTYPE_I16 : tp_dtype_size(x.dtype) == 4 ? TP_DTYPE_I32
                                                                                    : TP_DTYPE_I64;
  tp_hlo_value_t v = bits == x.dtype ? x : tp_hlo_bitcast(b, x, bits, 1, x.dims);
  tp_hlo_value_t mine = tp_hlo_compare(b, TP_CMP_EQ, tp_hlo_replica_id(b),
                                       tp_hlo_constant_i(b, TP_DTYPE_I32, root));
  tp_hlo_value_t zero = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, bits, 0), 1, v.dims);
  v = tp_hlo_select(b, tp_hlo_broadcast_to(b, mine, 1, v.dims), v, zero);
  v = tp_hlo_collective(b, TP_HLO_ALL_REDUCE, v, n, bits == TP_DTYPE_BOOL ? TP_HLO_OR : TP_HLO_ADD);
  return bits == x.dtype ? v : tp_hlo_bitcast(b, v, x.dtype, 1, v.dims);
}

/* A bitwise all_reduce of integers, which not every plugin's all_reduce takes (XLA's CPU one
 * does not): every participant's values gathered, then reduced here. */
static tp_hlo_value_t bitwise_all_reduce(tp_hlo_builder_t *b, tp_hlo_value_t x, int n,
                                         tp_hlo_binary_t op) {
  tp_hlo_value_t all = tp_hlo_collective(b, TP_HLO_ALL_GATHER, x, n, op);
  all = tp_hlo_reshape(b, all, 2, (int64_t[]){n, x.dims[0]});
  tp_hlo_value_t init = tp_hlo_constant_i(b, x.dtype, op == TP_HLO_AND ? -1 : 0);
  return tp_hlo_reduce(b, all, init, op, 1, (int64_t[]){0});
}

/* An all_reduce as a reduce_scatter then an all_gather, the input padded to a multiple of |n|.
 * XLA's CPU plugin has each participant reduce the whole buffer in its all_reduce, n times the
 * work of one reduce_scatter. Measured over 4 devices on 2 cores (all_reduce / this): 64 MiB
 * 176 / 64 ms, 16 MiB 16 / 14 ms, 4 MiB 4.5 / 5.5 ms, 1 MiB 0.9 / 1.8 ms; so from 8 MiB. The
 * barrier keeps the compiler from merging the pair back into an all_reduce. */
#define SCATTER_GATHER_BYTES (8 << 20)
static tp_hlo_value_t scatter_gather_all_reduce(tp_hlo_builder_t *b, tp_hlo_value_t x, int n,
                                                tp_hlo_binary_t op) {
  int64_t m = x.dims[0], padded = (m + n - 1) / n * n;
  if (padded != m)
    x = tp_hlo_pad(b, x, tp_hlo_constant_i(b, x.dtype, 0), (int64_t[]){0},
                   (int64_t[]){padded - m});
  tp_hlo_value_t y = tp_hlo_collective(b, TP_HLO_REDUCE_SCATTER, x, n, op);
  y = tp_hlo_collective(b, TP_HLO_ALL_GATHER, tp_hlo_optimization_barrier(b, y), n, op);
  if (padded != m) y = tp_hlo_slice(b, y, (int64_t[]){0}, (int64_t[]){m}, (int64_t[]){1});
  return y;
}

typedef struct {
  const program_t *p;
  tp_hlo_binary_t combine;
} build_ctx_t;

static tp_status_t *build(void *ctx, char **out_text) {
  const build_ctx_t *c = ctx;
  const program_t *p = c->p;
  tp_hlo_builder_t *b = NULL;
  TP_RETURN_IF_ERROR(tp_exec_builder_create(&b));
  tp_hlo_value_t x = tp_hlo_param(b, p->dtype, 1, &p->m, p->reuse == REUSE_INPUT ? 0 : -1), y;
  if (p->reuse == REUSE_OUTPUT) tp_hlo_param(b, p->dtype, 1, &p->out_m, 0);
  switch (p->kind) {
    case TP_COLL_ALL_REDUCE:
    case TP_COLL_REDUCE_SCATTER:
      if (p->dtype != TP_DTYPE_BOOL && (c->combine == TP_HLO_AND || c->combine == TP_HLO_OR ||
                                        c->combine == TP_HLO_XOR)) {
        y = bitwise_all_reduce(b, x, p->n, c->combine); /* plan() allows all_reduce only */
        break;
      }
      if (p->kind == TP_COLL_REDUCE_SCATTER)
        y = tp_hlo_collective(b, TP_HLO_REDUCE_SCATTER, x, p->n, c->combine);
      else if (p->n > 1 && tp_hlo_builder_xla_cpu(b) &&
               p->m * (int64_t)tp_dtype_size(p->dtype) >= SCATTER_GATHER_BYTES)
        y = scatter_gather_all_reduce(b, x, p->n, c->combine);
      else
        y = tp_hlo_collective(b, TP_HLO_ALL_REDUCE, x, p->n, c->combine);
      if (p->op == TP_COLL_AVG) y = average(b, y, p->n);
      break;
    case TP_COLL_BROADCAST: y = broadcast(b, x, p->root, p->n); break;
    case TP_COLL_ALL_GATHER: y = tp_hlo_collective(b, TP_HLO_ALL_GATHER, x, p->n, TP_HLO_ADD); break;
    default: y = tp_hlo_collective(b, TP_HLO_ALL_TO_ALL, x, p->n, TP_HLO_ADD); break;
  }
  tp_status_t *st = tp_hlo_finish(b, &y, 1, out_text);
  tp_hlo_builder_free(b);
  return st;
}

/* Checks |c| and fills |p| and each participant's device. */
static tp_status_t *plan(const tp_collective_t *c, program_t *p, int *devices,
                         tp_hlo_binary_t *combine) {
  if (c->n < 1 || c->n > MAX_PARTICIPANTS)
    return tp_make_status(TP_INVALID_ARGUMENT, "a collective takes 1..%d devices, not %d",
                          MAX_PARTICIPANTS, c->n);
  const char *name = kKindNames[c->kind];
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
  *combine = TP_HLO_ADD;
  if (c->kind == TP_COLL_ALL_REDUCE || c->kind == TP_COLL_REDUCE_SCATTER)
    TP_RETURN_IF_ERROR(combiner(in0->dtype, c->op, combine));
  if (c->kind == TP_COLL_REDUCE_SCATTER &&
      (c->op == TP_COLL_BAND || c->op == TP_COLL_BOR || c->op == TP_COLL_BXOR))
    return tp_make_status(TP_INVALID_ARGUMENT, "reduce_scatter: ReduceOp.%s is not supported "
                          "(all_reduce takes it)", kOpNames[c->op]);
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

tp_status_t *tp_exec_collective(const tp_collective_t *c) {
  if (!tp_exec_client()) return tp_exec_unavailable();
  program_t p;
  int devices[MAX_PARTICIPANTS];
  tp_hlo_binary_t combine = TP_HLO_ADD;
  TP_RETURN_IF_ERROR(plan(c, &p, devices, &combine));
  if (p.m == 0) return NULL; /* nothing moves */
  int n = c->n;
  /* Inputs the program cannot take as they are, and outputs it cannot write as they are, go
   * through dense temporaries (copies are enqueued outside the executor lock, which they take). */
  tp_storage_t *temp_in[MAX_PARTICIPANTS] = {NULL}, *temp_out[MAX_PARTICIPANTS] = {NULL};
  tp_view_t in_v[MAX_PARTICIPANTS], out_v[MAX_PARTICIPANTS];
  tp_status_t *st = NULL;
  bool was_paused = tp_bucket_pause(true); /* the temporaries' buffers must be exactly dense */
  for (int r = 0; r < n && !st; r++) {
    in_v[r] = c->inputs[r];
    out_v[r] = c->outputs[r];
    if (!direct(&c->inputs[r]) || !tp_storage_buffer(c->inputs[r].storage)) {
      st = tp_eager_temp_storage(devices[r], in_v[r].dtype, &c->inputs[r], &temp_in[r], &in_v[r]);
      if (!st) st = tp_eager_copy(&in_v[r], &c->inputs[r]);
    }
    if (!st && !direct(&c->outputs[r]))
      st = tp_eager_temp_storage(devices[r], out_v[r].dtype, &c->outputs[r], &temp_out[r], &out_v[r]);
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
    snprintf(what, sizeof(what), "%s(%d devices)", kKindNames[p.kind], n);
    tp_exec_origin_t origin = {what, c->inputs, 1, false};
    build_ctx_t ctx = {&p, combine};
    tp_executable_t *exe = NULL;
    bool compiled;
    if (key.failed) st = tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
    else
      st = tp_status_annotate(
          tp_exec_program(key.data, key.len, tp_hash_bytes(key.data, key.len, 0), build, &ctx,
                          &origin,
                          &(tp_compile_options_t){.replicas = n, .devices = devices,
                                                  .backend_opt_level = -1},
                          &exe, &compiled),
          "compiling %s", what);
    PJRT_Buffer *args[2 * MAX_PARTICIPANTS], *results[MAX_PARTICIPANTS] = {NULL};
    int n_args = p.reuse == REUSE_OUTPUT ? 2 : 1;
    for (int r = 0; r < n && !st; r++) {
      args[r * n_args] = tp_storage_buffer(in_v[r].storage);
      if (n_args == 2) args[r * n_args + 1] = tp_storage_buffer(out_v[r].storage);
    }
    if (!st)
      st = tp_executable_execute(exe, &(tp_execute_args_t){.replicas = n,
                                                           .args = args,
                                                           .n_args = (size_t)n_args,
                                                           .out_buffers = results,
                                                           .op_name = kKindNames[p.kind],
                                                           .blocking = tp_exec_blocking(),
                                                           .check_output = -1});
    if (exe) tp_executable_release(exe);
    for (int r = 0; r < n; r++)
      if (results[r]) tp_storage_set_buffer(out_v[r].storage, results[r], p.dtype, p.out_m);
    tp_exec_unlock();
    tp_key_free(&key);
  }
  for (int r = 0; r < n; r++) {
    if (temp_out[r] && !st) st = tp_eager_copy(&c->outputs[r], &out_v[r]);
    if (temp_in[r]) tp_storage_release(temp_in[r]);
    if (temp_out[r]) tp_storage_release(temp_out[r]);
  }
  return st;
}
