/* Storages: the device memory behind a PyTorch storage. One PJRT buffer (1-D, of the element type
 * its first writer chose) plus a record; the buffer is created lazily by the first program that
 * writes the storage, and replaced (handle swap) by every later write, so all views see it.
 * Each storage also owns a unique, never-mapped host address range that PyTorch uses as its
 * data_ptr: aliasing checks work, and a stray host dereference faults instead of reading garbage.
 * Thread-safety: a storage's buffer is swapped only under the executor lock (exec/exec.h). */
#ifndef TP_RUNTIME_STORAGE_H_
#define TP_RUNTIME_STORAGE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"
#include "runtime/client.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tp_storage tp_storage_t;

/* Creates an unwritten storage of |nbytes| on |device|; caller owns one reference.
 * RESOURCE_EXHAUSTED ("out of memory", with sizes) when it would exceed the memory budget. */
tp_status_t *tp_storage_create(tp_client_t *client, int device, size_t nbytes,
                               tp_storage_t **out_storage);
void tp_storage_retain(tp_storage_t *s);
void tp_storage_release(tp_storage_t *s);
/* Whether someone besides the caller (who holds a reference) holds |s|: how a recorder that
 * retains a storage learns its owner let it go (exec/fused.h). */
bool tp_storage_shared(const tp_storage_t *s);

/* Accessors (borrow): the device; the size PyTorch asked for; the reserved, never-mapped host
 * address range PyTorch uses as its data_ptr (NULL when nbytes is 0); the buffer (NULL until the
 * storage is first written; valid until the next set_buffer, which only the executor lock's
 * holder calls), its element type and its element count (1-D). */
int tp_storage_device(const tp_storage_t *s);
size_t tp_storage_nbytes(const tp_storage_t *s);
void *tp_storage_addr(const tp_storage_t *s);
PJRT_Buffer *tp_storage_buffer(const tp_storage_t *s);
tp_dtype_t tp_storage_buffer_dtype(const tp_storage_t *s);
int64_t tp_storage_buffer_numel(const tp_storage_t *s);

/* Replaces the buffer (takes ownership of |buffer|; the old one is destroyed). */
void tp_storage_set_buffer(tp_storage_t *s, PJRT_Buffer *buffer, tp_dtype_t dtype, int64_t numel);

/* Copies dense host data of |dtype| and shape |dims| (ndim 0 = scalar) into a new device buffer
 * on |device| (caller owns it). Returns once the host memory may be reused. */
tp_status_t *tp_buffer_from_host(tp_client_t *client, int device, const void *data,
                                 tp_dtype_t dtype, int ndim, const int64_t *dims,
                                 PJRT_Buffer **out_buffer);
/* Like tp_buffer_from_host, but returns once the copy is enqueued: *out_done (caller owns) is the
 * event that completes once the host memory is no longer read. Until then |data| must stay as it
 * is (pinned memory a non_blocking copy reads). Await it with tp_event_await. */
tp_status_t *tp_buffer_from_host_async(tp_client_t *client, int device, const void *data,
                                       tp_dtype_t dtype, int ndim, const int64_t *dims,
                                       PJRT_Buffer **out_buffer, PJRT_Event **out_done);
/* Waits for |event| and destroys it (NULL: nothing); its error, if any. */
tp_status_t *tp_event_await(tp_client_t *client, PJRT_Event *event);

/* Copies a whole device buffer to host memory of |size| bytes; blocks until done. A
 * synchronizing call: also waits for the executions enqueued before it and returns their
 * asynchronous failure, if any (naming the op), in preference to the copy's own. */
tp_status_t *tp_buffer_to_host(tp_client_t *client, PJRT_Buffer *buffer, void *dst, size_t size);
/* A copy of |buffer| on |device| of the same client (caller owns it), device to device without
 * the host; it is ready when the executions reading it are (PJRT orders them). UNIMPLEMENTED
 * when the plugin has no such copy. */
tp_status_t *tp_buffer_copy_to_device(tp_client_t *client, PJRT_Buffer *buffer, int device,
                                      PJRT_Buffer **out_buffer);
void tp_buffer_destroy(tp_client_t *client, PJRT_Buffer *buffer);
/* The host address of |buffer|'s bytes, for a client whose device memory is host memory (XLA's
 * CPU plugin): readable and writable in place once the executions reading or writing the buffer
 * are done (the caller waits for them), until the buffer is destroyed. UNIMPLEMENTED on other
 * platforms. */
tp_status_t *tp_buffer_host_pointer(tp_client_t *client, PJRT_Buffer *buffer, void **out_ptr);

/* Bytes of |client|'s live storages on |device|, and the peak since the last reset (0 for a
 * device the client does not have). */
int64_t tp_storage_bytes_in_use(const tp_client_t *client, int device);
int64_t tp_storage_peak_bytes(const tp_client_t *client, int device);
void tp_storage_reset_peak(tp_client_t *client, int device);

#ifdef __cplusplus
}
#endif
#endif  /* TP_RUNTIME_STORAGE_H_ */
