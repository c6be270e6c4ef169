/* Programs the runtime C tests compile: built with the StableHLO builder, no op table. */
#ifndef TP_TESTS_C_RUNTIME_HELPERS_H_
#define TP_TESTS_C_RUNTIME_HELPERS_H_

#include <stdint.h>

#include "hlo/builder.h"

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

#endif
