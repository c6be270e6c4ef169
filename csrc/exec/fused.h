/* Fused eager (opt-in): op calls are inferred at once by the caller, as in strict eager, but
 * recorded instead of run; the recorded region runs as one program when something needs its
 * values. A region ends, deterministically, when:
 *   - anything else takes the executor lock (exec.h): a host read or write, a CPU fallback (which
 *     reads its inputs), a collective, a compiled graph, a copy between devices;
 *   - a synchronize (tp_exec_synchronize), or fused mode is switched off;
 *   - a call on another device than the region's, or the region's size limit;
 *   - past an eighth of that limit, a call whose content (op, argument layouts) hashes to a
 *     boundary, so that a loop's iterations cut at the same calls and repeat the same regions;
 *   - an explicit end (tp_exec_end_region: the package's after each optimizer step).
 * None of these depends on time: every rank of a program cuts its regions at the same calls.
 * (Ranks that are threads of one process share the region: their cuts follow the interleaving
 * of their calls. Results do not: a collective never runs inside a region.)
 * A region's program key is the sequence of its calls' signatures (scalar values are inputs, as
 * in eager) plus which storages outlive it, so a loop compiles each distinct region once. A
 * storage the region writes is materialized only if its owner still holds it at the end.
 * The region is process-wide, under the executor lock (so autograd's device threads record into
 * the same region as the thread that started a backward). */
#ifndef TP_EXEC_FUSED_H_
#define TP_EXEC_FUSED_H_

#include <stdbool.h>
#include <stdint.h>

#include "exec/eager.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Switches fused mode; switching it off runs the open region and returns its failure, if any. */
tp_status_t *tp_fused_set(bool on);
bool tp_fused_on(void);
/* Region size limit in calls (TORCH_PJRT_FUSED_MAX_OPS; default 2048). */
void tp_fused_set_max_ops(int n);

typedef struct {
  int64_t regions;  /* regions run */
  int64_t ops;      /* calls recorded into them */
  int64_t compiles; /* regions whose program was compiled (else a cache hit) */
  int64_t hits;
  int64_t max_ops;  /* calls in the largest region */
  /* A hash of the sequence of regions run (each one's program key, in order): two processes
   * that cut the same regions at the same calls have the same digest. */
  uint64_t digest;
} tp_fused_stats_t;
void tp_fused_stats(tp_fused_stats_t *out);
void tp_fused_reset_stats(void);

/* Private to exec/ (under the executor lock): */
/* Records one call (already inferred; tp_eager_run's arguments) on |device|. */
tp_status_t *tp_fused_record(int op, const tp_eager_arg_t *args, int n_args,
                             const tp_meta_t *out_metas, const tp_view_t *outs, int n_out,
                             int device);
/* Runs the open region, if any; its failure, if any (caller owns). */
tp_status_t *tp_fused_flush(void);
/* The same for a caller that cannot report it (the executor lock): the failure is kept for the
 * next synchronizing call or recorded call. Cheap when no region is open. */
void tp_fused_flush_kept(void);
/* The kept failure of a region run by someone else's call (caller owns), or NULL. */
tp_status_t *tp_fused_take_error(void);

#ifdef __cplusplus
}
#endif
#endif  /* TP_EXEC_FUSED_H_ */
