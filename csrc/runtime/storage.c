/* Storage records, host<->device copies and memory accounting. */
#include "runtime/storage.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "runtime/internal.h"

#define TP_MAX_DEVICES 64
static _Atomic int64_t g_in_use[TP_MAX_DEVICES];
static _Atomic int64_t g_peak[TP_MAX_DEVICES];

static int dev_slot(int device) { return device >= 0 && device < TP_MAX_DEVICES ? device : 0; }

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
  if (s && nbytes) {
    addr = mmap(NULL, nbytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (addr == MAP_FAILED) addr = NULL;
  }
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
  if (s->addr) munmap(s->addr, s->nbytes);
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
