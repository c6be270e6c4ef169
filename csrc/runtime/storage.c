/* Storage records, host<->device copies and memory accounting. */
#include "runtime/storage.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "runtime/internal.h"

struct tp_storage {
  tp_ref_t ref;
  tp_client_t *client;    /* retained */
  int device;
  size_t nbytes;          /* size PyTorch asked for */
  void *addr;             /* reserved address range of nbytes, PROT_NONE; NULL when nbytes == 0 */
  PJRT_Buffer *buffer;    /* owned; NULL until first written */
  tp_dtype_t dtype;       /* element type of |buffer| */
  int64_t numel;          /* elements in |buffer| (1-D) */
};

int tp_storage_device(const tp_storage_t *s) { return s->device; }
size_t tp_storage_nbytes(const tp_storage_t *s) { return s->nbytes; }
void *tp_storage_addr(const tp_storage_t *s) { return s->addr; }
PJRT_Buffer *tp_storage_buffer(const tp_storage_t *s) { return s->buffer; }
tp_dtype_t tp_storage_buffer_dtype(const tp_storage_t *s) { return s->dtype; }
int64_t tp_storage_buffer_numel(const tp_storage_t *s) { return s->numel; }

/* Released address ranges, kept for reuse by a storage of the same size: a training step frees
 * and makes the same sizes every step, and an mmap/munmap pair per storage was a measurable part
 * of a compiled step. Reserved, never-mapped space only (no memory); bounded. */
#define TP_RANGE_CACHE 256
static struct {
  void *addr;
  size_t len;
} g_ranges[TP_RANGE_CACHE];
static int g_n_ranges;
static pthread_mutex_t g_ranges_lock = PTHREAD_MUTEX_INITIALIZER;

static void *range_reserve(size_t nbytes) {
  pthread_mutex_lock(&g_ranges_lock);
  for (int i = g_n_ranges - 1; i >= 0; i--) {
    if (g_ranges[i].len == nbytes) {
      void *addr = g_ranges[i].addr;
      g_ranges[i] = g_ranges[--g_n_ranges];
      pthread_mutex_unlock(&g_ranges_lock);
      return addr;
    }
  }
  pthread_mutex_unlock(&g_ranges_lock);
  void *addr = mmap(NULL, nbytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return addr == MAP_FAILED ? NULL : addr;
}

static void range_release(void *addr, size_t nbytes) {
  pthread_mutex_lock(&g_ranges_lock);
  if (g_n_ranges == TP_RANGE_CACHE) {  /* full: give one back */
    munmap(g_ranges[0].addr, g_ranges[0].len);
    g_ranges[0] = g_ranges[--g_n_ranges];
  }
  g_ranges[g_n_ranges].addr = addr;
  g_ranges[g_n_ranges].len = nbytes;
  g_n_ranges++;
  pthread_mutex_unlock(&g_ranges_lock);
}

tp_status_t *tp_storage_create(tp_client_t *client, int device, size_t nbytes,
                               tp_storage_t **out_storage) {
  *out_storage = NULL;
  if (device < 0 || (size_t)device >= client->num_devices)
    return tp_make_status(TP_INVALID_ARGUMENT, "tpu device %d does not exist (%zu devices)",
                          device, client->num_devices);
  _Atomic int64_t *in_use = &client->bytes_in_use[device], *peak_of = &client->peak_bytes[device];
  int64_t limit = tp_client_memory_limit(client);
  int64_t now = atomic_fetch_add(in_use, (int64_t)nbytes) + (int64_t)nbytes;
  if (nbytes > (size_t)INT64_MAX / 2 || now > limit) {
    atomic_fetch_sub(in_use, (int64_t)nbytes);
    return tp_make_status(TP_RESOURCE_EXHAUSTED,
                          "tpu out of memory. Tried to allocate %.2f GiB (device %d has a budget "
                          "of %.2f GiB, of which %.2f GiB is allocated by tensors)",
                          (double)nbytes / (1 << 30), device, (double)limit / (1 << 30),
                          (double)(now - (int64_t)nbytes) / (1 << 30));
  }
  int64_t peak = atomic_load(peak_of);
  while (now > peak && !atomic_compare_exchange_weak(peak_of, &peak, now)) {
  }
  tp_storage_t *s = calloc(1, sizeof(*s));
  void *addr = NULL;
  if (s && nbytes) addr = range_reserve(nbytes);
  if (!s || (nbytes && !addr)) {
    free(s);
    atomic_fetch_sub(in_use, (int64_t)nbytes);
    return tp_make_status(TP_RESOURCE_EXHAUSTED,
                          "tpu out of memory: cannot reserve an address range of %zu bytes",
                          nbytes);
  }
  tp_ref_init(&s->ref);
  s->client = client;
  tp_client_retain(client);
  s->device = device;
  s->nbytes = nbytes;
  s->addr = addr;
  s->dtype = TP_DTYPE_INVALID;
  *out_storage = s;
  return NULL;
}

static void storage_destroy(tp_storage_t *s) {
  tp_buffer_destroy(s->client, s->buffer);
  if (s->addr) range_release(s->addr, s->nbytes);
  atomic_fetch_sub(&s->client->bytes_in_use[s->device], (int64_t)s->nbytes);
  tp_client_release(s->client);
  free(s);
}

TP_REF_FUNCTIONS(tp_storage_t, tp_storage, storage_destroy)

bool tp_storage_shared(const tp_storage_t *s) {
  return atomic_load_explicit(&((tp_storage_t *)s)->ref.count, memory_order_acquire) > 1;
}

void tp_storage_set_buffer(tp_storage_t *s, PJRT_Buffer *pjrt_buffer, tp_dtype_t dtype,
                           int64_t numel) {
  if (s->buffer && s->buffer != pjrt_buffer) tp_buffer_destroy(s->client, s->buffer);
  s->buffer = pjrt_buffer;
  s->dtype = dtype;
  s->numel = numel;
}

void tp_buffer_destroy(tp_client_t *client, PJRT_Buffer *pjrt_buffer) {
  if (tp_runtime_in_forked_child()) return; /* see tp_runtime_in_forked_child */
  tp_pjrt_buffer_destroy(client->api, pjrt_buffer);
}

tp_status_t *tp_buffer_from_host_async(tp_client_t *client, int device, const void *data,
                                       tp_dtype_t dtype, int ndim, const int64_t *dims,
                                       PJRT_Buffer **out_buffer, PJRT_Event **out_done) {
  *out_buffer = NULL;
  *out_done = NULL;
  if (device < 0 || device >= (int)client->num_devices)
    return tp_make_status(TP_INVALID_ARGUMENT, "tpu device %d does not exist (%zu devices)",
                          device, client->num_devices);
  const PJRT_Api *api = client->api;
  TP_PJRT_ARGS(PJRT_Client_BufferFromHostBuffer_Args, args);
  args.client = client->client;
  args.data = data;
  args.type = tp_pjrt_type(dtype);
  args.dims = dims;
  args.num_dims = (size_t)ndim;
  args.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
  args.device = client->devices[device];
  tp_trace_event_t *traced = tp_trace_begin(TP_TRACE_COPY, device, "copy");
  tp_status_t *st = tp_pjrt_status(api, api->PJRT_Client_BufferFromHostBuffer(&args),
                                   "copy host to device");
  if (traced) {
    tp_trace_end(traced);
    traced->bytes = (int64_t)tp_dtype_size(dtype);
    for (int d = 0; d < ndim; d++) traced->bytes *= dims[d];
    tp_trace_detail(traced, "host to device");
  }
  TP_RETURN_IF_ERROR(st);
  *out_buffer = args.buffer;
  *out_done = args.done_with_host_buffer;
  return NULL;
}

tp_status_t *tp_event_await(tp_client_t *client, PJRT_Event *event) {
  return tp_pjrt_await(client->api, event, "copy host to device");
}

tp_status_t *tp_buffer_from_host(tp_client_t *client, int device, const void *data,
                                 tp_dtype_t dtype, int ndim, const int64_t *dims,
                                 PJRT_Buffer **out_buffer) {
  PJRT_Event *done = NULL;
  TP_RETURN_IF_ERROR(
      tp_buffer_from_host_async(client, device, data, dtype, ndim, dims, out_buffer, &done));
  tp_status_t *st = tp_event_await(client, done);
  if (st) {
    tp_pjrt_buffer_destroy(client->api, *out_buffer);
    *out_buffer = NULL;
  }
  return st;
}

tp_status_t *tp_buffer_copy_to_device(tp_client_t *client, PJRT_Buffer *buffer, int device,
                                      PJRT_Buffer **out_buffer) {
  const PJRT_Api *api = client->api;
  *out_buffer = NULL;
  if (device < 0 || (size_t)device >= client->num_devices)
    return tp_make_status(TP_INVALID_ARGUMENT, "copy to tpu:%d: the client has %zu device(s)",
                          device, client->num_devices);
  if (!TP_PJRT_HAS(api, PJRT_Buffer_CopyToDevice))
    return tp_make_status(TP_UNIMPLEMENTED, "the plugin copies no buffer between devices");
  TP_PJRT_ARGS(PJRT_Buffer_CopyToDevice_Args, args);
  args.buffer = buffer;
  args.dst_device = client->devices[device];
  tp_trace_event_t *traced = tp_trace_begin(TP_TRACE_COPY, device, "copy");
  tp_status_t *st = tp_pjrt_status(api, api->PJRT_Buffer_CopyToDevice(&args), "copy device to device");
  if (traced) {
    tp_trace_end(traced);
    TP_PJRT_ARGS(PJRT_Buffer_OnDeviceSizeInBytes_Args, sargs);
    sargs.buffer = buffer;
    tp_status_t *sst = tp_pjrt_status(api, api->PJRT_Buffer_OnDeviceSizeInBytes(&sargs), "size");
    traced->bytes = sst ? 0 : (int64_t)sargs.on_device_size_in_bytes;
    tp_status_free(sst);
    tp_trace_detail(traced, "device to device");
  }
  TP_RETURN_IF_ERROR(st);
  *out_buffer = args.dst_buffer;
  return NULL;
}

/* The index of the device holding |buffer| (0 if PJRT cannot say). */
static int buffer_device(tp_client_t *c, PJRT_Buffer *buffer) {
  TP_PJRT_ARGS(PJRT_Buffer_Device_Args, args);
  args.buffer = buffer;
  tp_status_t *st = tp_pjrt_status(c->api, c->api->PJRT_Buffer_Device(&args), "device");
  bool known = !st;
  tp_status_free(st);
  for (size_t i = 0; known && i < c->num_devices; i++)
    if (c->devices[i] == args.device) return (int)i;
  return 0;
}

tp_status_t *tp_buffer_to_host(tp_client_t *client, PJRT_Buffer *pjrt_buffer, void *dst, size_t size) {
  const PJRT_Api *api = client->api;
  /* A copy to the host is a synchronizing call (as on CUDA): it waits for the work enqueued
   * before it and reports an asynchronous failure of that work, naming its op. */
  tp_marker_t before;
  tp_client_mark(client, &before);
  TP_PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args, args);
  args.src = pjrt_buffer;
  args.dst = dst;
  args.dst_size = size;
  tp_trace_event_t *traced = tp_trace_on() ? tp_trace_begin(TP_TRACE_COPY, buffer_device(client, pjrt_buffer), "copy") : NULL;
  tp_status_t *st =
      tp_pjrt_status(api, api->PJRT_Buffer_ToHostBuffer(&args), "copy device to host");
  if (!st) st = tp_pjrt_await(api, args.event, "copy device to host");
  if (traced) {
    tp_trace_end(traced);
    traced->bytes = (int64_t)size;
    tp_trace_detail(traced, "device to host");
  }
  /* The earlier failure first: it is the cause, a failed copy only its symptom. */
  return tp_status_join(tp_client_marker_wait(client, &before), st);
}

tp_status_t *tp_buffer_host_pointer(tp_client_t *client, PJRT_Buffer *buffer, void **out_ptr) {
  *out_ptr = NULL;
  if (strcmp(client->platform_name, "cpu") != 0)
    return tp_make_status(TP_UNIMPLEMENTED, "%s device memory is not host memory",
                          client->platform_name);
  TP_PJRT_ARGS(PJRT_Buffer_UnsafePointer_Args, args);
  args.buffer = buffer;
  TP_RETURN_IF_ERROR(tp_pjrt_status(client->api, client->api->PJRT_Buffer_UnsafePointer(&args),
                                    "buffer address"));
  *out_ptr = (void *)args.buffer_pointer;
  return NULL;
}

static bool has_device(const tp_client_t *c, int device) {
  return device >= 0 && (size_t)device < c->num_devices;
}
int64_t tp_storage_bytes_in_use(const tp_client_t *c, int device) {
  return has_device(c, device) ? atomic_load(&c->bytes_in_use[device]) : 0;
}
int64_t tp_storage_peak_bytes(const tp_client_t *c, int device) {
  return has_device(c, device) ? atomic_load(&c->peak_bytes[device]) : 0;
}
void tp_storage_reset_peak(tp_client_t *c, int device) {
  if (has_device(c, device)) atomic_store(&c->peak_bytes[device], atomic_load(&c->bytes_in_use[device]));
}
