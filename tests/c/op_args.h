/* Op arguments and table lookups for the C unit tests that call infer/emit directly. */
#ifndef TP_TESTS_C_OP_ARGS_H_
#define TP_TESTS_C_OP_ARGS_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlo/builder.h"
#include "ops/op.h"
#include "test.h"

static inline tp_op_arg_t tensor(tp_dtype_t dt, int ndim, const int64_t *sizes) {
  tp_op_arg_t a;
  memset(&a, 0, sizeof(a));
  a.kind = TP_ARG_TENSOR;
  a.meta.dtype = dt;
  a.meta.ndim = ndim;
  for (int i = 0; i < ndim; i++) a.meta.sizes[i] = sizes[i];
  a.scalar_dtype = TP_DTYPE_INVALID;
  return a;
}

static inline tp_op_arg_t scalar(tp_dtype_t dt, double v, bool wrapped) {
  tp_op_arg_t a;
  memset(&a, 0, sizeof(a));
  a.kind = TP_ARG_SCALAR;
  a.meta.dtype = dt;
  a.f = v;
  a.i = (int64_t)v;
  a.wrapped = wrapped;
  a.scalar_dtype = TP_DTYPE_INVALID;
  return a;
}

static inline tp_op_arg_t int_arg(int64_t v) {
  tp_op_arg_t a;
  memset(&a, 0, sizeof(a));
  a.kind = TP_ARG_INT;
  a.i = v;
  return a;
}

static inline tp_op_arg_t ints_arg(int n, const int64_t *v) {
  tp_op_arg_t a;
  memset(&a, 0, sizeof(a));
  a.kind = TP_ARG_INTS;
  a.n = n;
  for (int i = 0; i < n; i++) a.ints[i] = v[i];
  return a;
}

static inline tp_op_arg_t str_arg(const char *v) {
  tp_op_arg_t a;
  memset(&a, 0, sizeof(a));
  a.kind = TP_ARG_STR;
  snprintf(a.s, sizeof(a.s), "%s", v);
  return a;
}

/* The row named |name| (a failed CHECK and row 0 when there is none). */
static inline const tp_op_def_t *op(const char *name) {
  int i = tp_op_lookup(name, NULL);
  CHECK(i >= 0);
  return i >= 0 ? &tp_op_table[i] : &tp_op_table[0];
}

/* Infers and emits |name|; returns whether the program text contains |needle|. */
static inline bool emits(const char *name, tp_op_arg_t *args, int n_args, tp_meta_t *out,
                         int *n_out, const char *needle) {
  const tp_op_def_t *d = op(name);
  tp_status_t *st = d->infer(d, args, n_args, out, n_out);
  CHECK(st == NULL);
  if (st) {
    fprintf(stderr, "%s: %s\n", name, tp_status_message(st));
    tp_status_free(st);
    return false;
  }
  tp_hlo_builder_t *b;
  CHECK_OK(tp_hlo_builder_create(&b));
  tp_hlo_value_t in[TP_MAX_ARGS], res[TP_MAX_OUTS];
  for (int i = 0; i < n_args; i++)
    if (args[i].kind == TP_ARG_TENSOR)
      in[i] = tp_hlo_param(b, args[i].meta.dtype, args[i].meta.ndim, args[i].meta.sizes, -1);
    else if (args[i].kind == TP_ARG_SCALAR)
      in[i] = tp_hlo_param(b, args[i].scalar_dtype, 0, NULL, -1);
  d->emit(d, b, args, n_args, in, out, res);
  char *text = NULL;
  CHECK_OK(tp_hlo_finish(b, res, *n_out, &text));
  tp_hlo_builder_free(b);
  bool found = text && strstr(text, needle);
  free(text);
  return found;
}

/* The status code |name|'s infer returns (0 when it accepts the call). */
static inline int infer_status(const char *name, tp_op_arg_t *args, int n_args) {
  const tp_op_def_t *d = op(name);
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  tp_status_t *st = d->infer(d, args, n_args, out, &n);
  int code = st ? (int)tp_status_code(st) : 0;
  tp_status_free(st);
  return code;
}

/* Whether |name|'s infer leaves the call to CPU (TP_UNIMPLEMENTED). */
static inline bool unimplemented(const char *name, tp_op_arg_t *args, int n_args) {
  return infer_status(name, args, n_args) == TP_UNIMPLEMENTED;
}

/* The program |name| emits over params of the inferred shapes (caller frees), or NULL. */
static inline char *emit_text(const char *name, tp_op_arg_t *args, int n_args) {
  const tp_op_def_t *d = op(name);
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  CHECK_OK(d->infer(d, args, n_args, out, &n));
  tp_hlo_builder_t *b;
  CHECK_OK(tp_hlo_builder_create(&b));
  tp_hlo_value_t in[TP_MAX_ARGS];
  for (int i = 0; i < n_args; i++) {
    if (args[i].kind == TP_ARG_TENSOR)
      in[i] = tp_hlo_param(b, args[i].meta.dtype, args[i].meta.ndim, args[i].meta.sizes, -1);
    else if (args[i].kind == TP_ARG_SCALAR)
      in[i] = tp_hlo_param(b, args[i].scalar_dtype, 0, NULL, -1);
  }
  tp_hlo_value_t res[TP_MAX_OUTS];
  d->emit(d, b, args, n_args, in, out, res);
  char *text = NULL;
  CHECK_OK(tp_hlo_finish(b, res, n, &text));
  tp_hlo_builder_free(b);
  return text;
}

/* Emits |name| and compares with tests/c/golden/<file>. */
static inline void check_golden(const char *name, tp_op_arg_t *args, int n_args, const char *file) {
  char *text = emit_text(name, args, n_args);
  char path[256];
  snprintf(path, sizeof(path), "%s/%s", GOLDEN_DIR, file);
  FILE *f = fopen(path, "rb");
  char expect[1 << 15] = {0};
  if (f) {
    size_t r = fread(expect, 1, sizeof(expect) - 1, f);
    expect[r] = 0;
    fclose(f);
  } else if (getenv("TP_UPDATE_GOLDEN") && text) {
    f = fopen(path, "wb");
    fputs(text, f);
    fclose(f);
    strcpy(expect, text);
  }
  CHECK(text && strcmp(text, expect) == 0);
  if (text && strcmp(text, expect) != 0) fprintf(stderr, "emitted for %s:\n%s\n", name, text);
  free(text);
}

#endif
