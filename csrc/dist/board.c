#include "dist/board.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
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

bool tp_board_posted(void *page, int rank, uint64_t seq) {
  return (atomic_load(word(page, TP_BOARD_WORD(rank, seq))) & 0xFF) == (seq & 0xFF);
}

static char *desc_slot(void *page, int size, int rank) {
  return (char *)page + TP_BOARD_POSTS_BYTES(size) + TP_BOARD_TOKEN_BYTES +
         (size_t)rank * TP_BOARD_DESC_BYTES;
}

void tp_board_write_desc(void *page, int size, int rank, const char *desc) {
  char *slot = desc_slot(page, size, rank);
  size_t n = strnlen(desc, TP_BOARD_DESC_BYTES);
  memcpy(slot, desc, n);
  memset(slot + n, 0, TP_BOARD_DESC_BYTES - n);
}

void tp_board_read_desc(void *page, int size, int rank, char *out) {
  memcpy(out, desc_slot(page, size, rank), TP_BOARD_DESC_BYTES);
  out[TP_BOARD_DESC_BYTES] = '\0';
}

tp_status_t *tp_board_create(int size, const char *token, char **out_path) {
  *out_path = NULL;
  struct stat st;
  const char *dir = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  size_t len = strlen(dir) + sizeof("/torch_pjrt_board_XXXXXX");
  char *path = malloc(len);
  if (!path) return tp_make_status(TP_RESOURCE_EXHAUSTED, "board: out of memory");
  snprintf(path, len, "%s/torch_pjrt_board_XXXXXX", dir);
  int fd = mkstemp(path);
  if (fd < 0) {
    tp_status_t *st_ = tp_make_status(TP_UNAVAILABLE, "board: cannot create %s: %s", path,
                                      strerror(errno));
    free(path);
    return st_;
  }
  size_t n = strnlen(token, TP_BOARD_TOKEN_BYTES);
  if (ftruncate(fd, (off_t)TP_BOARD_BYTES(size)) != 0 ||
      pwrite(fd, token, n, (off_t)TP_BOARD_POSTS_BYTES(size)) != (ssize_t)n) {
    tp_status_t *st_ = tp_make_status(TP_UNAVAILABLE, "board: cannot write %s: %s", path,
                                      strerror(errno));
    close(fd);
    unlink(path);
    free(path);
    return st_;
  }
  close(fd);
  *out_path = path;
  return NULL;
}

void tp_board_map(const char *path, int size, const char *token, void **out_page) {
  *out_page = NULL;
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  if (fstat(fd, &st) != 0 || (size_t)st.st_size < TP_BOARD_BYTES(size)) {  /* not a board of |size| */
    close(fd);
    return;
  }
  void *page = mmap(NULL, TP_BOARD_BYTES(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (page == MAP_FAILED) return;
  char mine[TP_BOARD_TOKEN_BYTES] = {0};
  memcpy(mine, token, strnlen(token, TP_BOARD_TOKEN_BYTES));
  if (memcmp((char *)page + TP_BOARD_POSTS_BYTES(size), mine, TP_BOARD_TOKEN_BYTES) != 0) {
    munmap(page, TP_BOARD_BYTES(size));
    return;
  }
  *out_page = page;
}

void tp_board_unmap(void *page, int size) {
  if (page) munmap(page, TP_BOARD_BYTES(size));
}

bool tp_board_process_alive(int64_t pid) {
  if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return false;
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/%lld/stat", (long long)pid);
  FILE *f = fopen(path, "r");
  if (!f) return true;
  size_t got = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[got] = '\0';
  /* "pid (comm) S ...": the state follows the last ')' (comm may hold one). */
  char *close_paren = strrchr(buf, ')');
  if (!close_paren) return true;
  char *p = close_paren + 1;
  while (*p == ' ') p++;
  return *p && *p != 'Z' && *p != 'X';
}

void tp_board_whereami(char *out, size_t n) {
  char ns[128] = "", host[256] = "";
  ssize_t got = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  ns[got > 0 ? got : 0] = '\0';
  gethostname(host, sizeof(host) - 1);
  host[sizeof(host) - 1] = '\0';
  snprintf(out, n, "%s@%s", ns, host);
}
