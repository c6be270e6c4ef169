/* Collectives as StableHLO (collective.h), and the _c10d_functional rows that put them into
 * whole graphs: all_reduce, all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single
 * (even splits) and broadcast. A graph holding one runs as a replicated program over the
 * group's devices (exec/graph.h), one replica per rank; the builder's replica count is the
 * group's size. */
#include "ops/collective.h"

#include <string.h>

#include "ops/families.h"

const char *const tp_coll_kind_names[] = {"all_reduce", "broadcast", "all_gather",
                                          "reduce_scatter", "all_to_all"};
const char *const tp_coll_op_names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX",
                                        "BAND", "BOR", "BXOR"};

static bool is_bitwise(tp_coll_op_t op) {
  return op == TP_COLL_BAND || op == TP_COLL_BOR || op == TP_COLL_BXOR;
}

tp_status_t *tp_coll_check(tp_coll_kind_t kind, tp_coll_op_t op, tp_dtype_t dt) {
  if (kind != TP_COLL_ALL_REDUCE && kind != TP_COLL_REDUCE_SCATTER) return NULL;
  bool is_bool = dt == TP_DTYPE_BOOL;
  if ((tp_dtype_is_complex(dt) && op != TP_COLL_SUM && op != TP_COLL_AVG) ||
      (is_bitwise(op) && !is_bool && !tp_dtype_is_int(dt)) || (is_bool && op == TP_COLL_AVG))
    return tp_make_status(TP_INVALID_ARGUMENT, "ReduceOp.%s is not supported for %s tensors",
                          tp_coll_op_names[op], tp_dtype_name(dt));
  if (kind == TP_COLL_REDUCE_SCATTER && is_bitwise(op))
    return tp_make_status(TP_INVALID_ARGUMENT, "reduce_scatter: ReduceOp.%s is not supported "
                          "(all_reduce takes it)", tp_coll_op_names[op]);
  return NULL;
}

/* The elementwise combination of |op| on elements of |dt| (checked by tp_coll_check). */
static tp_hlo_binary_t combiner(tp_dtype_t dt, tp_coll_op_t op) {
  bool is_bool = dt == TP_DTYPE_BOOL;
  switch (op) {
    case TP_COLL_PRODUCT: return is_bool ? TP_HLO_AND : TP_HLO_MUL;
    case TP_COLL_MIN: return is_bool ? TP_HLO_AND : TP_HLO_MIN;
    case TP_COLL_MAX: return is_bool ? TP_HLO_OR : TP_HLO_MAX;
    case TP_COLL_BAND: return TP_HLO_AND;
    case TP_COLL_BOR: return TP_HLO_OR;
    case TP_COLL_BXOR: return TP_HLO_XOR;
    default: return is_bool ? TP_HLO_OR : TP_HLO_ADD; /* SUM, AVG */
  }
}

/* AVG's division of a sum by |n|: floored for integers, as the host transport does. */
static tp_hlo_value_t average(tp_hlo_builder_t *b, tp_hlo_value_t sum, int n) {
  if (tp_dtype_is_float(sum.dtype))
    return tp_hlo_binary(b, TP_HLO_DIV, sum,
                         tp_hlo_broadcast_to(b, tp_hlo_constant(b, sum.dtype, n), 1, sum.dims));
  tp_hlo_value_t by = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, sum.dtype, n), 1, sum.dims);
  tp_hlo_value_t q = tp_hlo_binary(b, TP_HLO_DIV, sum, by);
  tp_hlo_value_t zero = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, sum.dtype, 0), 1, sum.dims);
  tp_hlo_value_t one = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, sum.dtype, 1), 1, sum.dims);
  tp_hlo_value_t neg_rem = tp_hlo_compare(b, TP_CMP_LT, tp_hlo_binary(b, TP_HLO_REM, sum, by), zero);
  return tp_hlo_select(b, neg_rem, tp_hlo_binary(b, TP_HLO_SUB, q, one), q);
}

/* Broadcast as a sum of the root's bits (as integers) and every other participant's zeros:
 * exact for every value (NaN payloads, -0.0), where a sum of the values would not be. */
static tp_hlo_value_t broadcast(tp_hlo_builder_t *b, tp_hlo_value_t x, int root, int n) {
  tp_dtype_t bits = x.dtype;
  if (tp_dtype_is_float(x.dtype))
    bits = tp_dtype_size(x.dtype) == 2 ? TP_DTYPE_I16 : tp_dtype_size(x.dtype) == 4 ? TP_DTYPE_I32
                                                                                    : TP_DTYPE_I64;
  tp_hlo_value_t v = bits == x.dtype ? x : tp_hlo_bitcast(b, x, bits, 1, x.dims);
  tp_hlo_value_t mine = tp_hlo_compare(b, TP_CMP_EQ, tp_hlo_replica_id(b),
                                       tp_hlo_constant_i(b, TP_DTYPE_I32, root));
  tp_hlo_value_t zero = tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, bits, 0), 1, v.dims);
  v = tp_hlo_select(b, tp_hlo_broadcast_to(b, mine, 1, v.dims), v, zero);
  v = tp_hlo_collective(b, TP_HLO_ALL_REDUCE, v, n, bits == TP_DTYPE_BOOL ? TP_HLO_OR : TP_HLO_ADD);
  return bits == x.dtype ? v : tp_hlo_bitcast(b, v, x.dtype, 1, v.dims);
}

/* A bitwise all_reduce of integers, which not every plugin's all_reduce takes (XLA's CPU one
 * does not): every participant's values gathered, then reduced here. */
static tp_hlo_value_t bitwise_all_reduce(tp_hlo_builder_t *b, tp_hlo_value_t x, int n,
                                         tp_hlo_binary_t op) {
  tp_hlo_value_t all = tp_hlo_collective(b, TP_HLO_ALL_GATHER, x, n, op);
  all = tp_hlo_reshape(b, all, 2, (int64_t[]){n, x.dims[0]});
  tp_hlo_value_t init = tp_hlo_constant_i(b, x.dtype, op == TP_HLO_AND ? -1 : 0);
  return tp_hlo_reduce(b, all, init, op, 1, (int64_t[]){0});
}

/* An all_reduce as a reduce_scatter then an all_gather, the input padded to a multiple of |n|.
 * XLA's CPU plugin has each participant reduce the whole buffer in its all_reduce, n times the
 * work of one reduce_scatter. Measured over 4 devices on 2 cores (all_reduce / this): 64 MiB
 * 176 / 64 ms, 16 MiB 16 / 14 ms, 4 MiB 4.5 / 5.5 ms, 1 MiB 0.9 / 1.8 ms; so from 8 MiB. The
 * barrier keeps the compiler from merging the pair back into an all_reduce. */
#define SCATTER_GATHER_BYTES (8 << 20)
static tp_hlo_value_t scatter_gather_all_reduce(tp_hlo_builder_t *b, tp_hlo_value_t x, int n,
                                                tp_hlo_binary_t op) {
  int64_t m = x.dims[0], padded = (m + n - 1) / n * n;
  if (padded != m)
    x = tp_hlo_pad(b, x, tp_hlo_constant_i(b, x.dtype, 0), (int64_t[]){0},
                   (int64_t[]){padded - m});
  tp_hlo_value_t y = tp_hlo_collective(b, TP_HLO_REDUCE_SCATTER, x, n, op);
  y = tp_hlo_collective(b, TP_HLO_ALL_GATHER, tp_hlo_optimization_barrier(b, y), n, op);
  if (padded != m) y = tp_hlo_slice(b, y, (int64_t[]){0}, (int64_t[]){m}, (int64_t[]){1});
  return y;
}

tp_hlo_value_t tp_coll_emit(tp_hlo_builder_t *b, tp_coll_kind_t kind, tp_coll_op_t op, int root,
                            int n, tp_dtype_t dt, tp_hlo_value_t x) {
  switch (kind) {
    case TP_COLL_ALL_REDUCE:
    case TP_COLL_REDUCE_SCATTER: {
      tp_hlo_binary_t combine = combiner(dt, op);
      tp_hlo_value_t y;
      if (x.dtype != TP_DTYPE_BOOL && is_bitwise(op))
        y = bitwise_all_reduce(b, x, n, combine); /* tp_coll_check allows all_reduce only */
      else if (kind == TP_COLL_REDUCE_SCATTER)
        y = tp_hlo_collective(b, TP_HLO_REDUCE_SCATTER, x, n, combine);
      else if (n > 1 && tp_hlo_builder_xla_cpu(b) &&
               x.dims[0] * (int64_t)tp_dtype_size(x.dtype) >= SCATTER_GATHER_BYTES)
        y = scatter_gather_all_reduce(b, x, n, combine);
      else
        y = tp_hlo_collective(b, TP_HLO_ALL_REDUCE, x, n, combine);
      return op == TP_COLL_AVG ? average(b, y, n) : y;
    }
    case TP_COLL_BROADCAST: return broadcast(b, x, root, n);
    case TP_COLL_ALL_GATHER: return tp_hlo_collective(b, TP_HLO_ALL_GATHER, x, n, TP_HLO_ADD);
    default: return tp_hlo_collective(b, TP_HLO_ALL_TO_ALL, x, n, TP_HLO_ADD);
  }
}

/* ---- the _c10d_functional rows ---- */

/* funcol's reduce_op strings, by tp_coll_op_t. */
static const char *const kFuncolOps[] = {"sum", "avg", "product", "min", "max",
                                         "band", "bor", "bxor"};

/* Argument |i| of the row (the code column says which collective), as infer turns them:
 * the reduce_op string becomes an INT of tp_coll_op_t, the group's name NONE (the group is the
 * program's replicas, not part of its text). Fills the collective's parts; |group_size| is -1
 * where the row has none (the builder's replica count serves). */
typedef struct {
  tp_coll_kind_t kind;
  tp_coll_op_t op;
  int root;
  int64_t group_size;
} call_t;

static tp_status_t *parse(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, call_t *c) {
  memset(c, 0, sizeof(*c));
  c->kind = (tp_coll_kind_t)op->code;
  c->group_size = -1;
  /* Positions: the reduce_op, the group size and the group name, per collective. */
  int at_op = -1, at_size = -1, at_root = -1, at_name;
  switch (c->kind) {
    case TP_COLL_ALL_REDUCE: at_op = 1, at_name = 2; break;
    case TP_COLL_ALL_GATHER: at_size = 1, at_name = 2; break;
    case TP_COLL_REDUCE_SCATTER: at_op = 1, at_size = 2, at_name = 3; break;
    case TP_COLL_BROADCAST: at_root = 1, at_name = 2; break;
    default: at_name = 3; break; /* all_to_all_single: the split lists at 1 and 2 */
  }
  if (n_args != at_name + 1 || args[0].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_UNIMPLEMENTED, "%s: unexpected arguments", op->name);
  if (at_op >= 0) {
    tp_op_arg_t *a = &args[at_op];
    if (a->kind == TP_ARG_STR) {
      int k = 0;
      while (k < TP_COLL_OP_COUNT && strcmp(a->s, kFuncolOps[k]) != 0) k++;
      if (k == TP_COLL_OP_COUNT)
        return tp_make_status(TP_UNIMPLEMENTED, "%s: reduce_op '%s'", op->name, a->s);
      memset(a, 0, sizeof(*a));
      a->kind = TP_ARG_INT;
      a->i = k;
    }
    c->op = (tp_coll_op_t)args[at_op].i;
  }
  if (at_size >= 0) {
    c->group_size = args[at_size].i;
    if (c->group_size < 1)
      return tp_make_status(TP_INVALID_ARGUMENT, "%s: group_size %lld", op->name,
                            (long long)c->group_size);
  }
  if (at_root >= 0) c->root = (int)args[at_root].i;
  if (args[at_name].kind == TP_ARG_STR) memset(&args[at_name], 0, sizeof(args[at_name]));
  return NULL;
}

tp_status_t *tp_infer_collective(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                 tp_meta_t *out, int *n_out) {
  call_t c;
  TP_RETURN_IF_ERROR(parse(op, args, n_args, &c));
  const tp_meta_t *x = &args[0].meta;
  TP_RETURN_IF_ERROR(tp_coll_check(c.kind, c.op, x->dtype));
  out[0] = *x;
  *n_out = 1;
  if (c.kind == TP_COLL_ALL_GATHER || c.kind == TP_COLL_REDUCE_SCATTER) {
    if (x->ndim < 1)
      return tp_make_status(TP_UNIMPLEMENTED, "%s of a 0-d tensor", op->name);
    if (c.kind == TP_COLL_ALL_GATHER) out[0].sizes[0] *= c.group_size;
    else if (x->sizes[0] % c.group_size != 0)
      return tp_make_status(TP_INVALID_ARGUMENT, "%s: input dim 0 (%lld) is not a multiple of "
                            "the group size %lld", op->name, (long long)x->sizes[0],
                            (long long)c.group_size);
    else out[0].sizes[0] /= c.group_size;
  }
  if (c.kind == TP_COLL_ALL_TO_ALL) {
    /* Even splits only: every split of both lists is dim 0 over the list's length. */
    const tp_op_arg_t *o = &args[1], *i = &args[2];
    bool even = x->ndim >= 1 && o->kind == TP_ARG_INTS && i->kind == TP_ARG_INTS &&
                o->n == i->n && o->n > 0 && x->sizes[0] % o->n == 0;
    for (int k = 0; even && k < o->n; k++)
      even = o->ints[k] == x->sizes[0] / o->n && i->ints[k] == o->ints[k];
    if (!even) return tp_make_status(TP_UNIMPLEMENTED, "%s with uneven splits", op->name);
  }
  return NULL;
}

void tp_emit_collective(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                        int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                        tp_hlo_value_t *out) {
  call_t c;
  if (!tp_emit_ok(b, parse(op, (tp_op_arg_t *)args, n_args, &c))) return;
  int n = c.kind == TP_COLL_ALL_TO_ALL ? args[1].n
          : c.group_size > 0           ? (int)c.group_size
                                       : tp_hlo_builder_replicas(b);
  int64_t numel = tp_meta_numel(&args[0].meta);
  tp_hlo_value_t flat = tp_hlo_reshape(b, in[0], 1, &numel);
  tp_hlo_value_t y = numel ? tp_coll_emit(b, c.kind, c.op, c.root, n, args[0].meta.dtype, flat)
                           : flat;
  out[0] = tp_hlo_reshape(b, y, out_meta->ndim, out_meta->sizes);
}
