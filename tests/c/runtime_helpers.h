/* What the runtime and executor C tests share: programs they compile (built with the StableHLO
 * builder, no op table) and the executor's start on the test plugin. */
#ifndef TP_TESTS_C_RUNTIME_HELPERS_H_
#define TP_TESTS_C_RUNTIME_HELPERS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "exec/exec.h"
#include "hlo/builder.h"
#include "test.h"

/* The text of a program adding two f32[n] parameters (caller frees). */
static inline char *add_program(int64_t n) {
  tp_hlo_builder_t *b;
  tp_hlo_builder_create(&b);
  tp_hlo_value_t x = tp_hlo_param(b, TP_DTYPE_F32, 1, &n, 0);
  tp_hlo_value_t y = tp_hlo_param(b, TP_DTYPE_F32, 1, &n, -1);
  tp_hlo_value_t z = tp_hlo_binary(b, TP_HLO_ADD, x, y);
  char *text = NULL;
  tp_status_t *st = tp_hlo_finish(b, &z, 1, &text);
  tp_status_free(st);
  tp_hlo_builder_free(b);
  return text;
}

/* Starts the executor on the test plugin with room for |cache_capacity| executables and no disk
 * cache; false when it has no client (the failed start is counted as a failed check). */
static inline bool start_exec(size_t cache_capacity) {
  const char *plugin = tp_test_plugin();
  char *warning = NULL;
  CHECK_OK(tp_exec_init(plugin, NULL, cache_capacity, &warning));
  free(warning);
  return tp_exec_client() != NULL;
}

#endif
