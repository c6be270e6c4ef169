/* The board: where the ranks of a process group on one host check, before each collective of the
 * host transport (python/torch_pjrt/distributed.py), that they all are about to run the same one.
 * It is a page of memory the ranks' processes share: each rank posts its next call's digest there
 * and waits, asleep on a futex that every post wakes, until each rank posted that call. A wait is
 * woken by the last post at once: no polling, no core taken from the ranks still working.
 * Layout, in 8-byte words: word 0 the wake counter (the futex, its low 32 bits), then two words
 * per rank, used in turn by the call's sequence number, each (digest << 8) | (seq & 0xFF) in one
 * store, so a reader sees a whole post or an older one. A rank posts call seq + 2 only after every
 * rank posted seq + 1, which each did after seeing call seq complete: two words never lose a post.
 * Knows nothing of PJRT or PyTorch. */
#ifndef TP_RUNTIME_BOARD_H_
#define TP_RUNTIME_BOARD_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The bytes a board of |size| ranks spans. */
#define TP_BOARD_BYTES(size) (8 * (1 + 2 * (size_t)(size)))

/* The word index (in 8-byte words from the page's start) of |rank|'s post of call |seq|. */
#define TP_BOARD_WORD(rank, seq) (1 + 2 * (size_t)(rank) + ((seq) & 1))

/* Posts |digest| (its low 56 bits) as |rank|'s call |seq| (1, 2, ... in order) and wakes the
 * waiting ranks. */
void tp_board_post(void *page, int rank, uint64_t seq, uint64_t digest);

/* Waits at most |wait_ms| until every one of |size| ranks posted call |seq|: 1 when they posted one
 * digest, 0 when their digests differ, -1 when some rank had not posted in time (the caller
 * finds which from the words and why, then waits again or gives up). */
int tp_board_wait(void *page, int size, uint64_t seq, int wait_ms);

#ifdef __cplusplus
}
#endif
#endif  /* TP_RUNTIME_BOARD_H_ */
