/* The board (dist/board.h): posts seen whole, agreement and disagreement, a wait that gives up
 * after its time, a waiter in another process woken by a post at once (the futex is shared), two
 * processes meeting call after call on the two words each rank owns, the descriptions, the file
 * its ranks map (and one another token refuses), and the liveness of a rank's process. Needs no
 * plugin. */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dist/board.h"
#include "test.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *shared_page(int size) {
  void *p = mmap(NULL, TP_BOARD_BYTES(size), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                 -1, 0);
  CHECK(p != MAP_FAILED);
  memset(p, 0, TP_BOARD_BYTES(size));
  return p;
}

static void test_agree_differ_and_late(void) {
  void *page = shared_page(3);
  tp_board_post(page, 0, 1, 0xABCDEF);
  tp_board_post(page, 1, 1, 0xABCDEF);
  double t0 = now_ms();
  CHECK(tp_board_wait(page, 3, 1, 30) == -1);  /* rank 2 has not posted call 1 */
  CHECK(tp_board_posted(page, 1, 1) && !tp_board_posted(page, 2, 1));
  CHECK(now_ms() - t0 >= 29);
  tp_board_post(page, 2, 1, 0xABCDEF);
  CHECK(tp_board_wait(page, 3, 1, 0) == 1);
  /* Call 2 in the other words; call 1's posts stay readable meanwhile. */
  tp_board_post(page, 0, 2, 7);
  tp_board_post(page, 1, 2, 7);
  tp_board_post(page, 2, 2, 8);
  CHECK(tp_board_wait(page, 3, 2, 0) == 0);
  CHECK(tp_board_wait(page, 3, 1, 0) == 1);
  /* A digest keeps its low 56 bits: these three agree. */
  tp_board_post(page, 0, 3, (1ull << 56) | 5);
  tp_board_post(page, 1, 3, 5);
  tp_board_post(page, 2, 3, 5);
  CHECK(tp_board_wait(page, 3, 3, 0) == 1);
  munmap(page, TP_BOARD_BYTES(3));
}

static void test_a_post_wakes_another_process(void) {
  void *page = shared_page(2);
  tp_board_post(page, 0, 1, 42);
  pid_t child = fork();
  if (child == 0) {
    usleep(100 * 1000);
    tp_board_post(page, 1, 1, 42);
    _exit(0);
  }
  double t0 = now_ms();
  CHECK(tp_board_wait(page, 2, 1, 10000) == 1);
  double waited = now_ms() - t0;
  CHECK(waited >= 90 && waited < 5000);  /* woken by the post, not by the 10 s limit */
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  munmap(page, TP_BOARD_BYTES(2));
}

/* Two processes post and wait 2000 calls in turn, rank 1's digest differing at call 1500 only:
 * each sees every call as the other posted it. */
static void test_two_processes_call_after_call(void) {
  enum { CALLS = 2000, ODD = 1500 };
  void *page = shared_page(2);
  pid_t child = fork();
  int rank = child == 0 ? 1 : 0, bad = 0;
  for (uint64_t seq = 1; seq <= CALLS; seq++) {
    tp_board_post(page, rank, seq, rank == 1 && seq == ODD ? 99 : seq * 31);
    int got = tp_board_wait(page, 2, seq, 10000);
    if (got != (seq == ODD ? 0 : 1)) bad++;
  }
  if (child == 0) _exit(bad ? 1 : 0);
  CHECK(bad == 0);
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  munmap(page, TP_BOARD_BYTES(2));
}

static void test_descriptions(void) {
  void *page = shared_page(2);
  char long_desc[400], got[TP_BOARD_DESC_BYTES + 1];
  memset(long_desc, 'x', sizeof(long_desc) - 1);
  long_desc[sizeof(long_desc) - 1] = '\0';
  tp_board_write_desc(page, 2, 0, "all_reduce(float32[3, 4], SUM)");
  tp_board_write_desc(page, 2, 1, long_desc);
  tp_board_read_desc(page, 2, 0, got);
  CHECK(strcmp(got, "all_reduce(float32[3, 4], SUM)") == 0);
  tp_board_read_desc(page, 2, 1, got);
  CHECK(strlen(got) == TP_BOARD_DESC_BYTES);
  tp_board_write_desc(page, 2, 1, "barrier");  /* a shorter one leaves nothing of the longer */
  tp_board_read_desc(page, 2, 1, got);
  CHECK(strcmp(got, "barrier") == 0);
  munmap(page, TP_BOARD_BYTES(2));
}

/* Two mappings of one board file share its posts; a mapping with another token is refused. */
static void test_file(void) {
  char *path = NULL;
  CHECK_OK(tp_board_create(2, "0123456789abcdef", &path));
  if (!path) return;
  void *a = NULL, *b = NULL, *other = NULL;
  tp_board_map(path, 2, "0123456789abcdef", &a);
  tp_board_map(path, 2, "0123456789abcdef", &b);
  tp_board_map(path, 2, "fedcba9876543210", &other);
  void *missing = (void *)1;
  tp_board_map("/nonexistent/torch_pjrt_board", 2, "x", &missing);
  CHECK(a && b && !other && !missing);
  unlink(path);
  free(path);
  if (!a || !b) return;
  tp_board_post(a, 0, 1, 5);
  tp_board_post(b, 1, 1, 5);
  CHECK(tp_board_wait(a, 2, 1, 0) == 1);
  tp_board_unmap(a, 2);
  tp_board_unmap(b, 2);
}

static void test_process_alive(void) {
  CHECK(tp_board_process_alive(getpid()));
  pid_t child = fork();
  if (child == 0) _exit(0);
  usleep(50 * 1000);
  CHECK(!tp_board_process_alive(child));  /* exited, not reaped yet: a zombie counts as gone */
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(!tp_board_process_alive(child));
  char where[512];
  tp_board_whereami(where, sizeof(where));
  CHECK(strchr(where, '@') != NULL);
}

int main(void) {
  test_agree_differ_and_late();
  test_a_post_wakes_another_process();
  test_two_processes_call_after_call();
  test_descriptions();
  test_file();
  test_process_alive();
  TEST_MAIN_END("dist_board_test");
}
