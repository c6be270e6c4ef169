/* The executable cache (runtime/exec_cache.c) on whatever plugin TP_TEST_PLUGIN names: memory LRU,
 * the on-disk entries a second cache finds, corrupt entries, unsafe directories, and the disk
 * bound. */
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/client.h"
#include "runtime/exec_cache.h"
#include "runtime/executable.h"
#include "runtime_helpers.h"
#include "test.h"

static void test_cache(tp_client_t *c) {
  char dir[] = "/tmp/tp_cache_test_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char sub[256];
  snprintf(sub, sizeof(sub), "%s/cache", dir);
  tp_exec_cache_t *cache = NULL;
  char *warn = NULL;
  CHECK_OK(tp_exec_cache_create(c, sub, 2, "test", &cache, &warn));
  CHECK(warn == NULL);
  struct stat sb;
  CHECK(stat(sub, &sb) == 0 && (sb.st_mode & 0777) == 0700);
  char *text = add_program(3);
  tp_executable_t *exe = NULL;
  CHECK_OK(tp_executable_compile(c, text, strlen(text), &exe));
  const char key[] = "signature-1";
  uint64_t h = tp_hash_bytes(key, sizeof(key), 0);
  CHECK(tp_exec_cache_lookup(cache, key, sizeof(key), h) == NULL);
  tp_exec_cache_insert(cache, key, sizeof(key), h, exe);
  tp_executable_t *hit = tp_exec_cache_lookup(cache, key, sizeof(key), h);
  CHECK(hit == exe);
  tp_executable_release(hit);
  /* LRU bound. */
  tp_exec_cache_insert(cache, "k2", 2, 2, exe);
  tp_exec_cache_insert(cache, "k3", 2, 3, exe);
  CHECK(tp_exec_cache_size(cache) == 2);
  tp_exec_cache_free(cache);

  /* A second cache (a "second process") finds it on disk. */
  tp_runtime_stats_t s0, s1;
  tp_runtime_stats(c, &s0);
  CHECK_OK(tp_exec_cache_create(c, sub, 16, "test", &cache, &warn));
  hit = tp_exec_cache_lookup(cache, key, sizeof(key), h);
  CHECK(hit != NULL);
  tp_runtime_stats(c, &s1);
  CHECK(s1.disk_cache_hits == s0.disk_cache_hits + 1);
  tp_executable_release(hit);
  tp_exec_cache_free(cache);

  /* Corrupt every entry: lookups miss instead of crashing. */
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "for f in %s/*.tpx; do head -c 100 /dev/urandom | dd of=$f bs=1 seek=60 conv=notrunc 2>/dev/null; done", sub);
  CHECK(system(cmd) == 0);
  CHECK_OK(tp_exec_cache_create(c, sub, 16, "test", &cache, &warn));
  CHECK(tp_exec_cache_lookup(cache, key, sizeof(key), h) == NULL);
  tp_exec_cache_free(cache);

  /* A world-writable directory is refused with a warning; the cache still works in memory. */
  chmod(sub, 0777);
  CHECK_OK(tp_exec_cache_create(c, sub, 16, "test", &cache, &warn));
  CHECK(warn != NULL && strstr(warn, "writable"));
  free(warn);
  CHECK(strcmp(tp_exec_cache_dir(cache), "") == 0);
  tp_exec_cache_free(cache);

  tp_executable_release(exe);
  free(text);
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

/* Total size of the *.tpx entries in |dir|, and their count. */
static long long dir_bytes(const char *dir, int *out_count) {
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "cat %s/*.tpx 2>/dev/null | wc -c; ls %s | grep -c '\\.tpx$'",
           dir, dir);
  FILE *p = popen(cmd, "r");
  long long bytes = -1;
  int count = -1;
  if (p) {
    if (fscanf(p, "%lld %d", &bytes, &count) != 2) bytes = -1;
    pclose(p);
  }
  *out_count = count;
  return bytes;
}

static void test_disk_bound(tp_client_t *c) {
  char dir[] = "/tmp/tp_disk_bound_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  tp_exec_cache_t *cache = NULL;
  char *warn = NULL;
  CHECK_OK(tp_exec_cache_create(c, dir, 4, "bound", &cache, &warn));
  CHECK(warn == NULL);
  CHECK(tp_exec_cache_disk_limit(cache) == (int64_t)1 << 30); /* the default */
  char *text = add_program(3);
  tp_executable_t *exe = NULL;
  CHECK_OK(tp_executable_compile(c, text, strlen(text), &exe));
  char key[32];
  snprintf(key, sizeof(key), "key-%d", 0);
  tp_exec_cache_insert(cache, key, strlen(key), 0, exe);
  int n1 = 0;
  long long one = dir_bytes(dir, &n1);
  CHECK(n1 == 1 && one > 0);
  /* Room for about five entries: storing twenty keeps it under the bound, newest kept. */
  tp_exec_cache_set_disk_limit(cache, one * 5 + one / 2);
  for (int i = 1; i < 20; i++) {
    snprintf(key, sizeof(key), "key-%d", i);
    tp_exec_cache_insert(cache, key, strlen(key), (uint64_t)i, exe);
    int n = 0;
    CHECK(dir_bytes(dir, &n) <= one * 5 + one / 2);
  }
  int n = 0;
  dir_bytes(dir, &n);
  CHECK(n >= 4 && n <= 5);
  tp_exec_cache_free(cache);
  /* A fresh cache (another process) finds the newest on disk, not the oldest. */
  CHECK_OK(tp_exec_cache_create(c, dir, 4, "bound", &cache, &warn));
  tp_executable_t *hit = tp_exec_cache_lookup(cache, "key-19", 6, 19);
  CHECK(hit != NULL);
  tp_executable_release(hit);
  CHECK(tp_exec_cache_lookup(cache, "key-0", 5, 0) == NULL);
  /* Lowering the bound evicts at once; 0 means unbounded. */
  tp_exec_cache_set_disk_limit(cache, one * 2 + one / 2);
  dir_bytes(dir, &n);
  CHECK(n <= 2);
  hit = tp_exec_cache_lookup(cache, "key-19", 6, 19); /* a memory hit now */
  CHECK(hit != NULL);
  tp_executable_release(hit);
  tp_exec_cache_set_disk_limit(cache, 0);
  CHECK(tp_exec_cache_disk_limit(cache) == 0);

  /* Two caches on one directory (two processes) share the byte count: together they stay
   * within the bound, and the counter agrees with the directory after a recount. */
  tp_exec_cache_t *other = NULL;
  CHECK_OK(tp_exec_cache_create(c, dir, 4, "bound", &other, &warn));
  tp_exec_cache_set_disk_limit(cache, one * 4 + one / 2);
  tp_exec_cache_set_disk_limit(other, one * 4 + one / 2);
  for (int i = 20; i < 40; i++) {
    snprintf(key, sizeof(key), "key-%d", i);
    tp_exec_cache_insert(i % 2 ? cache : other, key, strlen(key), (uint64_t)i, exe);
    CHECK(dir_bytes(dir, &n) <= one * 4 + one / 2);
  }
  long long now = dir_bytes(dir, &n);
  char counter_path[300];
  snprintf(counter_path, sizeof(counter_path), "%s/entry-bytes", dir);
  FILE *cf = fopen(counter_path, "r");
  long long counted = -1;
  CHECK(cf && fscanf(cf, "%lld", &counted) == 1);
  if (cf) fclose(cf);
  CHECK(counted == now);
  tp_exec_cache_free(other);
  tp_exec_cache_free(cache);

  /* The environment variable, and a malformed value warns and keeps the default. */
  setenv("TORCH_PJRT_CACHE_DISK_MAX_BYTES", "3M", 1);
  CHECK_OK(tp_exec_cache_create(c, dir, 4, "bound", &cache, &warn));
  CHECK(warn == NULL && tp_exec_cache_disk_limit(cache) == 3 << 20);
  tp_exec_cache_free(cache);
  setenv("TORCH_PJRT_CACHE_DISK_MAX_BYTES", "lots", 1);
  CHECK_OK(tp_exec_cache_create(c, dir, 4, "bound", &cache, &warn));
  CHECK(warn != NULL && strstr(warn, "TORCH_PJRT_CACHE_DISK_MAX_BYTES"));
  free(warn);
  CHECK(tp_exec_cache_disk_limit(cache) == (int64_t)1 << 30);
  tp_exec_cache_free(cache);
  unsetenv("TORCH_PJRT_CACHE_DISK_MAX_BYTES");

  tp_executable_release(exe);
  free(text);
  char cmd[300];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

int main(void) {
  const char *plugin = tp_test_plugin();
  tp_client_t *c = NULL;
  tp_status_t *st = tp_client_create(plugin, 1, &c);
  if (st) { /* runtime_test checks client creation; here it is only the set-up */
    fprintf(stderr, "runtime_exec_cache_test: %s\n", tp_status_message(st));
    tp_status_free(st);
    return 1;
  }
  test_cache(c);
  test_disk_bound(c);
  tp_client_release(c);
  TEST_MAIN_END("runtime_exec_cache_test");
}
