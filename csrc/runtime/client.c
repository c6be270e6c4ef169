/* Plugin loading, client creation, devices, memory budget and synchronization. */
#include "runtime/client.h"

#include <dlfcn.h>
#include <malloc.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/internal.h"

/* Each plugin is loaded and initialized once per process, and never unloaded: dlclose tears
 * down registries the plugin's threads still use. */
static pthread_mutex_t g_load_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  char *path;
  const PJRT_Api *api;
} g_loaded[8];
static int g_n_loaded;

static tp_status_t *load_api(const char *path, const PJRT_Api **out_api) {
  pthread_mutex_lock(&g_load_lock);
  for (int i = 0; i < g_n_loaded; i++)
    if (strcmp(g_loaded[i].path, path) == 0) {
      *out_api = g_loaded[i].api;
      pthread_mutex_unlock(&g_load_lock);
      return NULL;
    }
  tp_status_t *st = NULL;
  struct stat sb;
  if (stat(path, &sb) != 0) {
    st = tp_make_status(TP_NOT_FOUND, "PJRT plugin '%s' does not exist", path);
    goto done;
  }
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    st = tp_make_status(TP_NOT_FOUND, "cannot load PJRT plugin '%s': %s", path, dlerror());
    goto done;
  }
  typedef const PJRT_Api *(*get_api_fn)(void);
  get_api_fn get = (get_api_fn)dlsym(lib, "GetPjrtApi");
  if (!get) {
    st = tp_make_status(TP_NOT_FOUND, "'%s' is not a PJRT plugin: it exports no GetPjrtApi", path);
    goto done;
  }
  const PJRT_Api *api = get();
  if (!api) {
    st = tp_make_status(TP_FAILED_PRECONDITION, "PJRT plugin '%s' returned no API table", path);
    goto done;
  }
  if (api->pjrt_api_version.major_version != PJRT_API_MAJOR) {
    st = tp_make_status(TP_FAILED_PRECONDITION,
                        "PJRT plugin '%s' has API %d.%d; this build needs major version %d", path,
                        api->pjrt_api_version.major_version, api->pjrt_api_version.minor_version,
                        PJRT_API_MAJOR);
    goto done;
  }
  if (TP_PJRT_HAS(api, PJRT_Plugin_Initialize)) {
    TP_PJRT_ARGS(PJRT_Plugin_Initialize_Args, iargs);
    st = tp_pjrt_status(api, api->PJRT_Plugin_Initialize(&iargs), "initialize PJRT plugin");
    if (st) goto done;
  }
  if (g_n_loaded < (int)(sizeof(g_loaded) / sizeof(g_loaded[0]))) {
    g_loaded[g_n_loaded].path = strdup(path);
    g_loaded[g_n_loaded].api = api;
    g_n_loaded++;
  }
  *out_api = api;
done:
  pthread_mutex_unlock(&g_load_lock);
  return st;
}

static void inject_fault_from_env(tp_client_t *c);

static char *dup_n(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d) {
    memcpy(d, s, n);
    d[n] = 0;
  }
  return d;
}

static int64_t physical_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (int64_t)pages * page : (int64_t)1 << 34;
}

/* XLA's CPU client sizes its compute thread pool from PJRT_NPROC (else NPROC, else the CPU
 * count). Its workers do not count the Python thread that dispatches work, which needs a core of
 * its own: with a worker on every core, a training step on two cores spent a third more CPU time
 * (workers spinning and stealing while the dispatching thread waited for a core). So unless the
 * user chose, the pool leaves one core free. Other plugins ignore the variable. */
static void default_host_threads(void) {
  if (getenv("PJRT_NPROC") || getenv("NPROC")) return;
  cpu_set_t set;
  int n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
  char buf[16];
  snprintf(buf, sizeof(buf), "%d", n > 1 ? n - 1 : 1);
  setenv("PJRT_NPROC", buf, 0);
}

static volatile int g_forked;
static void on_fork_child(void) { g_forked = 1; }
static void watch_forks(void) { pthread_atfork(NULL, NULL, on_fork_child); }
bool tp_runtime_in_forked_child(void) { return g_forked; }

/* The CPU plugin's buffers are host memory from malloc, and glibc hands a large freed block
 * back to the system (munmap, or a trim of the heap's top): the next buffer of that size then
 * faults its pages in anew, which cost more than the op that fills it (a 3.2 MB relu: 1.4 ms
 * against 0.08). As a GPU's caching allocator keeps device memory, freed blocks up to malloc's
 * largest mmap threshold (32 MB) are kept for reuse; tp_client_release_cached_memory gives them
 * back. TORCH_PJRT_CPU_MEMORY_CACHE=0 leaves malloc as it was. */
static bool g_keeps_freed; /* written when a CPU client is created (tp_exec_init, one thread),
                              read after: no lock */
static void keep_freed_host_memory(void) {
  const char *v = getenv("TORCH_PJRT_CPU_MEMORY_CACHE");
  if (g_keeps_freed || (v && strcmp(v, "0") == 0)) return;
  g_keeps_freed = mallopt(M_MMAP_THRESHOLD, 32 << 20) && mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

void tp_client_release_cached_memory(void) {
  if (g_keeps_freed) malloc_trim(0);
}

tp_status_t *tp_client_create(const char *plugin_path, int cpu_device_count,
                              tp_client_t **out_client) {
  *out_client = NULL;
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, watch_forks);
  const PJRT_Api *api = NULL;
  TP_RETURN_IF_ERROR(load_api(plugin_path, &api));
  default_host_threads();
  tp_client_t *c = calloc(1, sizeof(*c));
  if (!c) return tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
  tp_ref_init(&c->ref);
  c->api = api;
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->handed, NULL);
  c->plugin_path = strdup(plugin_path);

  TP_PJRT_ARGS(PJRT_NamedValue, opt);
  opt.name = "cpu_device_count";
  opt.name_size = strlen(opt.name);
  opt.type = PJRT_NamedValue_kInt64;
  opt.int64_value = cpu_device_count;
  opt.value_size = 1;
  TP_PJRT_ARGS(PJRT_Client_Create_Args, cargs);
  cargs.create_options = &opt;
  cargs.num_options = cpu_device_count > 0 ? 1 : 0;
  tp_status_t *st = tp_pjrt_status(api, api->PJRT_Client_Create(&cargs), "create PJRT client");
  if (st && cargs.num_options) {
    /* Plugins other than the CPU one reject unknown options: retry without. */
    tp_status_free(st);
    cargs.num_options = 0;
    cargs.create_options = NULL;
    st = tp_pjrt_status(api, api->PJRT_Client_Create(&cargs), "create PJRT client");
  }
  if (st) {
    free(c->plugin_path);
    free(c);
    return st;
  }
  c->client = cargs.client;

  TP_PJRT_ARGS(PJRT_Client_PlatformName_Args, pargs);
  pargs.client = c->client;
  st = tp_pjrt_status(api, api->PJRT_Client_PlatformName(&pargs), "platform name");
  c->platform_name = st ? strdup("unknown") : dup_n(pargs.platform_name, pargs.platform_name_size);
  tp_status_free(st);
  if (strcmp(c->platform_name, "cpu") == 0) keep_freed_host_memory();
  TP_PJRT_ARGS(PJRT_Client_PlatformVersion_Args, vargs);
  vargs.client = c->client;
  st = tp_pjrt_status(api, api->PJRT_Client_PlatformVersion(&vargs), "platform version");
  c->platform_version =
      st ? strdup("unknown") : dup_n(vargs.platform_version, vargs.platform_version_size);
  tp_status_free(st);

  TP_PJRT_ARGS(PJRT_Client_AddressableDevices_Args, dargs);
  dargs.client = c->client;
  st = tp_pjrt_status(api, api->PJRT_Client_AddressableDevices(&dargs), "list devices");
  if (st) {
    tp_client_release(c);
    return st;
  }
  c->devices = dargs.addressable_devices;
  c->num_devices = dargs.num_addressable_devices;
  c->device_kinds = calloc(c->num_devices ? c->num_devices : 1, sizeof(char *));
  c->device_ids = calloc(c->num_devices ? c->num_devices : 1, sizeof(int64_t));
  c->bytes_in_use = calloc(c->num_devices ? c->num_devices : 1, sizeof(c->bytes_in_use[0]));
  c->peak_bytes = calloc(c->num_devices ? c->num_devices : 1, sizeof(c->peak_bytes[0]));
  if (!c->device_kinds || !c->device_ids || !c->bytes_in_use || !c->peak_bytes) {
    tp_client_release(c);
    return tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
  }
  for (size_t i = 0; i < c->num_devices; i++) {
    TP_PJRT_ARGS(PJRT_Device_GetDescription_Args, gargs);
    gargs.device = c->devices[i];
    tp_status_t *s2 = tp_pjrt_status(api, api->PJRT_Device_GetDescription(&gargs), "device");
    if (!s2) {
      TP_PJRT_ARGS(PJRT_DeviceDescription_Kind_Args, kargs);
      kargs.device_description = gargs.device_description;
      s2 = tp_pjrt_status(api, api->PJRT_DeviceDescription_Kind(&kargs), "device kind");
      if (!s2) c->device_kinds[i] = dup_n(kargs.device_kind, kargs.device_kind_size);
      TP_PJRT_ARGS(PJRT_DeviceDescription_Id_Args, iargs);
      iargs.device_description = gargs.device_description;
      c->device_ids[i] = (int64_t)i;
      tp_status_t *s3 = tp_pjrt_status(api, api->PJRT_DeviceDescription_Id(&iargs), "device id");
      if (!s3) c->device_ids[i] = iargs.id;
      tp_status_free(s3);
    }
    tp_status_free(s2);
    if (!c->device_kinds[i]) c->device_kinds[i] = strdup(c->platform_name);
  }
  tp_device_memory_t mem;
  tp_status_t *ms = c->num_devices ? tp_client_device_memory(c, 0, &mem) : NULL;
  c->memory_total = !ms && c->num_devices && mem.bytes_limit > 0 ? mem.bytes_limit
                                                                  : physical_memory();
  c->memory_limit = c->memory_total;
  tp_status_free(ms);
  inject_fault_from_env(c);
  *out_client = c;
  return NULL;
}

static void client_destroy(tp_client_t *c) {
  if (g_forked) return; /* the parent's client: not this process's to tear down */
  tp_status_free(tp_client_synchronize(c));
  tp_status_free(c->async_error);
  free(c->fault_op);
  if (c->client) {
    TP_PJRT_ARGS(PJRT_Client_Destroy_Args, args);
    args.client = c->client;
    tp_status_free(tp_pjrt_status(c->api, c->api->PJRT_Client_Destroy(&args), "destroy client"));
  }
  for (size_t i = 0; i < c->num_devices; i++) free(c->device_kinds[i]);
  free(c->device_ids);
  free(c->device_kinds);
  free(c->plugin_path);
  free(c->platform_name);
  free(c->platform_version);
  free(c->bytes_in_use);
  free(c->peak_bytes);
  pthread_cond_destroy(&c->handed);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

TP_REF_FUNCTIONS(tp_client_t, tp_client, client_destroy)

const char *tp_client_plugin_path(const tp_client_t *c) { return c->plugin_path; }
const char *tp_client_platform_name(const tp_client_t *c) { return c->platform_name; }
const char *tp_client_platform_version(const tp_client_t *c) { return c->platform_version; }
void tp_client_api_version(const tp_client_t *c, int *out_major, int *out_minor) {
  *out_major = c->api->pjrt_api_version.major_version;
  *out_minor = c->api->pjrt_api_version.minor_version;
}
int tp_client_device_count(const tp_client_t *c) { return (int)c->num_devices; }
const char *tp_client_device_kind(const tp_client_t *c, int device) {
  return device >= 0 && (size_t)device < c->num_devices ? c->device_kinds[device] : "";
}
int64_t tp_client_memory_limit(const tp_client_t *c) { return c->memory_limit; }
int64_t tp_client_memory_total(const tp_client_t *c) { return c->memory_total; }
void tp_client_set_memory_limit(tp_client_t *c, int64_t bytes) { c->memory_limit = bytes; }

tp_status_t *tp_client_dma_map(tp_client_t *c, void *data, size_t size, bool *out_mapped) {
  *out_mapped = false;
  if (!TP_PJRT_HAS(c->api, PJRT_Client_DmaMap)) return NULL;
  TP_PJRT_ARGS(PJRT_Client_DmaMap_Args, args);
  args.client = c->client;
  args.data = data;
  args.size = size;
  tp_status_t *st = tp_pjrt_status(c->api, c->api->PJRT_Client_DmaMap(&args), "map host memory");
  if (st && (tp_status_code(st) == TP_UNIMPLEMENTED || tp_status_code(st) == TP_INVALID_ARGUMENT)) {
    tp_status_free(st);  /* the plugin does not map host memory: ordinary memory it stays */
    return NULL;
  }
  *out_mapped = st == NULL;
  return st;
}

void tp_client_dma_unmap(tp_client_t *c, void *data) {
  if (!TP_PJRT_HAS(c->api, PJRT_Client_DmaUnmap)) return;
  TP_PJRT_ARGS(PJRT_Client_DmaUnmap_Args, args);
  args.client = c->client;
  args.data = data;
  tp_status_free(tp_pjrt_status(c->api, c->api->PJRT_Client_DmaUnmap(&args), "unmap host memory"));
}

tp_status_t *tp_client_device_memory(tp_client_t *c, int device, tp_device_memory_t *out) {
  out->bytes_in_use = out->peak_bytes_in_use = out->bytes_limit = -1;
  if (device < 0 || (size_t)device >= c->num_devices)
    return tp_make_status(TP_INVALID_ARGUMENT, "device %d out of range", device);
  if (!TP_PJRT_HAS(c->api, PJRT_Device_MemoryStats))
    return tp_make_status(TP_UNIMPLEMENTED, "plugin reports no memory stats");
  TP_PJRT_ARGS(PJRT_Device_MemoryStats_Args, args);
  args.device = c->devices[device];
  TP_RETURN_IF_ERROR(
      tp_pjrt_status(c->api, c->api->PJRT_Device_MemoryStats(&args), "device memory stats"));
  out->bytes_in_use = args.bytes_in_use;
  if (args.peak_bytes_in_use_is_set) out->peak_bytes_in_use = args.peak_bytes_in_use;
  if (args.bytes_limit_is_set) out->bytes_limit = args.bytes_limit;
  return NULL;
}

/* ---- fault injection ---- */

static const char kFaultEnv[] = "TORCH_PJRT_INJECT_FAULT";

void tp_client_inject_fault(tp_client_t *c, const char *op, int64_t count) {
  pthread_mutex_lock(&c->lock);
  free(c->fault_op);
  c->fault_op = op && *op && count != 0 ? strdup(op) : NULL;
  c->fault_left = count;
  atomic_store(&c->fault_armed, c->fault_op != NULL);
  pthread_mutex_unlock(&c->lock);
}

/* Arms injection from "<op>" or "<op>:<count>"; a malformed count fails every execution. */
static void inject_fault_from_env(tp_client_t *c) {
  const char *v = getenv(kFaultEnv);
  if (!v || !*v) return;
  char *op = strdup(v);
  if (!op) return;
  int64_t count = -1;
  char *colon = strrchr(op, ':');
  if (colon) {
    *colon = 0;
    char *end = NULL;
    long long n = strtoll(colon + 1, &end, 10);
    if (end != colon + 1 && *end == 0 && n > 0) count = n;
  }
  tp_client_inject_fault(c, op, count);
  fprintf(stderr, "torch_pjrt: %s: executions of '%s' will fail (%s)\n", kFaultEnv, op,
          count < 0 ? "every one" : "a limited number");
  free(op);
}

/* True (and one fewer left) when this execution of |op_name| is to fail. Caller holds lock. */
static int fault_due_locked(tp_client_t *c, const char *op_name) {
  if (!c->fault_op || !op_name) return 0;
  size_t n = strlen(c->fault_op);
  if (strncmp(op_name, c->fault_op, n) != 0 || (op_name[n] != 0 && op_name[n] != '.')) return 0;
  if (c->fault_left > 0 && --c->fault_left == 0) {
    free(c->fault_op);
    c->fault_op = NULL;
    atomic_store(&c->fault_armed, 0);
  }
  return 1;
}

static tp_status_t *injected_fault(const char *op_name) {
  return tp_make_status(TP_INTERNAL, "%s: injected device fault (%s)", op_name, kFaultEnv);
}

/* ---- the pending-execution queue ---- */

/* Starts copying a program's check flag to |dst|. The copy waits for the program, so starting it
 * at enqueue means no round trip is left for the time the program completes. */
static PJRT_Event *start_check_read(tp_client_t *c, PJRT_Buffer *check, int32_t *dst,
                                    tp_status_t **st) {
  *dst = TP_CHECK_NONE;
  TP_PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args, args);
  args.src = check;
  args.dst = dst;
  args.dst_size = sizeof(*dst);
  *st = tp_pjrt_status(c->api, c->api->PJRT_Buffer_ToHostBuffer(&args), "read check");
  return *st ? NULL : args.event;
}

/* Awaits a started check-flag copy and destroys the flag buffer: the failed check's error when
 * the flag holds one (base/status.h). |started| is the status of starting the copy (its event is
 * then NULL). */
static tp_status_t *finish_check_read(tp_client_t *c, PJRT_Buffer *check, PJRT_Event *read,
                                      tp_status_t *started, const int32_t *flag) {
  tp_status_t *st = started;
  if (read) st = tp_pjrt_await(c->api, read, "read check");
  tp_pjrt_buffer_destroy(c->api, check);
  return st ? st : tp_check_status(*flag);
}

static tp_status_t *read_check(tp_client_t *c, PJRT_Buffer *check) {
  if (!check) return NULL;
  int32_t flag;
  tp_status_t *st = NULL;
  PJRT_Event *read = start_check_read(c, check, &flag, &st);
  return finish_check_read(c, check, read, st, &flag);
}

/* Awaits pending execution |i| and turns its outcome (a device error, an injected fault or a set
 * check flag) into the client's pending asynchronous error. Caller holds lock. */
static void finish_locked(tp_client_t *c, int i) {
  tp_status_t *err = tp_pjrt_await(c->api, c->pending[i].event, "device execution");
  if (!err && c->pending[i].fault) err = injected_fault("device execution");
  if (c->pending[i].check) {
    tp_status_t *flag = finish_check_read(c, c->pending[i].check, c->pending[i].check_read, NULL,
                                          &c->check_flag[c->pending[i].seq % TP_MAX_PENDING]);
    if (err) tp_status_free(flag);
    else err = flag;
  }
  if (err) {
    tp_status_annotate(err, "asynchronous error in '%s'", c->pending[i].op);
    c->async_error = tp_status_join(c->async_error, err);
  }
  c->completed = c->pending[i].seq;
}

static void drop_head_locked(tp_client_t *c, int n) {
  memmove(c->pending, c->pending + n, (size_t)(c->n_pending - n) * sizeof(c->pending[0]));
  c->n_pending -= n;
  if (c->n_pending == 0) c->completed = c->enqueued;
}

/* Drops the finished events at the head of the queue; keeps the first failure for later. */
static void prune_locked(tp_client_t *c, int keep_at_most) {
  int i = 0;
  for (; i < c->n_pending; i++) {
    TP_PJRT_ARGS(PJRT_Event_IsReady_Args, args);
    args.event = c->pending[i].event;
    tp_status_t *st = tp_pjrt_status(c->api, c->api->PJRT_Event_IsReady(&args), "event");
    bool ready = !st && args.is_ready;
    tp_status_free(st);
    if (!ready && c->n_pending - i <= keep_at_most) break;
    /* Not ready but the queue is full: waiting here bounds memory. */
    finish_locked(c, i);
  }
  drop_head_locked(c, i);
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* |user_arg|: the execution's slot in its client's done_ns. */
static void on_ready(PJRT_Error *error, void *user_arg) {
  atomic_store((_Atomic int64_t *)user_arg, now_ns());
  (void)error; /* the error itself is read when the event is awaited */
}

void tp_client_track(tp_client_t *c, PJRT_Event *pjrt_event, const char *op_name,
                     PJRT_Buffer *check) {
  if (!pjrt_event) {
    tp_pjrt_buffer_destroy(c->api, check);
    return;
  }
  pthread_mutex_lock(&c->lock);
  if (c->n_pending == TP_MAX_PENDING) prune_locked(c, TP_MAX_PENDING / 2);
  uint64_t seq = ++c->enqueued;
  atomic_store(&c->done_ns[seq % TP_TIME_RING], 0);
  TP_PJRT_ARGS(PJRT_Event_OnReady_Args, oargs);
  oargs.event = pjrt_event;
  oargs.callback = on_ready;
  oargs.user_arg = (void *)&c->done_ns[seq % TP_TIME_RING];
  tp_status_free(tp_pjrt_status(c->api, c->api->PJRT_Event_OnReady(&oargs), "event"));
  int k = c->n_pending++;
  c->pending[k].seq = seq;
  c->pending[k].event = pjrt_event;
  c->pending[k].op = op_name ? op_name : "?";
  c->pending[k].check = check;
  c->pending[k].check_read = NULL;
  if (check) {
    tp_status_t *st = NULL;
    int32_t *flag = &c->check_flag[seq % TP_MAX_PENDING];
    c->pending[k].check_read = start_check_read(c, check, flag, &st);
    if (st) {  /* the flag cannot be read: report that at the next sync, as a failed execution */
      tp_status_annotate(st, "asynchronous error in '%s'", c->pending[k].op);
      c->async_error = tp_status_join(c->async_error, st);
      tp_pjrt_buffer_destroy(c->api, check);
      c->pending[k].check = NULL;
    }
  }
  c->pending[k].fault = atomic_load_explicit(&c->fault_armed, memory_order_relaxed) &&
                        fault_due_locked(c, op_name);
  pthread_mutex_unlock(&c->lock);
}

tp_status_t *tp_client_await_execution(tp_client_t *c, PJRT_Event *pjrt_event, const char *op_name,
                                       PJRT_Buffer *check) {
  int fault = 0;
  if (atomic_load_explicit(&c->fault_armed, memory_order_relaxed)) {
    pthread_mutex_lock(&c->lock);
    fault = fault_due_locked(c, op_name);
    pthread_mutex_unlock(&c->lock);
  }
  tp_status_t *err = tp_pjrt_await(c->api, (PJRT_Event *)pjrt_event, op_name);
  if (!err && fault) err = injected_fault(op_name);
  if (err) {
    tp_pjrt_buffer_destroy(c->api, check);
    return err;
  }
  return tp_status_annotate(read_check(c, check), "%s", op_name);
}

void tp_client_hand_off(tp_client_t *c) {
  pthread_mutex_lock(&c->lock);
  c->in_hand++;
  pthread_mutex_unlock(&c->lock);
}

void tp_client_handed(tp_client_t *c, tp_status_t *failed, const char *op_name) {
  pthread_mutex_lock(&c->lock);
  if (failed) {
    tp_status_annotate(failed, "asynchronous error in '%s'", op_name ? op_name : "?");
    c->async_error = tp_status_join(c->async_error, failed);
  }
  c->in_hand--;
  pthread_cond_broadcast(&c->handed);
  pthread_mutex_unlock(&c->lock);
}

/* Waits until every execution handed off has been enqueued. Caller holds lock. */
static void await_hand_offs_locked(tp_client_t *c) {
  while (c->in_hand > 0) pthread_cond_wait(&c->handed, &c->lock);
}

tp_status_t *tp_client_synchronize(tp_client_t *c) {
  pthread_mutex_lock(&c->lock);
  await_hand_offs_locked(c);
  prune_locked(c, 0);
  tp_status_t *err = c->async_error;
  c->async_error = NULL;
  pthread_mutex_unlock(&c->lock);
  return err;
}

void tp_client_mark(tp_client_t *c, tp_marker_t *out) {
  pthread_mutex_lock(&c->lock);
  await_hand_offs_locked(c);
  out->seq = c->enqueued;
  pthread_mutex_unlock(&c->lock);
  out->record_ns = now_ns();
}

bool tp_client_marker_done(tp_client_t *c, const tp_marker_t *m) {
  pthread_mutex_lock(&c->lock);
  prune_locked(c, TP_MAX_PENDING);
  bool done = c->completed >= m->seq;
  pthread_mutex_unlock(&c->lock);
  return done;
}

tp_status_t *tp_client_marker_wait(tp_client_t *c, const tp_marker_t *m) {
  pthread_mutex_lock(&c->lock);
  while (c->completed < m->seq && c->n_pending > 0) {
    /* Await the oldest pending execution. */
    finish_locked(c, 0);
    drop_head_locked(c, 1);
  }
  if (c->n_pending == 0) c->completed = c->enqueued;
  tp_status_t *err = c->async_error;
  c->async_error = NULL;
  pthread_mutex_unlock(&c->lock);
  return err;
}

int64_t tp_client_marker_time(tp_client_t *c, const tp_marker_t *m) {
  int64_t t = m->seq ? atomic_load(&c->done_ns[m->seq % TP_TIME_RING]) : 0;
  return t > m->record_ns ? t : m->record_ns;
}
