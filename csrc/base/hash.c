/* See hash.h. */
#include "base/hash.h"

#include <string.h>

/* Eight bytes a step (a byte-at-a-time FNV cost every eager call a tenth of its time: two keys
 * of a few hundred bytes each), each word mixed in by a multiply and a shift. */
uint64_t tp_hash_bytes(const void *data, size_t size, uint64_t seed) {
  const unsigned char *p = data;
  uint64_t h = (1469598103934665603ull ^ seed) + size * 0x9e3779b97f4a7c15ull;
#define TP_HASH_MIX(w) (h ^= (w), h *= 0xbf58476d1ce4e5b9ull, h ^= h >> 31)
  for (; size >= 8; size -= 8, p += 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    TP_HASH_MIX(w);
  }
  if (size) {
    uint64_t w = 0;
    memcpy(&w, p, size);
    TP_HASH_MIX(w);
  }
#undef TP_HASH_MIX
  h ^= h >> 33;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 29);
}
