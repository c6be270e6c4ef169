/* Op arguments and table lookups for the C unit tests that call infer/emit directly. */
#ifndef TP_TESTS_C_OP_ARGS_H_
#define TP_TESTS_C_OP_ARGS_H_

#include <stdio.h>
#include <string.h>

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

#endif
