/* Minimal test harness for the C unit tests: CHECK records a failure and continues. */
#ifndef TP_TESTS_C_TEST_H_
#define TP_TESTS_C_TEST_H_

#include <stdio.h>
#include <stdlib.h>

#include "base/status.h"

static int tp_test_failures, tp_test_checks;

#define CHECK(cond)                                                        \
  do {                                                                     \
    tp_test_checks++;                                                      \
    if (!(cond)) {                                                         \
      tp_test_failures++;                                                  \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                      \
  } while (0)

#define CHECK_OK(expr)                                                          \
  do {                                                                          \
    tp_status_t *st_ = (expr);                                                  \
    tp_test_checks++;                                                           \
    if (st_) {                                                                  \
      tp_test_failures++;                                                       \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr,      \
              tp_status_message(st_));                                          \
      tp_status_free(st_);                                                      \
    }                                                                           \
  } while (0)

/* The PJRT plugin the tests run on (TP_TEST_PLUGIN); exits with status 2 when it is not set. */
static inline const char *tp_test_plugin(void) {
  const char *plugin = getenv("TP_TEST_PLUGIN");
  if (!plugin) {
    fprintf(stderr, "TP_TEST_PLUGIN must name a PJRT plugin\n");
    exit(2);
  }
  return plugin;
}

#define TEST_MAIN_END(name)                                                          \
  printf("%s: %d checks, %d failed\n", name, tp_test_checks, tp_test_failures);   \
  return tp_test_failures ? 1 : 0;

#endif
