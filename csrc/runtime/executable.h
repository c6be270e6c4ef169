/* Executables: StableHLO compiled by the plugin, serialized for the disk cache, and executed.
 * Thread-safe: PJRT executables may run concurrently. */
#ifndef TP_RUNTIME_EXECUTABLE_H_
#define TP_RUNTIME_EXECUTABLE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "runtime/client.h"
#include "runtime/storage.h" /* PJRT_Buffer */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tp_executable tp_executable_t;

/* Compiles MLIR text (StableHLO) into an executable runnable on any device of |client|.
 * Caller owns one reference. The plugin's diagnostics are kept in the error message. */
tp_status_t *tp_executable_compile(tp_client_t *client, const char *mlir, size_t size,
                                   tp_executable_t **out_exe);
/* How to compile. */
typedef struct {
  /* 0 or 1: one replica, runnable on any device. n > 1: a replicated program, replica r on
   * device |devices|[r] (collectives inside it run across those devices). */
  int replicas;
  const int *devices;
  /* XLA's backend (LLVM) optimization level, 0..3, as a compile option override; -1: the
   * plugin's default. */
  int backend_opt_level;
} tp_compile_options_t;
/* Compiles MLIR text as |options| say. Caller owns one reference. */
tp_status_t *tp_executable_compile_with(tp_client_t *client, const char *mlir, size_t size,
                                        const tp_compile_options_t *options,
                                        tp_executable_t **out_exe);
/* Serializes |exe|; *out_bytes is the caller's (free()). */
tp_status_t *tp_executable_serialize(tp_executable_t *exe, char **out_bytes, size_t *out_size);
/* Loads a serialized executable; caller owns one reference. */
tp_status_t *tp_executable_deserialize(tp_client_t *client, const char *bytes, size_t size,
                                       tp_executable_t **out_exe);
void tp_executable_retain(tp_executable_t *exe);
void tp_executable_release(tp_executable_t *exe);
int tp_executable_num_outputs(const tp_executable_t *exe);

/* One execution: on |device|, reading |args| (borrowed; those not listed in |non_donatable| may be
 * donated, i.e. dead afterwards when the program aliases them), filling |out_buffers|
 * (num_outputs entries, caller owns). A failure that happens later surfaces at the next
 * tp_client_synchronize, attributed to |op_name| (a static string). With |blocking| set, the
 * call waits for completion and returns its error itself. The output at index |check_output|
 * (-1, or the program has no output there: none) is the program's check flag
 * (tp_hlo_check_flag, appended after the data outputs): the client takes it (its out_buffers
 * entry becomes NULL) and reports the failed check the same way when it is set. */
typedef struct {
  int device;
  /* A replicated executable (tp_executable_compile_with, replicas > 1) runs once on each of its
   * |replicas| devices (|device| unused): |args| holds replicas * n_args buffers, replica by
   * replica, and |out_buffers| replicas * num_outputs. 0 or 1: one device. */
  int replicas;
  /* Replica r's device (as compiled), for traces; NULL: device r. */
  const int *replica_devices;
  PJRT_Buffer *const *args;
  size_t n_args;
  const int64_t *non_donatable;
  size_t n_non_donatable;
  PJRT_Buffer **out_buffers;
  const char *op_name;
  /* What a trace calls the program (copied at once; NULL: |op_name|), e.g. a graph's name. */
  const char *trace_name;
  bool blocking;
  int check_output;
} tp_execute_args_t;

/* Enqueues one execution of |exe| (see tp_execute_args_t); returns once enqueued. */
tp_status_t *tp_executable_execute(tp_executable_t *exe, const tp_execute_args_t *args);

/* The client's counters. */
typedef struct {
  int64_t compiles, memory_cache_hits, disk_cache_hits, executes;
  double compile_seconds;
} tp_runtime_stats_t;
void tp_runtime_stats(tp_client_t *client, tp_runtime_stats_t *out);
void tp_runtime_stats_reset(tp_client_t *client);
/* Counts an executable-cache hit (the cache calls it). */
void tp_runtime_count_hit(tp_client_t *client, int disk);

#ifdef __cplusplus
}
#endif
#endif  /* TP_RUNTIME_EXECUTABLE_H_ */
