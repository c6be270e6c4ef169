/* Private to csrc/runtime: the PJRT calling helpers and the client's full record.
 * Only runtime .c files include this; everything else sees the opaque handles. */
#ifndef TP_RUNTIME_INTERNAL_H_
#define TP_RUNTIME_INTERNAL_H_

#include <pjrt_c_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "base/ref.h"
#include "base/status.h"
#include "runtime/client.h"
#include "runtime/trace.h"

/* Zeroes a PJRT args struct and sets its struct_size from the header's constant. */
#define TP_PJRT_ARGS(type, var) \
  type var;                     \
  memset(&var, 0, sizeof(var)); \
  var.struct_size = type##_STRUCT_SIZE

/* True when the plugin's function table reaches |field| (older plugins have shorter tables). */
#define TP_PJRT_HAS(api, field) \
  (offsetof(PJRT_Api, field) + sizeof(void *) <= (api)->struct_size && (api)->field != NULL)

/* Turns a PJRT error into a status (code and message kept) and destroys it. NULL in, NULL out. */
tp_status_t *tp_pjrt_status(const PJRT_Api *api, PJRT_Error *err, const char *what);
/* Awaits |ev|, destroys it, and returns its error as a status. */
tp_status_t *tp_pjrt_await(const PJRT_Api *api, PJRT_Event *ev, const char *what);
void tp_pjrt_buffer_destroy(const PJRT_Api *api, PJRT_Buffer *buf);
PJRT_Buffer_Type tp_pjrt_type(tp_dtype_t dtype);

/* Records when the device finishes |event|'s work into |e|'s done_ns (trace.c); NULL |e| or
 * |event| does nothing. */
void tp_trace_watch(tp_client_t *c, PJRT_Event *event, tp_trace_event_t *e);
#define TP_MAX_PENDING 256
/* Completion times kept, by sequence number. */
#define TP_TIME_RING 4096

struct tp_client {
  tp_ref_t ref;
  const PJRT_Api *api;
  PJRT_Client *client;
  char *plugin_path;
  char *platform_name;
  char *platform_version;
  size_t num_devices;
  PJRT_Device *const *devices; /* borrowed from the PJRT client */
  char **device_kinds;
  int64_t *device_ids; /* PJRT's global id of each device (device assignments name these) */
  int64_t memory_total; /* the plugin's limit, else physical memory */
  int64_t memory_limit; /* the budget storages are checked against (at most memory_total) */
  /* Completion events of enqueued executions, with the op that enqueued each, so synchronize
   * can wait for them and an asynchronous failure can name its op. */
  pthread_mutex_t lock;
  struct {
    PJRT_Event *event;
    const char *op;  /* static string (op table name) */
    uint64_t seq;
    int fault;       /* injected: completes with an error (see tp_client_inject_fault) */
    PJRT_Buffer *check; /* the program's check flag (s32[]), or NULL */
    PJRT_Event *check_read; /* its copy to check_flag[seq % TP_MAX_PENDING], started at enqueue */
  } pending[TP_MAX_PENDING];
  /* Copies of the pending check flags. Queued seqs are consecutive, so seq % TP_MAX_PENDING
   * gives each pending entry its own byte; entries move in |pending|, their bytes do not. */
  int32_t check_flag[TP_MAX_PENDING];
  int n_pending;
  uint64_t enqueued;   /* executions tracked so far */
  uint64_t completed;  /* all executions with seq <= completed are done */
  tp_status_t *async_error; /* first failure seen while pruning, reported at next sync */
  /* Executions handed to another thread to enqueue (tp_client_hand_off) and not enqueued yet;
   * |handed| is signalled as each is. Synchronize and mark wait for none to be left. */
  int in_hand;
  pthread_cond_t handed;
  /* Fault injection: executions of |fault_op| complete with an error. |fault_armed| is the only
   * thing the execute path reads when nothing is armed; the rest is guarded by |lock|. */
  _Atomic int fault_armed;
  char *fault_op;          /* "mul.Tensor", or a base name "mul" matching every overload */
  int64_t fault_left;      /* executions still to fail; < 0: every one */
  /* Completion times by sequence number, written by plugin threads (atomics only, no locks). */
  _Atomic int64_t done_ns[TP_TIME_RING];
  /* Bytes of live storages per device (num_devices entries), and their peaks. */
  _Atomic int64_t *bytes_in_use, *peak_bytes;
  /* Counters (tp_runtime_stats). */
  _Atomic int64_t compiles, memory_cache_hits, disk_cache_hits, executes, compile_ns;
};

#endif  /* TP_RUNTIME_INTERNAL_H_ */
