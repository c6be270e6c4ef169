/* The StableHLO builder (hlo/builder.c) on its own: the forms it writes for a reduction, with and
 * without the XLA CPU backend's materialized input. Needs no device. */
#include <string.h>

#include "hlo/builder.h"
#include "hlo/module.h"
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

/* A module as jax.export prints one: attributes, location aliases and annotations, a helper
 * function, a string attribute holding what looks like a symbol and a location. */
static const char kJaxModule[] =
    "#loc1 = loc(\"x\")\n"
    "module @jit_f attributes {jax.uses_shape_polymorphism = false, mhlo.num_replicas = 1 : i32} {\n"
    "  func.func public @main(%arg0: tensor<4x8xf32> loc(\"x\"), %arg1: tensor<8xbf16> "
    "{mhlo.sharding = \"{replicated}\"} loc(\"w\")) -> (tensor<4x8xf32> {jax.result_info = "
    "\"@not_a_symbol loc(\\\"s\\\")\"}, tensor<i32>) {\n"
    "    %0 = call @helper(%arg0) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc(#loc1)\n"
    "    %c = stablehlo.constant dense<1> : tensor<i32> loc(callsite(#loc1 at #loc1))\n"
    "    return %0, %c : tensor<4x8xf32>, tensor<i32> loc(#loc1)\n"
    "  } loc(#loc1)\n"
    "  func.func private @helper(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {\n"
    "    %0 = stablehlo.add %arg0, %arg0 : tensor<4x8xf32>\n"
    "    return %0 : tensor<4x8xf32>\n"
    "  }\n"
    "} loc(#loc1)\n"
    "#loc2 = loc(\"y\")\n";

static void test_module_signature_and_functions(void) {
  tp_hlo_signature_t sig;
  CHECK_OK(tp_hlo_module_signature(kJaxModule, &sig));
  CHECK(sig.n_params == 2 && sig.n_results == 2);
  CHECK(sig.params[0].dtype == TP_DTYPE_F32 && sig.params[0].ndim == 2 && sig.params[0].dims[1] == 8);
  CHECK(sig.params[1].dtype == TP_DTYPE_BF16 && sig.params[1].ndim == 1);
  CHECK(sig.results[0].ndim == 2 && sig.results[1].dtype == TP_DTYPE_I32 && sig.results[1].ndim == 0);
  char *f = NULL;
  CHECK_OK(tp_hlo_module_functions(kJaxModule, "k1_", &f));
  CHECK(f && strstr(f, "func.func private @k1_main(") && strstr(f, "func.func private @k1_helper(") &&
        strstr(f, "call @k1_helper(") && !strstr(f, "loc(#") && !strstr(f, "#loc") &&
        !strstr(f, "module") && !strstr(f, "public"));
  /* What a string holds is left as it is. */
  CHECK(f && strstr(f, "\"@not_a_symbol loc(\\\"s\\\")\""));
  free(f);

  /* Errors say what is wrong. */
  tp_status_t *st = tp_hlo_module_signature("func.func @f() -> tensor<f32>", &sig);
  CHECK(st && strstr(tp_status_message(st), "no function @main"));
  tp_status_free(st);
  st = tp_hlo_module_signature("func.func public @main(%a: tensor<?x4xf32>) -> tensor<f32> {}", &sig);
  CHECK(st && strstr(tp_status_message(st), "dynamic"));
  tp_status_free(st);
  st = tp_hlo_module_signature("func.func @main(%a: !stablehlo.token) -> tensor<f32> {}", &sig);
  CHECK(st && strstr(tp_status_message(st), "token"));
  tp_status_free(st);
  st = tp_hlo_module_signature("func.func @main(%a: tensor<4xf8E4M3FN>) -> tensor<f32> {}", &sig);
  CHECK(st && strstr(tp_status_message(st), "element type"));
  tp_status_free(st);

  /* Called from a program of ours: the functions follow @main in the module. */
  tp_hlo_builder_t *b;
  CHECK_OK(tp_hlo_builder_create(&b));
  CHECK_OK(tp_hlo_module_functions(kJaxModule, "k1_", &f));
  tp_hlo_add_functions(b, 1, f);
  tp_hlo_add_functions(b, 1, f); /* once per key */
  free(f);
  tp_hlo_value_t x = tp_hlo_param(b, TP_DTYPE_F32, 2, (int64_t[]){4, 8}, -1);
  tp_hlo_value_t w = tp_hlo_param(b, TP_DTYPE_BF16, 1, (int64_t[]){8}, -1);
  tp_hlo_value_t types[2] = {{.dtype = TP_DTYPE_F32, .ndim = 2, .dims = {4, 8}},
                             {.dtype = TP_DTYPE_I32, .ndim = 0}};
  tp_hlo_value_t r[2];
  tp_hlo_call(b, "k1_main", (tp_hlo_value_t[]){x, w}, 2, types, 2, r);
  char *text = NULL;
  CHECK_OK(tp_hlo_finish(b, r, 2, &text));
  CHECK(text && strstr(text, "func.call @k1_main(") && strstr(text, "func.func private @k1_helper"));
  CHECK(text && strstr(strstr(text, "func.func private @k1_helper") + 1, "func.func private @k1_helper") == NULL);
  free(text);
  tp_hlo_builder_free(b);

  /* The registry: one id per text, the same again; a bad module refused with its reason. */
  int64_t id = -1, again = -2;
  CHECK_OK(tp_hlo_module_register(kJaxModule, &id));
  CHECK_OK(tp_hlo_module_register(kJaxModule, &again));
  CHECK(id >= 0 && id == again);
  const tp_hlo_module_t *m = tp_hlo_module_lookup(id);
  CHECK(m && m->sig.n_params == 2 && strstr(m->functions, m->main) && tp_hlo_module_lookup(id + 1) == NULL);
  st = tp_hlo_module_register("not a module", &id);
  CHECK(st && strstr(tp_status_message(st), "no function @main") && id == -1);
  tp_status_free(st);
}

int main(void) {
  test_reduce_forms();
  test_module_signature_and_functions();
  TEST_MAIN_END("hlo_builder_test");
}
