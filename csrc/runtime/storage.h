/* Storages: the device memory behind a PyTorch storage. One PJRT buffer (1-D, of the element type
 * its first writer chose) plus a record; the buffer is created lazily by the first program that
 * writes the storage, and replaced (handle swap) by every later write, so all views see it.
 * Each storage also owns a unique, never-mapped host address range that PyTorch uses as its
 * data_ptr: aliasing checks work, and a stray host dereference faults instead of reading garbage.
 * Thread-safety: a storage's buffer is swapped only under the eager executor's lock. */
#ifndef TP_RUNTIME_STORAGE_H_
#define TP_RUNTIME_STORAGE_H_

#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"
#include "runtime/client.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tp_storage {
  int refs;               /* atomic */
  tp_client_t *client;    /* retained */
  int device;
  size_t nbytes;          /* size PyTorch asked for */
  void *addr;             /* reserved address range of nbytes, PROT_NONE; NULL when nbytes == 0 */
  void *buffer;           /* PJRT_Buffer*, owned; NULL until first written */
  tp_dtype_t dtype;       /* element type of |buffer| */
  int64_t numel;          /* elements in |buffer| (1-D) */
} tp_storage_t;

/* Creates an unwritten storage of |nbytes| on |device|; caller owns one reference.
 * RESOURCE_EXHAUSTED ("out of memory", with sizes) when it would exceed the memory budget. */
tp_status_t *tp_storage_create(tp_client_t *client, int device, size_t nbytes,
                               tp_storage_t **out_storage);
void tp_storage_retain(tp_storage_t *s);
void tp_storage_release(tp_storage_t *s);

/* Replaces the buffer (takes ownership of |pjrt_buffer|; the old one is destroyed). */
void tp_storage_set_buffer(tp_storage_t *s, void *pjrt_buffer, tp_dtype_t dtype, int64_t numel);

/* Copies dense host data of |dtype| and shape |dims| (ndim 0 = scalar) into a new device buffer
 * on |device| (caller owns the returned PJRT_Buffer*). Returns once the host memory may be
 * reused. */
tp_status_t *tp_buffer_from_host(tp_client_t *client, int device, const void *data,
                                 tp_dtype_t dtype, int ndim, const int64_t *dims,
                                 void **out_buffer);
/* Copies a whole device buffer to host memory of |size| bytes; blocks until done. A
 * synchronizing call: also waits for the executions enqueued before it and returns their
 * asynchronous failure, if any (naming the op), in preference to the copy's own. */
tp_status_t *tp_buffer_to_host(tp_client_t *client, void *pjrt_buffer, void *dst, size_t size);
void tp_buffer_destroy(tp_client_t *client, void *pjrt_buffer);

/* Bytes of live storages, process-wide, and the peak since the last reset. */
int64_t tp_storage_bytes_in_use(int device);
int64_t tp_storage_peak_bytes(int device);
void tp_storage_reset_peak(int device);

#ifdef __cplusplus
}
#endif
#endif  /* TP_RUNTIME_STORAGE_H_ */
