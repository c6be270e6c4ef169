/* The StableHLO builder (hlo/builder.c) on its own: the forms it writes for a reduction, with and
 * without the XLA CPU backend's materialized input. Needs no device. */
#include <string.h>

#include "hlo/builder.h"
#include "test.h"

/* Reductions merge adjacent reduced (or kept) dims; for XLA's CPU backend a reduction that keeps
 * the innermost dim reduces a materialized input (an optimization barrier before it). */
static void test_reduce_forms(void) {
  for (int cpu = 0; cpu < 2; cpu++) {
    const int64_t keep_inner[2] = {0, 1}, keep_outer[1] = {2};
    const int64_t *dims[2] = {keep_inner, keep_outer};
    int n_dims[2] = {2, 1};
    for (int k = 0; k < 2; k++) {
      tp_hlo_builder_t *b;
      CHECK_OK(tp_hlo_builder_create(&b));
      tp_hlo_builder_set_xla_cpu(b, cpu);
      tp_hlo_value_t x = tp_hlo_param(b, TP_DTYPE_F32, 3, (int64_t[]){2, 3, 4}, -1);
      tp_hlo_value_t r = tp_hlo_reduce(b, x, tp_hlo_constant(b, TP_DTYPE_F32, 0), TP_HLO_ADD,
                                       n_dims[k], dims[k]);
      CHECK(r.ndim == 3 - n_dims[k] && r.dims[0] == (k == 0 ? 4 : 2));
      char *text = NULL;
      CHECK_OK(tp_hlo_finish(b, &r, 1, &text));
      CHECK(text && strstr(text, k == 0 ? "(tensor<6x4xf32>, tensor<f32>) -> tensor<4xf32>"
                                        : "(tensor<6x4xf32>, tensor<f32>) -> tensor<6xf32>"));
      CHECK(text && (strstr(text, "optimization_barrier") != NULL) == (cpu && k == 0));
      free(text);
      tp_hlo_builder_free(b);
    }
  }
}

int main(void) {
  test_reduce_forms();
  TEST_MAIN_END("hlo_builder_test");
}
