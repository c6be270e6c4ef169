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

/* xla.CompileOptionsProto: executable_build_options {num_replicas: 1, num_partitions: 1} and
 * compile_portable_executable: true, so one executable runs on any device via execute_device.
 * Empty options abort some plugins, hence the explicit encoding. */
static const char kCompileOptions[] = {0x1a, 0x04, 0x20, 0x01, 0x28, 0x01, 0x20, 0x01};

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

tp_status_t *tp_executable_compile(tp_client_t *client, const char *mlir, size_t size,
                                   tp_executable_t **out_exe) {
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
  args.compile_options = kCompileOptions;
  args.compile_options_size = sizeof(kCompileOptions);
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
  if (a->device < 0 || (size_t)a->device >= c->num_devices)
    return tp_make_status(TP_INVALID_ARGUMENT, "tpu device %d does not exist (%zu devices)",
                          a->device, c->num_devices);
  TP_PJRT_ARGS(PJRT_ExecuteOptions, opts);
  opts.non_donatable_input_indices = a->non_donatable;
  opts.num_non_donatable_input_indices = a->n_non_donatable;
  PJRT_Buffer *const *arg_list = a->args;
  PJRT_Buffer **out_list = a->out_buffers;
  PJRT_Event *done = NULL;
  TP_PJRT_ARGS(PJRT_LoadedExecutable_Execute_Args, xargs);
  xargs.executable = e->exe;
  xargs.options = &opts;
  xargs.argument_lists = &arg_list;
  xargs.num_devices = 1;
  xargs.num_args = a->n_args;
  xargs.output_lists = &out_list;
  xargs.device_complete_events = &done;
  xargs.execute_device = c->devices[a->device];
  tp_status_t *st = tp_pjrt_status(api, api->PJRT_LoadedExecutable_Execute(&xargs), a->op_name);
  if (st) return st;
  atomic_fetch_add(&c->executes, 1);
  PJRT_Buffer *check = NULL;
  if (a->check_output >= 0 && a->check_output < e->num_outputs) {
    check = a->out_buffers[a->check_output];
    a->out_buffers[a->check_output] = NULL;
  }
  if (a->blocking) return tp_client_await_execution(c, done, a->op_name, check);
  tp_client_track(c, done, a->op_name, check);
  return NULL;
}
