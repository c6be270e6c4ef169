/* Eager executor: signature -> cached executable -> one PJRT execute. See eager.h. */
#include "eager/eager.h"
#include "eager/program.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlo/builder.h"
#include "runtime/executable.h"

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

tp_status_t *tp_eager_init(const char *plugin_path, const char *cache_dir, size_t cache_capacity,
                           char **out_warning) {
  if (out_warning) *out_warning = NULL;
  if (g.client) return NULL;
  tp_client_t *client = NULL;
  TP_RETURN_IF_ERROR(tp_client_create(plugin_path, 1, &client));
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

tp_client_t *tp_eager_client(void) { return g.client; }
void tp_eager_lock(void) { pthread_mutex_lock(&g_lock); }
void tp_eager_unlock(void) { pthread_mutex_unlock(&g_lock); }
int tp_eager_blocking(void) { return g.blocking; }
tp_exec_cache_t *tp_eager_cache(void) { return g.cache; }
void tp_eager_set_blocking(int blocking) { g.blocking = blocking; }

/* ---- scalar inputs: small device buffers cached by value ---- */

#define SCALAR_CACHE 512
static struct {
  int device;
  tp_dtype_t dtype;
  uint64_t bits[2]; /* the value's bytes (16: complex128) */
  void *buffer;
  uint64_t call;    /* the last call (tp_eager_scalar_buffer's |call|) that took this buffer */
} g_scalars[SCALAR_CACHE];
static uint64_t g_calls; /* under g_lock */

uint64_t tp_eager_next_call(void) { return ++g_calls; }

/* Host bytes of scalar |a| in |dtype|. */
static void scalar_bytes(const tp_op_arg_t *a, tp_dtype_t dtype, unsigned char *out) {
  bool is_f = tp_dtype_is_float(a->meta.dtype) || tp_dtype_is_complex(a->meta.dtype);
  double f = is_f ? a->f : (double)a->i;
  int64_t i = is_f ? (int64_t)a->f : a->i;
  memset(out, 0, 16);
  switch (dtype) {
    case TP_DTYPE_BOOL: out[0] = is_f ? f != 0 : i != 0; break;
    case TP_DTYPE_U8: out[0] = (uint8_t)i; break;
    case TP_DTYPE_I8: { int8_t v = (int8_t)i; memcpy(out, &v, 1); break; }
    case TP_DTYPE_I16: { int16_t v = (int16_t)i; memcpy(out, &v, 2); break; }
    case TP_DTYPE_I32: { int32_t v = (int32_t)i; memcpy(out, &v, 4); break; }
    case TP_DTYPE_I64: memcpy(out, &i, 8); break;
    case TP_DTYPE_F32: { float v = (float)f; memcpy(out, &v, 4); break; }
    case TP_DTYPE_F64: memcpy(out, &f, 8); break;
    case TP_DTYPE_C64: { /* interleaved (real, imag) */
      float v[2] = {(float)f, tp_dtype_is_complex(a->meta.dtype) ? (float)a->fi : 0.0f};
      memcpy(out, v, 8);
      break;
    }
    case TP_DTYPE_C128: {
      double v[2] = {f, tp_dtype_is_complex(a->meta.dtype) ? a->fi : 0.0};
      memcpy(out, v, 16);
      break;
    }
    case TP_DTYPE_BF16: {
      float v = (float)f;
      uint32_t u;
      memcpy(&u, &v, 4);
      uint16_t h = (v != v) ? 0x7FC0 : (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
      memcpy(out, &h, 2);
      break;
    }
    case TP_DTYPE_F16: {
      _Float16 v = (_Float16)(float)f; /* through float, as PyTorch converts */
      memcpy(out, &v, 2);
      break;
    }
    default: break;
  }
}

tp_hlo_value_t tp_program_scalar_constant(tp_hlo_builder_t *b, const tp_op_arg_t *a) {
  tp_dtype_t dt = a->scalar_dtype;
  bool src_c = tp_dtype_is_complex(a->meta.dtype);
  double re = tp_dtype_is_float(a->meta.dtype) || src_c ? a->f : (double)a->i;
  if (tp_dtype_is_complex(dt)) return tp_hlo_constant_c(b, dt, re, src_c ? a->fi : 0.0);
  if (tp_dtype_is_float(dt)) return tp_hlo_constant(b, dt, re);
  unsigned char bytes[16];
  scalar_bytes(a, dt, bytes);
  int64_t v = 0;
  switch (tp_dtype_size(dt)) { /* sign-extend the narrowed value (u8 and bool stay positive) */
    case 1: v = dt == TP_DTYPE_I8 ? (int64_t)(int8_t)bytes[0] : (int64_t)bytes[0]; break;
    case 2: { int16_t x; memcpy(&x, bytes, 2); v = x; break; }
    case 4: { int32_t x; memcpy(&x, bytes, 4); v = x; break; }
    default: memcpy(&v, bytes, 8); break;
  }
  return tp_hlo_constant_i(b, dt, v);
}

tp_status_t *tp_eager_scalar_buffer(int device, const tp_op_arg_t *a, uint64_t call, void **out,
                                    void **out_owned) {
  *out_owned = NULL;
  unsigned char bytes[16];
  tp_dtype_t dt = a->scalar_dtype;
  scalar_bytes(a, dt, bytes);
  uint64_t bits[2];
  memcpy(bits, bytes, 16);
  unsigned slot = (unsigned)(((bits[0] ^ (bits[1] * 31)) * 0x9E3779B97F4A7C15ull + (uint64_t)dt * 131 + (unsigned)device) >> 55) %
                  SCALAR_CACHE;
  if (g_scalars[slot].buffer && g_scalars[slot].device == device && g_scalars[slot].dtype == dt &&
      g_scalars[slot].bits[0] == bits[0] && g_scalars[slot].bits[1] == bits[1]) {
    g_scalars[slot].call = call;
    *out = g_scalars[slot].buffer;
    return NULL;
  }
  void *buf = NULL;
  TP_RETURN_IF_ERROR(tp_buffer_from_host(g.client, device, bytes, dt, 0, NULL, &buf));
  *out = buf;
  /* Another argument of this call holds the slot's buffer: evicting it now would hand the
   * program a destroyed buffer. This value gets a buffer of its own, the caller's to destroy. */
  if (g_scalars[slot].buffer && g_scalars[slot].call == call) {
    *out_owned = buf;
    return NULL;
  }
  /* An evicted buffer may still feed an enqueued program: PJRT frees its memory only once
   * that use completes (PJRT_Buffer_Destroy acts as PJRT_Buffer_Delete). */
  if (g_scalars[slot].buffer) tp_buffer_destroy(g.client, g_scalars[slot].buffer);
  g_scalars[slot].device = device;
  g_scalars[slot].dtype = dt;
  g_scalars[slot].bits[0] = bits[0];
  g_scalars[slot].bits[1] = bits[1];
  g_scalars[slot].buffer = buf;
  g_scalars[slot].call = call;
  return NULL;
}

/* ---- views ---- */

int64_t tp_view_numel(const tp_view_t *v) {
  int64_t n = 1;
  for (int i = 0; i < v->ndim; i++) n *= v->sizes[i];
  return n;
}

static bool view_contiguous(const tp_view_t *v) {
  int64_t expect = 1;
  for (int i = v->ndim - 1; i >= 0; i--) {
    if (v->sizes[i] != 1 && v->strides[i] != expect) return false;
    expect *= v->sizes[i];
  }
  return true;
}

/* Elements of |dtype| the storage holds. */
int64_t tp_storage_elems(const tp_storage_t *s, tp_dtype_t dtype) {
  return (int64_t)(s->nbytes / tp_dtype_size(dtype));
}

/* True when |v| is the whole storage, dense, in order. */
static bool view_is_whole(const tp_view_t *v) {
  return v->offset == 0 && view_contiguous(v) &&
         (size_t)tp_view_numel(v) * tp_dtype_size(v->dtype) == v->storage->nbytes;
}

tp_status_t *tp_view_check_bounds(const tp_view_t *v) {
  if (tp_view_numel(v) == 0) return NULL;
  int64_t lo = v->offset, hi = v->offset;
  for (int i = 0; i < v->ndim; i++) {
    if (v->strides[i] >= 0) hi += v->strides[i] * (v->sizes[i] - 1);
    else lo += v->strides[i] * (v->sizes[i] - 1);
  }
  if (lo < 0 || hi >= tp_storage_elems(v->storage, v->dtype))
    return tp_make_status(TP_INVALID_ARGUMENT,
                          "view [offset %lld, extent %lld] lies outside its storage of %zu bytes",
                          (long long)v->offset, (long long)(hi - lo + 1), v->storage->nbytes);
  return NULL;
}

void tp_program_key_arg(const tp_op_arg_t *a, bool scalar_value, tp_key_put_fn put, void *key) {
#define KEY_I64(v) do { int64_t x_ = (int64_t)(v); put(key, &x_, 8); } while (0)
  KEY_I64(a->kind);
  switch (a->kind) {
    case TP_ARG_SCALAR:
      KEY_I64(a->scalar_dtype);
      KEY_I64(a->meta.dtype);
      KEY_I64(a->wrapped);
      if (!scalar_value) break;
      if (tp_dtype_is_float(a->meta.dtype)) {
        put(key, &a->f, sizeof(double));
      } else if (tp_dtype_is_complex(a->meta.dtype)) {
        put(key, &a->f, sizeof(double));
        put(key, &a->fi, sizeof(double));
      } else {
        KEY_I64(a->i);
      }
      break;
    case TP_ARG_INT: KEY_I64(a->i); break;
    case TP_ARG_FLOAT: put(key, &a->f, sizeof(double)); break;
    case TP_ARG_STR: put(key, a->s, sizeof(a->s)); break;
    case TP_ARG_INTS:
      KEY_I64(a->n);
      put(key, a->ints, sizeof(int64_t) * (size_t)a->n);
      break;
    default: break;
  }
#undef KEY_I64
}

/* ---- the signature ---- */

typedef struct {
  unsigned char data[8192];
  size_t len;
  bool overflow;
} sig_t;

static void sig_put(sig_t *s, const void *p, size_t n) {
  if (s->len + n > sizeof(s->data)) {
    s->overflow = true;
    return;
  }
  memcpy(s->data + s->len, p, n);
  s->len += n;
}
#define SIG_I64(s, v) do { int64_t x_ = (int64_t)(v); sig_put((s), &x_, 8); } while (0)
static void sig_put_key(void *s, const void *p, size_t n) { sig_put(s, p, n); }

static void sig_view(sig_t *s, const tp_view_t *v) {
  SIG_I64(s, v->dtype);
  SIG_I64(s, v->ndim);
  sig_put(s, v->sizes, sizeof(int64_t) * (size_t)v->ndim);
  sig_put(s, v->strides, sizeof(int64_t) * (size_t)v->ndim);
  SIG_I64(s, v->offset);
}

/* ---- program assembly ---- */

#define MAX_STORAGES (TP_MAX_ARGS + TP_MAX_OUTS)

typedef struct {
  tp_storage_t *storage;
  bool read;       /* an input reads it */
  bool partial;    /* an output writes part of it */
  bool written;
  bool has_buffer; /* else it reads as zeros */
  tp_dtype_t dtype;  /* buffer dtype when has_buffer */
  int64_t numel;
  int param;       /* parameter index, or -1 */
  int output;      /* output index, or -1 */
  tp_dtype_t new_dtype; /* buffer dtype after the program */
  int64_t new_numel;
} slot_t;

typedef struct {
  slot_t slots[MAX_STORAGES];
  int n_slots;
  int arg_slot[TP_MAX_ARGS];
  int out_slot[TP_MAX_OUTS];
  int n_params, n_outputs; /* n_outputs: storages written (the program's first outputs) */
} plan_t;

static int plan_slot(plan_t *p, tp_storage_t *s) {
  for (int i = 0; i < p->n_slots; i++)
    if (p->slots[i].storage == s) return i;
  slot_t *sl = &p->slots[p->n_slots];
  memset(sl, 0, sizeof(*sl));
  sl->storage = s;
  sl->has_buffer = s->buffer != NULL;
  sl->dtype = s->dtype;
  sl->numel = s->numel;
  sl->param = sl->output = -1;
  return p->n_slots++;
}

static tp_dtype_t index_type(int64_t n) { return n < ((int64_t)1 << 31) ? TP_DTYPE_I32 : TP_DTYPE_I64; }

/* The 1-D contents of a storage slot reinterpreted as |dtype|. */
/* XLA's bitcast_convert takes no complex types: a complex array and its storage form (the
 * interleaved parts, 1-D) convert through stablehlo.real/imag/complex. */
tp_hlo_value_t tp_program_to_storage(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  int64_t n = tp_hlo_numel(&x);
  x = tp_hlo_reshape(b, x, 1, &n);
  if (!tp_dtype_is_complex(x.dtype)) return x;
  int64_t col[2] = {n, 1}, n2 = 2 * n;
  tp_hlo_value_t parts[2] = {tp_hlo_reshape(b, tp_hlo_real(b, x), 2, col),
                             tp_hlo_reshape(b, tp_hlo_imag(b, x), 2, col)};
  return tp_hlo_reshape(b, tp_hlo_concatenate(b, parts, 2, 1), 1, &n2);
}

static tp_hlo_value_t parts_to_complex(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  int64_t m = x.dims[0] / 2, one = 1;
  if (2 * m != x.dims[0]) x = tp_hlo_slice(b, x, (int64_t[]){0}, (int64_t[]){2 * m}, &one);
  tp_hlo_value_t pairs = tp_hlo_reshape(b, x, 2, (int64_t[]){m, 2});
  int64_t step[2] = {1, 1};
  tp_hlo_value_t re = tp_hlo_slice(b, pairs, (int64_t[]){0, 0}, (int64_t[]){m, 1}, step);
  tp_hlo_value_t im = tp_hlo_slice(b, pairs, (int64_t[]){0, 1}, (int64_t[]){m, 2}, step);
  return tp_hlo_complex(b, tp_hlo_reshape(b, re, 1, &m), tp_hlo_reshape(b, im, 1, &m));
}

tp_hlo_value_t tp_program_as_dtype(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_dtype_t dtype,
                               int64_t nbytes) {
  if (x.dtype == dtype) return x;
  if (tp_dtype_is_complex(x.dtype)) x = tp_program_to_storage(b, x);
  if (tp_dtype_is_complex(dtype))
    return parts_to_complex(b, tp_program_as_dtype(b, x, tp_dtype_real_part(dtype), nbytes));
  if (x.dtype == dtype) return x;
  if (x.dtype == TP_DTYPE_BOOL) x = tp_hlo_convert(b, x, TP_DTYPE_U8);
  bool to_bool = dtype == TP_DTYPE_BOOL;
  tp_dtype_t target = to_bool ? TP_DTYPE_U8 : dtype;
  if (x.dtype != target) {
    size_t from = tp_dtype_size(x.dtype), to = tp_dtype_size(target);
    int64_t n = x.dims[0];
    if (from == to) {
      x = tp_hlo_bitcast(b, x, target, 1, &n);
    } else if (from > to) {
      int64_t d2[2] = {n, (int64_t)(from / to)}, m = nbytes / (int64_t)to;
      x = tp_hlo_reshape(b, tp_hlo_bitcast(b, x, target, 2, d2), 1, &m);
    } else {
      int64_t r = (int64_t)(to / from), m = n / r, d2[2] = {m, r};
      if (m * r != n) {
        x = tp_hlo_slice(b, x, (int64_t[]){0}, (int64_t[]){m * r}, (int64_t[]){1});
      }
      x = tp_hlo_bitcast(b, tp_hlo_reshape(b, x, 2, d2), target, 1, &m);
    }
  }
  return to_bool ? tp_hlo_convert(b, x, TP_DTYPE_BOOL) : x;
}

tp_hlo_value_t tp_program_storage(tp_hlo_builder_t *b, const tp_hlo_value_t *param,
                                  const tp_storage_t *s, tp_dtype_t dtype) {
  if (param) return tp_program_as_dtype(b, *param, dtype, (int64_t)s->nbytes);
  int64_t n = tp_storage_elems(s, dtype);
  return tp_hlo_broadcast_to(b, tp_hlo_constant(b, dtype, 0), 1, &n);
}

/* Linear element indices of |v| (shape = v's sizes), for gather/scatter. */
static tp_hlo_value_t view_indices(tp_hlo_builder_t *b, const tp_view_t *v, tp_dtype_t it) {
  tp_hlo_value_t idx = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, it, v->offset), v->ndim,
                                           v->sizes);
  for (int d = 0; d < v->ndim; d++) {
    if (v->sizes[d] == 1 || v->strides[d] == 0) continue;
    tp_hlo_value_t io = tp_hlo_iota(b, it, v->ndim, v->sizes, d);
    tp_hlo_value_t st = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, it, v->strides[d]), v->ndim,
                                            v->sizes);
    idx = tp_hlo_binary(b, TP_HLO_ADD, idx, tp_hlo_binary(b, TP_HLO_MUL, io, st));
  }
  return idx;
}

/* Sorts the dims of |v| that matter (size > 1, stride > 0) by decreasing stride; returns their
 * count and whether they are non-overlapping (each stride covers the next dim's extent). */
static int core_dims(const tp_view_t *v, int *order, bool *nonoverlap) {
  int n = 0;
  for (int d = 0; d < v->ndim; d++)
    if (v->sizes[d] > 1 && v->strides[d] > 0) order[n++] = d;
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v->strides[order[j - 1]] < v->strides[order[j]]; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  *nonoverlap = true;
  for (int i = 0; i + 1 < n; i++)
    if (v->strides[order[i]] < v->strides[order[i + 1]] * v->sizes[order[i + 1]])
      *nonoverlap = false;
  return n;
}

/* Reads view |v| out of the 1-D array |x| (already of v's dtype). */
tp_hlo_value_t tp_program_read_view(tp_hlo_builder_t *b, tp_hlo_value_t x, const tp_view_t *v) {
  int64_t numel = tp_view_numel(v);
  int64_t one = 1;
  if (numel == 0) {
    tp_hlo_value_t e = tp_hlo_slice(b, x, (int64_t[]){0}, (int64_t[]){0}, &one);
    return tp_hlo_reshape(b, e, v->ndim, v->sizes);
  }
  if (view_contiguous(v)) {
    int64_t lo = v->offset, hi = v->offset + numel;
    return tp_hlo_reshape(b, tp_hlo_slice(b, x, &lo, &hi, &one), v->ndim, v->sizes);
  }
  int order[TP_MAX_DIMS];
  bool nonoverlap;
  int n = core_dims(v, order, &nonoverlap);
  /* The view with broadcast (stride 0) dims kept at size 1; broadcast at the end. */
  int64_t kept[TP_MAX_DIMS];
  for (int d = 0; d < v->ndim; d++) kept[d] = v->strides[d] == 0 ? 1 : v->sizes[d];
  tp_hlo_value_t core;
  if (nonoverlap && n > 0) {
    /* A strided window: reshape to [size0, stride0], keep the first stride1*size1 of each row,
     * reshape to [size0, size1, stride1], and so on; pad the tail if the window runs past. */
    int64_t s0 = v->strides[order[0]], z0 = v->sizes[order[0]];
    int64_t need = v->offset + s0 * z0;
    if (need > x.dims[0]) {
      int64_t pad = need - x.dims[0];
      tp_hlo_value_t zeros = tp_hlo_broadcast_to(b, tp_hlo_constant(b, x.dtype, 0), 1, &pad);
      tp_hlo_value_t parts[2] = {x, zeros};
      x = tp_hlo_concatenate(b, parts, 2, 0);
    }
    int64_t lo = v->offset, hi = need;
    x = tp_hlo_slice(b, x, &lo, &hi, &one);
    int64_t dims[TP_MAX_DIMS + 1], start[TP_MAX_DIMS + 1] = {0}, limit[TP_MAX_DIMS + 1],
        step[TP_MAX_DIMS + 1];
    for (int k = 0; k < n; k++) {
      /* x is [size_0 .. size_{k-1}, size_k * stride_k]: split the last dim, keep its head. */
      dims[k] = v->sizes[order[k]];
      dims[k + 1] = v->strides[order[k]];
      x = tp_hlo_reshape(b, x, k + 2, dims);
      for (int i = 0; i < k + 2; i++) {
        limit[i] = dims[i];
        step[i] = 1;
      }
      limit[k + 1] = k + 1 < n ? v->strides[order[k + 1]] * v->sizes[order[k + 1]] : 1;
      x = tp_hlo_slice(b, x, start, limit, step);
    }
    /* Now [size_0, ..., size_{n-1}, 1]. */
    int64_t cs[TP_MAX_DIMS];
    for (int k = 0; k < n; k++) cs[k] = v->sizes[order[k]];
    x = tp_hlo_reshape(b, x, n, cs);
    /* Put core dims back in view order. */
    int64_t perm[TP_MAX_DIMS];
    int m = 0;
    for (int d = 0; d < v->ndim; d++)
      for (int k = 0; k < n; k++)
        if (order[k] == d) perm[m++] = k;
    core = tp_hlo_transpose(b, x, perm);
    core = tp_hlo_reshape(b, core, v->ndim, kept);
  } else if (n == 0) {
    int64_t lo = v->offset, hi = v->offset + 1;
    core = tp_hlo_reshape(b, tp_hlo_slice(b, x, &lo, &hi, &one), v->ndim, kept);
  } else {
    tp_view_t kv = *v;
    for (int d = 0; d < v->ndim; d++) kv.sizes[d] = kept[d];
    core = tp_hlo_gather_1d(b, x, view_indices(b, &kv, index_type(x.dims[0])));
  }
  return tp_hlo_broadcast_in_dim(b, core, v->ndim, v->sizes,
                                 (int64_t[]){0, 1, 2, 3, 4, 5, 6, 7});
}

/* Writes |value| (v's sizes and dtype) into the 1-D array |x| of v's dtype at view |v|. */
static tp_hlo_value_t write_view(tp_hlo_builder_t *b, tp_hlo_value_t x, const tp_view_t *v,
                                 tp_hlo_value_t value) {
  int64_t numel = tp_view_numel(v);
  if (numel == 0) return x;
  if (view_contiguous(v)) {
    tp_hlo_value_t flat = tp_hlo_reshape(b, value, 1, &numel);
    return tp_hlo_update_slice(b, x, flat, &v->offset);
  }
  tp_hlo_value_t idx = view_indices(b, v, index_type(x.dims[0]));
  return tp_hlo_scatter_1d(b, x, idx, value);
}

tp_status_t *tp_eager_builder_create(tp_hlo_builder_t **out_builder) {
  TP_RETURN_IF_ERROR(tp_hlo_builder_create(out_builder));
  tp_hlo_builder_set_xla_cpu(*out_builder,
                             g.client && strcmp(tp_client_platform_name(g.client), "cpu") == 0);
  return NULL;
}

static tp_status_t *build_program(const tp_op_def_t *op, const tp_eager_arg_t *args, int n_args,
                                  const tp_meta_t *out_metas, const tp_view_t *outs, int n_out,
                                  const plan_t *p, char **out_text) {
  tp_hlo_builder_t *b = NULL;
  TP_RETURN_IF_ERROR(tp_eager_builder_create(&b));
  /* Parameters: storages first (in slot order), then scalars (in argument order). */
  tp_hlo_value_t arrays[MAX_STORAGES];
  for (int i = 0; i < p->n_slots; i++) {
    const slot_t *sl = &p->slots[i];
    if (sl->param >= 0) arrays[i] = tp_hlo_param(b, sl->dtype, 1, &sl->numel, sl->output);
  }
  tp_op_arg_t op_args[TP_MAX_ARGS];
  tp_hlo_value_t in[TP_MAX_ARGS];
  memset(in, 0, sizeof(in));
  for (int i = 0; i < n_args; i++) {
    const tp_eager_arg_t *a = &args[i];
    op_args[i] = a->arg;
    if (a->arg.kind == TP_ARG_SCALAR) {
      in[i] = tp_hlo_param(b, a->arg.scalar_dtype, 0, NULL, -1);
    } else if (a->arg.kind == TP_ARG_TENSOR) {
      const slot_t *sl = &p->slots[p->arg_slot[i]];
      in[i] = tp_program_read_view(
          b, tp_program_storage(b, sl->has_buffer ? &arrays[p->arg_slot[i]] : NULL, sl->storage,
                                a->view.dtype),
          &a->view);
    }
  }
  tp_hlo_value_t results[TP_MAX_OUTS];
  op->emit(op, b, op_args, n_args, in, out_metas, results);
  /* Write each result into its storage's new contents. */
  tp_hlo_value_t next[MAX_STORAGES];
  bool started[MAX_STORAGES] = {false};
  for (int k = 0; k < n_out; k++) {
    int si = p->out_slot[k];
    const slot_t *sl = &p->slots[si];
    const tp_view_t *v = &outs[k];
    tp_hlo_value_t val = tp_hlo_convert(b, results[k], v->dtype);
    if (!sl->partial) {
      next[si] = tp_program_to_storage(b, val);
      started[si] = true;
      continue;
    }
    if (!started[si]) {
      next[si] = tp_program_storage(b, sl->has_buffer ? &arrays[si] : NULL, sl->storage, v->dtype);
      started[si] = true;
    }
    next[si] = write_view(b, tp_program_as_dtype(b, next[si], v->dtype, (int64_t)sl->storage->nbytes), v, val);
  }
  tp_hlo_value_t results_out[MAX_STORAGES + 1];
  int n_results = 0;
  for (int i = 0; i < p->n_slots; i++)
    if (p->slots[i].output >= 0)
      results_out[p->slots[i].output] = tp_program_to_storage(b, next[i]), n_results++;
  if (tp_hlo_check_flag(b, &results_out[n_results])) n_results++; /* last: the index check */
  tp_status_t *st = tp_hlo_finish(b, results_out, n_results, out_text);
  tp_hlo_builder_free(b);
  return st;
}

/* Plans a call: which storages are parameters and outputs, and the signature. */
static tp_status_t *plan_call(int op, const tp_eager_arg_t *args, int n_args,
                              const tp_meta_t *out_metas, const tp_view_t *outs, int n_out,
                              plan_t *p, sig_t *sig) {
  memset(p, 0, sizeof(*p));
  for (int i = 0; i < n_args; i++) {
    p->arg_slot[i] = -1;
    if (args[i].arg.kind != TP_ARG_TENSOR) continue;
    TP_RETURN_IF_ERROR(tp_view_check_bounds(&args[i].view));
    int si = plan_slot(p, args[i].view.storage);
    p->arg_slot[i] = si;
    p->slots[si].read = true;
  }
  for (int k = 0; k < n_out; k++) {
    TP_RETURN_IF_ERROR(tp_view_check_bounds(&outs[k]));
    int si = plan_slot(p, outs[k].storage);
    slot_t *sl = &p->slots[si];
    p->out_slot[k] = si;
    if (sl->written || !view_is_whole(&outs[k])) sl->partial = true;
    sl->written = true;
    sl->new_dtype = tp_dtype_storage(outs[k].dtype);
    sl->new_numel = tp_storage_elems(sl->storage, sl->new_dtype);
    if ((size_t)tp_storage_elems(sl->storage, outs[k].dtype) * tp_dtype_size(outs[k].dtype) !=
        sl->storage->nbytes)
      return tp_make_status(TP_UNIMPLEMENTED,
                            "writing %s elements into a storage of %zu bytes (not a multiple)",
                            tp_dtype_name(outs[k].dtype), sl->storage->nbytes);
  }
  for (int i = 0; i < p->n_slots; i++) {
    slot_t *sl = &p->slots[i];
    if (sl->has_buffer && (sl->read || sl->partial)) sl->param = p->n_params++;
    if (sl->written) sl->output = p->n_outputs++;
  }
  sig->len = 0;
  sig->overflow = false;
  SIG_I64(sig, op);
  SIG_I64(sig, n_args);
  SIG_I64(sig, n_out);
  for (int i = 0; i < p->n_slots; i++) {
    const slot_t *sl = &p->slots[i];
    SIG_I64(sig, sl->has_buffer ? sl->dtype : -1);
    SIG_I64(sig, sl->has_buffer ? sl->numel : (int64_t)sl->storage->nbytes);
    SIG_I64(sig, sl->param);
    SIG_I64(sig, sl->output);
    SIG_I64(sig, sl->partial);
  }
  for (int i = 0; i < n_args; i++) {
    /* A scalar's value is an input of the program, not part of it. */
    tp_program_key_arg(&args[i].arg, false, sig_put_key, sig);
    if (args[i].arg.kind == TP_ARG_TENSOR) {
      SIG_I64(sig, p->arg_slot[i]);
      sig_view(sig, &args[i].view);
    }
  }
  for (int k = 0; k < n_out; k++) {
    SIG_I64(sig, p->out_slot[k]);
    SIG_I64(sig, out_metas[k].dtype);
    sig_view(sig, &outs[k]);
  }
  if (sig->overflow) return tp_make_status(TP_UNIMPLEMENTED, "call signature too large");
  return NULL;
}

tp_status_t *tp_eager_infer(int op, tp_eager_arg_t *args, int n_args, tp_meta_t *out_metas,
                            int *n_out) {
  if (op < 0 || op >= tp_op_count) return tp_make_status(TP_INVALID_ARGUMENT, "bad op %d", op);
  if (n_args > TP_MAX_ARGS)
    return tp_make_status(TP_UNIMPLEMENTED, "%s: too many arguments", tp_op_table[op].name);
  tp_op_arg_t a[TP_MAX_ARGS];
  for (int i = 0; i < n_args; i++) {
    a[i] = args[i].arg;
    if (a[i].kind == TP_ARG_SCALAR && a[i].scalar_dtype == TP_DTYPE_INVALID)
      a[i].scalar_dtype = a[i].meta.dtype;
  }
  *n_out = 0;
  memset(out_metas, 0, sizeof(tp_meta_t) * TP_MAX_OUTS); /* infer fills only what it knows */
  const tp_op_def_t *d = &tp_op_table[op];
  TP_RETURN_IF_ERROR(tp_op_check_complex(d, a, n_args, NULL, 0));
  TP_RETURN_IF_ERROR(d->infer(d, a, n_args, out_metas, n_out));
  TP_RETURN_IF_ERROR(tp_op_check_complex(d, NULL, 0, out_metas, *n_out));
  for (int i = 0; i < n_args; i++) args[i].arg = a[i]; /* infer may refine arguments */
  return NULL;
}

static tp_status_t *run_locked(int op, tp_eager_arg_t *args, int n_args,
                               const tp_meta_t *out_metas, const tp_view_t *outs, int n_out) {
  if (!g.client) return tp_make_status(TP_FAILED_PRECONDITION, "the tpu runtime is not initialized");
  const tp_op_def_t *d = &tp_op_table[op];
  int device = -1;
  for (int i = 0; i < n_args; i++)
    if (args[i].arg.kind == TP_ARG_TENSOR) {
      int dv = args[i].view.storage->device;
      if (device >= 0 && dv != device)
        return tp_make_status(TP_INVALID_ARGUMENT,
                              "%s: expected all tensors to be on the same device, but found at "
                              "least two devices, tpu:%d and tpu:%d",
                              d->name, device, dv);
      device = dv;
    }
  for (int k = 0; k < n_out; k++) {
    if (device >= 0 && outs[k].storage->device != device)
      return tp_make_status(TP_INVALID_ARGUMENT, "%s: output on tpu:%d, inputs on tpu:%d",
                            d->name, outs[k].storage->device, device);
    device = outs[k].storage->device;
  }
  static plan_t p;
  static sig_t sig;
  TP_RETURN_IF_ERROR(plan_call(op, args, n_args, out_metas, outs, n_out, &p, &sig));
  uint64_t hash = tp_hash_bytes(sig.data, sig.len, 0);
  tp_executable_t *exe = tp_exec_cache_lookup(g.cache, sig.data, sig.len, hash);
  if (!exe) {
    char *text = NULL;
    TP_RETURN_IF_ERROR(build_program(d, args, n_args, out_metas, outs, n_out, &p, &text));
    tp_status_t *st = tp_executable_compile(g.client, text, strlen(text), &exe);
    if (st) {
      if (getenv("TORCH_PJRT_DUMP_ON_ERROR")) fprintf(stderr, "%s\n", text);
      free(text);
      return tp_status_annotate(st, "compiling %s", d->name);
    }
    free(text);
    tp_exec_cache_insert(g.cache, sig.data, sig.len, hash, exe);
  }
  void *inputs[MAX_STORAGES + TP_MAX_ARGS];
  int n_in = 0;
  for (int i = 0; i < p.n_slots; i++)
    if (p.slots[i].param >= 0) inputs[n_in++] = p.slots[i].storage->buffer;
  tp_status_t *st = NULL;
  uint64_t call = tp_eager_next_call();
  void *owned[TP_MAX_ARGS];
  int n_owned = 0;
  for (int i = 0; i < n_args && !st; i++)
    if (args[i].arg.kind == TP_ARG_SCALAR) {
      st = tp_eager_scalar_buffer(device < 0 ? 0 : device, &args[i].arg, call, &inputs[n_in++],
                                  &owned[n_owned]);
      if (!st && owned[n_owned]) n_owned++;
    }
  void *results[MAX_STORAGES + 1] = {NULL};
  /* An output past the storages' is the program's index check (see build_program). */
  if (!st)
    st = tp_executable_execute(exe, device < 0 ? 0 : device, inputs, (size_t)n_in, NULL, 0,
                               results, d->name, g.blocking, p.n_outputs);
  tp_executable_release(exe);
  for (int i = 0; i < n_owned; i++) tp_buffer_destroy(g.client, owned[i]);
  if (st) {
    /* A failed execution may already have consumed donated buffers: forget them rather than
     * leave a storage pointing at a dead buffer. */
    for (int i = 0; i < p.n_slots; i++)
      if (p.slots[i].param >= 0 && p.slots[i].output >= 0 && results[p.slots[i].output])
        tp_storage_set_buffer(p.slots[i].storage, results[p.slots[i].output],
                              p.slots[i].new_dtype, p.slots[i].new_numel);
    return st;
  }
  for (int i = 0; i < p.n_slots; i++) {
    slot_t *sl = &p.slots[i];
    if (sl->output >= 0)
      tp_storage_set_buffer(sl->storage, results[sl->output], sl->new_dtype, sl->new_numel);
  }
  return NULL;
}

tp_status_t *tp_eager_run(int op, tp_eager_arg_t *args, int n_args, const tp_meta_t *out_metas,
                          const tp_view_t *outs, int n_out) {
  if (op < 0 || op >= tp_op_count) return tp_make_status(TP_INVALID_ARGUMENT, "bad op %d", op);
  if (n_args > TP_MAX_ARGS || n_out > TP_MAX_OUTS)
    return tp_make_status(TP_UNIMPLEMENTED, "too many arguments");
  for (int k = 0; k < n_out; k++) {
    if (outs[k].ndim != out_metas[k].ndim ||
        memcmp(outs[k].sizes, out_metas[k].sizes, sizeof(int64_t) * (size_t)outs[k].ndim) != 0)
      return tp_make_status(TP_INVALID_ARGUMENT,
                            "%s: output with %d dims doesn't match the broadcast shape of %d dims",
                            tp_op_table[op].name, outs[k].ndim, out_metas[k].ndim);
    if (!tp_dtype_can_cast(out_metas[k].dtype, outs[k].dtype))
      return tp_make_status(TP_INVALID_ARGUMENT,
                            "result type %s can't be cast to the desired output type %s",
                            tp_dtype_name(out_metas[k].dtype), tp_dtype_name(outs[k].dtype));
  }
  pthread_mutex_lock(&g_lock);
  tp_status_t *st = run_locked(op, args, n_args, out_metas, outs, n_out);
  pthread_mutex_unlock(&g_lock);
  return st;
}

static int copy_op(void) {
  static int id = -2;
  if (id == -2) id = tp_op_lookup("copy", NULL);
  return id;
}

static void tensor_arg(tp_eager_arg_t *a, const tp_view_t *v) {
  memset(a, 0, sizeof(*a));
  a->arg.kind = TP_ARG_TENSOR;
  a->arg.meta.dtype = v->dtype;
  a->arg.meta.ndim = v->ndim;
  memcpy(a->arg.meta.sizes, v->sizes, sizeof(int64_t) * (size_t)v->ndim);
  a->view = *v;
}

tp_status_t *tp_eager_copy_bits(const tp_view_t *dst, const tp_view_t *src, bool conj, bool neg) {
  /* copy(self, src, non_blocking) and the copy row's own conj/neg attributes. */
  tp_eager_arg_t args[5];
  int n = conj || neg ? 5 : 2;
  tensor_arg(&args[0], dst);
  tensor_arg(&args[1], src);
  for (int i = 2; i < 5; i++) {
    memset(&args[i], 0, sizeof(args[i]));
    args[i].arg.kind = TP_ARG_INT;
  }
  args[3].arg.i = conj;
  args[4].arg.i = neg;
  tp_meta_t meta[TP_MAX_OUTS];
  int n_out = 0;
  TP_RETURN_IF_ERROR(tp_eager_infer(copy_op(), args, n, meta, &n_out));
  return tp_eager_run(copy_op(), args, n, meta, dst, 1);
}

tp_status_t *tp_eager_copy(const tp_view_t *dst, const tp_view_t *src) {
  return tp_eager_copy_bits(dst, src, false, false);
}

/* A contiguous view over all of a fresh storage of |numel| elements. */
static tp_status_t *temp_storage(int device, tp_dtype_t dtype, const tp_view_t *shape_of,
                                 tp_storage_t **out_s, tp_view_t *out_v) {
  int64_t numel = tp_view_numel(shape_of);
  TP_RETURN_IF_ERROR(tp_storage_create(g.client, device, (size_t)numel * tp_dtype_size(dtype), out_s));
  memset(out_v, 0, sizeof(*out_v));
  out_v->storage = *out_s;
  out_v->dtype = dtype;
  out_v->ndim = shape_of->ndim;
  int64_t st = 1;
  for (int d = shape_of->ndim - 1; d >= 0; d--) {
    out_v->sizes[d] = shape_of->sizes[d];
    out_v->strides[d] = st;
    st *= shape_of->sizes[d] > 0 ? shape_of->sizes[d] : 1;
  }
  return NULL;
}

tp_status_t *tp_eager_copy_from_host(const tp_view_t *dst, const void *data) {
  if (!g.client) return tp_make_status(TP_FAILED_PRECONDITION, "the tpu runtime is not initialized");
  TP_RETURN_IF_ERROR(tp_view_check_bounds(dst));
  int64_t numel = tp_view_numel(dst);
  if (view_is_whole(dst)) {
    void *buf = NULL;
    tp_dtype_t sdt = tp_dtype_storage(dst->dtype); /* complex: its parts, interleaved */
    numel *= (int64_t)(tp_dtype_size(dst->dtype) / tp_dtype_size(sdt));
    TP_RETURN_IF_ERROR(tp_buffer_from_host(g.client, dst->storage->device, data, sdt, 1,
                                           &numel, &buf));
    pthread_mutex_lock(&g_lock);
    tp_storage_set_buffer(dst->storage, buf, sdt, numel);
    pthread_mutex_unlock(&g_lock);
    return NULL;
  }
  tp_storage_t *tmp = NULL;
  tp_view_t tv;
  TP_RETURN_IF_ERROR(temp_storage(dst->storage->device, dst->dtype, dst, &tmp, &tv));
  tp_status_t *st = tp_eager_copy_from_host(&tv, data);
  if (!st) st = tp_eager_copy(dst, &tv);
  tp_storage_release(tmp);
  return st;
}

tp_status_t *tp_eager_copy_to_host(const tp_view_t *src, void *data) {
  if (!g.client) return tp_make_status(TP_FAILED_PRECONDITION, "the tpu runtime is not initialized");
  TP_RETURN_IF_ERROR(tp_view_check_bounds(src));
  size_t nbytes = (size_t)tp_view_numel(src) * tp_dtype_size(src->dtype);
  /* The lock keeps another thread from donating the buffer while it is read. */
  pthread_mutex_lock(&g_lock);
  void *buf = src->storage->buffer;
  bool direct = view_is_whole(src) && (!buf || src->storage->dtype == tp_dtype_storage(src->dtype));
  if (direct) {
    tp_status_t *st = NULL;
    if (!buf) memset(data, 0, nbytes);
    else st = tp_status_annotate(tp_buffer_to_host(g.client, buf, data, nbytes), "reading tpu tensor");
    pthread_mutex_unlock(&g_lock);
    return st;
  }
  pthread_mutex_unlock(&g_lock);
  tp_storage_t *tmp = NULL;
  tp_view_t tv;
  TP_RETURN_IF_ERROR(temp_storage(src->storage->device, src->dtype, src, &tmp, &tv));
  tp_status_t *st = tp_eager_copy(&tv, src);
  if (!st) st = tp_eager_copy_to_host(&tv, data);
  tp_storage_release(tmp);
  return st;
}
