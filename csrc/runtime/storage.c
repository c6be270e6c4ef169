/* Storage records, host<->device copies and memory accounting. */
#include "runtime/storage.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "runtime/internal.h"

#define TP_MAX_DEVICES 64
static _Atomic int64_t g_in_use[TP_MAX_DEVICES];
static _Atomic int64_t g_peak[TP_MAX_DEVICES];

static int dev_slot(int device) { return device >= 0 && device < TP_MAX_DEVICES ? device : 0; }

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
  int d = dev_slot(device);
  int64_t limit = tp_client_memory_limit(client);
  int64_t now = atomic_fetch_add(&g_in_use[d], (int64_t)nbytes) + (int64_t)nbytes;
  if (nbytes > (size_t)INT64_MAX / 2 || now > limit) {
    atomic_fetch_sub(&g_in_use[d], (int64_t)nbytes);
    return tp_make_status(TP_RESOURCE_EXHAUSTED,
                          "tpu out of memory. Tried to allocate %.2f GiB (device %d has a budget "
                          "of %.2f GiB, of which %.2f GiB is allocated by tensors)",
                          (double)nbytes / (1 << 30), device, (double)limit / (1 << 30),
                          (double)(now - (int64_t)nbytes) / (1 << 30));
  }
  int64_t peak = atomic_load(&g_peak[d]);
  while (now > peak && !atomic_compare_exchange_weak(&g_peak[d], &peak, now)) {
  }
  tp_storage_t *s = calloc(1, sizeof(*s));
  void *addr = NULL;
  if (s && nbytes) addr = range_reserve(nbytes);
  if (!s || (nbytes && !addr)) {
    free(s);
    atomic_fetch_sub(&g_in_use[d], (int64_t)nbytes);
    return tp_make_status(TP_RESOURCE_EXHAUSTED,
                          "tpu out of memory: cannot reserve an address range of %zu bytes",
                          nbytes);
  }
  s->refs = 1;
  s->client = client;
  tp_client_retain(client);
  s->device = device;
  s->nbytes = nbytes;
  s->addr = addr;
  s->dtype = TP_DTYPE_INVALID;
  *out_storage = s;
  return NULL;
}

void tp_storage_retain(tp_storage_t *s) {
  if (s) atomic_fetch_add((_Atomic int *)&s->refs, 1);
}

void tp_storage_release(tp_storage_t *s) {
  if (!s || atomic_fetch_sub((_Atomic int *)&s->refs, 1) != 1) return;
  tp_buffer_destroy(s->client, s->buffer);
  if (s->addr) range_release(s->addr, s->nbytes);
  atomic_fetch_sub(&g_in_use[dev_slot(s->device)], (int64_t)s->nbytes);
  tp_client_release(s->client);
  free(s);
}

void tp_storage_set_buffer(tp_storage_t *s, void *pjrt_buffer, tp_dtype_t dtype, int64_t numel) {
  if (s->buffer && s->buffer != pjrt_buffer) tp_buffer_destroy(s->client, s->buffer);
  s->buffer = pjrt_buffer;
  s->dtype = dtype;
  s->numel = numel;
}

void tp_buffer_destroy(tp_client_t *client, void *pjrt_buffer) {
  tp_pjrt_buffer_destroy(client->api, (PJRT_Buffer *)pjrt_buffer);
}

tp_status_t *tp_buffer_from_host(tp_client_t *client, int device, const void *data,
                                 tp_dtype_t dtype, int ndim, const int64_t *dims,
                                 void **out_buffer) {
  *out_buffer = NULL;
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
  TP_RETURN_IF_ERROR(tp_pjrt_status(api, api->PJRT_Client_BufferFromHostBuffer(&args),
                                    "copy host to device"));
  tp_status_t *st = tp_pjrt_await(api, args.done_with_host_buffer, "copy host to device");
  if (st) {
    tp_pjrt_buffer_destroy(api, args.buffer);
    return st;
  }
  *out_buffer = args.buffer;
  return NULL;
}

tp_status_t *tp_buffer_to_host(tp_client_t *client, void *pjrt_buffer, void *dst, size_t size) {
  const PJRT_Api *api = client->api;
  /* A copy to the host is a synchronizing call (as on CUDA): it waits for the work enqueued
   * before it and reports an asynchronous failure of that work, naming its op. */
  tp_marker_t before;
  tp_client_mark(client, &before);
  TP_PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args, args);
  args.src = (PJRT_Buffer *)pjrt_buffer;
  args.dst = dst;
  args.dst_size = size;
  tp_status_t *st =
      tp_pjrt_status(api, api->PJRT_Buffer_ToHostBuffer(&args), "copy device to host");
  if (!st) st = tp_pjrt_await(api, args.event, "copy device to host");
  /* The earlier failure first: it is the cause, a failed copy only its symptom. */
  return tp_status_join(tp_client_marker_wait(client, &before), st);
}

int64_t tp_storage_bytes_in_use(int device) { return atomic_load(&g_in_use[dev_slot(device)]); }
int64_t tp_storage_peak_bytes(int device) { return atomic_load(&g_peak[dev_slot(device)]); }
void tp_storage_reset_peak(int device) {
  atomic_store(&g_peak[dev_slot(device)], atomic_load(&g_in_use[dev_slot(device)]));
}
