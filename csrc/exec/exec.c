/* The executors' shared state and the one path from a program key to an executable. See exec.h. */
#include "exec/exec.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static struct {
  tp_client_t *client;
  tp_exec_cache_t *cache;
  int blocking;
} g;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

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
void tp_exec_lock(void) { pthread_mutex_lock(&g_lock); }
void tp_exec_unlock(void) { pthread_mutex_unlock(&g_lock); }
int tp_exec_blocking(void) { return g.blocking; }
void tp_exec_set_blocking(int blocking) { g.blocking = blocking; }

tp_status_t *tp_exec_builder_create(tp_hlo_builder_t **out_builder) {
  TP_RETURN_IF_ERROR(tp_hlo_builder_create(out_builder));
  tp_hlo_builder_set_xla_cpu(*out_builder,
                             g.client && strcmp(tp_client_platform_name(g.client), "cpu") == 0);
  return NULL;
}

tp_status_t *tp_exec_program(const void *key, size_t key_len, uint64_t hash, tp_exec_build_fn build,
                             void *ctx, tp_executable_t **out_exe, bool *out_compiled) {
  *out_compiled = false;
  *out_exe = tp_exec_cache_lookup(g.cache, key, key_len, hash);
  if (*out_exe) return NULL;
  char *text = NULL;
  TP_RETURN_IF_ERROR(build(ctx, &text));
  tp_status_t *st = tp_executable_compile(g.client, text, strlen(text), out_exe);
  if (st && getenv("TORCH_PJRT_DUMP_ON_ERROR")) fprintf(stderr, "%s\n", text);
  free(text);
  if (st) return st;
  *out_compiled = true;
  tp_exec_cache_insert(g.cache, key, key_len, hash, *out_exe);
  return NULL;
}
