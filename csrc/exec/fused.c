/* Fused eager: calls recorded into a region, run as one program. See fused.h. */
#include "exec/fused.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "exec/key.h"
#include "exec/program.h"
#include "exec/scalars.h"

/* A storage the region touches. */
typedef struct {
  tp_storage_t *storage; /* retained until the region has run */
  bool start_buffer;     /* it had a buffer when the region first touched it */
  tp_dtype_t start_dtype;
  int64_t start_numel;
  bool param;            /* the region reads the contents it had before the region */
  bool has;              /* it has contents in the region: its old buffer or a write */
  bool written;
  bool updated;          /* its first write is partial: an update of its old contents */
  tp_dtype_t dtype;      /* its buffer after the calls recorded so far */
  int64_t numel;
  int param_index, output; /* in the program, or -1 (set when the region runs) */
} rslot_t;

typedef struct {
  int op, n_args, n_out;
  tp_eager_arg_t args[TP_MAX_ARGS];
  int arg_slot[TP_MAX_ARGS];
  tp_meta_t metas[TP_MAX_OUTS];
  tp_view_t outs[TP_MAX_OUTS];
  int out_slot[TP_MAX_OUTS];
} rcall_t;

/* Everything here is under the executor lock, except that |on| is also read without it
 * (tp_fused_on, at each call: a stale read only runs one call strictly or records it). */
static struct {
  bool on;
  int max_ops;
  int device;
  rcall_t *calls;
  int n_calls, cap_calls;
  rslot_t *slots;
  int n_slots, cap_slots;
  tp_key_t key;
  tp_status_t *error; /* a region's failure no caller could report yet */
  tp_fused_stats_t stats;
} g = {.max_ops = 2048};

bool tp_fused_on(void) { return g.on; }
void tp_fused_set_max_ops(int n) { g.max_ops = n > 0 ? n : 1; }

void tp_fused_stats(tp_fused_stats_t *out) { *out = g.stats; }
void tp_fused_reset_stats(void) { memset(&g.stats, 0, sizeof(g.stats)); }

tp_status_t *tp_fused_take_error(void) {
  tp_status_t *st = g.error;
  g.error = NULL;
  return st;
}

static void keep_error(tp_status_t *st) {
  if (!st) return;
  if (g.error) tp_status_free(st); /* the first failure is the one to report */
  else g.error = st;
}

/* The slot of |s|, added (and its state at the region's start put in the key) on first touch;
 * -1 when out of memory. */
static int slot_of(tp_storage_t *s) {
  for (int i = g.n_slots - 1; i >= 0; i--)
    if (g.slots[i].storage == s) return i;
  if (g.n_slots == g.cap_slots) {
    int cap = g.cap_slots ? 2 * g.cap_slots : 64;
    rslot_t *grown = realloc(g.slots, sizeof(rslot_t) * (size_t)cap);
    if (!grown) return -1;
    g.slots = grown;
    g.cap_slots = cap;
  }
  rslot_t *sl = &g.slots[g.n_slots];
  memset(sl, 0, sizeof(*sl));
  tp_storage_retain(s);
  sl->storage = s;
  sl->start_buffer = sl->has = tp_storage_buffer(s) != NULL;
  sl->start_dtype = sl->dtype = tp_storage_buffer_dtype(s);
  sl->start_numel = sl->numel = tp_storage_buffer_numel(s);
  sl->param_index = sl->output = -1;
  tp_key_put_i64(&g.key, sl->start_buffer ? sl->start_dtype : -1);
  tp_key_put_i64(&g.key, sl->start_buffer ? sl->start_numel : 0);
  tp_key_put_i64(&g.key, (int64_t)tp_storage_nbytes(s));
  return g.n_slots++;
}

/* What a call does, independent of which region records it (tp_fused_record's boundaries). */
static uint64_t call_hash(const rcall_t *c) {
  uint64_t h = tp_hash_bytes(&c->op, sizeof(c->op), 0x63616c6cull);
  for (int i = 0; i < c->n_args; i++) {
    const tp_eager_arg_t *a = &c->args[i];
    h = tp_hash_bytes(&a->arg.kind, sizeof(a->arg.kind), h);
    if (a->arg.kind == TP_ARG_TENSOR) {
      h = tp_hash_bytes(a->view.sizes, sizeof(int64_t) * (size_t)a->view.ndim, h);
      h = tp_hash_bytes(&a->view.dtype, sizeof(a->view.dtype), h);
    }
  }
  return h ^ (h >> 29);
}

static void reset_region(void) {
  for (int i = 0; i < g.n_slots; i++) tp_storage_release(g.slots[i].storage);
  g.n_slots = g.n_calls = 0;
  g.key.len = 0;
  g.key.failed = false;
}

tp_status_t *tp_fused_record(int op, const tp_eager_arg_t *args, int n_args,
                             const tp_meta_t *out_metas, const tp_view_t *outs, int n_out,
                             int device) {
  assert(tp_exec_locked());
  TP_RETURN_IF_ERROR(tp_fused_take_error());
  if (g.n_calls > 0 && device != g.device)
    TP_RETURN_IF_ERROR(tp_fused_flush());
  for (int i = 0; i < n_args; i++)
    if (args[i].arg.kind == TP_ARG_TENSOR) TP_RETURN_IF_ERROR(tp_view_check_bounds(&args[i].view));
  for (int k = 0; k < n_out; k++) {
    TP_RETURN_IF_ERROR(tp_view_check_bounds(&outs[k]));
    const tp_storage_t *s = outs[k].storage;
    if ((size_t)tp_storage_elems(s, outs[k].dtype) * tp_dtype_size(outs[k].dtype) != tp_storage_nbytes(s))
      return tp_make_status(TP_UNIMPLEMENTED,
                            "writing %s elements into a storage of %zu bytes (not a multiple)",
                            tp_dtype_name(outs[k].dtype), tp_storage_nbytes(s));
  }
  if (g.n_calls == g.cap_calls) {
    int cap = g.cap_calls ? 2 * g.cap_calls : 64;
    rcall_t *grown = realloc(g.calls, sizeof(rcall_t) * (size_t)cap);
    if (!grown) return tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
    g.calls = grown;
    g.cap_calls = cap;
  }
  g.device = device;
  rcall_t *c = &g.calls[g.n_calls];
  c->op = op;
  c->n_args = n_args;
  c->n_out = n_out;
  memcpy(c->args, args, sizeof(args[0]) * (size_t)n_args);
  memcpy(c->metas, out_metas, sizeof(out_metas[0]) * (size_t)n_out);
  memcpy(c->outs, outs, sizeof(outs[0]) * (size_t)n_out);
  tp_key_t *k = &g.key;
  tp_key_put_i64(k, op);
  tp_key_put_i64(k, n_args);
  tp_key_put_i64(k, n_out);
  /* Reads first (a call reads its inputs before it writes), then writes. */
  for (int i = 0; i < n_args; i++) {
    c->arg_slot[i] = -1;
    tp_key_put_arg(k, &args[i].arg, false); /* a scalar's value is an input, as in eager */
    if (args[i].arg.kind != TP_ARG_TENSOR) continue;
    int s = slot_of(args[i].view.storage);
    if (s < 0) return tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
    c->arg_slot[i] = s;
    if (g.slots[s].start_buffer && !g.slots[s].written) g.slots[s].param = true;
    tp_key_put_i64(k, s);
    tp_key_put_view(k, &args[i].view);
  }
  for (int j = 0; j < n_out; j++) {
    int s = slot_of(outs[j].storage);
    if (s < 0) return tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
    c->out_slot[j] = s;
    tp_key_put_i64(k, s);
    tp_key_put_i64(k, out_metas[j].dtype);
    tp_key_put_view(k, &outs[j]);
  }
  for (int j = 0; j < n_out; j++) {
    rslot_t *sl = &g.slots[c->out_slot[j]];
    bool first = true; /* each slot once per call */
    for (int i = 0; i < j; i++) first = first && c->out_slot[i] != c->out_slot[j];
    if (!first) continue;
    if (sl->start_buffer && !sl->written &&
        tp_program_slot_partial(outs, c->out_slot, n_out, c->out_slot[j]))
      sl->param = sl->updated = true; /* a partial write keeps the rest of the old contents */
    tp_program_slot_after(sl->storage, sl->has, sl->dtype, sl->numel, outs, c->out_slot, n_out,
                          c->out_slot[j], &sl->dtype, &sl->numel);
    sl->has = sl->written = true;
  }
  if (k->failed) {
    reset_region();
    return tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
  }
  g.n_calls++;
  /* Past an eighth of the limit, the region ends after the next call whose content (op and
   * argument layouts, not which storages) hashes to a boundary: one call in 16. The cut depends
   * only on the calls, so a loop's iterations cut at the same calls and repeat the same regions
   * (a fixed count would drift through the loop body and make every region new). */
  if (g.n_calls >= g.max_ops || (g.n_calls >= g.max_ops / 8 && (call_hash(c) & 15) == 0))
    return tp_fused_flush();
  return NULL;
}

static tp_status_t *build_region(void *ctx, char **out_text) {
  (void)ctx;
  tp_hlo_builder_t *b = NULL;
  TP_RETURN_IF_ERROR(tp_exec_builder_create(&b));
  tp_hlo_builder_set_whole_graph(b, true);
  size_t n = (size_t)g.n_slots;
  tp_hlo_value_t *cur = calloc(n + 1, sizeof(*cur));
  bool *has = calloc(n + 1, sizeof(*has));
  tp_storage_t **storages = calloc(n + 1, sizeof(*storages));
  int n_scalars = 0;
  for (int i = 0; i < g.n_calls; i++)
    for (int a = 0; a < g.calls[i].n_args; a++) n_scalars += g.calls[i].args[a].arg.kind == TP_ARG_SCALAR;
  tp_hlo_value_t *scalars = calloc((size_t)n_scalars + 1, sizeof(*scalars));
  tp_hlo_value_t *results = calloc(n + 2, sizeof(*results));
  tp_status_t *st = NULL;
  if (!cur || !has || !storages || !scalars || !results) {
    st = tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
    goto done;
  }
  /* Parameters: the storages whose old contents the region reads (slot order), then every call's
   * scalars (call order, argument order). */
  for (int i = 0; i < g.n_slots; i++) {
    const rslot_t *sl = &g.slots[i];
    storages[i] = sl->storage;
    if (sl->param_index < 0) continue;
    /* As in eager (tp_exec_donate_whole_writes): on XLA's CPU plugin only to a partial first
     * write. Donating there otherwise made an AdamW step's region wait 4-5 ms for the
     * backward's region still reading the parameters. */
    bool donate = sl->output >= 0 && (sl->updated || tp_exec_donate_whole_writes()) &&
                  (size_t)sl->start_numel * tp_dtype_size(sl->start_dtype) ==
                      (size_t)sl->numel * tp_dtype_size(sl->dtype);
    cur[i] = tp_hlo_param(b, sl->start_dtype, 1, &sl->start_numel, donate ? sl->output : -1);
    has[i] = true;
  }
  int next_scalar = 0;
  for (int i = 0; i < g.n_calls; i++)
    for (int a = 0; a < g.calls[i].n_args; a++)
      if (g.calls[i].args[a].arg.kind == TP_ARG_SCALAR)
        scalars[next_scalar++] = tp_hlo_param(b, g.calls[i].args[a].arg.scalar_dtype, 0, NULL, -1);
  next_scalar = 0;
  for (int i = 0; i < g.n_calls; i++) {
    const rcall_t *c = &g.calls[i];
    tp_program_emit_call(b, &tp_op_table[c->op], c->args, c->n_args, c->arg_slot,
                         scalars + next_scalar, c->metas, c->outs, c->out_slot, c->n_out, storages,
                         cur, has);
    for (int a = 0; a < c->n_args; a++) next_scalar += c->args[a].arg.kind == TP_ARG_SCALAR;
  }
  /* Each storage's last whole write gives the dims its result leaves in (tp_program_result). */
  const tp_view_t **whole = calloc(n + 1, sizeof(*whole));
  for (int i = g.n_calls - 1; whole && i >= 0; i--) {
    const rcall_t *c = &g.calls[i];
    for (int k = 0; k < c->n_out; k++) {
      int s = c->out_slot[k];
      if (!whole[s] && !tp_program_slot_partial(c->outs, c->out_slot, c->n_out, s))
        whole[s] = &c->outs[k];
    }
  }
  int n_results = 0;
  for (int i = 0; i < g.n_slots; i++)
    if (g.slots[i].output >= 0) {
      tp_hlo_value_t flat = tp_program_to_storage(b, cur[i]);
      int64_t dims[TP_MAX_DIMS];
      int nd = whole && whole[i] ? tp_program_storage_dims(whole[i], flat.dtype, dims) : 0;
      results[g.slots[i].output] = tp_program_result(b, flat, nd, dims);
      n_results++;
    }
  free(whole);
  if (tp_hlo_check_flag(b, &results[n_results])) n_results++; /* last: the index check */
  st = tp_hlo_finish(b, results, n_results, out_text);
done:
  tp_hlo_builder_free(b);
  free(cur);
  free(has);
  free(storages);
  free(scalars);
  free(results);
  return st;
}

static tp_status_t *run_region(void) {
  /* Which storages outlive the region: only those are written back. */
  int n_params = 0, n_outputs = 0, n_scalars = 0;
  for (int i = 0; i < g.n_slots; i++) {
    rslot_t *sl = &g.slots[i];
    bool alive = tp_storage_shared(sl->storage);
    sl->param_index = sl->param ? n_params++ : -1;
    sl->output = sl->written && alive ? n_outputs++ : -1;
    tp_key_put_i64(&g.key, sl->output >= 0);
  }
  for (int i = 0; i < g.n_calls; i++)
    for (int a = 0; a < g.calls[i].n_args; a++) n_scalars += g.calls[i].args[a].arg.kind == TP_ARG_SCALAR;
  if (g.key.failed) return tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
  uint64_t hash = tp_hash_bytes(g.key.data, g.key.len, 0x66757365ull);
  char what[64];
  snprintf(what, sizeof(what), "fused region of %d ops", g.n_calls);
  tp_exec_origin_t origin = {what, NULL, 0, false};
  tp_executable_t *exe = NULL;
  bool compiled = false;
  TP_RETURN_IF_ERROR(tp_status_annotate(
      tp_exec_program(g.key.data, g.key.len, hash,
                      build_region, NULL, &origin, &(tp_compile_options_t){.backend_opt_level = -1},
                      &exe, &compiled),
      "compiling a %s (first op %s)", what, tp_op_table[g.calls[0].op].name));
  g.stats.regions++;
  g.stats.digest = tp_hash_bytes(&hash, sizeof(hash), g.stats.digest);
  g.stats.ops += g.n_calls;
  if (g.n_calls > g.stats.max_ops) g.stats.max_ops = g.n_calls;
  if (compiled) g.stats.compiles++;
  else g.stats.hits++;
  size_t n_in = (size_t)(n_params + n_scalars);
  PJRT_Buffer **inputs = calloc(n_in + 1, sizeof(*inputs));
  PJRT_Buffer **owned = calloc((size_t)n_scalars + 1, sizeof(*owned));
  PJRT_Buffer **results = calloc((size_t)n_outputs + 2, sizeof(*results));
  tp_status_t *st = NULL;
  int n_owned = 0;
  if (!inputs || !owned || !results) st = tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
  for (int i = 0; !st && i < g.n_slots; i++)
    if (g.slots[i].param_index >= 0) inputs[g.slots[i].param_index] = tp_storage_buffer(g.slots[i].storage);
  uint64_t call = tp_scalars_next_call();
  size_t next = (size_t)n_params;
  for (int i = 0; !st && i < g.n_calls; i++)
    for (int a = 0; !st && a < g.calls[i].n_args; a++)
      if (g.calls[i].args[a].arg.kind == TP_ARG_SCALAR) {
        st = tp_scalars_buffer(g.device, &g.calls[i].args[a].arg, call, &inputs[next++], &owned[n_owned]);
        if (!st && owned[n_owned]) n_owned++;
      }
  if (!st)
    st = tp_executable_execute(exe, &(tp_execute_args_t){.device = g.device,
                                                         .args = inputs,
                                                         .n_args = n_in,
                                                         .out_buffers = results,
                                                         /* kept for a later error report:
                                                          * a static string */
                                                         .op_name = "fused region",
                                                         .trace_name = what,
                                                         .blocking = tp_exec_blocking(),
                                                         .check_output = n_outputs});
  tp_executable_release(exe);
  for (int i = 0; i < n_owned; i++) tp_buffer_destroy(tp_exec_client(), owned[i]);
  /* On failure, storages whose donated buffers are gone take whatever result came back, as in
   * eager (eager.c), rather than point at a dead buffer. */
  for (int i = 0; results && i < g.n_slots; i++) {
    rslot_t *sl = &g.slots[i];
    if (sl->output >= 0 && results[sl->output])
      tp_storage_set_buffer(sl->storage, results[sl->output], sl->dtype, sl->numel);
  }
  free(inputs);
  free(owned);
  free(results);
  return st;
}

tp_status_t *tp_fused_flush(void) {
  assert(tp_exec_locked());
  if (g.n_calls == 0) {
    reset_region();
    return NULL;
  }
  tp_status_t *st = tp_exec_client() ? run_region() : tp_exec_unavailable();
  reset_region();
  return st;
}

void tp_fused_flush_kept(void) {
  if (g.n_calls > 0 || g.n_slots > 0) keep_error(tp_fused_flush());
}

tp_status_t *tp_fused_set(bool on) {
  tp_exec_lock(); /* runs the open region (tp_fused_flush_kept) */
  g.on = on;
  tp_status_t *st = tp_fused_take_error();
  tp_exec_unlock();
  return st;
}
