/* Compile, serialize, deserialize and execute through PJRT. */
#include "runtime/executable.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "runtime/internal.h"

struct tp_executable {
  tp_ref_t ref;
  tp_client_t *client;
  PJRT_LoadedExecutable *exe;
  int num_outputs;
};

void tp_runtime_stats(tp_client_t *c, tp_runtime_stats_t *out) {
  out->compiles = c->compiles;
  out->memory_cache_hits = c->memory_cache_hits;
  out->disk_cache_hits = c->disk_cache_hits;
  out->executes = c->executes;
  out->compile_seconds = (double)c->compile_ns / 1e9;
}

void tp_runtime_stats_reset(tp_client_t *c) {
  c->compiles = c->memory_cache_hits = c->disk_cache_hits = c->executes = c->compile_ns = 0;
}

void tp_runtime_count_hit(tp_client_t *c, int disk) {
  atomic_fetch_add(disk ? &c->disk_cache_hits : &c->memory_cache_hits, 1);
}

static tp_status_t *wrap(tp_client_t *client, PJRT_LoadedExecutable *loaded,
                         tp_executable_t **out_exe) {
  const PJRT_Api *api = client->api;
  tp_executable_t *e = calloc(1, sizeof(*e));
  if (!e) return tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
  tp_ref_init(&e->ref);
  e->client = client;
  tp_client_retain(client);
  e->exe = loaded;
  TP_PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args, gargs);
  gargs.loaded_executable = loaded;
  tp_status_t *st =
      tp_pjrt_status(api, api->PJRT_LoadedExecutable_GetExecutable(&gargs), "get executable");
  if (!st) {
    TP_PJRT_ARGS(PJRT_Executable_NumOutputs_Args, nargs);
    nargs.executable = gargs.executable;
    st = tp_pjrt_status(api, api->PJRT_Executable_NumOutputs(&nargs), "num outputs");
    e->num_outputs = (int)nargs.num_outputs;
    TP_PJRT_ARGS(PJRT_Executable_Destroy_Args, dargs);
    dargs.executable = gargs.executable;
    st = tp_status_join(st, tp_pjrt_status(api, api->PJRT_Executable_Destroy(&dargs), "destroy"));
  }
  if (st) {
    tp_executable_release(e);
    return st;
  }
  *out_exe = e;
  return NULL;
}

static tp_status_t *compile(tp_client_t *client, const char *mlir, size_t size,
                            const char *options, size_t options_size, tp_executable_t **out_exe) {
  *out_exe = NULL;
  const PJRT_Api *api = client->api;
  TP_PJRT_ARGS(PJRT_Program, prog);
  prog.code = (char *)mlir;
  prog.code_size = size;
  prog.format = "mlir";
  prog.format_size = 4;
  TP_PJRT_ARGS(PJRT_Client_Compile_Args, args);
  args.client = client->client;
  args.program = &prog;
  args.compile_options = options;
  args.compile_options_size = options_size;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  tp_status_t *st = tp_pjrt_status(api, api->PJRT_Client_Compile(&args), "compile");
  clock_gettime(CLOCK_MONOTONIC, &t1);
  atomic_fetch_add(&client->compile_ns,
                   (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec));
  if (st) return st;
  atomic_fetch_add(&client->compiles, 1);
  return wrap(client, args.executable, out_exe);
}

/* Protocol-buffer wire format, the little of it compile options need: varint fields (wire type
 * 0) and length-delimited ones (wire type 2). */
typedef struct {
  unsigned char data[1024];
  size_t len;
} pb_t;
static void pb_varint(pb_t *p, uint64_t v) {
  while (p->len < sizeof(p->data)) {
    p->data[p->len++] = (unsigned char)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
    if ((v >>= 7) == 0) break;
  }
}
static void pb_int(pb_t *p, int field, int64_t v) {
  pb_varint(p, (uint64_t)field << 3);
  pb_varint(p, (uint64_t)v);
}
static void pb_bytes(pb_t *p, int field, const void *data, size_t n) {
  pb_varint(p, (uint64_t)field << 3 | 2);
  pb_varint(p, n);
  for (size_t i = 0; i < n && p->len < sizeof(p->data); i++)
    p->data[p->len++] = ((const unsigned char *)data)[i];
}
static void pb_message(pb_t *p, int field, const pb_t *m) { pb_bytes(p, field, m->data, m->len); }

tp_status_t *tp_executable_compile(tp_client_t *client, const char *mlir, size_t size,
                                   tp_executable_t **out_exe) {
  static const tp_compile_options_t plain = {.backend_opt_level = -1};
  return tp_executable_compile_with(client, mlir, size, &plain, out_exe);
}

tp_status_t *tp_executable_compile_with(tp_client_t *client, const char *mlir, size_t size,
                                        const tp_compile_options_t *o, tp_executable_t **out_exe) {
  *out_exe = NULL;
  int n = o->replicas > 1 ? o->replicas : 1;
  if (n > 64)
    return tp_make_status(TP_INVALID_ARGUMENT, "a replicated program needs 1..64 devices, not %d", n);
  /* xla.CompileOptionsProto{3: ExecutableBuildOptionsProto{4: num_replicas, 5: num_partitions,
   * 9: DeviceAssignmentProto{1: replica_count, 2: computation_count,
   * 3: ComputationDevice{1: replica_device_ids...}}}, 4: compile_portable_executable,
   * 7: env_option_overrides {1: flag name, 2: OptionOverrideProto{3: int_field}}}.
   * One replica compiles portable, so one executable runs on any device via execute_device.
   * Empty options abort some plugins, hence always the explicit encoding. */
  pb_t build = {0}, options = {0};
  pb_int(&build, 4, n);
  pb_int(&build, 5, 1);
  if (o->replicas > 1) {
    pb_t ids = {0}, assignment = {0};
    for (int r = 0; r < n; r++) {
      if (o->devices[r] < 0 || (size_t)o->devices[r] >= client->num_devices)
        return tp_make_status(TP_INVALID_ARGUMENT, "tpu device %d does not exist (%zu devices)",
                              o->devices[r], client->num_devices);
      pb_int(&ids, 1, client->device_ids[o->devices[r]]);
    }
    pb_int(&assignment, 1, n);
    pb_int(&assignment, 2, 1);
    pb_message(&assignment, 3, &ids);
    pb_message(&build, 9, &assignment);
  }
  pb_message(&options, 3, &build);
  if (o->replicas <= 1) pb_int(&options, 4, 1);
  if (o->backend_opt_level >= 0) {
    static const char kFlag[] = "xla_backend_optimization_level";
    pb_t value = {0}, entry = {0};
    pb_int(&value, 3, o->backend_opt_level);
    pb_bytes(&entry, 1, kFlag, sizeof(kFlag) - 1);
    pb_message(&entry, 2, &value);
    pb_message(&options, 7, &entry);
  }
  return compile(client, mlir, size, (const char *)options.data, options.len, out_exe);
}

tp_status_t *tp_executable_serialize(tp_executable_t *e, char **out_bytes, size_t *out_size) {
  *out_bytes = NULL;
  *out_size = 0;
  const PJRT_Api *api = e->client->api;
  TP_PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args, gargs);
  gargs.loaded_executable = e->exe;
  TP_RETURN_IF_ERROR(
      tp_pjrt_status(api, api->PJRT_LoadedExecutable_GetExecutable(&gargs), "get executable"));
  TP_PJRT_ARGS(PJRT_Executable_Serialize_Args, sargs);
  sargs.executable = gargs.executable;
  tp_status_t *st = tp_pjrt_status(api, api->PJRT_Executable_Serialize(&sargs), "serialize");
  if (!st) {
    *out_bytes = malloc(sargs.serialized_bytes_size ? sargs.serialized_bytes_size : 1);
    if (*out_bytes) {
      memcpy(*out_bytes, sargs.serialized_bytes, sargs.serialized_bytes_size);
      *out_size = sargs.serialized_bytes_size;
    } else {
      st = tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
    }
    if (sargs.serialized_executable_deleter)
      sargs.serialized_executable_deleter(sargs.serialized_executable);
  }
  TP_PJRT_ARGS(PJRT_Executable_Destroy_Args, dargs);
  dargs.executable = gargs.executable;
  return tp_status_join(st, tp_pjrt_status(api, api->PJRT_Executable_Destroy(&dargs), "destroy"));
}

tp_status_t *tp_executable_deserialize(tp_client_t *client, const char *bytes, size_t size,
                                       tp_executable_t **out_exe) {
  *out_exe = NULL;
  const PJRT_Api *api = client->api;
  TP_PJRT_ARGS(PJRT_Executable_DeserializeAndLoad_Args, args);
  args.client = client->client;
  args.serialized_executable = bytes;
  args.serialized_executable_size = size;
  TP_RETURN_IF_ERROR(tp_pjrt_status(api, api->PJRT_Executable_DeserializeAndLoad(&args),
                                    "load cached executable"));
  return wrap(client, args.loaded_executable, out_exe);
}

static void executable_destroy(tp_executable_t *e) {
  if (e->exe) {
    TP_PJRT_ARGS(PJRT_LoadedExecutable_Destroy_Args, args);
    args.executable = e->exe;
    tp_status_free(tp_pjrt_status(e->client->api,
                                  e->client->api->PJRT_LoadedExecutable_Destroy(&args),
                                  "destroy executable"));
  }
  tp_client_release(e->client);
  free(e);
}

TP_REF_FUNCTIONS(tp_executable_t, tp_executable, executable_destroy)

int tp_executable_num_outputs(const tp_executable_t *e) { return e->num_outputs; }

tp_status_t *tp_executable_execute(tp_executable_t *e, const tp_execute_args_t *a) {
  tp_client_t *c = e->client;
  const PJRT_Api *api = c->api;
  int n = a->replicas > 1 ? a->replicas : 1;
  if (a->replicas <= 1 && (a->device < 0 || (size_t)a->device >= c->num_devices))
    return tp_make_status(TP_INVALID_ARGUMENT, "tpu device %d does not exist (%zu devices)",
                          a->device, c->num_devices);
  TP_PJRT_ARGS(PJRT_ExecuteOptions, opts);
  opts.non_donatable_input_indices = a->non_donatable;
  opts.num_non_donatable_input_indices = a->n_non_donatable;
  PJRT_Buffer *const *arg_lists[64];
  PJRT_Buffer **out_lists[64];
  PJRT_Event *done[64] = {NULL};
  if (n > 64) return tp_make_status(TP_INVALID_ARGUMENT, "more than 64 replicas");
  for (int r = 0; r < n; r++) {
    arg_lists[r] = a->args + (size_t)r * a->n_args;
    out_lists[r] = a->out_buffers + (size_t)r * (size_t)e->num_outputs;
  }
  TP_PJRT_ARGS(PJRT_LoadedExecutable_Execute_Args, xargs);
  xargs.executable = e->exe;
  xargs.options = &opts;
  xargs.argument_lists = arg_lists;
  xargs.num_devices = (size_t)n;
  xargs.num_args = a->n_args;
  xargs.output_lists = out_lists;
  xargs.device_complete_events = done;
  /* A replicated program runs on the devices its assignment names, in replica order. */
  xargs.execute_device = a->replicas > 1 ? NULL : c->devices[a->device];
  tp_trace_event_t *traced[64] = {NULL};
  if (tp_trace_on())
    for (int r = 0; r < n; r++) {
      int device = a->replicas <= 1 ? a->device : a->replica_devices ? a->replica_devices[r] : r;
      traced[r] = tp_trace_begin(TP_TRACE_PROGRAM, device, a->trace_name ? a->trace_name : a->op_name);
    }
  tp_status_t *st = tp_pjrt_status(api, api->PJRT_LoadedExecutable_Execute(&xargs), a->op_name);
  if (st) return st;
  atomic_fetch_add(&c->executes, 1);
  for (int r = 0; r < n; r++) {
    tp_trace_end(traced[r]);
    if (!a->blocking) tp_trace_watch(c, done[r], traced[r]);
    PJRT_Buffer *check = NULL;
    if (a->check_output >= 0 && a->check_output < e->num_outputs) {
      check = out_lists[r][a->check_output];
      out_lists[r][a->check_output] = NULL;
    }
    if (a->blocking) {
      st = tp_status_join(st, tp_client_await_execution(c, done[r], a->op_name, check));
      if (traced[r]) tp_trace_set_done(traced[r], tp_trace_now_ns());
    }
    else tp_client_track(c, done[r], a->op_name, check);
  }
  return st;
}
