/* Runtime tests on whatever plugin TP_TEST_PLUGIN names: loading errors, client, storages,
 * host<->device copies, compile/execute with donation, serialization, while loops, injected
 * faults and output checks, two clients. The executable cache has its own test. */
#include <stdint.h>
#include <string.h>

#include "hlo/builder.h"
#include "runtime/client.h"
#include "runtime/executable.h"
#include "runtime/storage.h"
#include "runtime/trace.h"
#include "runtime_helpers.h"
#include "test.h"

/* tp_executable_execute with its arguments spelled out, as the tests call it. */
static tp_status_t *execute(tp_executable_t *exe, PJRT_Buffer *const *args, size_t n_args,
                            const int64_t *keep, size_t n_keep, PJRT_Buffer **out,
                            const char *op, int blocking, int check) {
  return tp_executable_execute(exe, &(tp_execute_args_t){.device = 0,
                                                         .args = args,
                                                         .n_args = n_args,
                                                         .non_donatable = keep,
                                                         .n_non_donatable = n_keep,
                                                         .out_buffers = out,
                                                         .op_name = op,
                                                         .blocking = blocking,
                                                         .check_output = check});
}

static void test_load_errors(void) {
  tp_client_t *c = NULL;
  tp_status_t *st = tp_client_create("/nonexistent/plugin.so", 0, &c);
  CHECK(st && tp_status_code(st) == TP_NOT_FOUND);
  CHECK(st && strstr(tp_status_message(st), "/nonexistent/plugin.so"));
  tp_status_free(st);
  /* A shared library without GetPjrtApi. */
  st = tp_client_create("libm.so.6", 0, &c);
  CHECK(st != NULL);
  tp_status_free(st);
}

static void test_execute(tp_client_t *c) {
  int64_t n = 5;
  float a[5] = {1, 2, 3, 4, 5}, b[5] = {10, 20, 30, 40, 50}, r[5] = {0};
  PJRT_Buffer *ba = NULL, *bb = NULL;
  CHECK_OK(tp_buffer_from_host(c, 0, a, TP_DTYPE_F32, 1, &n, &ba));
  CHECK_OK(tp_buffer_from_host(c, 0, b, TP_DTYPE_F32, 1, &n, &bb));
  char *text = add_program(n);
  CHECK(text != NULL);
  tp_executable_t *exe = NULL;
  CHECK_OK(tp_executable_compile(c, text, strlen(text), &exe));
  if (!exe) return;
  CHECK(tp_executable_num_outputs(exe) == 1);
  PJRT_Buffer *args[2] = {ba, bb}, *out = NULL;
  int64_t keep = 1;
  CHECK_OK(execute(exe, args, 2, &keep, 1, &out, "add", 0, -1));
  CHECK_OK(tp_client_synchronize(c));
  CHECK_OK(tp_buffer_to_host(c, out, r, sizeof(r)));
  CHECK(r[0] == 11 && r[4] == 55);

  /* Compiled at each backend optimization level (a compile option override): the same result. */
  for (int level = 0; level <= 3; level++) {
    tp_executable_t *tuned = NULL;
    CHECK_OK(tp_executable_compile_with(c, text, strlen(text),
                                        &(tp_compile_options_t){.backend_opt_level = level}, &tuned));
    if (!tuned) continue;
    PJRT_Buffer *o = NULL;
    float t[5] = {0};
    PJRT_Buffer *targs[2] = {out, bb}; /* |a| went to |out| (donated) */
    CHECK_OK(execute(tuned, targs, 2, (int64_t[]){0, 1}, 2, &o, "add", 1, -1));
    CHECK_OK(tp_buffer_to_host(c, o, t, sizeof(t)));
    CHECK(t[0] == 21 && t[4] == 105);
    tp_buffer_destroy(c, o);
    tp_executable_release(tuned);
  }

  /* Serialize and reload: same result. */
  char *bytes = NULL;
  size_t size = 0;
  CHECK_OK(tp_executable_serialize(exe, &bytes, &size));
  tp_executable_t *exe2 = NULL;
  CHECK_OK(tp_executable_deserialize(c, bytes, size, &exe2));
  if (exe2) {
    PJRT_Buffer *out2 = NULL;
    PJRT_Buffer *args2[2] = {out, bb};
    CHECK_OK(execute(exe2, args2, 2, &keep, 1, &out2, "add", 1, -1));
    CHECK_OK(tp_buffer_to_host(c, out2, r, sizeof(r)));
    CHECK(r[0] == 21 && r[4] == 105);
    tp_buffer_destroy(c, out2);
    tp_executable_release(exe2);
  }
  /* Garbage is an error, not a crash. */
  tp_executable_t *bad = NULL;
  tp_status_t *st = tp_executable_deserialize(c, "garbage", 7, &bad);
  CHECK(st != NULL && bad == NULL);
  tp_status_free(st);
  free(bytes);

  /* A compile error carries the plugin's message. */
  st = tp_executable_compile(c, "this is not mlir", 16, &bad);
  CHECK(st != NULL && bad == NULL);
  tp_status_free(st);

  tp_buffer_destroy(c, ba);
  tp_buffer_destroy(c, bb);
  tp_buffer_destroy(c, out);
  tp_executable_release(exe);
  free(text);
}

static void test_storage(tp_client_t *c) {
  tp_storage_t *s = NULL;
  int64_t before = tp_storage_bytes_in_use(c, 0);
  CHECK_OK(tp_storage_create(c, 0, 4096, &s));
  CHECK(s && tp_storage_buffer(s) == NULL && tp_storage_addr(s) != NULL);
  CHECK(tp_storage_bytes_in_use(c, 0) == before + 4096);
  tp_storage_release(s);
  CHECK(tp_storage_bytes_in_use(c, 0) == before);
  /* Over the budget: a clear out-of-memory error. */
  tp_status_t *st = tp_storage_create(c, 0, (size_t)1 << 60, &s);
  CHECK(st && tp_status_code(st) == TP_RESOURCE_EXHAUSTED);
  CHECK(st && strstr(tp_status_message(st), "out of memory"));
  tp_status_free(st);
  CHECK(tp_storage_bytes_in_use(c, 0) == before);
}

/* An injected fault travels the asynchronous path: reported by the next synchronizing call,
 * naming the op; a blocking execution reports it itself; a count disarms after that many. */
static void test_injected_fault(tp_client_t *c) {
  int64_t n = 3;
  float a[3] = {1, 2, 3}, r[3] = {0};
  PJRT_Buffer *ba = NULL;
  CHECK_OK(tp_buffer_from_host(c, 0, a, TP_DTYPE_F32, 1, &n, &ba));
  char *text = add_program(n);
  tp_executable_t *exe = NULL;
  CHECK_OK(tp_executable_compile(c, text, strlen(text), &exe));
  if (!exe) return;
  PJRT_Buffer *args[2] = {ba, ba}, *out = NULL;
  int64_t keep[2] = {0, 1};

  tp_client_inject_fault(c, "add", 1); /* a base name matches every overload */
  CHECK_OK(execute(exe, args, 2, keep, 2, &out, "add.Tensor", 0, -1));
  tp_status_t *st = tp_client_synchronize(c);
  CHECK(st && tp_status_code(st) == TP_INTERNAL);
  CHECK(st && strstr(tp_status_message(st), "asynchronous error in 'add.Tensor'"));
  tp_status_free(st);
  CHECK_OK(tp_client_synchronize(c)); /* reported once, and disarmed after one */
  tp_buffer_destroy(c, out);
  CHECK_OK(execute(exe, args, 2, keep, 2, &out, "add.Tensor", 0, -1));
  CHECK_OK(tp_client_synchronize(c));
  tp_buffer_destroy(c, out);

  /* A copy to the host is a synchronizing call too. */
  tp_client_inject_fault(c, "add.Tensor", -1);
  CHECK_OK(execute(exe, args, 2, keep, 2, &out, "add.Tensor", 0, -1));
  st = tp_buffer_to_host(c, out, r, sizeof(r));
  CHECK(st && strstr(tp_status_message(st), "'add.Tensor'"));
  tp_status_free(st);
  tp_buffer_destroy(c, out);
  /* Blocking: the execution itself fails; other ops and other names are untouched. */
  st = execute(exe, args, 2, keep, 2, &out, "add.Tensor", 1, -1);
  CHECK(st && tp_status_code(st) == TP_INTERNAL && strstr(tp_status_message(st), "add.Tensor"));
  tp_status_free(st);
  tp_buffer_destroy(c, out);
  CHECK_OK(execute(exe, args, 2, keep, 2, &out, "addmm", 1, -1));
  tp_buffer_destroy(c, out);
  CHECK_OK(execute(exe, args, 2, keep, 2, &out, "add_", 0, -1));
  CHECK_OK(tp_client_synchronize(c));
  tp_buffer_destroy(c, out);
  tp_client_inject_fault(c, NULL, 0);
  CHECK_OK(execute(exe, args, 2, keep, 2, &out, "add.Tensor", 0, -1));
  CHECK_OK(tp_buffer_to_host(c, out, r, sizeof(r)));
  CHECK(r[0] == 2 && r[2] == 6);
  tp_buffer_destroy(c, out);
  tp_buffer_destroy(c, ba);
  tp_executable_release(exe);
  free(text);
}

/* A program's check output (tp_hlo_check): x[i] with i checked against [0, 3) (an index check)
 * and against 2 (an assertion whose code is a program input); the flag is read at the next
 * synchronizing call (the failed check's code and message, naming the op), or by a blocking
 * execution. */
static void test_check_output(tp_client_t *c) {
  tp_hlo_builder_t *b;
  CHECK_OK(tp_hlo_builder_create(&b));
  if (!b) return;
  int64_t n = 3;
  tp_hlo_value_t x = tp_hlo_param(b, TP_DTYPE_F32, 1, &n, -1);
  tp_hlo_value_t i = tp_hlo_param(b, TP_DTYPE_I64, 0, NULL, -1);
  tp_hlo_value_t code = tp_hlo_param(b, TP_DTYPE_I32, 0, NULL, -1);
  tp_hlo_check(b, tp_hlo_compare(b, TP_CMP_GE, i, tp_hlo_constant_i(b, TP_DTYPE_I64, n)),
               tp_hlo_constant_i(b, TP_DTYPE_I32, TP_CHECK_INDEX));
  tp_hlo_check(b, tp_hlo_compare(b, TP_CMP_EQ, i, tp_hlo_constant_i(b, TP_DTYPE_I64, 2)), code);
  tp_hlo_value_t outs[2] = {tp_hlo_binary(b, TP_HLO_ADD, x, x)};
  CHECK(tp_hlo_check_flag(b, &outs[1]));
  char *text = NULL;
  CHECK_OK(tp_hlo_finish(b, outs, 2, &text));
  tp_hlo_builder_free(b);
  tp_executable_t *exe = NULL;
  if (text) CHECK_OK(tp_executable_compile(c, text, strlen(text), &exe));
  free(text);
  if (!exe) return;
  float a[3] = {1, 2, 3};
  PJRT_Buffer *bx = NULL, *bc = NULL;
  CHECK_OK(tp_buffer_from_host(c, 0, a, TP_DTYPE_F32, 1, &n, &bx));
  int32_t assertion = tp_check_register("i is not two");
  CHECK(assertion > TP_CHECK_INDEX && tp_check_register("i is not two") == assertion);
  CHECK_OK(tp_buffer_from_host(c, 0, &assertion, TP_DTYPE_I32, 0, NULL, &bc));
  for (int64_t idx = 1; idx <= 3; idx++) {
    for (int blocking = 0; blocking <= 1; blocking++) {
      PJRT_Buffer *bi = NULL, *out[2] = {NULL, NULL};
      CHECK_OK(tp_buffer_from_host(c, 0, &idx, TP_DTYPE_I64, 0, NULL, &bi));
      PJRT_Buffer *args[3] = {bx, bi, bc};
      int64_t keep[3] = {0, 1, 2};
      tp_status_t *st = execute(exe, args, 3, keep, 3, out, "index_select", blocking, 1);
      CHECK(out[1] == NULL); /* the client took the flag */
      if (!blocking) st = tp_status_join(st, tp_client_synchronize(c));
      CHECK((st != NULL) == (idx >= 2));
      CHECK(idx != 2 || (tp_status_code(st) == TP_FAILED_PRECONDITION &&
                         strstr(tp_status_message(st), "index_select") &&
                         strstr(tp_status_message(st), "assertion failed: i is not two")));
      CHECK(idx != 3 || (tp_status_code(st) == TP_OUT_OF_RANGE &&
                         strstr(tp_status_message(st), "index_select") &&
                         strstr(tp_status_message(st), "index out of range")));
      tp_status_free(st);
      CHECK_OK(tp_client_synchronize(c)); /* reported once */
      tp_buffer_destroy(c, out[0]);
      tp_buffer_destroy(c, bi);
    }
  }
  tp_buffer_destroy(c, bx);
  tp_buffer_destroy(c, bc);
  tp_executable_release(exe);
}

/* A stablehlo.while whose body reads x[i] with a dynamic slice and writes a running sum with a
 * dynamic update: out[i] = x[0] + ... + x[i]. Also: a loop left open is an error. */
static void test_while(tp_client_t *c) {
  int64_t n = 5, one = 1;
  float x[5] = {1, 2, 3, 4, 5}, r[5] = {0};
  tp_hlo_builder_t *b;
  CHECK_OK(tp_hlo_builder_create(&b));
  tp_hlo_value_t xs = tp_hlo_param(b, TP_DTYPE_F32, 1, &n, -1);
  tp_hlo_value_t init[3] = {tp_hlo_constant_i(b, TP_DTYPE_I32, 0), tp_hlo_constant(b, TP_DTYPE_F32, 0),
                            tp_hlo_broadcast_to(b, tp_hlo_constant(b, TP_DTYPE_F32, 0), 1, &n)};
  tp_hlo_value_t s[3], out[3];
  tp_hlo_while_begin(b, init, 3, s);
  tp_hlo_while_body(b, tp_hlo_compare(b, TP_CMP_LT, s[0], tp_hlo_constant_i(b, TP_DTYPE_I32, n)), s);
  /* The body reads |xs| from the enclosing scope: StableHLO regions are not isolated. */
  tp_hlo_value_t xi = tp_hlo_reshape(b, tp_hlo_dynamic_slice(b, xs, &s[0], &one), 0, NULL);
  tp_hlo_value_t acc = tp_hlo_binary(b, TP_HLO_ADD, s[1], xi);
  tp_hlo_value_t next[3] = {
      tp_hlo_binary(b, TP_HLO_ADD, s[0], tp_hlo_constant_i(b, TP_DTYPE_I32, 1)), acc,
      tp_hlo_dynamic_update_slice(b, s[2], tp_hlo_reshape(b, acc, 1, &one), &s[0])};
  tp_hlo_while_end(b, next, out);
  char *text = NULL;
  CHECK_OK(tp_hlo_finish(b, &out[2], 1, &text));
  tp_hlo_builder_free(b);
  tp_executable_t *exe = NULL;
  if (text) CHECK_OK(tp_executable_compile(c, text, strlen(text), &exe));
  free(text);
  if (exe) {
    PJRT_Buffer *bx = NULL, *o = NULL;
    CHECK_OK(tp_buffer_from_host(c, 0, x, TP_DTYPE_F32, 1, &n, &bx));
    int64_t keep = 1;
    CHECK_OK(execute(exe, &bx, 1, &keep, 1, &o, "while", 1, -1));
    CHECK_OK(tp_buffer_to_host(c, o, r, sizeof(r)));
    CHECK(r[0] == 1 && r[1] == 3 && r[4] == 15);
    tp_buffer_destroy(c, bx);
    tp_buffer_destroy(c, o);
    tp_executable_release(exe);
  }
  CHECK_OK(tp_hlo_builder_create(&b));
  tp_hlo_value_t z = tp_hlo_constant(b, TP_DTYPE_F32, 0), zs;
  tp_hlo_while_begin(b, &z, 1, &zs);
  tp_status_t *st = tp_hlo_finish(b, &z, 1, &text);
  CHECK(st != NULL && strstr(tp_status_message(st), "open"));
  tp_status_free(st);
  tp_hlo_builder_free(b);
}

/* Two clients in one process (many devices come next) keep their own counters and memory. */
static void test_two_clients(tp_client_t *c, const char *plugin) {
  tp_client_t *c2 = NULL;
  CHECK_OK(tp_client_create(plugin, 1, &c2));
  if (!c2) return;
  tp_runtime_stats_t a0, a1, b1;
  tp_runtime_stats(c, &a0);
  int64_t in_use = tp_storage_bytes_in_use(c, 0);
  tp_storage_t *s = NULL;
  CHECK_OK(tp_storage_create(c2, 0, 1000, &s));
  CHECK(tp_storage_bytes_in_use(c2, 0) == 1000 && tp_storage_peak_bytes(c2, 0) == 1000);
  CHECK(tp_storage_bytes_in_use(c, 0) == in_use);
  char *text = add_program(2);
  tp_executable_t *exe = NULL;
  CHECK_OK(tp_executable_compile(c2, text, strlen(text), &exe));
  tp_runtime_stats(c, &a1);
  tp_runtime_stats(c2, &b1);
  CHECK(b1.compiles == 1 && a1.compiles == a0.compiles);
  CHECK(tp_storage_bytes_in_use(c, 7) == 0);  /* a device the client lacks: nothing, no crash */
  tp_executable_release(exe);
  free(text);
  tp_storage_release(s);
  CHECK(tp_storage_bytes_in_use(c2, 0) == 0);
  tp_client_release(c2);
}

/* The device's trace: nothing recorded while off; on, a program's device span (after its launch,
 * ending at its completion), copies with their bytes, the caller's correlation id, and the next
 * trace starts empty. */
static void test_trace(tp_client_t *c) {
  int64_t n = 4;
  float a[4] = {1, 2, 3, 4}, r[4] = {0};
  char *text = add_program(n);
  tp_executable_t *exe = NULL;
  CHECK_OK(tp_executable_compile(c, text, strlen(text), &exe));
  free(text);
  if (!exe) return;
  CHECK(!tp_trace_on() && tp_trace_begin(TP_TRACE_COPY, 0, "x") == NULL);
  tp_trace_start();
  CHECK(tp_trace_on() && tp_trace_count() == 0);
  tp_trace_push_correlation(41);
  tp_trace_push_correlation(42); /* the innermost op */
  PJRT_Buffer *ba = NULL, *out = NULL, *out2 = NULL;
  CHECK_OK(tp_buffer_from_host(c, 0, a, TP_DTYPE_F32, 1, &n, &ba));
  PJRT_Buffer *args[2] = {ba, ba};
  int64_t keep[2] = {0, 1};
  CHECK_OK(execute(exe, args, 2, keep, 2, &out, "add", 0, -1));
  tp_trace_pop_correlation();
  CHECK_OK(tp_executable_execute(exe, &(tp_execute_args_t){.device = 0, .args = args, .n_args = 2,
                                                           .non_donatable = keep,
                                                           .n_non_donatable = 2,
                                                           .out_buffers = &out2, .op_name = "add",
                                                           .trace_name = "my graph",
                                                           .check_output = -1}));
  tp_trace_pop_correlation();
  tp_trace_pop_correlation(); /* one too many (an op begun before the trace): ignored */
  CHECK_OK(tp_buffer_to_host(c, out2, r, sizeof(r)));
  CHECK(r[3] == 8);
  tp_trace_stop(10000);
  CHECK(!tp_trace_on() && tp_trace_begin(TP_TRACE_COPY, 0, "x") == NULL);
  CHECK(tp_trace_count() == 4 && tp_trace_dropped() == 0);
  const tp_trace_event_t *up = tp_trace_event(0), *p1 = tp_trace_event(1), *p2 = tp_trace_event(2),
                         *down = tp_trace_event(3);
  if (tp_trace_count() == 4) {
    CHECK(up->kind == TP_TRACE_COPY && up->bytes == 16 && strcmp(up->detail, "host to device") == 0);
    CHECK(up->correlation == 42 && up->thread > 0);
    CHECK(p1->kind == TP_TRACE_PROGRAM && strcmp(p1->name, "add") == 0 && p1->correlation == 42);
    CHECK(p2->kind == TP_TRACE_PROGRAM && strcmp(p2->name, "my graph") == 0 && p2->correlation == 41);
    for (const tp_trace_event_t *p = p1; p != NULL; p = p == p1 ? p2 : NULL) {
      CHECK(p->device == 0 && p->begin_ns <= p->end_ns);
      CHECK(p->begin_ns <= p->device_begin_ns && p->device_begin_ns <= tp_trace_done_ns(p));
    }
    CHECK(p2->device_begin_ns >= tp_trace_done_ns(p1)); /* one device runs them in order */
    CHECK(down->kind == TP_TRACE_COPY && down->bytes == 16 && down->correlation == 0);
    CHECK(down->device_begin_ns >= tp_trace_done_ns(p2) && down->end_ns >= down->device_begin_ns);
  }
  tp_trace_start();
  CHECK(tp_trace_count() == 0);
  tp_trace_stop(1000);
  tp_buffer_destroy(c, ba);
  tp_buffer_destroy(c, out);
  tp_buffer_destroy(c, out2);
  tp_executable_release(exe);
}

int main(void) {
  const char *plugin = tp_test_plugin();
  test_load_errors();
  tp_client_t *c = NULL;
  CHECK_OK(tp_client_create(plugin, 1, &c));
  if (!c) {
    TEST_MAIN_END("runtime_test");
  }
  CHECK(tp_client_device_count(c) >= 1);
  CHECK(strlen(tp_client_platform_name(c)) > 0);
  test_storage(c);
  test_execute(c);
  test_while(c);
  test_injected_fault(c);
  test_check_output(c);
  test_trace(c);
  test_two_clients(c, plugin);
  CHECK_OK(tp_client_synchronize(c));
  tp_client_release(c);
  TEST_MAIN_END("runtime_test");
}
