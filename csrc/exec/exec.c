/* The executors' shared state and the one path from a program key to an executable. See exec.h. */
#include "exec/exec.h"

#include "exec/fused.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <sys/stat.h>

#include "exec/fused.h"

static struct {
  tp_client_t *client;
  tp_exec_cache_t *cache;
  int blocking;
} g;
/* The executor lock is a flag under a mutex, not the mutex itself, so that a thread other than
 * the one that took it may release it: a collective hands its execute to the collective thread
 * with the lock held (collective.c), and that thread releases it once the execute is enqueued. */
static pthread_mutex_t g_lock_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_lock_free = PTHREAD_COND_INITIALIZER;
static atomic_bool g_locked; /* written under g_lock_mu; tp_exec_locked reads it bare */

/* The GNU build-id note of the loaded object that contains |addr|, as hex; "" if none. */
typedef struct {
  uintptr_t addr;
  char *hex;
  size_t n;
} build_id_t;

static int find_build_id(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  build_id_t *want = data;
  bool mine = false;
  for (int i = 0; i < info->dlpi_phnum && !mine; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    mine = ph->p_type == PT_LOAD && want->addr >= lo && want->addr < lo + ph->p_memsz;
  }
  if (!mine) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE) continue;
    const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
    const unsigned char *end = p + ph->p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
      const unsigned char *name = p + sizeof(*nh);
      const unsigned char *desc = name + ((nh->n_namesz + 3) & ~3u);
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
        for (size_t k = 0; k < nh->n_descsz && 2 * k + 2 < want->n; k++)
          snprintf(want->hex + 2 * k, 3, "%02x", desc[k]);
        return 1;
      }
      p = desc + ((nh->n_descsz + 3) & ~3u);
    }
  }
  return 1;
}

/* Identifies this build of the program generator, so disk cache entries another build emitted
 * are never loaded: the linker's build-id of the object holding this code (a hash of its
 * contents: reinstalling the same build keeps the cache), else its path, size and mtime. */
static void codegen_id(char *buf, size_t n) {
  char hex[129] = "";
  build_id_t want = {(uintptr_t)&codegen_id, hex, sizeof(hex)};
  dl_iterate_phdr(find_build_id, &want);
  if (hex[0]) {
    snprintf(buf, n, "build-id|%s", hex);
    return;
  }
  Dl_info info;
  struct stat sb;
  if (dladdr((void *)&codegen_id, &info) && info.dli_fname && stat(info.dli_fname, &sb) == 0)
    snprintf(buf, n, "%s|%lld|%lld", info.dli_fname, (long long)sb.st_size,
             (long long)sb.st_mtime);
  else
    snprintf(buf, n, "unknown-build");
}

tp_status_t *tp_exec_init(const char *plugin_path, const char *cache_dir, size_t cache_capacity,
                          char **out_warning) {
  if (out_warning) *out_warning = NULL;
  if (g.client) return NULL;
  tp_client_t *client = NULL;
  const char *n_env = getenv("TORCH_PJRT_CPU_DEVICES");
  int n_cpu = n_env && atoi(n_env) > 0 ? atoi(n_env) : 1;
  TP_RETURN_IF_ERROR(tp_client_create(plugin_path, n_cpu, &client));
  tp_exec_cache_t *cache = NULL;
  char id[1200];
  codegen_id(id, sizeof(id));
  tp_status_t *st = tp_exec_cache_create(client, cache_dir, cache_capacity, id, &cache,
                                         out_warning);
  if (st) {
    tp_client_release(client);
    return st;
  }
  g.cache = cache;
  g.client = client;
  return NULL;
}

tp_client_t *tp_exec_client(void) { return tp_exec_forked() ? NULL : g.client; }
tp_exec_cache_t *tp_exec_cache(void) { return tp_exec_forked() ? NULL : g.cache; }
bool tp_exec_initialized(void) { return g.client != NULL; }
bool tp_exec_forked(void) { return g.client && tp_runtime_in_forked_child(); }
int tp_exec_device_count(void) { return g.client ? tp_client_device_count(g.client) : 0; }

tp_status_t *tp_exec_unavailable(void) {
  if (tp_exec_forked())
    return tp_make_status(TP_FAILED_PRECONDITION,
                          "Cannot use the tpu device in a forked subprocess: the device was "
                          "initialized before the fork. To use the tpu device with "
                          "multiprocessing, you must use the 'spawn' start method");
  return tp_make_status(TP_FAILED_PRECONDITION, "the tpu runtime is not initialized");
}
void tp_exec_lock_keeping_region(void) {
  pthread_mutex_lock(&g_lock_mu);
  while (g_locked) pthread_cond_wait(&g_lock_free, &g_lock_mu);
  g_locked = true;
  pthread_mutex_unlock(&g_lock_mu);
}

void tp_exec_lock(void) {
  tp_exec_lock_keeping_region();
  tp_fused_flush_kept();
}

tp_status_t *tp_exec_end_region(void) {
  tp_exec_lock();
  tp_status_t *st = tp_fused_take_error();
  tp_exec_unlock();
  return st;
}

tp_status_t *tp_exec_synchronize(void) {
  if (!tp_exec_client()) return tp_exec_unavailable();
  TP_RETURN_IF_ERROR(tp_exec_end_region());
  return tp_client_synchronize(tp_exec_client());
}

bool tp_exec_locked(void) { return atomic_load_explicit(&g_locked, memory_order_relaxed); }

void tp_exec_unlock(void) {
  pthread_mutex_lock(&g_lock_mu);
  g_locked = false;
  pthread_cond_signal(&g_lock_free);
  pthread_mutex_unlock(&g_lock_mu);
}
int tp_exec_blocking(void) { return g.blocking; }
void tp_exec_set_blocking(int blocking) { g.blocking = blocking; }

tp_status_t *tp_exec_builder_create(tp_hlo_builder_t **out_builder) {
  TP_RETURN_IF_ERROR(tp_hlo_builder_create(out_builder));
  tp_hlo_builder_set_xla_cpu(*out_builder,
                             g.client && strcmp(tp_client_platform_name(g.client), "cpu") == 0);
  return NULL;
}

/* ---- compile log ---- */

#define TP_KINDS 4096 /* open-addressed set of (what, input dtypes and ranks) hashes seen */
static uint64_t g_kinds[TP_KINDS];
static int64_t g_new_shape_compiles;

int64_t tp_exec_new_shape_compiles(void) { return g_new_shape_compiles; }
void tp_exec_reset_new_shape_compiles(void) { g_new_shape_compiles = 0; }

/* "f32[2, 3], i64[]" (or with every size "*": the kind of program, whatever its shapes). */
static void describe_inputs(const tp_exec_origin_t *o, bool shapeless, char *buf, size_t n) {
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; i < o->n_inputs && at + 1 < n; i++) {
    const tp_view_t *v = &o->inputs[i];
    at += (size_t)snprintf(buf + at, n - at, "%s%s[", i ? ", " : "", tp_dtype_name(v->dtype));
    for (int d = 0; d < v->ndim && at + 1 < n; d++) {
      if (shapeless) at += (size_t)snprintf(buf + at, n - at, "%s*", d ? ", " : "");
      else at += (size_t)snprintf(buf + at, n - at, "%s%lld", d ? ", " : "", (long long)v->sizes[d]);
    }
    if (at + 1 < n) at += (size_t)snprintf(buf + at, n - at, "]");
  }
}

/* Whether a program of |o|'s kind was compiled before; records it. */
static bool seen_kind(const tp_exec_origin_t *o) {
  char kind[1024];
  describe_inputs(o, true, kind, sizeof(kind));
  uint64_t h = tp_hash_bytes(kind, strlen(kind), tp_hash_bytes(o->what, strlen(o->what), 0)) | 1;
  for (size_t i = 0; i < TP_KINDS; i++) {
    uint64_t *slot = &g_kinds[(h + i) % TP_KINDS];
    if (*slot == h) return true;
    if (*slot == 0) {
      *slot = h;
      return false;
    }
  }
  return false; /* full: every further kind counts as first */
}

static bool log_compiles(void) {
  static int on = -1;
  if (on < 0) {
    const char *v = getenv("TORCH_PJRT_LOG_COMPILES");
    on = v && *v && strcmp(v, "0") != 0;
  }
  return on;
}

/* Counts a compile of |o|; logs it (TORCH_PJRT_LOG_COMPILES) and says why in |traced|. */
static void note_compile(const tp_exec_origin_t *o, double ms, tp_trace_event_t *traced) {
  bool again = seen_kind(o);
  if (again) g_new_shape_compiles++;
  if (!log_compiles() && !traced) return;
  char shapes[1024];
  describe_inputs(o, false, shapes, sizeof(shapes));
  const char *why = again ? "new shapes" : "first", *bucket = o->bucketed ? ", bucket" : "";
  tp_trace_detail(traced, "%s%s (%s)", why, bucket, shapes);
  if (log_compiles())
    fprintf(stderr, "torch_pjrt: compile %s (%s): %s%s, %.1f ms\n", o->what, shapes, why, bucket, ms);
}

/* With TORCH_PJRT_DUMP_DIR set, each compiled program's text goes to a file there, numbered in
 * compile order and named after what it is: <n>-<what>.mlir. Under the executor lock. */
static void dump_program(const tp_exec_origin_t *o, const char *text) {
  const char *dir = getenv("TORCH_PJRT_DUMP_DIR");
  if (!dir || !*dir) return;
  static int n;
  char name[96], path[4096];
  const char *what = o ? o->what : "program";
  size_t i = 0;
  for (; what[i] && i + 1 < sizeof(name); i++) {
    char ch = what[i];
    bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '_' || ch == '.' || ch == '-';
    name[i] = plain ? ch : '_';
  }
  name[i] = 0;
  snprintf(path, sizeof(path), "%s/%06d-%s%s.mlir", dir, n++, name, o && o->bucketed ? "-bucket" : "");
  FILE *f = fopen(path, "w");
  if (!f) return; /* a debugging aid: an unwritable folder costs the dump, not the program */
  fputs(text, f);
  fclose(f);
}

tp_status_t *tp_exec_program(const void *key, size_t key_len, uint64_t hash, tp_exec_build_fn build,
                             void *ctx, const tp_exec_origin_t *origin,
                             const tp_compile_options_t *options, tp_executable_t **out_exe,
                             bool *out_compiled) {
  *out_compiled = false;
  *out_exe = tp_exec_cache_lookup(g.cache, key, key_len, hash);
  if (*out_exe) return NULL;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  tp_trace_event_t *traced = tp_trace_begin(TP_TRACE_COMPILE, -1, origin ? origin->what : "program");
  char *text = NULL;
  tp_status_t *st = build(ctx, &text);
  if (!st) dump_program(origin, text);
  if (!st) st = tp_executable_compile_with(g.client, text, strlen(text), options, out_exe);
  if (st && text && getenv("TORCH_PJRT_DUMP_ON_ERROR")) fprintf(stderr, "%s\n", text);
  free(text);
  tp_trace_end(traced);
  if (st) {
    tp_trace_detail(traced, "failed");
    return st;
  }
  *out_compiled = true;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (origin)
    note_compile(origin, (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
                 traced);
  tp_exec_cache_insert(g.cache, key, key_len, hash, *out_exe);
  return NULL;
}

int tp_exec_eager_opt_level(void) {
  static int level = -2;
  if (level == -2) {
    const char *v = getenv("TORCH_PJRT_EAGER_OPT_LEVEL");
    if (v && *v) level = strcmp(v, "default") == 0 ? -1 : atoi(v) < 0 ? -1 : atoi(v) > 3 ? 3 : atoi(v);
    else level = g.client && strcmp(tp_client_platform_name(g.client), "cpu") == 0 ? 1 : -1;
  }
  return level;
}

static bool on_cpu_plugin(void) {
  return g.client && strcmp(tp_client_platform_name(g.client), "cpu") == 0;
}

bool tp_exec_donate_whole_writes(void) {
  static int donate = -1;
  if (donate < 0) donate = !on_cpu_plugin();
  return donate;
}

bool tp_exec_buffers_any_shape(void) {
  static int any = -1;
  if (any < 0) any = on_cpu_plugin();
  return any;
}
