/* Executable cache: hash table + LRU list in memory; one file per entry on disk, bounded in
 * bytes with least-recently-used eviction by file mtime (shared by every process using the
 * directory, so no index file needs locking). */
#include "runtime/exec_cache.h"
#include "runtime/trace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct entry {
  uint64_t hash;
  size_t key_size;
  unsigned char *key;
  tp_executable_t *exe;
  struct entry *chain;             /* next in bucket */
  struct entry *prev, *next;       /* LRU list, most recent first */
} entry_t;

struct tp_exec_cache {
  pthread_mutex_t lock;
  tp_client_t *client;
  entry_t **buckets;
  size_t n_buckets, size, capacity;
  entry_t *head, *tail;
  char *dir;          /* NULL when disabled */
  char *identity;     /* plugin path, size, mtime and API version */
  pthread_mutex_t disk_lock; /* orders this process's threads around the byte counter */
  int64_t disk_max;   /* bytes; 0 = unbounded */
};

static const char kDiskMaxEnv[] = "TORCH_PJRT_CACHE_DISK_MAX_BYTES";
#define TP_DISK_MAX_DEFAULT ((int64_t)1 << 30)
/* The directory's total entry bytes, shared by every process using it (a decimal number,
 * updated under flock at each store, recounted by each scan). */
static const char kCounterName[] = "entry-bytes";
/* A temporary file this old was left by a writer that died before renaming it. */
#define TP_STALE_TMP_SECONDS 3600

static const char kMagic[8] = {'T', 'P', 'X', 'C', '0', '0', '0', '1'};

static char *check_dir(const char *dir, char **out_warning) {
  char buf[1024];
  /* Create each missing component private to the user. */
  snprintf(buf, sizeof(buf), "%s", dir);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    mkdir(buf, 0700);
    *p = '/';
  }
  if (mkdir(buf, 0700) != 0 && errno != EEXIST) {
    snprintf(buf, sizeof(buf), "cannot create cache directory '%s': %s", dir, strerror(errno));
    *out_warning = strdup(buf);
    return NULL;
  }
  struct stat sb;
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    snprintf(buf, sizeof(buf), "cache path '%s' is not a directory", dir);
    *out_warning = strdup(buf);
    return NULL;
  }
  if (sb.st_uid != geteuid()) {
    snprintf(buf, sizeof(buf),
             "refusing cache directory '%s': owned by uid %u, not by this user (uid %u); "
             "it holds executable code",
             dir, (unsigned)sb.st_uid, (unsigned)geteuid());
    *out_warning = strdup(buf);
    return NULL;
  }
  if (sb.st_mode & (S_IWGRP | S_IWOTH)) {
    snprintf(buf, sizeof(buf),
             "refusing cache directory '%s': writable by group or others (mode %03o); "
             "it holds executable code",
             dir, (unsigned)(sb.st_mode & 0777));
    *out_warning = strdup(buf);
    return NULL;
  }
  if (access(dir, R_OK | W_OK | X_OK) != 0) {
    snprintf(buf, sizeof(buf), "cache directory '%s' is not readable and writable: %s", dir,
             strerror(errno));
    *out_warning = strdup(buf);
    return NULL;
  }
  return strdup(dir);
}

/* "<n>[K|M|G][B]" (powers of 1024) -> bytes, or -1 when malformed. */
static int64_t parse_bytes(const char *v) {
  char *end = NULL;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  if (end == v || n < 0 || errno) return -1;
  int64_t mul = 1;
  switch (*end) {
    case 'k': case 'K': mul = (int64_t)1 << 10; end++; break;
    case 'm': case 'M': mul = (int64_t)1 << 20; end++; break;
    case 'g': case 'G': mul = (int64_t)1 << 30; end++; break;
    default: break;
  }
  if (*end == 'b' || *end == 'B') end++;
  if (*end || n > INT64_MAX / mul) return -1;
  return (int64_t)n * mul;
}

tp_status_t *tp_exec_cache_create(tp_client_t *client, const char *disk_dir, size_t capacity,
                                  const char *codegen_id, tp_exec_cache_t **out_cache,
                                  char **out_warning) {
  *out_cache = NULL;
  if (out_warning) *out_warning = NULL;
  tp_exec_cache_t *c = calloc(1, sizeof(*c));
  if (!c) return tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
  pthread_mutex_init(&c->lock, NULL);
  c->client = client;
  tp_client_retain(client);
  c->n_buckets = 4096;
  c->buckets = calloc(c->n_buckets, sizeof(entry_t *));
  c->capacity = capacity ? capacity : 1;
  pthread_mutex_init(&c->disk_lock, NULL);
  c->disk_max = TP_DISK_MAX_DEFAULT;
  char *warning = NULL;
  if (disk_dir && *disk_dir) c->dir = check_dir(disk_dir, &warning);
  const char *max_env = getenv(kDiskMaxEnv);
  if (c->dir && max_env && *max_env) {
    int64_t v = parse_bytes(max_env);
    if (v >= 0) {
      c->disk_max = v;
    } else if (!warning) {
      char buf[512];
      snprintf(buf, sizeof(buf),
               "ignoring %s='%.200s': not a byte count (such as 500M or 2G); the on-disk cache "
               "keeps its default bound of 1G",
               kDiskMaxEnv, max_env);
      warning = strdup(buf);
    }
  }
  if (out_warning) *out_warning = warning;
  else free(warning);
  struct stat sb;
  const char *path = tp_client_plugin_path(client);
  int major, minor;
  tp_client_api_version(client, &major, &minor);
  /* XLA_FLAGS change what the plugin compiles (fast math, fusion choices): a program compiled
   * under other flags is another program. */
  const char *flags = getenv("XLA_FLAGS");
  unsigned long long flags_hash = flags ? tp_hash_bytes(flags, strlen(flags), 0) : 0;
  char id[2400];
  if (stat(path, &sb) == 0)
    snprintf(id, sizeof(id), "%s|%lld|%lld|%d.%d|%s|%s|%llx", path, (long long)sb.st_size,
             (long long)sb.st_mtime, major, minor, tp_client_platform_version(client),
             codegen_id ? codegen_id : "", flags_hash);
  else
    snprintf(id, sizeof(id), "%s|%d.%d|%s|%llx", path, major, minor,
             codegen_id ? codegen_id : "", flags_hash);
  c->identity = strdup(id);
  *out_cache = c;
  return NULL;
}

static void entry_free(entry_t *e) {
  tp_executable_release(e->exe);
  free(e->key);
  free(e);
}

void tp_exec_cache_clear(tp_exec_cache_t *c) {
  pthread_mutex_lock(&c->lock);
  for (entry_t *e = c->head; e;) {
    entry_t *n = e->next;
    entry_free(e);
    e = n;
  }
  memset(c->buckets, 0, c->n_buckets * sizeof(entry_t *));
  c->head = c->tail = NULL;
  c->size = 0;
  pthread_mutex_unlock(&c->lock);
}

void tp_exec_cache_free(tp_exec_cache_t *c) {
  if (!c) return;
  tp_exec_cache_clear(c);
  free(c->buckets);
  free(c->dir);
  free(c->identity);
  tp_client_release(c->client);
  pthread_mutex_destroy(&c->disk_lock);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

size_t tp_exec_cache_size(const tp_exec_cache_t *c) { return c->size; }
const char *tp_exec_cache_dir(const tp_exec_cache_t *c) { return c->dir ? c->dir : ""; }

static void lru_unlink(tp_exec_cache_t *c, entry_t *e) {
  if (e->prev) e->prev->next = e->next; else c->head = e->next;
  if (e->next) e->next->prev = e->prev; else c->tail = e->prev;
  e->prev = e->next = NULL;
}

static void lru_push_front(tp_exec_cache_t *c, entry_t *e) {
  e->next = c->head;
  e->prev = NULL;
  if (c->head) c->head->prev = e;
  c->head = e;
  if (!c->tail) c->tail = e;
}

static void evict_locked(tp_exec_cache_t *c) {
  while (c->size > c->capacity && c->tail) {
    entry_t *e = c->tail;
    lru_unlink(c, e);
    entry_t **pp = &c->buckets[e->hash % c->n_buckets];
    while (*pp && *pp != e) pp = &(*pp)->chain;
    if (*pp) *pp = e->chain;
    c->size--;
    entry_free(e);
  }
}

void tp_exec_cache_set_capacity(tp_exec_cache_t *c, size_t capacity) {
  pthread_mutex_lock(&c->lock);
  c->capacity = capacity ? capacity : 1;
  evict_locked(c);
  pthread_mutex_unlock(&c->lock);
}

static entry_t *find_locked(tp_exec_cache_t *c, const void *key, size_t key_size, uint64_t hash) {
  for (entry_t *e = c->buckets[hash % c->n_buckets]; e; e = e->chain)
    if (e->hash == hash && e->key_size == key_size && memcmp(e->key, key, key_size) == 0)
      return e;
  return NULL;
}

static void insert_locked(tp_exec_cache_t *c, const void *key, size_t key_size, uint64_t hash,
                          tp_executable_t *exe) {
  if (find_locked(c, key, key_size, hash)) return;
  entry_t *e = calloc(1, sizeof(*e));
  if (!e) return;
  e->key = malloc(key_size ? key_size : 1);
  if (!e->key) {
    free(e);
    return;
  }
  memcpy(e->key, key, key_size);
  e->key_size = key_size;
  e->hash = hash;
  e->exe = exe;
  tp_executable_retain(exe);
  e->chain = c->buckets[hash % c->n_buckets];
  c->buckets[hash % c->n_buckets] = e;
  lru_push_front(c, e);
  c->size++;
  evict_locked(c);
}

/* Disk entry: magic | u64 id_size | u64 key_size | u64 payload_size | u64 payload_hash |
 * identity | key | payload. The file name is the hash of identity + key. */
static void entry_path(tp_exec_cache_t *c, const void *key, size_t key_size, char *buf,
                       size_t n) {
  uint64_t h = tp_hash_bytes(c->identity, strlen(c->identity), 0);
  h = tp_hash_bytes(key, key_size, h);
  uint64_t h2 = tp_hash_bytes(key, key_size, h ^ 0x9e3779b97f4a7c15ull);
  snprintf(buf, n, "%s/%016" PRIx64 "%016" PRIx64 ".tpx", c->dir, h, h2);
}

/* ---- the disk bound ---- */

typedef struct {
  struct timespec mtime;
  int64_t size;
  char name[48];
} disk_file_t;

static int older_first(const void *pa, const void *pb) {
  const disk_file_t *a = pa, *b = pb;
  if (a->mtime.tv_sec != b->mtime.tv_sec) return a->mtime.tv_sec < b->mtime.tv_sec ? -1 : 1;
  if (a->mtime.tv_nsec != b->mtime.tv_nsec) return a->mtime.tv_nsec < b->mtime.tv_nsec ? -1 : 1;
  return strcmp(a->name, b->name);
}

/* Counts the directory's entries and, when they exceed the bound, removes the least recently
 * used until 90% of it remains (the slack keeps scans rare); also removes the temporary files
 * of writers that died. Scans are serialized by the counter's flock; a reader holding an
 * unlinked file still reads it whole, and an entry already gone counts as removed. Returns the
 * bytes left, or -1 when the directory cannot be read. */
static int64_t disk_scan(tp_exec_cache_t *c) {
  DIR *d = opendir(c->dir);
  if (!d) return -1;
  int dfd = dirfd(d);
  disk_file_t *files = NULL;
  size_t n = 0, cap = 0;
  int64_t total = 0;
  time_t now = time(NULL);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    size_t len = strlen(de->d_name);
    bool entry = len > 4 && strcmp(de->d_name + len - 4, ".tpx") == 0;
    bool tmp = len > 4 && strcmp(de->d_name + len - 4, ".tmp") == 0;
    struct stat sb;
    if ((!entry && !tmp) || fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(sb.st_mode))
      continue;
    if (tmp) {
      if (now - sb.st_mtime > TP_STALE_TMP_SECONDS) unlinkat(dfd, de->d_name, 0);
      continue;
    }
    total += sb.st_size;
    if (len >= sizeof(files[0].name)) continue; /* not one of ours: counted, never removed */
    if (n == cap) {
      size_t ncap = cap ? cap * 2 : 256;
      disk_file_t *nf = realloc(files, ncap * sizeof(*files));
      if (!nf) break;
      files = nf;
      cap = ncap;
    }
    files[n].mtime = sb.st_mtim;
    files[n].size = sb.st_size;
    memcpy(files[n].name, de->d_name, len + 1);
    n++;
  }
  if (c->disk_max > 0 && total > c->disk_max) {
    qsort(files, n, sizeof(*files), older_first);
    int64_t target = c->disk_max - c->disk_max / 10;
    for (size_t i = 0; i < n && total > target; i++)
      if (unlinkat(dfd, files[i].name, 0) == 0 || errno == ENOENT) total -= files[i].size;
  }
  closedir(d);
  free(files);
  return total;
}

/* Adds |bytes| to the shared counter and enforces the bound: O(1) per store, so a big cache is
 * not rescanned by every process that compiles something. A missing or malformed counter, a
 * count past the bound, or |rescan| recount the directory (evicting if needed) and rewrite it;
 * without a usable counter file every store recounts: slower, still bounded. */
static void disk_account(tp_exec_cache_t *c, int64_t bytes, bool rescan) {
  pthread_mutex_lock(&c->disk_lock);
  if (!c->dir || c->disk_max <= 0) {
    pthread_mutex_unlock(&c->disk_lock);
    return;
  }
  char path[1200];
  snprintf(path, sizeof(path), "%s/%s", c->dir, kCounterName);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd >= 0) flock(fd, LOCK_EX); /* released by close */
  int64_t total = -1;
  char buf[32];
  ssize_t n = fd >= 0 && !rescan ? pread(fd, buf, sizeof(buf) - 1, 0) : -1;
  if (n > 0) {
    buf[n] = 0;
    char *end = NULL;
    long long v = strtoll(buf, &end, 10);
    if (end != buf && (*end == '\n' || *end == 0) && v >= 0) total = (int64_t)v + bytes;
  }
  if (total < 0 || total > c->disk_max) total = disk_scan(c);
  if (fd >= 0) {
    int len = snprintf(buf, sizeof(buf), "%lld\n", (long long)total);
    if (total < 0 || pwrite(fd, buf, (size_t)len, 0) != len || ftruncate(fd, len) != 0)
      (void)!ftruncate(fd, 0); /* unusable: the next store recounts */
    close(fd);
  }
  pthread_mutex_unlock(&c->disk_lock);
}

void tp_exec_cache_set_disk_limit(tp_exec_cache_t *c, int64_t max_bytes) {
  pthread_mutex_lock(&c->disk_lock);
  c->disk_max = max_bytes > 0 ? max_bytes : 0;
  pthread_mutex_unlock(&c->disk_lock);
  disk_account(c, 0, true);
}

int64_t tp_exec_cache_disk_limit(const tp_exec_cache_t *c) { return c->disk_max; }

static tp_executable_t *disk_load(tp_exec_cache_t *c, const void *key, size_t key_size) {
  char path[1200];
  entry_path(c, key, key_size, path, sizeof(path));
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  tp_executable_t *exe = NULL;
  char magic[8];
  uint64_t hdr[4];
  size_t id_size = strlen(c->identity);
  char *buf = NULL;
  if (fread(magic, 1, 8, f) != 8 || memcmp(magic, kMagic, 8) != 0) goto out;
  if (fread(hdr, sizeof(uint64_t), 4, f) != 4) goto out;
  if (hdr[0] != id_size || hdr[1] != key_size || hdr[2] > ((uint64_t)1 << 32)) goto out;
  size_t total = id_size + key_size + hdr[2];
  buf = malloc(total ? total : 1);
  if (!buf || fread(buf, 1, total, f) != total) goto out;
  if (memcmp(buf, c->identity, id_size) != 0 || memcmp(buf + id_size, key, key_size) != 0)
    goto out;
  const char *payload = buf + id_size + key_size;
  if (tp_hash_bytes(payload, hdr[2], 0) != hdr[3]) goto out;
  tp_status_t *st = tp_executable_deserialize(c->client, payload, hdr[2], &exe);
  if (st) {
    tp_status_free(st);
    exe = NULL;
  } else {
    futimens(fileno(f), NULL); /* recently used: the disk bound evicts by mtime */
  }
out:
  free(buf);
  fclose(f);
  return exe;
}

static void disk_store(tp_exec_cache_t *c, const void *key, size_t key_size,
                       tp_executable_t *exe) {
  char *bytes = NULL;
  size_t size = 0;
  tp_status_t *st = tp_executable_serialize(exe, &bytes, &size);
  if (st) {
    tp_status_free(st);
    return;
  }
  char path[1200], tmp[1300];
  entry_path(c, key, key_size, path, sizeof(path));
  snprintf(tmp, sizeof(tmp), "%s.%d.%lx.tmp", path, (int)getpid(), (unsigned long)pthread_self());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    free(bytes);
    return;
  }
  FILE *f = fdopen(fd, "wb");
  size_t id_size = strlen(c->identity);
  uint64_t hdr[4] = {id_size, key_size, size, tp_hash_bytes(bytes, size, 0)};
  int ok = f && fwrite(kMagic, 1, 8, f) == 8 && fwrite(hdr, sizeof(uint64_t), 4, f) == 4 &&
           fwrite(c->identity, 1, id_size, f) == id_size &&
           fwrite(key, 1, key_size, f) == key_size && fwrite(bytes, 1, size, f) == size;
  ok = f && fflush(f) == 0 && ok;
  if (f) fclose(f); else close(fd);
  if (ok && rename(tmp, path) == 0) {
    free(bytes);
    disk_account(c, (int64_t)(sizeof(kMagic) + sizeof(hdr) + id_size + key_size + size), false);
    return;
  }
  unlink(tmp);
  free(bytes);
}

tp_executable_t *tp_exec_cache_lookup(tp_exec_cache_t *c, const void *key, size_t key_size,
                                      uint64_t hash) {
  pthread_mutex_lock(&c->lock);
  entry_t *e = find_locked(c, key, key_size, hash);
  if (e) {
    lru_unlink(c, e);
    lru_push_front(c, e);
    tp_executable_retain(e->exe);
    tp_executable_t *exe = e->exe;
    pthread_mutex_unlock(&c->lock);
    tp_runtime_count_hit(c->client, 0);
    return exe;
  }
  pthread_mutex_unlock(&c->lock);
  if (!c->dir) return NULL;
  int64_t t0 = tp_trace_on() ? tp_trace_now_ns() : 0;
  tp_executable_t *exe = disk_load(c, key, key_size);
  if (!exe) return NULL;
  tp_trace_event_t *traced = tp_trace_begin(TP_TRACE_LOAD, -1, "disk cache");
  if (traced) {
    traced->begin_ns = t0;
    tp_trace_end(traced);
  }
  tp_runtime_count_hit(c->client, 1);
  pthread_mutex_lock(&c->lock);
  insert_locked(c, key, key_size, hash, exe);
  pthread_mutex_unlock(&c->lock);
  return exe;
}

void tp_exec_cache_insert(tp_exec_cache_t *c, const void *key, size_t key_size, uint64_t hash,
                          tp_executable_t *exe) {
  pthread_mutex_lock(&c->lock);
  insert_locked(c, key, key_size, hash, exe);
  pthread_mutex_unlock(&c->lock);
  if (c->dir) disk_store(c, key, key_size, exe);
}
