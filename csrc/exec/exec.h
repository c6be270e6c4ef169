/* What both executors (eager.h: one op call; graph.h: a captured graph) share: the process's
 * client and executable cache, the executor lock, the blocking switch, the StableHLO builder
 * tuned for the backend, and the one path from a program key to an executable: the cache, else
 * build, compile (dumping the program on failure when asked) and insert.
 * Binds ops/ (through the executors) to runtime/; knows nothing of PyTorch. */
#ifndef TP_EXEC_EXEC_H_
#define TP_EXEC_EXEC_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hlo/builder.h"
#include "exec/view.h"
#include "runtime/client.h"
#include "runtime/exec_cache.h"
#include "runtime/executable.h"
#include "runtime/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Creates the process's client and executable cache (once; later calls return NULL and change
 * nothing). |cache_dir| NULL/"" disables the disk cache; *out_warning (caller owns, may be NULL)
 * explains a disk cache that could not be used. */
tp_status_t *tp_exec_init(const char *plugin_path, const char *cache_dir, size_t cache_capacity,
                          char **out_warning);
/* Borrowed; NULL before a successful init, and in a process forked after it (the child has
 * none of the plugin's threads: any use of the client would hang). */
tp_client_t *tp_exec_client(void);
tp_exec_cache_t *tp_exec_cache(void);
/* Whether init succeeded in this process or in the parent it was forked from. */
bool tp_exec_initialized(void);
/* True in a process forked after init: the device cannot be used there. */
bool tp_exec_forked(void);
/* Devices of the client (also in a forked child, which cannot use them); 0 before init. */
int tp_exec_device_count(void);
/* Why there is no client: FAILED_PRECONDITION, naming the fork (and the spawn start method)
 * in a forked child. Caller owns the status. */
tp_status_t *tp_exec_unavailable(void);

/* Waits for everything enqueued (after running fused eager's open region) and returns an
 * asynchronous failure, if any: what torch.tpu.synchronize() does. */
tp_status_t *tp_exec_synchronize(void);
/* Runs fused eager's open region, if any, and returns its failure: what an event's record
 * does, so that the event follows the work recorded before it. */
tp_status_t *tp_exec_end_region(void);

/* Every execution waits for completion (errors point at the op that caused them). */
void tp_exec_set_blocking(int blocking);
int tp_exec_blocking(void);

/* The executor lock: every program run and storage buffer swap happens under it. Not
 * recursive. Any thread may release it, so work can be handed on with it held (collective.c).
 * Taking it first runs fused eager's open region (fused.h), so whoever holds it sees every
 * storage as the calls before made it; only the recorder takes it keeping the region open. */
void tp_exec_lock(void);
void tp_exec_lock_keeping_region(void);
void tp_exec_unlock(void);
/* Whether some thread holds the executor lock: what code that keeps static scratch (a key, a
 * plan, the bucket sites) asserts, since the lock is what makes that scratch one caller's. */
bool tp_exec_locked(void);

/* A StableHLO builder tuned for the client's backend (tp_hlo_builder_set_xla_cpu); caller owns. */
tp_status_t *tp_exec_builder_create(tp_hlo_builder_t **out_builder);

/* Writes the program's MLIR text (caller frees) from |ctx|. */
typedef tp_status_t *(*tp_exec_build_fn)(void *ctx, char **out_text);

/* What a program is, for the compile log: |what| (an op's name, or "graph of N ops") and its
 * tensor inputs (which |build| may fill: it runs before the compile is logged). */
typedef struct {
  const char *what;
  const tp_view_t *inputs;
  int n_inputs;
  bool bucketed; /* a bucket's program (exec/bucket.h): |inputs| carry the bucket's sizes */
} tp_exec_origin_t;

/* The executable for program key |key| (|hash| its tp_hash_bytes): from the cache, else built by
 * |build|, compiled as |options| say (which |key| must determine: a replicated program is bound
 * to its devices) and inserted. With TORCH_PJRT_DUMP_ON_ERROR set, the text of a program that
 * fails to compile goes to stderr; with TORCH_PJRT_DUMP_DIR, each compiled program's text goes to a
 * file there. *out_compiled says whether this call compiled. Returns a new
 * reference in *out_exe. Under the executor lock.
 * Each compile is classified by |origin|: "new shapes" when a program of the same |what| and
 * input dtypes was compiled before with other sizes (counted, tp_exec_new_shape_compiles), else
 * "first". With TORCH_PJRT_LOG_COMPILES=1 each compile prints a line to stderr: what, inputs,
 * reason and milliseconds. */
tp_status_t *tp_exec_program(const void *key, size_t key_len, uint64_t hash, tp_exec_build_fn build,
                             void *ctx, const tp_exec_origin_t *origin,
                             const tp_compile_options_t *options, tp_executable_t **out_exe,
                             bool *out_compiled);
/* The backend optimization level eager programs (one op each) compile at: they are many and
 * small, so compile time matters more than the last bit of code quality. TORCH_PJRT_EAGER_OPT_LEVEL
 * (0..3, or "default") sets it; by default 1 on XLA's CPU plugin (compiles ~40% faster than its
 * default 3, code as fast in our measurements, where 0 is many times slower), the plugin's own
 * elsewhere (-1). Whole graphs compile at the plugin's default. Read once, after init. */
int tp_exec_eager_opt_level(void);
/* Whether a program (eager's, or a fused region's) donates a storage's buffer to a write that
 * replaces all of it. Not on XLA's CPU plugin: its execute waits until every pending reader of a
 * donated buffer has finished, stalling the host behind the device, and a fresh buffer costs
 * nothing there. bench/compile.py's TinyLM training step: strict eager 13.5 -> 7.4 ms (AdamW's
 * step 5.8 -> 2.2 ms), fused eager 105 -> 186 steps/s. A partial write (a slice assigned, an
 * index_put_) donates everywhere: without it, the program copies the rest of the storage.
 * Read once, after init. */
bool tp_exec_donate_whole_writes(void);
/* Whether a program's parameter takes any buffer holding its bytes, whatever the buffer's shape:
 * on XLA's CPU plugin an array is its bytes in row-major order, so a program may return a
 * storage's new contents in the dims it computed them in (tp_program_result). Elsewhere buffers
 * may be laid out by shape (a TPU's tiles), and results stay 1-D, as storages are. Read once,
 * after init. */
bool tp_exec_buffers_any_shape(void);
/* Compiles caused by new shapes since the last reset (the kinds seen are kept). */
int64_t tp_exec_new_shape_compiles(void);
void tp_exec_reset_new_shape_compiles(void);

#ifdef __cplusplus
}
#endif
#endif  /* TP_EXEC_EXEC_H_ */
