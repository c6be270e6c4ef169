/* Shape buckets in eager mode. See bucket.h. */
#include "exec/bucket.h"

#include <math.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>

#include "exec/exec.h"
#include "exec/key.h"
#include "exec/program.h"
#include "exec/scalars.h"

/* ---- the policy ---- */

#define MAX_LIST 32
static struct {
  bool off;
  int64_t floor; /* pow2: the smallest bucket */
  int n;         /* list: its sizes, ascending */
  int64_t list[MAX_LIST];
} g_policy;

/* Parsed once, whichever thread asks first (pthread_once: no caller sees a half-read policy,
 * such as floor 0, which would make tp_bucket_size spin). */
static void parse_policy(void) {
  g_policy.floor = 16;
  const char *v = getenv("TORCH_PJRT_SHAPE_BUCKETS");
  if (!v || !*v || strcmp(v, "pow2") == 0) return;
  if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0 || strcmp(v, "exact") == 0) {
    g_policy.off = true;
    return;
  }
  if (strncmp(v, "pow2:", 5) == 0) {
    long long f = atoll(v + 5);
    g_policy.floor = f > 1 ? f : 1;
    return;
  }
  /* A list: ascending sizes; anything unparsable turns buckets off rather than guess. */
  const char *p = v;
  while (*p && g_policy.n < MAX_LIST) {
    char *end = NULL;
    long long s = strtoll(p, &end, 10);
    if (end == p || s < 1 || (g_policy.n && s <= g_policy.list[g_policy.n - 1])) {
      g_policy.off = true;
      return;
    }
    g_policy.list[g_policy.n++] = s;
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') {
      g_policy.off = true;
      return;
    }
  }
  g_policy.floor = 1;
}

static void read_policy(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, parse_policy);
}

bool tp_bucket_enabled(void) {
  read_policy();
  return !g_policy.off;
}

int64_t tp_bucket_size(int64_t size) {
  read_policy();
  if (g_policy.off || size <= 1) return size;
  for (int i = 0; i < g_policy.n; i++)
    if (size <= g_policy.list[i]) return g_policy.list[i];
  int64_t b = g_policy.floor;
  while (b < size) b *= 2;
  return b;
}

static _Thread_local bool t_paused;
bool tp_bucket_pause(bool paused) {
  bool was = t_paused;
  t_paused = paused;
  return was;
}

static int64_t g_calls, g_compiles;
int64_t tp_bucket_calls(void) { return g_calls; }
int64_t tp_bucket_compiles(void) { return g_compiles; }
void tp_bucket_reset_stats(void) { g_calls = g_compiles = 0; }

/* ---- which dims vary: per site, the sizes it first ran with ----
 * A site is a kind of call (its op, argument dtypes and ranks, non-tensor arguments: everything
 * but sizes) on one device, in the context of the kinds of the CONTEXT calls just before it, and
 * of its place in a run of calls of its own kind. Eager mode has no call sites, but a model's
 * forward runs the same sequence of kinds whatever the sequence length, so the context tells
 * apart, say, the attention's input projection from its output projection, and the place in a
 * run an optimizer's update of each parameter: each keeps its own sizes, and only a dim that
 * changes at one site is padded there.
 * Evidence, not suspicion: a site remembers the signatures (sizes and places) it has met, up to
 * SEEN, and which of them ran exactly. A new signature at a site runs the bucket's program; one
 * that ran exactly runs so again. A site settles when its first signature comes round again
 * with no new one since: its calls repeat (a fixed-shape training step whose sites still
 * collide), so each signature it meets from then on runs exactly, compiling its exact program
 * once; after one pass such a loop runs exact programs only. (A loop that began with other
 * sizes, a first call on a test batch, never meets its first signature again: it stays
 * bucketed. Calls repeating within a pass are no evidence: the layers of a model share sites,
 * and repeat a new prompt length of generate's as they repeat a fixed loop's.) A site that has
 * met more than SEEN signatures varies for real (generate's growing lengths, a sweep over prompt
 * lengths) and never settles: its sizes must not each compile exactly (at SEEN 8, a second
 * sweep over 8 prompt lengths compiled each prefill exactly). */

/* g_sites, and every site in it, is read and written under the executor lock (tp_bucket_run's
 * callers hold it); the context (g_recent, g_run) is per thread. */
#define SITES 4096
#define PROBES 32 /* slots a site may lie from its hash's: past them the table counts as full (a
                     full table probed to its end cost every call microseconds) */
#define SEEN 4
typedef struct {
  uint64_t hash; /* 0: empty */
  int n;         /* tensor dims of the call, all arguments and outputs */
  int64_t *first; /* the first sizes (arguments', then outputs'), then per tensor argument its
                     first offset and buffer */
  uint32_t *varying; /* per argument, a bit per dim */
  uint32_t varying_out[TP_MAX_OUTS]; /* per output, a bit per dim */
  bool moved; /* a view's offset or its storage's buffer length has changed here */
  uint64_t seen[SEEN]; /* the signatures met here, the first first */
  uint32_t ran_exact; /* a bit per seen signature */
  int n_seen;
  bool many;    /* more than SEEN met */
  bool settled; /* seen[0] has come round again, and no new signature since */
} site_t;

/* Where a tensor argument lies, beyond its sizes: its offset and its storage's buffer length
 * (what an exact program's key holds: a view at a new offset, or of a longer storage, compiles
 * anew). A slice of a growing tensor (the last token of the ids) moves at every step. */
static void lie(const tp_view_t *v, int64_t *out) {
  out[0] = v->offset;
  out[1] = tp_storage_buffer(v->storage) ? tp_storage_buffer_numel(v->storage)
                                         : (int64_t)tp_storage_nbytes(v->storage);
}
static site_t g_sites[SITES];

/* The call's kind: everything but its tensors' sizes, strides and offsets; save a parameter's
 * sizes. Those never vary where a loop's shapes do (a sweep's lengths, generate's cache), and
 * they tell apart the stages of a model whose calls are alike but for their widths (a CNN's
 * stages, LeViT's): there a site would meet every stage's sizes in each pass, more than SEEN,
 * and run bucketed (gathers, padding) for good. */
static uint64_t kind_hash(int op, const tp_eager_arg_t *args, int n_args, const tp_view_t *outs,
                          int n_out, bool *out_param) {
  static tp_key_t k;
  k.len = 0;
  *out_param = false;
  tp_key_put_i64(&k, op);
  tp_key_put_i64(&k, n_args);
  for (int i = 0; i < n_args; i++) {
    tp_key_put_arg(&k, &args[i].arg, false);
    if (args[i].arg.kind == TP_ARG_TENSOR) {
      tp_key_put_i64(&k, args[i].view.dtype);
      tp_key_put_i64(&k, args[i].view.ndim);
      if (args[i].param) { /* a parameter's sizes: which stage of a model this is */
        tp_key_put(&k, args[i].view.sizes, sizeof(int64_t) * (size_t)args[i].view.ndim);
        *out_param = true;
      }
    }
  }
  for (int j = 0; j < n_out; j++) {
    tp_key_put_i64(&k, outs[j].dtype);
    tp_key_put_i64(&k, outs[j].ndim);
  }
  if (k.failed) return 0;
  return tp_hash_bytes(k.data, k.len, 0x6275636b) | 1;
}

#define CONTEXT 2
/* The kinds of the last calls on this thread, newest first (autograd runs the backward on a
 * thread of its own: each thread repeats its own sequence), how many calls in a row before
 * this one had the newest kind, and the kind of the last call that read a parameter, for the
 * STAGE_SPAN calls after it: the stage they are in (an attention's matmuls and softmax, a few
 * calls from its projections, tell one stage's widths from another's by it). Forgotten after
 * that, so calls far from any parameter (a script's first calls, and the same calls in its next
 * pass, after the last pass's parameters) meet the same sites in every pass. */
#define STAGE_SPAN 16
#define RUN_CAP 256
static _Thread_local uint64_t g_recent[CONTEXT];
static _Thread_local uint64_t g_run;
static _Thread_local uint64_t g_stage;
static _Thread_local int64_t g_since;

/* The site of a call of kind |kind| (|param|: it reads a parameter); then |kind| becomes the
 * newest of the context. */
static uint64_t site_of(uint64_t kind, bool param) {
  /* Places in a run past RUN_CAP share a site: a loop around one op would make each call a new
   * site, filling the table. */
  g_run = kind == g_recent[0] ? (g_run < RUN_CAP ? g_run + 1 : RUN_CAP) : 0;
  if (param) g_stage = kind, g_since = 0;
  else if (++g_since > STAGE_SPAN) g_stage = 0;
  /* Multiplied before each mix: a call after one of its own kind must not cancel out (k ^ k). */
  uint64_t h = (kind * 0x100000001b3ull) ^ g_stage;
  for (int i = 0; i < CONTEXT; i++) h = (h * 0x100000001b3ull) ^ g_recent[i];
  h = (h * 0x100000001b3ull) ^ g_run;
  h *= 0x100000001b3ull;
  memmove(&g_recent[1], &g_recent[0], sizeof(uint64_t) * (CONTEXT - 1));
  g_recent[0] = kind;
  return h | 1;
}

/* A call's signature: its tensors' sizes and (arguments) places. */
static uint64_t signature(const tp_eager_arg_t *args, int n_args, const tp_meta_t *outs,
                          int n_out) {
  uint64_t h = 0xcbf29ce484222325ull;
#define TP_MIX(v) (h = (h ^ (uint64_t)(v)) * 0x100000001b3ull)
  for (int a = 0; a < n_args; a++) {
    if (args[a].arg.kind != TP_ARG_TENSOR) continue;
    for (int d = 0; d < args[a].view.ndim; d++) TP_MIX(args[a].view.sizes[d]);
    /* Its offset and its storage's own length, not its buffer's: a buffer is longer when the
     * call that made it ran bucketed, and the call must be the same signature whichever way its
     * producer ran, else each pass of a loop would meet anew the calls after those that turned
     * exact in the pass before (a chain a model's depth long). */
    TP_MIX(args[a].view.offset);
    TP_MIX((int64_t)tp_storage_nbytes(args[a].view.storage));
  }
  for (int k = 0; k < n_out; k++)
    for (int d = 0; d < outs[k].ndim; d++) TP_MIX(outs[k].sizes[d]);
#undef TP_MIX
  return h;
}

/* Records the call's sizes under its site |h| and fills |padded| (per argument, the dims whose
 * size has changed there) and, for a row whose outputs pad of their own (|pads_outputs|),
 * |padded_out| (the same per output); false when none has, when the sizes are the site's first
 * (whose exact program exists), or when the table of sites is full. */
static bool observe(uint64_t h, const tp_eager_arg_t *args, int n_args, const tp_meta_t *outs,
                    int n_out, bool pads_outputs, uint32_t *padded, uint32_t *padded_out) {
  memset(padded, 0, sizeof(uint32_t) * (size_t)n_args);
  memset(padded_out, 0, sizeof(uint32_t) * (size_t)n_out);
  int n = 0, nt = 0;
  for (int i = 0; i < n_args; i++)
    if (args[i].arg.kind == TP_ARG_TENSOR) n += args[i].view.ndim, nt++;
  for (int k = 0; k < n_out; k++) n += outs[k].ndim;
  site_t *kd = NULL;
  for (size_t i = 0; i < PROBES; i++) {
    site_t *s = &g_sites[(h + i) % SITES];
    if (s->hash == h) {
      kd = s;
      break;
    }
    if (s->hash == 0) {
      s->first = malloc(sizeof(int64_t) * (size_t)(n + 2 * nt + 1));
      s->varying = calloc((size_t)n_args, sizeof(uint32_t));
      if (!s->first || !s->varying) {
        free(s->first), free(s->varying);
        s->first = NULL, s->varying = NULL;
        return false;
      }
      s->hash = h;
      s->n = n;
      int at = 0, lt = n;
      for (int a = 0; a < n_args; a++)
        if (args[a].arg.kind == TP_ARG_TENSOR) {
          for (int d = 0; d < args[a].view.ndim; d++) s->first[at++] = args[a].view.sizes[d];
          lie(&args[a].view, &s->first[lt]);
          lt += 2;
        }
      for (int k = 0; k < n_out; k++)
        for (int d = 0; d < outs[k].ndim; d++) s->first[at++] = outs[k].sizes[d];
      s->seen[0] = signature(args, n_args, outs, n_out);
      s->n_seen = 1;
      s->ran_exact = 1;
      return false; /* the first call at a site runs exactly */
    }
  }
  if (!kd || kd->n != n) return false; /* full, or a hash collision */
  bool exact = false;
  const uint64_t sig = signature(args, n_args, outs, n_out);
  int met = -1;
  for (int i = 0; i < kd->n_seen && met < 0; i++)
    if (kd->seen[i] == sig) met = i;
  if (met < 0) {
    kd->settled = false;
    if (kd->n_seen < SEEN) kd->seen[kd->n_seen++] = sig;
    else kd->many = true;
  } else if (met == 0) {
    kd->settled = true;
  }
  if (met >= 0 && !kd->many && (kd->settled || (kd->ran_exact >> met & 1))) {
    kd->ran_exact |= 1u << met; /* runs exactly (below) */
    exact = true;
  }
  bool any = false, first = true;
  int at = 0;
  for (int a = 0, lt = n; a < n_args; a++) {
    if (args[a].arg.kind != TP_ARG_TENSOR) continue;
    for (int d = 0; d < args[a].view.ndim; d++, at++)
      if (args[a].view.sizes[d] != kd->first[at]) {
        kd->varying[a] |= 1u << d;
        first = false;
      }
    int64_t where[2];
    lie(&args[a].view, where);
    if (where[0] != kd->first[lt] || where[1] != kd->first[lt + 1]) kd->moved = true, first = false;
    lt += 2;
    padded[a] = kd->varying[a];
    /* Sizes 0 and 1 stay exact (0: nothing to pad; 1 may broadcast). */
    for (int d = 0; d < args[a].view.ndim; d++)
      if (args[a].view.sizes[d] <= 1) padded[a] &= ~(1u << d);
    any = any || padded[a];
  }
  for (int k = 0; k < n_out; k++) {
    for (int d = 0; d < outs[k].ndim; d++, at++)
      if (outs[k].sizes[d] != kd->first[at]) {
        kd->varying_out[k] |= 1u << d;
        first = false;
      }
    padded_out[k] = pads_outputs ? kd->varying_out[k] : 0;
    for (int d = 0; d < outs[k].ndim; d++)
      if (outs[k].sizes[d] <= 1) padded_out[k] &= ~(1u << d);
    any = any || padded_out[k];
  }
  /* The first sizes and places, or a signature that runs exactly (above). A site whose views
   * move runs the bucket's program even with no dim padded: it takes offsets as inputs. */
  if (first || exact) return false;
  return any || kd->moved;
}

/* ---- the bucketed program ---- */

typedef struct {
  const tp_op_def_t *op;
  int opi;
  tp_op_arg_t bargs[TP_MAX_ARGS]; /* the arguments at the bucket's sizes */
  const tp_eager_arg_t *args;
  int n_args;
  uint32_t padded[TP_MAX_ARGS];     /* per argument, a bit per dim */
  uint32_t padded_out[TP_MAX_OUTS]; /* per output, a bit per dim */
  tp_pad_rule_t rule; /* what each argument's padding reads as (ops/op.h) */
  tp_meta_t bmeta[TP_MAX_OUTS]; /* outputs at the bucket's sizes */
  const tp_view_t *outs;
  int n_out;
  bool partial[TP_MAX_OUTS]; /* an output that is part of its storage: scattered into it */
  tp_storage_t *storages[TP_MAX_ARGS]; /* the distinct storages read, in parameter order */
  int arg_param[TP_MAX_ARGS];          /* tensor argument -> parameter */
  int n_params;
  int64_t n_layout;
  int64_t big;   /* the largest index the program computes */
  tp_dtype_t it; /* index type */
  int64_t caps[TP_MAX_OUTS]; /* per output: its buffer's elements */
  tp_exec_origin_t *origin;
  tp_view_t *views;
  bool flat;                /* rows taken from the storages' fronts as they lie (see flat_rows) */
  bool row[TP_MAX_ARGS];    /* flat: the arguments read as rows */
  int out_param[TP_MAX_OUTS]; /* per output: the parameter of the storage it writes into, or -1 */
} build_t;

/* Element |i| of the layout vector, broadcast to |dims|. */
static tp_hlo_value_t lay(tp_hlo_builder_t *b, tp_hlo_value_t layout, int64_t i, int ndim,
                          const int64_t *dims) {
  int64_t lo = i, hi = i + 1, one = 1;
  tp_hlo_value_t s = tp_hlo_reshape(b, tp_hlo_slice(b, layout, &lo, &hi, &one), 0, NULL);
  return tp_hlo_broadcast_to(b, s, ndim, dims);
}

static tp_hlo_value_t fill_value(tp_hlo_builder_t *b, tp_dtype_t dt, tp_pad_t fill) {
  bool high = fill == TP_PAD_HIGHEST;
  if (fill == TP_PAD_ZERO || fill == TP_PAD_ONE) {
    return tp_dtype_is_float(dt) ? tp_hlo_constant(b, dt, fill == TP_PAD_ONE)
                                 : tp_hlo_constant_i(b, dt, fill == TP_PAD_ONE);
  }
  if (tp_dtype_is_float(dt)) return tp_hlo_constant(b, dt, high ? INFINITY : -INFINITY);
  if (dt == TP_DTYPE_BOOL) return tp_hlo_constant_i(b, dt, high);
  int bits = (int)tp_dtype_size(dt) * 8;
  bool is_unsigned = dt == TP_DTYPE_U8;
  if (is_unsigned) return tp_hlo_constant_i(b, dt, high ? (1 << bits) - 1 : 0);
  int64_t max = bits == 64 ? INT64_MAX : ((int64_t)1 << (bits - 1)) - 1;
  return tp_hlo_constant_i(b, dt, high ? max : -max - 1);
}

/* Tensor argument |a| (at layout position *at: offset, then live size and stride per dim) read
 * at the bucket's sizes |dims| out of the 1-D storage |x|. */
static tp_hlo_value_t read_arg(const build_t *c, tp_hlo_builder_t *b, tp_hlo_value_t x,
                               tp_hlo_value_t layout, int64_t *at, int ndim, const int64_t *dims,
                               uint32_t padded, tp_pad_t fill, int64_t value) {
  tp_dtype_t it = c->it;
  tp_hlo_value_t idx = lay(b, layout, (*at)++, ndim, dims), valid = {0};
  bool have_valid = false;
  for (int d = 0; d < ndim; d++) {
    tp_hlo_value_t live = lay(b, layout, (*at)++, ndim, dims);
    tp_hlo_value_t stride = lay(b, layout, (*at)++, ndim, dims);
    if (dims[d] == 1) continue;
    tp_hlo_value_t io = tp_hlo_iota(b, it, ndim, dims, d);
    idx = tp_hlo_binary(b, TP_HLO_ADD, idx, tp_hlo_binary(b, TP_HLO_MUL, io, stride));
    if (!(padded >> d & 1)) continue;
    tp_hlo_value_t in = tp_hlo_compare(b, TP_CMP_LT, io, live);
    valid = have_valid ? tp_hlo_binary(b, TP_HLO_AND, valid, in) : in;
    have_valid = true;
  }
  if (!have_valid) return tp_hlo_gather_1d(b, x, idx);
  /* Padding reads element 0 (in bounds), then the fill where the row needs one. */
  tp_hlo_value_t v = tp_hlo_gather_1d(
      b, x, tp_hlo_select(b, valid, idx, tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, it, 0), ndim, dims)));
  if (fill == TP_PAD_ANY) return v;
  tp_hlo_value_t f = fill == TP_PAD_VALUE ? tp_hlo_constant_i(b, x.dtype, value) : fill_value(b, x.dtype, fill);
  return tp_hlo_select(b, valid, v, tp_hlo_broadcast_to(b, f, ndim, dims));
}

/* |r| (the bucket's sizes) laid out as output |o| (dense, whole) with its live sizes and strides
 * (layout at *at: live numel, then live size and stride per dim), at the front of a 1-D buffer of
 * |cap| elements: flat position p holds r at ((p / stride_d) % live_d)_d, p < numel. */
static tp_hlo_value_t write_out(const build_t *c, tp_hlo_builder_t *b, tp_hlo_value_t r,
                                tp_hlo_value_t layout, int64_t *at, int64_t cap) {
  tp_dtype_t it = c->it;
  int nd = r.ndim;
  int64_t flat = tp_hlo_numel(&r);
  tp_hlo_value_t p = tp_hlo_iota(b, it, 1, &cap, 0);
  tp_hlo_value_t valid = tp_hlo_compare(b, TP_CMP_LT, p, lay(b, layout, (*at)++, 1, &cap));
  tp_hlo_value_t src = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, it, 0), 1, &cap);
  int64_t bstride = flat;
  for (int d = 0; d < nd; d++) {
    tp_hlo_value_t live = lay(b, layout, (*at)++, 1, &cap);
    tp_hlo_value_t stride = lay(b, layout, (*at)++, 1, &cap);
    bstride /= r.dims[d] ? r.dims[d] : 1;
    if (r.dims[d] == 1) continue;
    tp_hlo_value_t i = tp_hlo_binary(b, TP_HLO_REM, tp_hlo_binary(b, TP_HLO_DIV, p, stride), live);
    src = tp_hlo_binary(b, TP_HLO_ADD, src,
                        tp_hlo_binary(b, TP_HLO_MUL, i, tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, it, bstride), 1, &cap)));
  }
  src = tp_hlo_select(b, valid, src, tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, it, 0), 1, &cap));
  return tp_hlo_gather_1d(b, tp_hlo_reshape(b, r, 1, &flat), src);
}

/* |r| (the bucket's sizes) written into |x|, the 1-D buffer of the storage that output view
 * holds part of (layout at *at: the view's offset, then live size and stride per dim): each live
 * position lands at offset + sum(i_d * stride_d), the rest of the storage keeps its values, and
 * the padding's positions are dropped (an index past the buffer). */
static tp_hlo_value_t write_into(const build_t *c, tp_hlo_builder_t *b, tp_hlo_value_t r,
                                 tp_hlo_value_t x, tp_hlo_value_t layout, int64_t *at) {
  int nd = r.ndim;
  int64_t flat = tp_hlo_numel(&r);
  tp_hlo_value_t idx = lay(b, layout, (*at)++, nd, r.dims), valid = {0};
  bool have_valid = false;
  for (int d = 0; d < nd; d++) {
    tp_hlo_value_t live = lay(b, layout, (*at)++, nd, r.dims);
    tp_hlo_value_t stride = lay(b, layout, (*at)++, nd, r.dims);
    if (r.dims[d] == 1) continue;
    tp_hlo_value_t io = tp_hlo_iota(b, c->it, nd, r.dims, d);
    idx = tp_hlo_binary(b, TP_HLO_ADD, idx, tp_hlo_binary(b, TP_HLO_MUL, io, stride));
    tp_hlo_value_t in = tp_hlo_compare(b, TP_CMP_LT, io, live);
    valid = have_valid ? tp_hlo_binary(b, TP_HLO_AND, valid, in) : in;
    have_valid = true;
  }
  if (have_valid)
    idx = tp_hlo_select(b, valid, idx,
                        tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, c->it, (double)x.dims[0]), nd, r.dims));
  return tp_hlo_scatter_1d(b, x, tp_hlo_reshape(b, idx, 1, &flat), tp_hlo_reshape(b, r, 1, &flat));
}

/* Live sizes for tp_op_emit_live, out of the layout vector: argument i's part starts at at[i]. */
typedef struct {
  tp_hlo_builder_t *b;
  tp_hlo_value_t layout;
  int64_t at[TP_MAX_ARGS];
} live_ctx_t;

static tp_hlo_value_t live_size(void *ctx, int arg, int dim) {
  live_ctx_t *l = ctx;
  return lay(l->b, l->layout, l->at[arg] + 1 + 2 * dim, 0, NULL);
}

static tp_status_t *build(void *ctx, char **out_text) {
  const build_t *c = ctx;
  c->origin->inputs = c->views;
  tp_hlo_builder_t *b = NULL;
  TP_RETURN_IF_ERROR(tp_exec_builder_create(&b));
  tp_hlo_value_t params[TP_MAX_ARGS];
  for (int i = 0; i < c->n_params; i++) {
    int64_t n = tp_storage_buffer_numel(c->storages[i]);
    params[i] = tp_hlo_param(b, tp_storage_buffer_dtype(c->storages[i]), 1, &n, -1);
  }
  tp_hlo_value_t layout = {0};
  if (!c->flat) layout = tp_hlo_param(b, c->it, 1, &c->n_layout, -1);
  tp_hlo_value_t in[TP_MAX_ARGS];
  memset(in, 0, sizeof(in));
  live_ctx_t live = {b, layout, {0}};
  int64_t at = 0;
  for (int i = 0; i < c->n_args; i++) {
    const tp_op_arg_t *a = &c->bargs[i];
    const tp_view_t *v = &c->args[i].view;
    live.at[i] = at;
    if (a->kind == TP_ARG_SCALAR) {
      in[i] = tp_hlo_param(b, a->scalar_dtype, 0, NULL, -1);
    } else if (a->kind == TP_ARG_TENSOR && c->flat && !c->row[i]) { /* read as it lies */
      const int p = c->arg_param[i];
      in[i] = tp_program_read_view(b, tp_program_storage(b, p >= 0 ? &params[p] : NULL, v->storage,
                                                         v->dtype), v);
    } else if (a->kind == TP_ARG_TENSOR && c->flat && c->arg_param[i] >= 0) {
      /* A row tensor: the bucket's worth of elements from the front, in the bucket's shape. */
      int64_t n = 1, zero = 0, one = 1;
      for (int d = 0; d < a->meta.ndim; d++) n *= a->meta.sizes[d];
      in[i] = tp_hlo_reshape(b, tp_hlo_slice(b, params[c->arg_param[i]], &zero, &n, &one),
                             a->meta.ndim, a->meta.sizes);
    } else if (a->kind == TP_ARG_TENSOR && c->arg_param[i] < 0) { /* never written: zeros */
      at += 1 + 2 * a->meta.ndim;
      in[i] = tp_hlo_broadcast_to(b, fill_value(b, c->args[i].view.dtype, TP_PAD_ZERO),
                                  a->meta.ndim, a->meta.sizes);
    } else if (a->kind == TP_ARG_TENSOR) {
      in[i] = read_arg(c, b, params[c->arg_param[i]], layout, &at, a->meta.ndim, a->meta.sizes,
                       c->padded[i], c->rule.fill[i], c->rule.value[i]);
    }
  }
  tp_hlo_value_t results[TP_MAX_OUTS + 1];
  if (c->flat || !tp_op_emit_live(c->op, b, c->bargs, c->n_args, c->padded, in, live_size,
                                  &live, c->bmeta, results))
    c->op->emit(c->op, b, c->bargs, c->n_args, in, c->bmeta, results);
  for (int k = 0; k < c->n_out; k++) {
    tp_hlo_value_t r = tp_hlo_convert(b, results[k], c->outs[k].dtype);
    if (c->out_param[k] >= 0)
      results[k] = write_into(c, b, r, params[c->out_param[k]], layout, &at);
    else
      results[k] = c->flat ? tp_hlo_reshape(b, r, 1, &c->caps[k])
                           : write_out(c, b, r, layout, &at, c->caps[k]);
  }
  int n_results = c->n_out + tp_hlo_check_flag(b, &results[c->n_out]);
  tp_status_t *st = tp_hlo_finish(b, results, n_results, out_text);
  tp_hlo_builder_free(b);
  return st;
}

/* Whether a tensor argument's storage can be read by a bucketed program: holding the view's own
 * (real) dtype, never written (zeros), or not read at all (empty). */
static bool readable(const tp_view_t *v) {
  return !tp_dtype_is_complex(v->dtype) &&
         (!tp_storage_buffer(v->storage) || tp_view_numel(v) == 0 ||
          tp_storage_buffer_dtype(v->storage) == v->dtype);
}

/* The buffer length a bucketed program wants of a storage it reads through |v| at the bucket's
 * sizes |bsizes|: the bucket's size of a whole view (what a bucketed program writing the tensor
 * would have left), else the storage's own length rounded up as the policy rounds a size. Either
 * stays the same across the live sizes of one bucket, so the program's key does too. */
static int64_t wanted_length(const tp_view_t *v, const int64_t *bsizes) {
  if (tp_view_is_whole(v)) {
    int64_t n = 1;
    for (int d = 0; d < v->ndim; d++) n *= bsizes[d];
    return n;
  }
  return tp_bucket_size(tp_storage_elems(v->storage, v->dtype));
}

/* Gives storage |s| a buffer of |length| elements, its contents at the front (through the host:
 * a copy rather than a program compiled for this one length). Waits for the work writing it. */
static tp_status_t *regrow(tp_storage_t *s, int64_t length) {
  tp_dtype_t dt = tp_storage_buffer_dtype(s);
  int64_t held = tp_storage_buffer_numel(s);
  size_t es = tp_dtype_size(dt);
  char *host = calloc((size_t)length, es);
  if (!host) return tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
  PJRT_Buffer *grown = NULL;
  tp_status_t *st = tp_buffer_to_host(tp_exec_client(), tp_storage_buffer(s), host, (size_t)held * es);
  if (!st)
    st = tp_buffer_from_host(tp_exec_client(), tp_storage_device(s), host, dt, 1, &length, &grown);
  free(host);
  if (!st) tp_storage_set_buffer(s, grown, dt, length);
  return st;
}

/* Whether the call can run on the fronts of its storages as they lie, with no index arithmetic:
 * the op is rowwise (ops/op.h: tp_op_rowwise) over the first k dims of its outputs, k covering
 * every padded dim, and every tensor with those rows (each output, each padded argument) is a
 * whole, row-major storage whose first k live sizes are the outputs'. Its live rows then lie at
 * the front of its buffer in one order for all of them, which the program reads in the bucket's
 * shape and writes back as it computed them. Fills |row| (the arguments read as rows). */
static bool flat_rows(const tp_op_def_t *d, const tp_eager_arg_t *args, const tp_op_arg_t *bargs,
                      int n_args, const uint32_t *padded, const tp_view_t *outs, int n_out,
                      bool *row) {
  int k = 0, nd = outs[0].ndim;
  for (int i = 0; i < n_args; i++)
    for (int dd = 0; dd < TP_MAX_DIMS; dd++)
      if (padded[i] >> dd & 1 && dd + 1 > k) k = dd + 1;
  uint32_t whole = 0;
  if (k == 0 || nd < k || !tp_op_rowwise(d, bargs, n_args, k, &whole)) return false;
  const int64_t *lead = outs[0].sizes;
  for (int j = 0; j < n_out; j++)
    if (!tp_view_is_whole(&outs[j]) || outs[j].ndim < k ||
        memcmp(outs[j].sizes, lead, sizeof(int64_t) * (size_t)k) != 0)
      return false;
  for (int i = 0; i < n_args; i++) {
    row[i] = false;
    if (args[i].arg.kind != TP_ARG_TENSOR) continue;
    const tp_view_t *v = &args[i].view;
    if (whole >> i & 1) {
      if (padded[i]) return false;
      continue;
    }
    if (padded[i]) {
      if (v->ndim < k || !tp_view_is_whole(v) ||
          memcmp(v->sizes, lead, sizeof(int64_t) * (size_t)k) != 0)
        return false;
      row[i] = true;
      continue;
    }
    /* Broadcast over the rows: size 1 (or absent) in each row dim, the dims aligned right. */
    int off = nd - v->ndim;
    for (int dd = 0; dd < k; dd++)
      if (dd - off >= 0 && v->sizes[dd - off] != 1) return false;
  }
  return true;
}

/* The call at the bucket's sizes: whether it runs bucketed (the row allows it, its site pads a
 * dim, its storages can be read so), and if so its arguments and outputs there, its fill and its
 * outputs' buffer lengths. */
static bool plan(build_t *c, uint64_t site, const tp_meta_t *out_metas) {
  const tp_op_def_t *d = c->op;
  for (int i = 0; i < c->n_args; i++) c->bargs[i] = c->args[i].arg;
  /* Not a bucketed row; or a count protocol's (value-dependent sizes follow the exact shape). */
  if ((d->flags & TP_OPF_COUNTED) || !tp_op_pad_rule(d, c->bargs, c->n_args, c->padded, &c->rule))
    return false;
  for (int i = 0; i < c->n_args; i++)
    if (c->args[i].arg.kind == TP_ARG_TENSOR && !readable(&c->args[i].view)) return false;
  /* A partial write (a view of part of its storage) is scattered into the storage's buffer,
   * which the program takes as a parameter: the view's own dtype, its buffer already there. */
  for (int k = 0; k < c->n_out; k++) {
    const tp_view_t *o = &c->outs[k];
    if (tp_dtype_is_complex(o->dtype)) return false;
    c->partial[k] = !tp_view_is_whole_permuted(o, NULL);
    if (c->partial[k] && (!tp_storage_buffer(o->storage) ||
                          tp_storage_buffer_dtype(o->storage) != o->dtype))
      return false;
    for (int j = 0; j < k; j++)
      if (c->outs[j].storage == o->storage) return false;
  }
  /* Outputs are padded of their own only where the row says so; elsewhere an output's sizes
   * follow its arguments'. */
  if (!observe(site, c->args, c->n_args, out_metas, c->n_out, tp_op_pads_outputs(d), c->padded,
               c->padded_out))
    return false;
  if (!tp_op_pad_rule(d, c->bargs, c->n_args, c->padded, &c->rule) ||
      (c->rule.live && !tp_op_emits_live(d)))
    return false;
  for (int i = 0; i < c->n_args; i++)
    for (int dd = 0; dd < c->bargs[i].meta.ndim; dd++)
      if (c->padded[i] >> dd & 1) c->bargs[i].meta.sizes[dd] = tp_bucket_size(c->bargs[i].meta.sizes[dd]);
  tp_op_arg_t inferred[TP_MAX_ARGS];
  memcpy(inferred, c->bargs, sizeof(tp_op_arg_t) * (size_t)c->n_args);
  int bn = 0;
  tp_status_t *ist = d->infer(d, inferred, c->n_args, c->bmeta, &bn);
  if (ist) {
    tp_status_free(ist);
    return false;
  }
  if (bn != c->n_out) return false;
  memcpy(c->bargs, inferred, sizeof(tp_op_arg_t) * (size_t)c->n_args); /* as infer refined them */
  c->big = 0;
  for (int k = 0; k < c->n_out; k++) {
    tp_meta_t *m = &c->bmeta[k];
    if (m->ndim != out_metas[k].ndim || m->dtype != out_metas[k].dtype) return false;
    c->caps[k] = 1;
    for (int dd = 0; dd < m->ndim; dd++) {
      if (c->padded_out[k] >> dd & 1) m->sizes[dd] = tp_bucket_size(out_metas[k].sizes[dd]);
      if (m->sizes[dd] < out_metas[k].sizes[dd]) return false;
      c->caps[k] *= m->sizes[dd];
    }
    if (c->caps[k] > c->big) c->big = c->caps[k];
  }
  c->flat = flat_rows(d, c->args, c->bargs, c->n_args, c->padded, c->outs, c->n_out, c->row);
  return true;
}

/* The program's parameters: the distinct storages the call reads (each grown to the length the
 * program wants of it) and those its partial outputs are scattered into. Sets *fits false when
 * they are more than a call takes. */
static tp_status_t *bind_storages(build_t *c, bool *fits) {
  *fits = true;
  bool any_padded = false; /* else the views only moved: their buffers serve as they are */
  for (int i = 0; i < c->n_args; i++) any_padded = any_padded || c->padded[i];
  for (int i = 0; i < c->n_args; i++) {
    c->arg_param[i] = -1;
    if (c->args[i].arg.kind != TP_ARG_TENSOR) continue;
    const tp_view_t *v = &c->args[i].view;
    TP_RETURN_IF_ERROR(tp_view_check_bounds(v));
    c->n_layout += 1 + 2 * v->ndim;
    if (!tp_storage_buffer(v->storage) || tp_view_numel(v) == 0)
      continue; /* reads as zeros, or reads nothing */
    int64_t want = (c->flat && !c->row[i]) || !any_padded
                       ? 0 : wanted_length(v, c->bargs[i].meta.sizes);
    if (tp_storage_buffer_numel(v->storage) < want) TP_RETURN_IF_ERROR(regrow(v->storage, want));
    for (int j = 0; j < c->n_params && c->arg_param[i] < 0; j++)
      if (c->storages[j] == v->storage) c->arg_param[i] = j;
    if (c->arg_param[i] < 0) {
      c->arg_param[i] = c->n_params;
      c->storages[c->n_params++] = v->storage;
    }
    int64_t numel = 1;
    for (int dd = 0; dd < c->bargs[i].meta.ndim; dd++) numel *= c->bargs[i].meta.sizes[dd];
    if (numel > c->big) c->big = numel;
    if (tp_storage_buffer_numel(v->storage) > c->big) c->big = tp_storage_buffer_numel(v->storage);
  }
  for (int k = 0; k < c->n_out; k++) {
    const tp_view_t *o = &c->outs[k];
    c->n_layout += 1 + 2 * o->ndim;
    c->out_param[k] = -1;
    if (!c->partial[k]) continue;
    TP_RETURN_IF_ERROR(tp_view_check_bounds(o));
    for (int j = 0; j < c->n_params && c->out_param[k] < 0; j++)
      if (c->storages[j] == o->storage) c->out_param[k] = j;
    if (c->out_param[k] < 0) {
      if (c->n_params == TP_MAX_ARGS) {
        *fits = false;
        return NULL;
      }
      c->out_param[k] = c->n_params;
      c->storages[c->n_params++] = o->storage;
    }
    c->caps[k] = tp_storage_buffer_numel(o->storage); /* as the arguments' reads left it */
    if (c->caps[k] > c->big) c->big = c->caps[k];
  }
  c->it = c->big < ((int64_t)1 << 31) ? TP_DTYPE_I32 : TP_DTYPE_I64;
  return NULL;
}

/* The program's key: the bucket's sizes, never the live ones. */
static void put_key(const build_t *c, tp_key_t *key) {
  key->len = 0;
  tp_key_put(key, c->flat ? "bucket-flat" : "bucket", c->flat ? 11 : 6);
  tp_key_put_i64(key, c->opi);
  tp_key_put_i64(key, tp_exec_eager_opt_level());
  tp_key_put_i64(key, c->it);
  tp_key_put_i64(key, c->n_args);
  tp_key_put_i64(key, c->n_out);
  for (int j = 0; j < c->n_params; j++) {
    tp_key_put_i64(key, tp_storage_buffer_dtype(c->storages[j]));
    tp_key_put_i64(key, tp_storage_buffer_numel(c->storages[j]));
  }
  for (int i = 0; i < c->n_args; i++) {
    const tp_op_arg_t *a = &c->bargs[i];
    tp_key_put_arg(key, a, false);
    if (c->args[i].arg.kind != TP_ARG_TENSOR) continue;
    tp_key_put_i64(key, c->arg_param[i]);
    tp_key_put_i64(key, c->padded[i]);
    tp_key_put_i64(key, c->rule.fill[i]);
    tp_key_put_i64(key, c->rule.fill[i] == TP_PAD_VALUE ? c->rule.value[i] : 0);
    tp_key_put_i64(key, c->args[i].view.dtype);
    tp_key_put_i64(key, a->meta.ndim);
    tp_key_put(key, a->meta.sizes, sizeof(int64_t) * (size_t)a->meta.ndim);
    if (c->flat && !c->row[i]) { /* read as it lies: its whole view */
      const tp_view_t *v = &c->args[i].view;
      tp_key_put(key, v->strides, sizeof(int64_t) * (size_t)v->ndim);
      tp_key_put_i64(key, v->offset);
      tp_key_put_i64(key, (int64_t)tp_storage_nbytes(v->storage));
    }
  }
  for (int k = 0; k < c->n_out; k++) {
    tp_key_put_i64(key, c->out_param[k]);
    tp_key_put_i64(key, c->outs[k].dtype);
    tp_key_put_i64(key, c->bmeta[k].ndim);
    tp_key_put(key, c->bmeta[k].sizes, sizeof(int64_t) * (size_t)c->bmeta[k].ndim);
  }
}

/* The layout vector on |device|: what the bucket leaves to the call (per tensor argument its
 * offset, then live size and stride per dim; per output likewise), in the index type. */
static tp_status_t *layout_buffer(const build_t *c, int device, PJRT_Buffer **out) {
  int64_t n = c->n_layout ? c->n_layout : 1;
  int64_t *lv = malloc(sizeof(int64_t) * (size_t)n);
  int32_t *lv32 = c->it == TP_DTYPE_I32 ? malloc(sizeof(int32_t) * (size_t)n) : NULL;
  if (!lv || (c->it == TP_DTYPE_I32 && !lv32)) {
    free(lv);
    free(lv32);
    return tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
  }
  int64_t at = 0;
  for (int i = 0; i < c->n_args; i++) {
    if (c->args[i].arg.kind != TP_ARG_TENSOR) continue;
    const tp_view_t *v = &c->args[i].view;
    lv[at++] = v->offset;
    for (int dd = 0; dd < v->ndim; dd++) {
      lv[at++] = v->sizes[dd];
      lv[at++] = v->sizes[dd] == 1 ? 0 : v->strides[dd];
    }
  }
  for (int k = 0; k < c->n_out; k++) {
    const tp_view_t *v = &c->outs[k];
    lv[at++] = c->partial[k] ? v->offset : tp_view_numel(v);
    for (int dd = 0; dd < v->ndim; dd++) {
      lv[at++] = v->sizes[dd];
      lv[at++] = v->sizes[dd] == 1 ? 1 : v->strides[dd];
    }
  }
  if (lv32)
    for (int64_t i = 0; i < c->n_layout; i++) lv32[i] = (int32_t)lv[i];
  tp_status_t *st = tp_buffer_from_host(tp_exec_client(), device, lv32 ? (void *)lv32 : (void *)lv,
                                        c->it, 1, &c->n_layout, out);
  free(lv);
  free(lv32);
  return st;
}

/* Runs |exe| on the call's storages, layout and scalars; its outputs become the outputs'
 * storages' buffers. */
static tp_status_t *execute(const build_t *c, tp_executable_t *exe, PJRT_Buffer *layout_buf,
                            int device) {
  PJRT_Buffer *inputs[2 * TP_MAX_ARGS + 1], *owned[TP_MAX_ARGS];
  int n_in = 0, n_owned = 0;
  tp_status_t *st = NULL;
  for (int j = 0; j < c->n_params; j++) inputs[n_in++] = tp_storage_buffer(c->storages[j]);
  if (layout_buf) inputs[n_in++] = layout_buf;
  uint64_t call = tp_scalars_next_call();
  for (int i = 0; i < c->n_args && !st; i++)
    if (c->args[i].arg.kind == TP_ARG_SCALAR) {
      st = tp_scalars_buffer(device, &c->bargs[i], call, &inputs[n_in++], &owned[n_owned]);
      if (!st && owned[n_owned]) n_owned++;
    }
  PJRT_Buffer *results[TP_MAX_OUTS + 1] = {NULL};
  if (!st)
    st = tp_executable_execute(exe, &(tp_execute_args_t){.device = device,
                                                         .args = inputs,
                                                         .n_args = (size_t)n_in,
                                                         .out_buffers = results,
                                                         .op_name = c->op->name,
                                                         .blocking = tp_exec_blocking(),
                                                         .check_output = c->n_out});
  for (int i = 0; i < n_owned; i++) tp_buffer_destroy(tp_exec_client(), owned[i]);
  if (st) return st;
  for (int k = 0; k < c->n_out; k++)
    tp_storage_set_buffer(c->outs[k].storage, results[k], c->outs[k].dtype, c->caps[k]);
  return NULL;
}

tp_status_t *tp_bucket_run(int op, const tp_eager_arg_t *args, int n_args,
                           const tp_meta_t *out_metas, const tp_view_t *outs, int n_out,
                           int device, bool *out_ran) {
  *out_ran = false;
  if (!tp_bucket_enabled() || t_paused) return NULL;
  bool param;
  uint64_t kind = kind_hash(op, args, n_args, outs, n_out, &param);
  /* Every call moves the context. A site is per device: ranks that are threads of one process
   * (a device each) run the same calls, each must decide alike whatever the threads' order, or
   * a replicated program would meet one rank's exact buffer and another's padded one. */
  uint64_t site = (site_of(kind, param) * 0x100000001b3ull ^ (uint64_t)(uint32_t)device) | 1;
  if (!kind || n_out < 1) return NULL;
  /* Scratch of the executor lock's holder (too large for the stack of a rank thread). Every
   * field is set before it is read; only these start at zero (not the whole 4 KiB: a call's
   * cost). */
  static build_t c;
  memset(c.padded, 0, sizeof(c.padded));
  memset(c.bmeta, 0, sizeof(c.bmeta));
  c.n_params = 0;
  c.n_layout = 0;
  c.op = &tp_op_table[op];
  c.opi = op;
  c.args = args;
  c.n_args = n_args;
  c.outs = outs;
  c.n_out = n_out;
  if (!plan(&c, site, out_metas)) return NULL;
  bool fits;
  TP_RETURN_IF_ERROR(bind_storages(&c, &fits));
  if (!fits) return NULL;
  static tp_key_t key;
  put_key(&c, &key);
  if (key.failed) return tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
  PJRT_Buffer *layout_buf = NULL;
  if (!c.flat) TP_RETURN_IF_ERROR(layout_buffer(&c, device, &layout_buf));

  tp_view_t views[TP_MAX_ARGS];
  tp_exec_origin_t origin = {c.op->name, NULL, 0, true};
  for (int i = 0; i < n_args; i++)
    if (args[i].arg.kind == TP_ARG_TENSOR) {
      views[origin.n_inputs] = args[i].view;
      views[origin.n_inputs].ndim = c.bargs[i].meta.ndim;
      memcpy(views[origin.n_inputs].sizes, c.bargs[i].meta.sizes,
             sizeof(int64_t) * (size_t)c.bargs[i].meta.ndim);
      origin.n_inputs++;
    }
  c.origin = &origin;
  c.views = views;
  tp_executable_t *exe = NULL;
  bool compiled;
  tp_status_t *st = tp_status_annotate(
      tp_exec_program(key.data, key.len, tp_hash_bytes(key.data, key.len, 0), build, &c, &origin,
                      &(tp_compile_options_t){.backend_opt_level = tp_exec_eager_opt_level()},
                      &exe, &compiled),
      "compiling %s", c.op->name);
  if (!st && compiled) g_compiles++;
  if (!st) st = execute(&c, exe, layout_buf, device);
  if (exe) tp_executable_release(exe);
  if (layout_buf) tp_buffer_destroy(tp_exec_client(), layout_buf);
  if (st) return st;
  g_calls++;
  *out_ran = true;
  return NULL;
}
