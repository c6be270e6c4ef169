/* Graph executor: many table ops as one program. See graph.h. */
#include "exec/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/bucket.h"
#include "exec/eager.h"
#include "exec/exec.h"
#include "exec/key.h"
#include "exec/program.h"
#include "exec/scalars.h"

typedef struct {
  int op;
  int n_args;
  tp_op_arg_t args[TP_MAX_ARGS];
  int values[TP_MAX_ARGS]; /* TENSOR args: the value read */
  int n_out, first_out;
  int key;                 /* a random op's key input (0-based), else -1 */
} node_t;

struct tp_graph {
  tp_meta_t *values;
  int n_values, cap_values;
  node_t *nodes;
  int n_nodes, cap_nodes;
  int *inputs, n_inputs, cap_inputs;
  int *outputs, n_outputs;
  int n_random;
  tp_key_t desc;  /* the graph's description: the program key's first part */
  tp_key_t key;   /* scratch: desc + the layouts of one run's inputs */
  tp_key_t last_layout;        /* the input layouts of the last run ... */
  tp_executable_t *last_exe;  /* ... and its executable (retained): reruns skip the key */
  char name[96];              /* what traces call its program ("" until named) */
};

/* Grows *arr (of *cap elements of |size|) to hold |need|. */
static bool grow(void **arr, int *cap, int need, size_t size) {
  if (need <= *cap) return true;
  int c = *cap ? *cap * 2 : 16;
  while (c < need) c *= 2;
  void *p = realloc(*arr, (size_t)c * size);
  if (!p) return false;
  *arr = p;
  *cap = c;
  return true;
}

static tp_status_t *oom(void) {
  return tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory building a graph");
}

tp_status_t *tp_graph_create(tp_graph_t **out) {
  *out = calloc(1, sizeof(tp_graph_t));
  return *out ? NULL : oom();
}

void tp_graph_free(tp_graph_t *g) {
  if (!g) return;
  free(g->values);
  free(g->nodes);
  free(g->inputs);
  free(g->outputs);
  tp_key_free(&g->desc);
  tp_key_free(&g->key);
  tp_key_free(&g->last_layout);
  if (g->last_exe) tp_executable_release(g->last_exe);
  free(g);
}

static int new_value(tp_graph_t *g, const tp_meta_t *m) {
  if (!grow((void **)&g->values, &g->cap_values, g->n_values + 1, sizeof(tp_meta_t))) return -1;
  g->values[g->n_values] = *m;
  g->values[g->n_values].writes_arg = 0;
  return g->n_values++;
}

static void put_meta(tp_key_t *s, const tp_meta_t *m) {
  tp_key_put_i64(s, m->dtype);
  tp_key_put_i64(s, m->ndim);
  tp_key_put(s, m->sizes, sizeof(int64_t) * (size_t)m->ndim);
}

int tp_graph_input(tp_graph_t *g, const tp_meta_t *meta) {
  if (!grow((void **)&g->inputs, &g->cap_inputs, g->n_inputs + 1, sizeof(int))) return -1;
  int v = new_value(g, meta);
  if (v < 0) return -1;
  g->inputs[g->n_inputs++] = v;
  tp_key_put_i64(&g->desc, -1);  /* an input */
  put_meta(&g->desc, meta);
  return v;
}

tp_status_t *tp_graph_node(tp_graph_t *g, int op, tp_op_arg_t *args, const int *arg_values,
                           int n_args, tp_meta_t *out_metas, int *n_out, int *first_value) {
  if (op < 0 || op >= tp_op_count) return tp_make_status(TP_INVALID_ARGUMENT, "bad op %d", op);
  const tp_op_def_t *d = &tp_op_table[op];
  if (n_args > TP_MAX_ARGS) return tp_make_status(TP_UNIMPLEMENTED, "%s: too many arguments", d->name);
  node_t nd;
  memset(&nd, 0, sizeof(nd));
  nd.op = op;
  nd.n_args = n_args;
  nd.key = -1;
  for (int i = 0; i < n_args; i++) {
    nd.args[i] = args[i];
    nd.values[i] = -1;
    if (args[i].kind == TP_ARG_TENSOR) {
      int v = arg_values[i];
      if (v < 0 || v >= g->n_values)
        return tp_make_status(TP_INVALID_ARGUMENT, "%s: argument %d names no value", d->name, i);
      nd.values[i] = v;
      nd.args[i].meta = g->values[v];
    } else if (args[i].kind == TP_ARG_SCALAR && args[i].scalar_dtype == TP_DTYPE_INVALID) {
      nd.args[i].scalar_dtype = args[i].meta.dtype;
    }
  }
  if (d->flags & TP_OPF_RANDOM) {
    /* The key: a program input, one per op and run (the eager glue appends it the same way). */
    if (n_args >= TP_MAX_ARGS) return tp_make_status(TP_UNIMPLEMENTED, "%s: too many arguments", d->name);
    tp_op_arg_t *k = &nd.args[nd.n_args++];
    memset(k, 0, sizeof(*k));
    k->kind = TP_ARG_SCALAR;
    k->meta.dtype = k->scalar_dtype = TP_DTYPE_I64;
    nd.key = g->n_random;
  }
  *n_out = 0;
  memset(out_metas, 0, sizeof(tp_meta_t) * TP_MAX_OUTS);
  TP_RETURN_IF_ERROR(tp_op_check_complex(d, nd.args, nd.n_args, NULL, 0));
  TP_RETURN_IF_ERROR(d->infer(d, nd.args, nd.n_args, out_metas, n_out));
  TP_RETURN_IF_ERROR(tp_op_check_complex(d, NULL, 0, out_metas, *n_out));
  TP_RETURN_IF_ERROR(tp_op_check_text(d, nd.args, nd.n_args));
  for (int k = 0; k < *n_out; k++)
    if (out_metas[k].writes_arg)  /* in-place updates have no place in a functional graph */
      return tp_make_status(TP_UNIMPLEMENTED, "%s updates an argument in place", d->name);
  if (!grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof(node_t))) return oom();
  nd.n_out = *n_out;
  nd.first_out = g->n_values;
  for (int k = 0; k < *n_out; k++)
    if (new_value(g, &out_metas[k]) < 0) return oom();
  if (nd.key >= 0) g->n_random++;
  g->nodes[g->n_nodes++] = nd;
  *first_value = nd.first_out;
  /* The description: op, then each argument as the eager signature records it, with scalar
   * values included (they are constants of the program). */
  tp_key_t *s = &g->desc;
  tp_key_put_i64(s, op);
  tp_key_put_i64(s, nd.n_args);
  for (int i = 0; i < nd.n_args; i++) {
    /* A random op's last scalar (its key) is fed per run: not part of the program. */
    bool per_run = i == nd.n_args - 1 && nd.key >= 0;
    tp_key_put_arg(s, &nd.args[i], !per_run);
    if (nd.args[i].kind == TP_ARG_TENSOR) tp_key_put_i64(s, nd.values[i]);
    else if (nd.args[i].kind == TP_ARG_SCALAR && per_run) tp_key_put_i64(s, -1);
  }
  for (int k = 0; k < *n_out; k++) put_meta(s, &out_metas[k]);
  return s->failed ? oom() : NULL;
}

tp_status_t *tp_graph_set_outputs(tp_graph_t *g, const int *values, int n) {
  int *o = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  if (!o) return oom();
  for (int i = 0; i < n; i++) {
    if (values[i] < 0 || values[i] >= g->n_values) {
      free(o);
      return tp_make_status(TP_INVALID_ARGUMENT, "graph output %d names no value", i);
    }
    o[i] = values[i];
  }
  free(g->outputs);
  g->outputs = o;
  g->n_outputs = n;
  return NULL;
}

const tp_meta_t *tp_graph_value_meta(const tp_graph_t *g, int v) {
  return v >= 0 && v < g->n_values ? &g->values[v] : NULL;
}
int tp_graph_input_count(const tp_graph_t *g) { return g->n_inputs; }
int tp_graph_output_count(const tp_graph_t *g) { return g->n_outputs; }
void tp_graph_set_name(tp_graph_t *g, const char *name) {
  snprintf(g->name, sizeof(g->name), "%s", name ? name : "");
}

int tp_graph_node_count(const tp_graph_t *g) { return g->n_nodes; }
int tp_graph_random_count(const tp_graph_t *g) { return g->n_random; }
uint64_t tp_graph_fingerprint(const tp_graph_t *g) {
  return tp_hash_bytes(g->desc.data, g->desc.len, 0x66707267ull);
}

/* ---- one run ---- */

typedef struct {
  tp_storage_t *storage;
  int param;  /* -1: no buffer yet (reads as zeros) */
} gslot_t;

static tp_status_t *build(const tp_graph_t *g, int replicas, const tp_view_t *inputs,
                          const gslot_t *slots, int n_slots, const int *input_slot,
                          char **out_text) {
  tp_hlo_builder_t *b = NULL;
  TP_RETURN_IF_ERROR(tp_exec_builder_create(&b));
  tp_hlo_builder_set_replicas(b, replicas);
  tp_hlo_builder_set_whole_graph(b, true);
  tp_hlo_value_t *val = calloc((size_t)(g->n_values > 0 ? g->n_values : 1), sizeof(tp_hlo_value_t));
  tp_hlo_value_t *params = calloc((size_t)(n_slots > 0 ? n_slots : 1), sizeof(tp_hlo_value_t));
  tp_hlo_value_t *keys = calloc((size_t)(g->n_random > 0 ? g->n_random : 1), sizeof(tp_hlo_value_t));
  tp_hlo_value_t *results = calloc((size_t)g->n_outputs + 1, sizeof(tp_hlo_value_t));
  if (!val || !params || !keys || !results) {
    free(val), free(params), free(keys), free(results);
    tp_hlo_builder_free(b);
    return oom();
  }
  for (int s = 0; s < n_slots; s++)
    if (slots[s].param >= 0)
      {
      int64_t numel = tp_storage_buffer_numel(slots[s].storage);
      params[s] = tp_hlo_param(b, tp_storage_buffer_dtype(slots[s].storage), 1, &numel, -1);
    }
  for (int r = 0; r < g->n_random; r++) keys[r] = tp_hlo_param(b, TP_DTYPE_I64, 0, NULL, -1);
  for (int i = 0; i < g->n_inputs; i++) {
    const gslot_t *sl = &slots[input_slot[i]];
    tp_hlo_value_t x = tp_program_storage(b, sl->param >= 0 ? &params[input_slot[i]] : NULL,
                                          sl->storage, inputs[i].dtype);
    val[g->inputs[i]] = tp_program_read_view(b, x, &inputs[i]);
  }
  for (int n = 0; n < g->n_nodes; n++) {
    const node_t *nd = &g->nodes[n];
    const tp_op_def_t *d = &tp_op_table[nd->op];
    tp_hlo_value_t in[TP_MAX_ARGS];
    memset(in, 0, sizeof(in));
    for (int i = 0; i < nd->n_args; i++) {
      if (nd->args[i].kind == TP_ARG_TENSOR) in[i] = val[nd->values[i]];
      else if (nd->args[i].kind == TP_ARG_SCALAR)
        in[i] = (nd->key >= 0 && i == nd->n_args - 1) ? keys[nd->key]
                                                      : tp_program_scalar_constant(b, &nd->args[i]);
    }
    d->emit(d, b, nd->args, nd->n_args, in, &g->values[nd->first_out], &val[nd->first_out]);
  }
  for (int k = 0; k < g->n_outputs; k++) {
    tp_hlo_value_t v = val[g->outputs[k]];
    results[k] = tp_program_result(b, tp_program_to_storage(b, v), v.ndim, v.dims);
  }
  /* Last, past the graph's outputs: the OR of its ops' index checks, if any has one. */
  int n_results = g->n_outputs + tp_hlo_check_flag(b, &results[g->n_outputs]);
  tp_status_t *st = tp_hlo_finish(b, results, n_results, out_text);
  free(val), free(params), free(keys), free(results);
  tp_hlo_builder_free(b);
  return st;
}

typedef struct {
  const tp_graph_t *g;
  int replicas;
  const tp_view_t *inputs;
  const gslot_t *slots;
  int n_slots;
  const int *input_slot;
} build_ctx_t;

static tp_status_t *build_graph(void *ctx, char **out_text) {
  const build_ctx_t *c = ctx;
  return build(c->g, c->replicas, c->inputs, c->slots, c->n_slots, c->input_slot, out_text);
}

/* One participant's inputs as program parameters: each storage becomes one parameter however
 * many inputs view it (|slots|, |input_slot|), and |k| gets the layout: per input its slot and
 * view, then per slot its buffer. */
static tp_status_t *layout(const tp_graph_t *g, int device, const tp_view_t *inputs,
                           gslot_t *slots, int *input_slot, int *out_n_slots, int *out_n_params,
                           tp_key_t *k) {
  int n_in = g->n_inputs, n_slots = 0, n_params = 0;
  for (int i = 0; i < n_in; i++) {
    const tp_view_t *v = &inputs[i];
    const tp_meta_t *m = &g->values[g->inputs[i]];
    if (v->dtype != m->dtype || v->ndim != m->ndim ||
        memcmp(v->sizes, m->sizes, sizeof(int64_t) * (size_t)m->ndim) != 0)
      return tp_make_status(TP_INVALID_ARGUMENT, "graph input %d does not match the graph's "
                            "declared shape or dtype", i);
    if (tp_storage_device(v->storage) != device)
      return tp_make_status(TP_INVALID_ARGUMENT, "graph input %d is on tpu:%d, the graph runs on "
                            "tpu:%d", i, tp_storage_device(v->storage), device);
    TP_RETURN_IF_ERROR(tp_view_check_bounds(v));
    int s = 0;
    while (s < n_slots && slots[s].storage != v->storage) s++;
    if (s == n_slots) {
      slots[s].storage = v->storage;
      slots[s].param = tp_storage_buffer(v->storage) ? n_params++ : -1;
      n_slots++;
    }
    input_slot[i] = s;
    tp_key_put_i64(k, s);
    tp_key_put_i64(k, v->ndim);
    tp_key_put(k, v->strides, sizeof(int64_t) * (size_t)v->ndim);
    tp_key_put_i64(k, v->offset);
  }
  for (int s = 0; s < n_slots; s++) {
    const tp_storage_t *sg = slots[s].storage;
    tp_key_put_i64(k, slots[s].param >= 0 ? tp_storage_buffer_dtype(sg) : -1);
    tp_key_put_i64(k, slots[s].param >= 0 ? tp_storage_buffer_numel(sg) : -1);
    tp_key_put_i64(k, (int64_t)tp_storage_nbytes(sg));
  }
  *out_n_slots = n_slots;
  *out_n_params = n_params;
  return k->failed ? oom() : NULL;
}

/* Runs |g| once over |n| participants (n > 1: replica r on devices[r]). Participant r's inputs,
 * keys and output storages are inputs[r * n_inputs ...], keys[r * n_random ...] and
 * outs[r * n_outputs ...]. */
static tp_status_t *run_locked(tp_graph_t *g, int n, const int *devices, const tp_view_t *inputs,
                               const int64_t *keys, tp_storage_t *const *outs,
                               tp_graph_outcome_t *out) {
  tp_client_t *client = tp_exec_client();
  if (!client) return tp_exec_unavailable();
  int n_in = g->n_inputs, n_per = n_in + g->n_random;
  size_t cells = (size_t)n * (size_t)(n_in > 0 ? n_in : 1);
  gslot_t *slots = calloc(cells, sizeof(gslot_t));
  int *input_slot = calloc(cells, sizeof(int));
  PJRT_Buffer **args = calloc((size_t)n * (size_t)(n_per + 1), sizeof(PJRT_Buffer *));
  PJRT_Buffer **results = calloc((size_t)n * (size_t)(g->n_outputs + 1), sizeof(PJRT_Buffer *));
  PJRT_Buffer **owned = calloc((size_t)n * (size_t)(g->n_random + 1), sizeof(PJRT_Buffer *)); /* see tp_scalars_buffer */
  tp_key_t other = {0};
  tp_status_t *st = (slots && input_slot && args && results && owned) ? NULL : oom();
  int n_slots = 0, n_params = 0;
  tp_executable_t *exe = NULL;
  tp_key_t *k = &g->key;
  /* The key: the graph, then (replicated) the devices, then participant 0's layout. A run with
   * the last run's devices and layout reuses its executable. */
  size_t head = g->desc.len + 8 + sizeof(int) * (size_t)g->n_outputs;
  if (!st) {
    k->len = 0;
    tp_key_put(k, g->desc.data, g->desc.len);
    tp_key_put_i64(k, g->n_outputs);
    tp_key_put(k, g->outputs, sizeof(int) * (size_t)g->n_outputs);
    tp_key_put_i64(k, n);
    if (n > 1) tp_key_put(k, devices, sizeof(int) * (size_t)n);
    size_t mine = k->len;
    st = layout(g, devices[0], inputs, slots, input_slot, &n_slots, &n_params, k);
    /* The program is the same on every replica: so must be every participant's layout. */
    for (int r = 1; r < n && !st; r++) {
      int ns = 0, np = 0;
      other.len = 0;
      st = layout(g, devices[r], inputs + (size_t)r * n_in, slots + (size_t)r * n_in,
                  input_slot + (size_t)r * n_in, &ns, &np, &other);
      if (!st && (other.len != k->len - mine || memcmp(other.data, k->data + mine, other.len)))
        st = tp_make_status(TP_INTERNAL, "participant %d's graph inputs are laid out unlike "
                            "participant 0's after aligning them", r); /* see align_inputs */
    }
  }
  if (!st && g->last_exe && g->last_layout.len == k->len - head &&
      memcmp(g->last_layout.data, k->data + head, k->len - head) == 0) {
    exe = g->last_exe;
    tp_executable_retain(exe);
  }
  if (!st && !exe) {
    build_ctx_t ctx = {g, n, inputs, slots, n_slots, input_slot};
    char what[64];
    if (n > 1) snprintf(what, sizeof(what), "graph of %d ops (%d devices)", g->n_nodes, n);
    else snprintf(what, sizeof(what), "graph of %d ops", g->n_nodes);
    tp_exec_origin_t origin = {what, inputs, g->n_inputs, false};
    st = tp_exec_program(g->key.data, g->key.len, tp_hash_bytes(g->key.data, g->key.len, 0x67726170ull),
                         build_graph, &ctx, &origin,
                         &(tp_compile_options_t){.replicas = n > 1 ? n : 0,
                                                 .devices = n > 1 ? devices : NULL,
                                                 .backend_opt_level = -1},
                         &exe, &out->compiled);
    if (st) {
      out->build_failed = true;
      st = tp_status_annotate(st, "building or compiling a graph of %d ops", g->n_nodes);
    }
    if (!st) {
      g->last_layout.len = 0;
      tp_key_put(&g->last_layout, k->data + head, k->len - head);
      if (g->last_exe) tp_executable_release(g->last_exe);
      g->last_exe = NULL;
      if (!g->last_layout.failed) {
        g->last_exe = exe;
        tp_executable_retain(exe);
      }
    }
  }
  int n_owned = 0, n_args = n_params + g->n_random;
  if (!st) {
    uint64_t call = tp_scalars_next_call();
    for (int r = 0; r < n && !st; r++) {
      PJRT_Buffer **a = args + (size_t)r * n_args;
      const gslot_t *sl = slots + (size_t)r * n_in;
      int at = 0;
      for (int s = 0; s < n_slots; s++)
        if (sl[s].param >= 0) a[at++] = tp_storage_buffer(sl[s].storage);
      for (int q = 0; q < g->n_random && !st; q++) {
        tp_op_arg_t ka;
        memset(&ka, 0, sizeof(ka));
        ka.kind = TP_ARG_SCALAR;
        ka.meta.dtype = ka.scalar_dtype = TP_DTYPE_I64;
        ka.i = keys[(size_t)r * g->n_random + q];
        st = tp_scalars_buffer(devices[r], &ka, call, &a[at++], &owned[n_owned]);
        if (!st && owned[n_owned]) n_owned++;
      }
    }
  }
  if (!st) {
    int n_res = tp_executable_num_outputs(exe);
    st = tp_executable_execute(exe, &(tp_execute_args_t){.device = devices[0],
                                                         .replicas = n > 1 ? n : 0,
                                                         .replica_devices = devices,
                                                         .args = args,
                                                         .trace_name = g->name[0] ? g->name : NULL,
                                                         .n_args = (size_t)n_args,
                                                         .out_buffers = results,
                                                         .op_name = "graph",
                                                         .blocking = tp_exec_blocking(),
                                                         .check_output = g->n_outputs});
    for (int r = 0; r < n; r++)
      for (int o = 0; o < g->n_outputs; o++) {
        PJRT_Buffer *res = results[(size_t)r * n_res + o];
        if (!res) continue;
        const tp_meta_t *m = &g->values[g->outputs[o]];
        tp_dtype_t sdt = tp_dtype_storage(m->dtype);
        tp_storage_set_buffer(outs[(size_t)r * g->n_outputs + o], res, sdt,
                              tp_meta_numel(m) * (int64_t)(tp_dtype_size(m->dtype) / tp_dtype_size(sdt)));
      }
  }
  for (int i = 0; i < n_owned; i++) tp_buffer_destroy(client, owned[i]);
  if (exe) tp_executable_release(exe);
  tp_key_free(&other);
  free(slots), free(input_slot), free(args), free(results), free(owned);
  return st;
}

/* Whether input |i| lies on participant |b| (its inputs |vb|) as on |a| (|va|): its strides and
 * offset, its storage's size and buffer (dtype and length), and the earlier input, if any, whose
 * storage it shares: all that layout() puts in the program's key. */
static bool lies_alike(const tp_view_t *va, const tp_view_t *vb, int i) {
  const tp_view_t *a = &va[i], *b = &vb[i];
  if (a->offset != b->offset || memcmp(a->strides, b->strides, sizeof(int64_t) * (size_t)a->ndim) ||
      tp_storage_nbytes(a->storage) != tp_storage_nbytes(b->storage) ||
      !tp_storage_buffer(a->storage) != !tp_storage_buffer(b->storage))
    return false;
  if (tp_storage_buffer(a->storage) &&
      (tp_storage_buffer_dtype(a->storage) != tp_storage_buffer_dtype(b->storage) ||
       tp_storage_buffer_numel(a->storage) != tp_storage_buffer_numel(b->storage)))
    return false;
  for (int j = 0; j < i; j++)
    if ((va[j].storage == a->storage) != (vb[j].storage == b->storage)) return false;
  return true;
}

/* One program needs one input layout. Ranks that run the same calls lay their inputs out alike
 * (shape buckets decide per device: exec/bucket.c); an input that lies otherwise on some
 * participant (a view at another offset) is read through an exact dense copy on every one:
 * *out_inputs (the caller frees it) is |inputs| with those copies, whose storages are
 * *out_temps[0 .. *out_n_temps) (the caller releases them), or NULL when all lie alike. Runs
 * before the executor lock (the copies take it); the participants' inputs are theirs, not
 * written while they wait for this call. */
static tp_status_t *align_inputs(const tp_graph_t *g, int n, const tp_view_t *inputs,
                                 tp_view_t **out_inputs, tp_storage_t ***out_temps,
                                 int *out_n_temps) {
  int n_in = g->n_inputs;
  *out_inputs = NULL, *out_temps = NULL, *out_n_temps = 0;
  tp_view_t *mine = NULL;
  tp_status_t *st = NULL;
  for (int i = 0; i < n_in && !st; i++) {
    bool alike = true;
    for (int r = 1; r < n && alike; r++) alike = lies_alike(inputs, inputs + (size_t)r * n_in, i);
    if (alike) continue;
    if (!mine) {
      mine = malloc(sizeof(tp_view_t) * (size_t)n * (size_t)n_in);
      *out_temps = malloc(sizeof(tp_storage_t *) * (size_t)n * (size_t)n_in);
      if (!mine || !*out_temps) {
        st = oom();
        break;
      }
      memcpy(mine, inputs, sizeof(tp_view_t) * (size_t)n * (size_t)n_in);
    }
    bool was = tp_bucket_pause(true); /* exact buffers, the same length on every participant */
    for (int r = 0; r < n && !st; r++) {
      const tp_view_t *v = &inputs[(size_t)r * n_in + i];
      tp_view_t *dense = &mine[(size_t)r * n_in + i];
      tp_storage_t *t = NULL;
      st = tp_eager_temp_storage(tp_storage_device(v->storage), v->dtype, v, &t, dense);
      if (!st) (*out_temps)[(*out_n_temps)++] = t;
      if (!st) st = tp_eager_copy(dense, v);
    }
    tp_bucket_pause(was);
  }
  *out_inputs = mine;
  return st;
}

tp_status_t *tp_graph_run_replicated(tp_graph_t *g, int n, const int *devices,
                                     const tp_view_t *inputs, const int64_t *keys,
                                     tp_storage_t *const *outs, tp_graph_outcome_t *out) {
  memset(out, 0, sizeof(*out));
  if (n < 1 || n > 64)
    return tp_make_status(TP_INVALID_ARGUMENT, "a graph runs over 1..64 devices, not %d", n);
  for (int r = 0; r < n; r++) {
    for (int q = 0; q < r; q++)
      if (devices[q] == devices[r])
        return tp_make_status(TP_INVALID_ARGUMENT, "graph participants %d and %d are both on "
                              "tpu:%d", q, r, devices[r]);
    for (int o = 0; o < g->n_outputs; o++) {
      const tp_meta_t *m = &g->values[g->outputs[o]];
      tp_storage_t *s = outs[(size_t)r * g->n_outputs + o];
      if (tp_storage_device(s) != devices[r] ||
          tp_storage_nbytes(s) != (size_t)tp_meta_numel(m) * tp_dtype_size(m->dtype))
        return tp_make_status(TP_INVALID_ARGUMENT, "graph output %d: storage of the wrong size or "
                              "device", o);
    }
  }
  tp_view_t *aligned = NULL;
  tp_storage_t **temps = NULL;
  int n_temps = 0;
  tp_status_t *st = n > 1 ? align_inputs(g, n, inputs, &aligned, &temps, &n_temps) : NULL;
  if (!st) {
    tp_exec_lock();
    st = run_locked(g, n, devices, aligned ? aligned : inputs, keys, outs, out);
    tp_exec_unlock();
  }
  for (int i = 0; i < n_temps; i++) tp_storage_release(temps[i]);
  free(aligned), free(temps);
  return st;
}

tp_status_t *tp_graph_run(tp_graph_t *g, int device, const tp_view_t *inputs, const int64_t *keys,
                          tp_storage_t *const *outs, tp_graph_outcome_t *out) {
  return tp_graph_run_replicated(g, 1, &device, inputs, keys, outs, out);
}
