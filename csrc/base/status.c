/* Status records: a code plus a heap message. Depends on libc only. */
#include "base/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tp_status {
  tp_status_code_t code;
  char *message;
};

static char *vformat(const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) n = 0;
  char *buf = malloc((size_t)n + 1);
  if (!buf) return NULL;
  vsnprintf(buf, (size_t)n + 1, fmt, ap);
  return buf;
}

/* Returned when even the status cannot be allocated; never freed. */
static struct tp_status oom_status = {TP_RESOURCE_EXHAUSTED,
                                      "out of host memory creating a status"};

tp_status_t *tp_status_make_at(const char *file, int line, tp_status_code_t code,
                               const char *fmt, ...) {
  tp_status_t *s = malloc(sizeof(*s));
  if (!s) return &oom_status;
  va_list ap;
  va_start(ap, fmt);
  char *body = vformat(fmt, ap);
  va_end(ap);
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  size_t n = (body ? strlen(body) : 0) + strlen(base) + 32;
  s->message = malloc(n);
  if (s->message) snprintf(s->message, n, "%s (%s:%d)", body ? body : "", base, line);
  free(body);
  s->code = code == TP_OK ? TP_UNKNOWN : code;
  return s;
}

tp_status_code_t tp_status_code(const tp_status_t *s) { return s ? s->code : TP_OK; }

const char *tp_status_message(const tp_status_t *s) {
  return s && s->message ? s->message : "";
}

tp_status_t *tp_status_annotate(tp_status_t *s, const char *fmt, ...) {
  if (!s || s == &oom_status || !s->message) return s;
  va_list ap;
  va_start(ap, fmt);
  char *prefix = vformat(fmt, ap);
  va_end(ap);
  if (!prefix) return s;
  size_t n = strlen(prefix) + strlen(s->message) + 3;
  char *m = malloc(n);
  if (m) {
    snprintf(m, n, "%s: %s", prefix, s->message);
    free(s->message);
    s->message = m;
  }
  free(prefix);
  return s;
}

tp_status_t *tp_status_join(tp_status_t *first, tp_status_t *second) {
  if (!first) return second;
  tp_status_free(second);
  return first;
}

void tp_status_free(tp_status_t *s) {
  if (!s || s == &oom_status) return;
  free(s->message);
  free(s);
}
