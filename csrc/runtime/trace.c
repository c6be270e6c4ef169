/* The device's trace (trace.h). Events sit in fixed chunks that never move, so a completion
 * callback on a plugin thread can write its program's done_ns with no lock; the recording
 * calls take g_lock, which only a running trace ever reaches. */
#include "runtime/trace.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "runtime/internal.h"

#define CHUNK 4096
#define MAX_CHUNKS 256 /* about a million events; later ones are counted as dropped */

int tp_trace_active;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static tp_trace_event_t *g_chunks[MAX_CHUNKS];
static size_t g_count, g_dropped;
/* Completion callbacks registered and not run yet: their events must stay put. */
static _Atomic int64_t g_watching;

static _Thread_local uint64_t t_corr[64];
static _Thread_local int t_depth;
static _Thread_local int32_t t_tid;

int64_t tp_trace_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void tp_trace_push_correlation(uint64_t id) {
  if (t_depth < (int)(sizeof(t_corr) / sizeof(t_corr[0]))) t_corr[t_depth] = id;
  t_depth++;
}

void tp_trace_pop_correlation(void) {
  if (t_depth > 0) t_depth--; /* a pop for an op begun before the trace started: nothing */
}

static uint64_t current_correlation(void) {
  int n = (int)(sizeof(t_corr) / sizeof(t_corr[0]));
  return t_depth > 0 && t_depth <= n ? t_corr[t_depth - 1] : 0;
}

void tp_trace_start(void) {
  pthread_mutex_lock(&g_lock);
  /* Chunks a callback may still write (a program of the last trace never finished) are left
   * to it; the others are reused. */
  if (atomic_load(&g_watching) > 0) memset(g_chunks, 0, sizeof(g_chunks));
  g_count = g_dropped = 0;
  __atomic_store_n(&tp_trace_active, 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&g_lock);
}

tp_trace_event_t *tp_trace_begin(tp_trace_kind_t kind, int device, const char *name) {
  if (!tp_trace_on()) return NULL;
  if (!t_tid) t_tid = (int32_t)syscall(SYS_gettid);
  tp_trace_event_t *e = NULL;
  pthread_mutex_lock(&g_lock);
  if (tp_trace_on()) {
    size_t c = g_count / CHUNK;
    if (c < MAX_CHUNKS && !g_chunks[c]) g_chunks[c] = malloc(sizeof(tp_trace_event_t) * CHUNK);
    if (c < MAX_CHUNKS && g_chunks[c]) e = &g_chunks[c][g_count++ % CHUNK];
    else g_dropped++;
  }
  pthread_mutex_unlock(&g_lock);
  if (!e) return NULL;
  memset(e, 0, sizeof(*e));
  e->kind = kind;
  e->device = device;
  e->thread = t_tid;
  e->correlation = current_correlation();
  snprintf(e->name, sizeof(e->name), "%s", name ? name : "?");
  e->begin_ns = tp_trace_now_ns();
  return e;
}

void tp_trace_end(tp_trace_event_t *e) {
  if (e) e->end_ns = tp_trace_now_ns();
}

void tp_trace_detail(tp_trace_event_t *e, const char *fmt, ...) {
  if (!e) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->detail, sizeof(e->detail), fmt, ap);
  va_end(ap);
}

static void on_done(PJRT_Error *error, void *user_arg) {
  tp_trace_set_done((tp_trace_event_t *)user_arg, tp_trace_now_ns());
  atomic_fetch_sub(&g_watching, 1);
  (void)error; /* read where the event is awaited */
}

void tp_trace_watch(tp_client_t *c, PJRT_Event *event, tp_trace_event_t *e) {
  if (!e || !event) return;
  atomic_fetch_add(&g_watching, 1);
  TP_PJRT_ARGS(PJRT_Event_OnReady_Args, args);
  args.event = event;
  args.callback = on_done;
  args.user_arg = e;
  tp_status_t *st = tp_pjrt_status(c->api, c->api->PJRT_Event_OnReady(&args), "event");
  if (st) { /* no callback will come: the launch's end stands for the completion */
    tp_status_free(st);
    tp_trace_set_done(e, e->end_ns);
    atomic_fetch_sub(&g_watching, 1);
  }
}

static tp_trace_event_t *at(size_t i) { return &g_chunks[i / CHUNK][i % CHUNK]; }

void tp_trace_stop(int timeout_ms) {
  __atomic_store_n(&tp_trace_active, 0, __ATOMIC_RELAXED);
  for (int waited_us = 0; atomic_load(&g_watching) > 0 && waited_us < timeout_ms * 1000;
       waited_us += 200)
    usleep(200);
  pthread_mutex_lock(&g_lock);
  /* Each device runs its programs in the order they were enqueued. */
  enum { MAX_DEVICES = 256 };
  static int64_t free_at[MAX_DEVICES];
  memset(free_at, 0, sizeof(free_at));
  for (size_t i = 0; i < g_count; i++) {
    tp_trace_event_t *e = at(i);
    if (e->kind != TP_TRACE_PROGRAM && e->kind != TP_TRACE_COPY) continue;
    /* A copy's call waits for the work before it (a read of a result): it began on the device
     * once that was done. */
    int64_t done = e->kind == TP_TRACE_COPY ? e->end_ns : tp_trace_done_ns(e);
    if (!done) tp_trace_set_done(e, done = e->end_ns > 0 ? e->end_ns : e->begin_ns);
    int64_t *f = e->device >= 0 && e->device < MAX_DEVICES ? &free_at[e->device] : NULL;
    e->device_begin_ns = f && *f > e->begin_ns ? *f : e->begin_ns;
    if (e->device_begin_ns > done) e->device_begin_ns = done;
    if (f && e->kind == TP_TRACE_PROGRAM) *f = done;
  }
  pthread_mutex_unlock(&g_lock);
}

size_t tp_trace_count(void) {
  pthread_mutex_lock(&g_lock);
  size_t n = g_count;
  pthread_mutex_unlock(&g_lock);
  return n;
}

const tp_trace_event_t *tp_trace_event(size_t i) { return i < tp_trace_count() ? at(i) : NULL; }

size_t tp_trace_dropped(void) {
  pthread_mutex_lock(&g_lock);
  size_t n = g_dropped;
  pthread_mutex_unlock(&g_lock);
  return n;
}
