/* Program keys. See key.h. */
#include "exec/key.h"

#include <stdlib.h>
#include <string.h>

bool tp_key_grow(tp_key_t *k, size_t n) {
  if (k->failed) return false;
  size_t cap = k->cap ? k->cap * 2 : 1024;
  while (cap < k->len + n) cap *= 2;
  unsigned char *d = realloc(k->data, cap);
  if (!d) {
    k->failed = true;
    return false;
  }
  k->data = d;
  k->cap = cap;
  return true;
}

void tp_key_free(tp_key_t *k) {
  free(k->data);
  memset(k, 0, sizeof(*k));
}

void tp_key_put_arg(tp_key_t *k, const tp_op_arg_t *a, bool scalar_value) {
  tp_key_put_i64(k, a->kind);
  switch (a->kind) {
    case TP_ARG_SCALAR:
      tp_key_put_i64(k, a->scalar_dtype);
      tp_key_put_i64(k, a->meta.dtype);
      tp_key_put_i64(k, a->wrapped);
      if (!scalar_value) break;
      if (tp_dtype_is_float(a->meta.dtype)) {
        tp_key_put(k, &a->f, sizeof(double));
      } else if (tp_dtype_is_complex(a->meta.dtype)) {
        tp_key_put(k, &a->f, sizeof(double));
        tp_key_put(k, &a->fi, sizeof(double));
      } else {
        tp_key_put_i64(k, a->i);
      }
      break;
    case TP_ARG_INT: tp_key_put_i64(k, a->i); break;
    case TP_ARG_FLOAT: tp_key_put(k, &a->f, sizeof(double)); break;
    case TP_ARG_STR: tp_key_put(k, a->s, sizeof(a->s)); break;
    case TP_ARG_TENSOR: /* what an emitter may choose its form by, beyond the sizes */
      tp_key_put_i64(k, a->contiguous | a->channels_last << 1);
      break;
    case TP_ARG_INTS:
      tp_key_put_i64(k, a->n);
      tp_key_put(k, a->ints, sizeof(int64_t) * (size_t)a->n);
      break;
    default: break;
  }
}
