/* PJRT plugin loading and the client: one per process, shared by every storage and executable.
 * Knows nothing of PyTorch. Thread-safe after creation. */
#ifndef TP_RUNTIME_CLIENT_H_
#define TP_RUNTIME_CLIENT_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tp_client tp_client_t;
/* PJRT's own handle types (pjrt_c_api.h declares them the same way). */
typedef struct PJRT_Buffer PJRT_Buffer;
typedef struct PJRT_Event PJRT_Event;

/* True in a process forked after a client was created: the child has none of the plugin's
 * threads, so it must make no PJRT call (one could wait forever for a lock a thread of the
 * parent held). Buffers and clients released there are left alone, not destroyed. */
bool tp_runtime_in_forked_child(void);

/* Loads the plugin at |plugin_path| (dlopen, never dlclose), checks its API version, initializes
 * it and creates a client. |cpu_device_count| > 0 is passed to plugins that accept it.
 * On success the caller owns one reference. Errors: NOT_FOUND (no file / no GetPjrtApi),
 * FAILED_PRECONDITION (incompatible API), or the plugin's own error. */
tp_status_t *tp_client_create(const char *plugin_path, int cpu_device_count,
                              tp_client_t **out_client);
void tp_client_retain(tp_client_t *c);
void tp_client_release(tp_client_t *c);

/* Accessors borrow; strings are valid while |c| lives. */
const char *tp_client_plugin_path(const tp_client_t *c);
const char *tp_client_platform_name(const tp_client_t *c);
const char *tp_client_platform_version(const tp_client_t *c);
void tp_client_api_version(const tp_client_t *c, int *out_major, int *out_minor);
int tp_client_device_count(const tp_client_t *c);
const char *tp_client_device_kind(const tp_client_t *c, int device);

/* Memory as the plugin reports it; fields it does not report are -1. */
typedef struct {
  int64_t bytes_in_use, peak_bytes_in_use, bytes_limit;
} tp_device_memory_t;
tp_status_t *tp_client_device_memory(tp_client_t *c, int device, tp_device_memory_t *out);
/* The byte budget storages are checked against (plugin limit, else physical memory, unless
 * set lower), and the device memory it was first set to. */
int64_t tp_client_memory_limit(const tp_client_t *c);
int64_t tp_client_memory_total(const tp_client_t *c);
void tp_client_set_memory_limit(tp_client_t *c, int64_t bytes);

/* Registers host memory [data, data + size) with the plugin for direct transfers (pinned host
 * memory), where the plugin takes it: *out_mapped says whether it did; a plugin without the
 * call, or that refuses, leaves the memory ordinary (not an error). Unmap before freeing. */
tp_status_t *tp_client_dma_map(tp_client_t *c, void *data, size_t size, bool *out_mapped);
void tp_client_dma_unmap(tp_client_t *c, void *data);

/* Waits for every enqueued execution; returns the first asynchronous failure, naming its op. */
tp_status_t *tp_client_synchronize(tp_client_t *c);
/* Gives host memory kept for reuse back to the system (the CPU plugin's freed buffers: see
 * TORCH_PJRT_CPU_MEMORY_CACHE in client.c); nothing elsewhere. */
void tp_client_release_cached_memory(void);

/* Records an execution's completion |event| (ownership passes to the client). |op_name| must be
 * a static string. A failure of that execution is reported by the next synchronizing call
 * (tp_client_synchronize, tp_client_marker_wait, tp_buffer_to_host), naming |op_name|. So is a
 * set |check| flag (the program's s32[] check output, or NULL; ownership passes): the failed
 * check's error (tp_check_status: IndexError for an index out of range, RuntimeError with its
 * message for an assertion), as CUDA reports a device-side assert. */
void tp_client_track(tp_client_t *c, PJRT_Event *event, const char *op_name, PJRT_Buffer *check);
/* For blocking executions: awaits |event| (ownership passes; it is destroyed) and returns
 * that execution's failure, or its set |check| flag, naming |op_name|. */
tp_status_t *tp_client_await_execution(tp_client_t *c, PJRT_Event *event, const char *op_name,
                                       PJRT_Buffer *check);

/* Fault injection, for testing the error paths (no device fails on demand). Executions of |op|
 * (an op-table name such as "mul.Tensor", or a base name such as "mul" for every overload)
 * complete with an INTERNAL error that travels the same way a device failure does: recorded
 * when the execution completes and reported by the next synchronizing call, or by the execution
 * itself when it is blocking. (Unlike a real failure, the outputs still hold the right values:
 * only the reporting is under test.) |count| > 0 fails that many executions, then disarms;
 * |count| < 0 fails every one; |op| NULL or "" disarms. tp_client_create arms it from the environment
 * variable TORCH_PJRT_INJECT_FAULT="<op>" or "<op>:<count>", read once. Thread-safe; costs the
 * execute path one atomic load when disarmed. */
void tp_client_inject_fault(tp_client_t *c, const char *op, int64_t count);

/* An execution another thread will enqueue: tp_client_hand_off counts it from the hand-off, and
 * that thread calls tp_client_handed once it has enqueued it (tp_client_track) or failed to
 * (|failed|, ownership passes: reported by the next synchronizing call, naming |op_name|, a static
 * string). Meanwhile tp_client_synchronize and tp_client_mark wait for it, so the work enqueued
 * before them includes it. Thread-safe. */
void tp_client_hand_off(tp_client_t *c);
void tp_client_handed(tp_client_t *c, tp_status_t *failed, const char *op_name);

/* Events over the device's one in-order queue. A marker names all work enqueued so far. */
typedef struct {
  uint64_t seq;        /* executions enqueued before the marker */
  int64_t record_ns;   /* host clock at record */
} tp_marker_t;
void tp_client_mark(tp_client_t *c, tp_marker_t *out);
/* True when all work before |m| has completed (never blocks). */
bool tp_client_marker_done(tp_client_t *c, const tp_marker_t *m);
/* Blocks until all work before |m| has completed; returns an asynchronous error if one arose. */
tp_status_t *tp_client_marker_wait(tp_client_t *c, const tp_marker_t *m);
/* Monotonic nanoseconds at which the work before |m| completed (after a wait). */
int64_t tp_client_marker_time(tp_client_t *c, const tp_marker_t *m);

#ifdef __cplusplus
}
#endif
#endif  /* TP_RUNTIME_CLIENT_H_ */
