/* The C core's one byte hash: program keys, the executable cache's entries, bucket sites and
 * registered modules' ids. Depends on nothing. */
#ifndef TP_BASE_HASH_H_
#define TP_BASE_HASH_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A 64-bit hash of |size| bytes at |data|, varied by |seed|. */
uint64_t tp_hash_bytes(const void *data, size_t size, uint64_t seed);

#ifdef __cplusplus
}
#endif
#endif /* TP_BASE_HASH_H_ */
