/* The eager executor: signature -> cached executable -> one PJRT execute. See eager.h. */
#include "exec/eager.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "exec/bucket.h"
#include "exec/exec.h"
#include "exec/fused.h"
#include "exec/key.h"
#include "exec/program.h"
#include "exec/scalars.h"

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
  sl->has_buffer = tp_storage_buffer(s) != NULL;
  sl->dtype = tp_storage_buffer_dtype(s);
  sl->numel = tp_storage_buffer_numel(s);
  sl->param = sl->output = -1;
  return p->n_slots++;
}

static tp_status_t *build_program(const tp_op_def_t *op, const tp_eager_arg_t *args, int n_args,
                                  const tp_meta_t *out_metas, const tp_view_t *outs, int n_out,
                                  const plan_t *p, char **out_text) {
  tp_hlo_builder_t *b = NULL;
  TP_RETURN_IF_ERROR(tp_exec_builder_create(&b));
  /* Parameters: storages first (in slot order), then scalars (in argument order). */
  tp_hlo_value_t cur[MAX_STORAGES];
  bool has[MAX_STORAGES] = {false};
  tp_storage_t *storages[MAX_STORAGES];
  for (int i = 0; i < p->n_slots; i++) {
    const slot_t *sl = &p->slots[i];
    storages[i] = sl->storage;
    /* A storage the program reads and replaces gives its buffer to the result when the two
     * are the same size (a buffer longer than its storage, bucket.h, is replaced by one that
     * is not) and the write is partial or the platform has whole writes donated. */
    bool donate = sl->output >= 0 && (sl->partial || tp_exec_donate_whole_writes()) &&
                  (size_t)sl->numel * tp_dtype_size(sl->dtype) ==
                      (size_t)sl->new_numel * tp_dtype_size(sl->new_dtype);
    if (sl->param >= 0) {
      cur[i] = tp_hlo_param(b, sl->dtype, 1, &sl->numel, donate ? sl->output : -1);
      has[i] = true;
    }
  }
  tp_hlo_value_t scalars[TP_MAX_ARGS];
  for (int i = 0, n = 0; i < n_args; i++)
    if (args[i].arg.kind == TP_ARG_SCALAR)
      scalars[n++] = tp_hlo_param(b, args[i].arg.scalar_dtype, 0, NULL, -1);
  tp_program_emit_call(b, op, args, n_args, p->arg_slot, scalars, out_metas, outs, p->out_slot,
                       n_out, storages, cur, has);
  tp_hlo_value_t results_out[MAX_STORAGES + 1];
  int n_results = 0;
  for (int i = 0; i < p->n_slots; i++)
    if (p->slots[i].output >= 0) {
      tp_hlo_value_t flat = tp_program_to_storage(b, cur[i]);
      int64_t dims[TP_MAX_DIMS];
      int nd = 0;
      for (int k = 0; k < n_out && !p->slots[i].partial; k++)
        if (p->out_slot[k] == i) nd = tp_program_storage_dims(&outs[k], flat.dtype, dims);
      results_out[p->slots[i].output] = tp_program_result(b, flat, nd, dims);
      n_results++;
    }
  if (tp_hlo_check_flag(b, &results_out[n_results])) n_results++; /* last: the index check */
  tp_status_t *st = tp_hlo_finish(b, results_out, n_results, out_text);
  tp_hlo_builder_free(b);
  return st;
}

typedef struct {
  const tp_op_def_t *op;
  const tp_eager_arg_t *args;
  int n_args;
  const tp_meta_t *out_metas;
  const tp_view_t *outs;
  int n_out;
  const plan_t *plan;
  tp_exec_origin_t *origin; /* filled here, on a cache miss only: the compile log's inputs */
  tp_view_t *views;
} build_ctx_t;

static tp_status_t *build_call(void *ctx, char **out_text) {
  const build_ctx_t *c = ctx;
  c->origin->inputs = c->views;
  for (int i = 0; i < c->n_args && c->origin->n_inputs < TP_MAX_ARGS; i++)
    if (c->args[i].arg.kind == TP_ARG_TENSOR) c->views[c->origin->n_inputs++] = c->args[i].view;
  return build_program(c->op, c->args, c->n_args, c->out_metas, c->outs, c->n_out, c->plan, out_text);
}

/* Plans a call: which storages are parameters and outputs, and the signature. */
static tp_status_t *plan_call(int op, const tp_eager_arg_t *args, int n_args,
                              const tp_meta_t *out_metas, const tp_view_t *outs, int n_out,
                              plan_t *p, tp_key_t *sig) {
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
    sl->written = true;
    if ((size_t)tp_storage_elems(sl->storage, outs[k].dtype) * tp_dtype_size(outs[k].dtype) !=
        tp_storage_nbytes(sl->storage))
      return tp_make_status(TP_UNIMPLEMENTED,
                            "writing %s elements into a storage of %zu bytes (not a multiple)",
                            tp_dtype_name(outs[k].dtype), tp_storage_nbytes(sl->storage));
  }
  for (int i = 0; i < p->n_slots; i++) {
    slot_t *sl = &p->slots[i];
    if (sl->written) {
      /* A write of the whole storage, in order or permuted (a channels-last output), replaces it. */
      sl->partial = tp_program_slot_partial(outs, p->out_slot, n_out, i);
      tp_program_slot_after(sl->storage, sl->has_buffer, sl->dtype, sl->numel, outs, p->out_slot,
                            n_out, i, &sl->new_dtype, &sl->new_numel);
    }
    if (sl->has_buffer && (sl->read || sl->partial)) sl->param = p->n_params++;
    if (sl->written) sl->output = p->n_outputs++;
  }
  sig->len = 0;
  tp_key_put_i64(sig, op);
  tp_key_put_i64(sig, tp_exec_eager_opt_level()); /* how it compiles (tp_exec_program) */
  tp_key_put_i64(sig, n_args);
  tp_key_put_i64(sig, n_out);
  for (int i = 0; i < p->n_slots; i++) {
    const slot_t *sl = &p->slots[i];
    tp_key_put_i64(sig, sl->has_buffer ? sl->dtype : -1);
    tp_key_put_i64(sig, sl->has_buffer ? sl->numel : (int64_t)tp_storage_nbytes(sl->storage));
    tp_key_put_i64(sig, sl->param);
    tp_key_put_i64(sig, sl->output);
    tp_key_put_i64(sig, sl->partial);
    tp_key_put_i64(sig, (int64_t)tp_storage_nbytes(sl->storage));
  }
  for (int i = 0; i < n_args; i++) {
    /* A scalar's value is an input of the program, not part of it. */
    tp_key_put_arg(sig, &args[i].arg, false);
    if (args[i].arg.kind == TP_ARG_TENSOR) {
      tp_key_put_i64(sig, p->arg_slot[i]);
      tp_key_put_view(sig, &args[i].view);
    }
  }
  for (int k = 0; k < n_out; k++) {
    tp_key_put_i64(sig, p->out_slot[k]);
    tp_key_put_i64(sig, out_metas[k].dtype);
    tp_key_put_view(sig, &outs[k]);
  }
  if (sig->failed) return tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
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
  TP_RETURN_IF_ERROR(tp_op_check_text(d, a, n_args));
  for (int i = 0; i < n_args; i++) args[i].arg = a[i]; /* infer may refine arguments */
  return NULL;
}

static tp_status_t *run_locked(int op, tp_eager_arg_t *args, int n_args,
                               const tp_meta_t *out_metas, const tp_view_t *outs, int n_out) {
  assert(tp_exec_locked()); /* the static plan below and the bucket sites are the holder's */
  if (!tp_exec_client()) return tp_exec_unavailable();
  const tp_op_def_t *d = &tp_op_table[op];
  int device = -1;
  for (int i = 0; i < n_args; i++)
    if (args[i].arg.kind == TP_ARG_TENSOR) {
      int dv = tp_storage_device(args[i].view.storage);
      if (device >= 0 && dv != device)
        return tp_make_status(TP_INVALID_ARGUMENT,
                              "%s: expected all tensors to be on the same device, but found at "
                              "least two devices, tpu:%d and tpu:%d",
                              d->name, device, dv);
      device = dv;
    }
  for (int k = 0; k < n_out; k++) {
    if (device >= 0 && tp_storage_device(outs[k].storage) != device)
      return tp_make_status(TP_INVALID_ARGUMENT, "%s: output on tpu:%d, inputs on tpu:%d",
                            d->name, tp_storage_device(outs[k].storage), device);
    device = tp_storage_device(outs[k].storage);
  }
  if (tp_fused_on()) /* recorded into the open region, with exact shapes (no buckets) */
    return tp_fused_record(op, args, n_args, out_metas, outs, n_out, device < 0 ? 0 : device);
  bool bucketed = false;
  TP_RETURN_IF_ERROR(tp_bucket_run(op, args, n_args, out_metas, outs, n_out, device < 0 ? 0 : device,
                                   &bucketed));
  if (bucketed) return NULL;
  static plan_t p;
  static tp_key_t sig; /* kept between calls: its buffer is allocated once */
  TP_RETURN_IF_ERROR(plan_call(op, args, n_args, out_metas, outs, n_out, &p, &sig));
  tp_view_t views[TP_MAX_ARGS];
  tp_exec_origin_t origin = {d->name, NULL, 0, false};
  build_ctx_t ctx = {d, args, n_args, out_metas, outs, n_out, &p, &origin, views};
  tp_executable_t *exe = NULL;
  bool compiled;
  TP_RETURN_IF_ERROR(tp_status_annotate(
      tp_exec_program(sig.data, sig.len, tp_hash_bytes(sig.data, sig.len, 0), build_call, &ctx,
                      &origin, &(tp_compile_options_t){.backend_opt_level = tp_exec_eager_opt_level()},
                      &exe, &compiled),
      "compiling %s", d->name));
  PJRT_Buffer *inputs[MAX_STORAGES + TP_MAX_ARGS];
  int n_in = 0;
  for (int i = 0; i < p.n_slots; i++)
    if (p.slots[i].param >= 0) inputs[n_in++] = tp_storage_buffer(p.slots[i].storage);
  tp_status_t *st = NULL;
  uint64_t call = tp_scalars_next_call();
  PJRT_Buffer *owned[TP_MAX_ARGS];
  int n_owned = 0;
  for (int i = 0; i < n_args && !st; i++)
    if (args[i].arg.kind == TP_ARG_SCALAR) {
      st = tp_scalars_buffer(device < 0 ? 0 : device, &args[i].arg, call, &inputs[n_in++],
                             &owned[n_owned]);
      if (!st && owned[n_owned]) n_owned++;
    }
  PJRT_Buffer *results[MAX_STORAGES + 1] = {NULL};
  /* An output past the storages' is the program's index check (see build_program). */
  if (!st)
    st = tp_executable_execute(exe, &(tp_execute_args_t){.device = device < 0 ? 0 : device,
                                                         .args = inputs,
                                                         .n_args = (size_t)n_in,
                                                         .out_buffers = results,
                                                         .op_name = d->name,
                                                         .blocking = tp_exec_blocking(),
                                                         .check_output = p.n_outputs});
  tp_executable_release(exe);
  for (int i = 0; i < n_owned; i++) tp_buffer_destroy(tp_exec_client(), owned[i]);
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
  /* Fused mode records into the open region, which the plain lock would run. */
  if (tp_fused_on()) tp_exec_lock_keeping_region();
  else tp_exec_lock();
  tp_status_t *st = run_locked(op, args, n_args, out_metas, outs, n_out);
  tp_exec_unlock();
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

/* |src|'s storage copied whole to |device| (device to device, under the executor lock): |out_v|
 * is |src| over the copy, which the caller releases (*out_s). */
static tp_status_t *storage_on_device(const tp_view_t *src, int device, tp_storage_t **out_s,
                                      tp_view_t *out_v) {
  tp_storage_t *from = src->storage;
  TP_RETURN_IF_ERROR(tp_storage_create(tp_exec_client(), device, tp_storage_nbytes(from), out_s));
  *out_v = *src;
  out_v->storage = *out_s;
  tp_status_t *st = NULL;
  tp_exec_lock();
  PJRT_Buffer *buffer = tp_storage_buffer(from), *moved = NULL;
  if (buffer) st = tp_buffer_copy_to_device(tp_exec_client(), buffer, device, &moved);
  if (moved)
    tp_storage_set_buffer(*out_s, moved, tp_storage_buffer_dtype(from), tp_storage_buffer_numel(from));
  tp_exec_unlock();
  if (st) {
    tp_storage_release(*out_s);
    *out_s = NULL;
  }
  return st;
}

tp_status_t *tp_eager_copy_bits(const tp_view_t *dst, const tp_view_t *src, bool conj, bool neg) {
  if (tp_exec_client() && tp_storage_device(src->storage) != tp_storage_device(dst->storage)) {
    /* Across devices: the source's storage moves to the destination's device first. */
    tp_storage_t *moved = NULL;
    tp_view_t v;
    TP_RETURN_IF_ERROR(storage_on_device(src, tp_storage_device(dst->storage), &moved, &v));
    tp_status_t *st = tp_eager_copy_bits(dst, &v, conj, neg);
    tp_storage_release(moved);
    return st;
  }
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

tp_status_t *tp_eager_temp_storage(int device, tp_dtype_t dtype, const tp_view_t *shape_of,
                                 tp_storage_t **out_s, tp_view_t *out_v) {
  int64_t numel = tp_view_numel(shape_of);
  TP_RETURN_IF_ERROR(tp_storage_create(tp_exec_client(), device, (size_t)numel * tp_dtype_size(dtype), out_s));
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

tp_status_t *tp_eager_copy_from_host_async(const tp_view_t *dst, const void *data,
                                           PJRT_Event **out_done) {
  *out_done = NULL;
  if (!tp_exec_client()) return tp_exec_unavailable();
  TP_RETURN_IF_ERROR(tp_view_check_bounds(dst));
  int64_t numel = tp_view_numel(dst);
  if (tp_view_is_whole(dst)) {
    PJRT_Buffer *buf = NULL;
    tp_dtype_t sdt = tp_dtype_storage(dst->dtype); /* complex: its parts, interleaved */
    numel *= (int64_t)(tp_dtype_size(dst->dtype) / tp_dtype_size(sdt));
    TP_RETURN_IF_ERROR(tp_buffer_from_host_async(tp_exec_client(), tp_storage_device(dst->storage),
                                                 data, sdt, 1, &numel, &buf, out_done));
    tp_exec_lock();
    tp_storage_set_buffer(dst->storage, buf, sdt, numel);
    tp_exec_unlock();
    return NULL;
  }
  /* Part of a storage: through a whole temporary (whose copy is awaited), then on the device. */
  tp_storage_t *tmp = NULL;
  tp_view_t tv;
  TP_RETURN_IF_ERROR(tp_eager_temp_storage(tp_storage_device(dst->storage), dst->dtype, dst, &tmp, &tv));
  tp_status_t *st = tp_eager_copy_from_host(&tv, data);
  if (!st) st = tp_eager_copy(dst, &tv);
  tp_storage_release(tmp);
  return st;
}

tp_status_t *tp_eager_copy_from_host(const tp_view_t *dst, const void *data) {
  PJRT_Event *done = NULL;
  TP_RETURN_IF_ERROR(tp_eager_copy_from_host_async(dst, data, &done));
  return tp_event_await(tp_exec_client(), done);
}

tp_status_t *tp_eager_host_alias(const tp_view_t *v, void **out_ptr) {
  *out_ptr = NULL;
  tp_client_t *c = tp_exec_client();
  if (!c) return tp_exec_unavailable();
  TP_RETURN_IF_ERROR(tp_view_check_bounds(v));
  if (strcmp(tp_client_platform_name(c), "cpu") != 0 || tp_dtype_is_complex(v->dtype) ||
      !tp_view_contiguous(v))
    return NULL;
  tp_exec_lock();
  PJRT_Buffer *buf = tp_storage_buffer(v->storage);
  tp_status_t *st = tp_fused_take_error();
  void *base = NULL;
  if (!st && buf && tp_storage_buffer_dtype(v->storage) == v->dtype &&
      v->offset + tp_view_numel(v) <= tp_storage_buffer_numel(v->storage)) {
    /* Nothing enqueued may still read the old contents or write new ones. */
    st = tp_client_synchronize(c);
    if (!st) st = tp_buffer_host_pointer(c, buf, &base);
  }
  tp_exec_unlock();
  if (st) return st;
  if (base) *out_ptr = (char *)base + v->offset * (int64_t)tp_dtype_size(v->dtype);
  return NULL;
}

tp_status_t *tp_eager_copy_to_host(const tp_view_t *src, void *data) {
  if (!tp_exec_client()) return tp_exec_unavailable();
  TP_RETURN_IF_ERROR(tp_view_check_bounds(src));
  size_t nbytes = (size_t)tp_view_numel(src) * tp_dtype_size(src->dtype);
  /* The lock keeps another thread from donating the buffer while it is read. */
  tp_exec_lock();
  tp_status_t *failed = tp_fused_take_error(); /* a region's, run by this lock */
  if (failed) {
    tp_exec_unlock();
    return failed;
  }
  PJRT_Buffer *buf = tp_storage_buffer(src->storage);
  bool direct = tp_view_is_whole(src) &&
                (!buf || tp_storage_buffer_dtype(src->storage) == tp_dtype_storage(src->dtype));
  if (direct) {
    tp_status_t *st = NULL;
    /* A buffer may hold more than its storage (bucket.h): all of it comes over, the front kept. */
    size_t held = buf ? (size_t)tp_storage_buffer_numel(src->storage) *
                            tp_dtype_size(tp_storage_buffer_dtype(src->storage))
                      : nbytes;
    void *to = held > nbytes ? malloc(held) : data;
    if (!to) st = tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory (%zu bytes)", held);
    else if (!buf) memset(data, 0, nbytes);
    else st = tp_status_annotate(tp_buffer_to_host(tp_exec_client(), buf, to, held), "reading tpu tensor");
    if (to && to != data) {
      if (!st) memcpy(data, to, nbytes);
      free(to);
    }
    tp_exec_unlock();
    return st;
  }
  tp_exec_unlock();
  tp_storage_t *tmp = NULL;
  tp_view_t tv;
  TP_RETURN_IF_ERROR(tp_eager_temp_storage(tp_storage_device(src->storage), src->dtype, src, &tmp, &tv));
  tp_status_t *st = tp_eager_copy(&tv, src);
  if (!st) st = tp_eager_copy_to_host(&tv, data);
  tp_storage_release(tmp);
  return st;
}
