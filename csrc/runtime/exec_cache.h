/* The executable cache: signature bytes -> compiled executable, in memory (bounded, LRU) and on
 * disk (serialized executables, keyed by plugin identity + signature, written atomically, with a
 * content hash checked before loading; a corrupt, stale or foreign entry is ignored and rebuilt).
 * The on-disk cache holds machine code: its directory must be private to the user (0700); one
 * owned by someone else or writable by others is refused. Thread-safe. */
#ifndef TP_RUNTIME_EXEC_CACHE_H_
#define TP_RUNTIME_EXEC_CACHE_H_

#include <stddef.h>
#include <stdint.h>

#include "base/hash.h" /* tp_hash_bytes: the cache's keys' hash */
#include "base/status.h"
#include "runtime/client.h"
#include "runtime/executable.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tp_exec_cache tp_exec_cache_t;

/* |disk_dir| NULL or "" disables the disk cache. |capacity| bounds the in-memory entries.
 * The disk cache is bounded too: by TORCH_PJRT_CACHE_DISK_MAX_BYTES (read here, once; a byte
 * count with an optional K/M/G suffix, 0 = unbounded, default 1G), evicting the least recently
 * used entries (by file mtime, which a load refreshes) once the directory grows past it.
 * |codegen_id| names the program generator (the build of the code that emits programs), so a
 * rebuilt library never loads programs an older build emitted for the same signature.
 * A disk directory that cannot be used is not an error: the cache runs memory-only and
 * *out_warning (caller owns, may be NULL) says why. Retains |client|. */
tp_status_t *tp_exec_cache_create(tp_client_t *client, const char *disk_dir, size_t capacity,
                                  const char *codegen_id, tp_exec_cache_t **out_cache,
                                  char **out_warning);
void tp_exec_cache_free(tp_exec_cache_t *cache);

/* Looks |key| up in memory, then on disk. Returns a new reference or NULL. */
tp_executable_t *tp_exec_cache_lookup(tp_exec_cache_t *cache, const void *key, size_t key_size,
                                      uint64_t hash);
/* Stores |exe| (retained) under |key|, in memory and (best effort) on disk. */
void tp_exec_cache_insert(tp_exec_cache_t *cache, const void *key, size_t key_size, uint64_t hash,
                          tp_executable_t *exe);
size_t tp_exec_cache_size(const tp_exec_cache_t *cache);
void tp_exec_cache_set_capacity(tp_exec_cache_t *cache, size_t capacity);
/* Bounds the disk cache to |max_bytes| (0 = unbounded), enforcing it at once. When a store
 * takes the directory past the bound, the oldest entries are removed until it holds at most 90%
 * of it. The byte count is shared by every process using the directory (a counter file updated
 * under flock), so each store costs O(1) and the bound holds for all of them together. */
void tp_exec_cache_set_disk_limit(tp_exec_cache_t *cache, int64_t max_bytes);
int64_t tp_exec_cache_disk_limit(const tp_exec_cache_t *cache);
void tp_exec_cache_clear(tp_exec_cache_t *cache);
const char *tp_exec_cache_dir(const tp_exec_cache_t *cache); /* "" when disabled */

#ifdef __cplusplus
}
#endif
#endif  /* TP_RUNTIME_EXEC_CACHE_H_ */
