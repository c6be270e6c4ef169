/* Program keys: the bytes that identify a program in the executable cache. Both executors build
 * theirs in a tp_key_t and encode an op's non-tensor arguments the same way. Private to exec/. */
#ifndef TP_EXEC_KEY_H_
#define TP_EXEC_KEY_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "exec/view.h"
#include "ops/op.h"

/* A growable byte string. A failed allocation sets |failed| and stops appending; the key is then
 * unusable (the caller reports out of memory). Zero-initialized is empty. */
typedef struct {
  unsigned char *data;
  size_t len, cap;
  bool failed;
} tp_key_t;

/* Grows |k| to hold |n| more bytes; false (and |failed| set) when it cannot. */
bool tp_key_grow(tp_key_t *k, size_t n);
/* Inline: an eager call's keys are a few hundred of these appends, on every call. */
static inline void tp_key_put(tp_key_t *k, const void *p, size_t n) {
  if (k->len + n > k->cap && !tp_key_grow(k, n)) return;
  memcpy(k->data + k->len, p, n);
  k->len += n;
}
static inline void tp_key_put_i64(tp_key_t *k, int64_t v) { tp_key_put(k, &v, 8); }
void tp_key_free(tp_key_t *k);
/* Appends a view's layout: dtype, sizes, strides and offset (not its storage). */
static inline void tp_key_put_view(tp_key_t *k, const tp_view_t *v) {
  tp_key_put_i64(k, v->dtype);
  tp_key_put_i64(k, v->ndim);
  tp_key_put(k, v->sizes, sizeof(int64_t) * (size_t)v->ndim);
  tp_key_put(k, v->strides, sizeof(int64_t) * (size_t)v->ndim);
  tp_key_put_i64(k, v->offset);
}

/* Appends what of op argument |a| shapes the program: its kind and the dtypes of a scalar (its
 * value too if |scalar_value|: a program constant rather than an input), an int, float, string
 * or int list; a tensor's part is the caller's. */
void tp_key_put_arg(tp_key_t *k, const tp_op_arg_t *a, bool scalar_value);

#endif  /* TP_EXEC_KEY_H_ */
