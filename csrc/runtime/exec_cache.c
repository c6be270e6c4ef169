/* Executable cache: hash table + LRU list in memory; one file per entry on disk. */
#include "runtime/exec_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
};

static const char kMagic[8] = {'T', 'P', 'X', 'C', '0', '0', '0', '1'};

uint64_t tp_hash_bytes(const void *data, size_t size, uint64_t seed) {
  const unsigned char *p = data;
  uint64_t h = 1469598103934665603ull ^ seed;
  for (size_t i = 0; i < size; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

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
  char *warning = NULL;
  if (disk_dir && *disk_dir) c->dir = check_dir(disk_dir, &warning);
  if (out_warning) *out_warning = warning;
  else free(warning);
  struct stat sb;
  const char *path = tp_client_plugin_path(client);
  int major, minor;
  tp_client_api_version(client, &major, &minor);
  char id[2400];
  if (stat(path, &sb) == 0)
    snprintf(id, sizeof(id), "%s|%lld|%lld|%d.%d|%s|%s", path, (long long)sb.st_size,
             (long long)sb.st_mtime, major, minor, tp_client_platform_version(client),
             codegen_id ? codegen_id : "");
  else
    snprintf(id, sizeof(id), "%s|%d.%d|%s", path, major, minor, codegen_id ? codegen_id : "");
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
    tp_runtime_count_hit(0);
    return exe;
  }
  pthread_mutex_unlock(&c->lock);
  if (!c->dir) return NULL;
  tp_executable_t *exe = disk_load(c, key, key_size);
  if (!exe) return NULL;
  tp_runtime_count_hit(1);
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
