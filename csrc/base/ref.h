/* The reference count the C core's shared objects (client, storage, executable) start with, and
 * the one macro that gives each type its retain/release. Included by .c files only (C11 atomics). */
#ifndef TP_BASE_REF_H_
#define TP_BASE_REF_H_

#include <stdatomic.h>
#include <stdbool.h>

typedef struct {
  _Atomic int count;
} tp_ref_t;

/* A new object holds one reference: its creator's. */
static inline void tp_ref_init(tp_ref_t *r) { atomic_init(&r->count, 1); }

/* Defines |prefix|_retain(type *) and |prefix|_release(type *) for a |type| whose first member is
 * `tp_ref_t ref`; the last release calls |destroy|. Both accept NULL. */
#define TP_REF_FUNCTIONS(type, prefix, destroy)                                   \
  void prefix##_retain(type *o) {                                                 \
    if (o) atomic_fetch_add_explicit(&o->ref.count, 1, memory_order_relaxed);     \
  }                                                                               \
  void prefix##_release(type *o) {                                                \
    if (o && atomic_fetch_sub_explicit(&o->ref.count, 1, memory_order_acq_rel) == 1) \
      destroy(o);                                                                 \
  }

#endif  /* TP_BASE_REF_H_ */
