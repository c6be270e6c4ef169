/* The board: where the ranks of a process group on one host check, before each collective of the
 * host transport (python/torch_pjrt/distributed/_host.py, csrc/torch/distributed/host.cpp), that
 * they all are about to run the same one. It is a page of memory the ranks' processes share (a file
 * in /dev/shm that each maps): each rank posts its next call's digest there and waits, asleep on a
 * futex that every post wakes, until each rank posted that call. A wait is woken by the last post
 * at once: no polling, no core taken from the ranks still working.
 * Layout: first the posts, in 8-byte words: word 0 the wake counter (the futex, its low 32 bits),
 * then two words per rank, used in turn by the call's sequence number, each
 * (digest << 8) | (seq & 0xFF) in one store, so a reader sees a whole post or an older one. A rank
 * posts call seq + 2 only after every rank posted seq + 1, which each did after seeing call seq
 * complete: two words never lose a post. Then the token that names the file (so a rank knows it
 * mapped its group's board), then one description slot per rank, where ranks whose digests differ
 * write their calls for each other to name in the error.
 * Knows nothing of PJRT or PyTorch: depends on base/ only. */
#ifndef TP_DIST_BOARD_H_
#define TP_DIST_BOARD_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A call's description as ranks exchange it when their digests differ (longer ones are cut). */
#define TP_BOARD_DESC_BYTES 256
/* The token naming a board's file: at most this many bytes. */
#define TP_BOARD_TOKEN_BYTES 16

/* The bytes of a board of |size| ranks: its posts, its token, its descriptions. */
#define TP_BOARD_POSTS_BYTES(size) (8 * (1 + 2 * (size_t)(size)))
#define TP_BOARD_BYTES(size) \
  (TP_BOARD_POSTS_BYTES(size) + TP_BOARD_TOKEN_BYTES + (size_t)(size) * TP_BOARD_DESC_BYTES)

/* The word index (in 8-byte words from the page's start) of |rank|'s post of call |seq|. */
#define TP_BOARD_WORD(rank, seq) (1 + 2 * (size_t)(rank) + ((seq) & 1))

/* Posts |digest| (its low 56 bits) as |rank|'s call |seq| (1, 2, ... in order) and wakes the
 * waiting ranks. */
void tp_board_post(void *page, int rank, uint64_t seq, uint64_t digest);

/* Waits at most |wait_ms| until every one of |size| ranks posted call |seq|: 1 when they posted one
 * digest, 0 when their digests differ, -1 when some rank had not posted in time (the caller
 * finds which with tp_board_posted, and why, then waits again or gives up). */
int tp_board_wait(void *page, int size, uint64_t seq, int wait_ms);

/* Whether |rank| posted call |seq|. */
bool tp_board_posted(void *page, int rank, uint64_t seq);

/* Writes |desc| (cut to TP_BOARD_DESC_BYTES, NUL-padded) as |rank|'s description on a board of
 * |size| ranks; tp_board_read_desc copies |rank|'s into |out| (TP_BOARD_DESC_BYTES + 1 bytes,
 * NUL-terminated). A rank reads the others' only after they posted a call after writing. */
void tp_board_write_desc(void *page, int size, int rank, const char *desc);
void tp_board_read_desc(void *page, int size, int rank, char *out);

/* Creates the file of a board of |size| ranks, zeroed but for |token| (at most
 * TP_BOARD_TOKEN_BYTES bytes), in /dev/shm (else $TMPDIR, else /tmp); |out_path|: its path,
 * caller owns (free). The ranks map it, then its creator unlinks it. */
tp_status_t *tp_board_create(int size, const char *token, char **out_path);

/* Maps the board file at |path| for |size| ranks: |out_page| the page (unmap with
 * tp_board_unmap), or NULL when the file cannot be opened or mapped here or holds another token
 * than |token| (another host's /dev/shm, another mount namespace: the ranks then check through
 * the network). Never fails otherwise. */
void tp_board_map(const char *path, int size, const char *token, void **out_page);
void tp_board_unmap(void *page, int size);

/* Whether process |pid| still runs: an exited rank its launcher has not reaped yet (a zombie)
 * counts as gone; a process this one may not signal counts as running. */
bool tp_board_process_alive(int64_t pid);

/* Where this process runs, as ranks compare it before sharing a board: its PID namespace and host
 * name, written into |out| (|n| bytes, NUL-terminated, cut if longer). */
void tp_board_whereami(char *out, size_t n);

#ifdef __cplusplus
}
#endif
#endif  /* TP_DIST_BOARD_H_ */
