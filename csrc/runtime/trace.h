/* The device's trace: what torch.profiler shows of the device (csrc/torch/profiler.cpp reads it).
 * While a trace runs, each executed program, compile, disk-cache load, CPU fallback, host/device
 * copy and collective records one event: its host span, a program's device completion time, the
 * bytes it moved, and the profiled op that caused it (the innermost correlation id the profiler
 * pushed on the calling thread). Off, a call site pays one relaxed atomic load (tp_trace_on).
 * Events live until the next tp_trace_start; their addresses never move. Thread-safe. */
#ifndef TP_RUNTIME_TRACE_H_
#define TP_RUNTIME_TRACE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  TP_TRACE_PROGRAM,    /* a program ran on |device|: name = its op or graph */
  TP_TRACE_COMPILE,    /* a program was compiled (cache miss): detail says why */
  TP_TRACE_LOAD,       /* a program was loaded from the disk cache */
  TP_TRACE_FALLBACK,   /* an op ran on PyTorch's CPU kernel: name = the op */
  TP_TRACE_COPY,       /* bytes between host and device or two devices: detail = direction */
  TP_TRACE_COLLECTIVE, /* a collective: name = the call, detail = its transport */
} tp_trace_kind_t;

typedef struct {
  tp_trace_kind_t kind;
  int device;               /* -1: a host-side event */
  int32_t thread;           /* the calling thread's system id */
  uint64_t correlation;     /* the profiled op that caused it; 0: none */
  int64_t begin_ns, end_ns; /* the host call's span (CLOCK_REALTIME, as the profiler's clock) */
  /* PROGRAM: when the device finished it (0: not seen); and when it (or a COPY) began there,
   * worked out by tp_trace_stop (the device runs its work in order: not before it was enqueued,
   * nor before the device finished the program before). done_ns is written by a plugin
   * thread: read it with tp_trace_done_ns. */
  int64_t done_ns;
  int64_t device_begin_ns;
  int64_t bytes;
  char name[96];
  char detail[160];
} tp_trace_event_t;

/* Whether a trace runs (C and C++ alike read it through the compiler's atomic builtins). */
extern int tp_trace_active;
static inline bool tp_trace_on(void) { return __atomic_load_n(&tp_trace_active, __ATOMIC_RELAXED) != 0; }
static inline int64_t tp_trace_done_ns(const tp_trace_event_t *e) {
  return __atomic_load_n(&e->done_ns, __ATOMIC_ACQUIRE);
}
static inline void tp_trace_set_done(tp_trace_event_t *e, int64_t ns) {
  __atomic_store_n(&e->done_ns, ns, __ATOMIC_RELEASE);
}

/* Starts a trace, dropping the previous one's events. */
void tp_trace_start(void);
/* Stops the trace: waits (at most |timeout_ms|) for the device to finish the programs it
 * recorded, then fills each program's device_begin_ns. */
void tp_trace_stop(int timeout_ms);
/* A new event stamped now on this thread, or NULL when no trace runs (or it is full). */
tp_trace_event_t *tp_trace_begin(tp_trace_kind_t kind, int device, const char *name);
/* Stamps |e|'s end; NULL does nothing. */
void tp_trace_end(tp_trace_event_t *e);
/* Sets |e|'s detail, printf-style; NULL does nothing. */
void tp_trace_detail(tp_trace_event_t *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The events of the last trace, in the order they began; events dropped once it was full. */
size_t tp_trace_count(void);
const tp_trace_event_t *tp_trace_event(size_t i);
size_t tp_trace_dropped(void);
/* The profiler's correlation ids on this thread (a stack: the innermost op is on top). */
void tp_trace_push_correlation(uint64_t id);
void tp_trace_pop_correlation(void);
int64_t tp_trace_now_ns(void);

#ifdef __cplusplus
}
#endif
#endif  /* TP_RUNTIME_TRACE_H_ */
