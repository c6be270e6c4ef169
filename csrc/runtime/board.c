#include "runtime/board.h"

#include <limits.h>
#include <stdatomic.h>
#include <time.h>

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

static _Atomic uint64_t *word(void *page, size_t i) { return (_Atomic uint64_t *)page + i; }

/* The futex: the low half of word 0 (the page is shared between processes: no PRIVATE flag). */
static _Atomic uint32_t *counter(void *page) {
  return (_Atomic uint32_t *)((char *)page + (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? 0 : 4));
}

void tp_board_post(void *page, int rank, uint64_t seq, uint64_t digest) {
  atomic_store(word(page, TP_BOARD_WORD(rank, seq)), (digest << 8) | (seq & 0xFF));
  atomic_fetch_add(counter(page), 1);
#ifdef __linux__
  syscall(SYS_futex, (uint32_t *)counter(page), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
#endif
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int tp_board_wait(void *page, int size, uint64_t seq, int wait_ms) {
  const int64_t deadline = now_ns() + (int64_t)wait_ms * 1000000;
  for (;;) {
    /* The counter is read before the posts: a post after this read changes it, and the futex
     * wait below then returns at once instead of sleeping through that post. */
    uint32_t seen = atomic_load(counter(page));
    int posted = 1, same = 1;
    uint64_t first = 0;
    for (int r = 0; r < size && posted; r++) {
      uint64_t p = atomic_load(word(page, TP_BOARD_WORD(r, seq)));
      if ((p & 0xFF) != (seq & 0xFF)) posted = 0;
      else if (r == 0) first = p;
      else if (p != first) same = 0;
    }
    if (posted) return same;
    int64_t left = deadline - now_ns();
    if (left <= 0) return -1;
#ifdef __linux__
    struct timespec ts = {(time_t)(left / 1000000000), (long)(left % 1000000000)};
    syscall(SYS_futex, (uint32_t *)counter(page), FUTEX_WAIT, seen, &ts, NULL, 0);
#else
    (void)seen;
    struct timespec ts = {0, left < 50000 ? (long)left : 50000};
    nanosleep(&ts, NULL);
#endif
  }
}
