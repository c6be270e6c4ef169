/* Status records: a code plus a heap message. Depends on libc only. */
#include "base/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

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

/* ---- runtime checks ---- */

/* Registered assertion messages: a small open-addressed table, never shrunk. Past its capacity a
 * message is not kept and its failure reads as an assertion without one. */
enum { CHECK_SLOTS = 4096 };
static struct {
  int32_t code;
  char *message;
} checks[CHECK_SLOTS];
static pthread_mutex_t checks_mu = PTHREAD_MUTEX_INITIALIZER;

int32_t tp_check_register(const char *message) {
  uint32_t h = 2166136261u; /* 32-bit FNV-1a: the same code in every process */
  for (const unsigned char *p = (const unsigned char *)message; *p; p++) h = (h ^ *p) * 16777619u;
  int32_t code = (int32_t)(h & 0x7fffffff);
  if (code <= TP_CHECK_INDEX) code += 2;
  pthread_mutex_lock(&checks_mu);
  for (uint32_t i = 0; i < CHECK_SLOTS; i++) {
    uint32_t at = ((uint32_t)code + i) % CHECK_SLOTS;
    if (checks[at].code == code) break;
    if (checks[at].code == 0) {
      char *m = strdup(message);
      if (m) checks[at].code = code, checks[at].message = m;
      break;
    }
  }
  pthread_mutex_unlock(&checks_mu);
  return code;
}

tp_status_t *tp_check_status(int32_t code) {
  if (code == TP_CHECK_NONE) return NULL;
  if (code == TP_CHECK_INDEX)
    return tp_make_status(TP_OUT_OF_RANGE,
                          "index out of range (an index tensor held a value outside the dimension "
                          "it indexes; values computed from it are unspecified)");
  const char *message = NULL;
  pthread_mutex_lock(&checks_mu);
  for (uint32_t i = 0; i < CHECK_SLOTS && !message; i++) {
    uint32_t at = ((uint32_t)code + i) % CHECK_SLOTS;
    if (checks[at].code == 0) break;
    if (checks[at].code == code) message = checks[at].message;
  }
  pthread_mutex_unlock(&checks_mu);
  /* The table is never shrunk: |message| stays valid. */
  if (!message) return tp_make_status(TP_FAILED_PRECONDITION, "a device-side assertion failed");
  return tp_make_status(TP_FAILED_PRECONDITION, "device-side assertion failed: %s", message);
}
