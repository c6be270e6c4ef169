/* The op library's interface: how one ATen op is described (arguments, inferred outputs) and
 * lowered (an emitter writing StableHLO through hlo/). Every native op is one row of
 * op_table.def. Emitters see logical values (views already read); they never see storages,
 * strides or PJRT, so the eager executor and a whole-graph compiler can share them.
 * Depends on base/ and hlo/ only. */
#ifndef TP_OPS_OP_H_
#define TP_OPS_OP_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"
#include "hlo/builder.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  TP_ARG_NONE = 0,  /* None / absent optional */
  TP_ARG_TENSOR,    /* a device tensor */
  TP_ARG_SCALAR,    /* a Scalar or wrapped Python number; its value is a program input */
  TP_ARG_INT,       /* int / SymInt / ScalarType (as tp_dtype_t) / bool attribute */
  TP_ARG_INTS,      /* int[] attribute */
  TP_ARG_FLOAT,     /* float attribute (part of the program) */
  TP_ARG_STR,       /* short string attribute (rounding_mode, approximate, ...) */
} tp_arg_kind_t;

/* Logical shape and element type. In an inferred output, |writes_arg| = i + 1 says the output
 * is written into argument i (an input the op updates in place, like batch norm's running
 * stats) rather than returned; 0 means a returned output. */
typedef struct {
  tp_dtype_t dtype;
  int ndim;
  int64_t sizes[TP_MAX_DIMS];
  int writes_arg;
} tp_meta_t;

typedef struct {
  tp_arg_kind_t kind;
  tp_meta_t meta;      /* TENSOR: its meta; SCALAR: ndim 0 and the scalar's own type */
  bool wrapped;        /* SCALAR from a Python number: promotes by category only */
  int64_t i;           /* INT value */
  double f;            /* FLOAT value; SCALAR of a float or complex type: its (real) value */
  double fi;           /* SCALAR of a complex type: its imaginary part */
  int n;               /* INTS length */
  int64_t ints[TP_MAX_DIMS];
  char s[16];          /* STR value, NUL-terminated: its first 15 bytes when longer */
  const char *text;    /* STR value whole (an assertion's message); valid while the call is
                          inferred only, so infer turns what it needs of it into other kinds */
  tp_dtype_t scalar_dtype; /* SCALAR: the type its program input takes; set by infer */
  bool contiguous;     /* TENSOR: PyTorch's is_contiguous() of the argument (some CPU kernels
                          choose their algorithm, and so their results, by it) */
  bool channels_last;  /* TENSOR (eager): a 4-d or 5-d argument in the channels-last memory
                          format (and not contiguous): an emitter may compute in that order */
} tp_op_arg_t;

#define TP_MAX_ARGS 16
#define TP_MAX_OUTS 8

typedef struct tp_op_def tp_op_def_t;

/* Infers outputs from arguments: fills |out| (up to TP_MAX_OUTS) and *n_out, and each SCALAR
 * argument's scalar_dtype. A SCALAR's value is a program input, outside the signature: an op
 * whose program depends on the value itself must turn the argument into a FLOAT attribute. Errors are the user's (INVALID_ARGUMENT with PyTorch-like text), except
 * UNIMPLEMENTED, which means "this call has no native lowering": the caller runs it on CPU.
 * A tensor-list argument arrives flattened: an INT with its length, then its tensors. */
typedef tp_status_t *(*tp_op_infer_fn)(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                       tp_meta_t *out, int *n_out);
/* Emits the op: |in| holds a value per argument (TENSOR/SCALAR; others unused); writes one value
 * per inferred output into |out|, of exactly the inferred meta. */
typedef void (*tp_op_emit_fn)(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                              int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                              tp_hlo_value_t *out);

enum {
  TP_OPF_NONE = 0,
  TP_OPF_ALPHA = 1 << 0,        /* third argument scales the second (add/sub) */
  TP_OPF_FLOAT_RESULT = 1 << 1, /* integer inputs promote to the default float (div, exp, ...) */
  TP_OPF_NO_BOOL = 1 << 2,      /* rejects bool inputs (sub, neg) */
  TP_OPF_BOOL_RESULT = 1 << 3,  /* result is bool (comparisons, isnan, logical_*) */
  TP_OPF_INT_ONLY = 1 << 4,     /* integral and bool inputs only (bitwise ops) */
  TP_OPF_FLOAT_ONLY = 1 << 5,   /* floating inputs only */
  TP_OPF_OUT_DTYPE = 1 << 6,    /* the out= form computes in the out tensor's dtype (arange) */
  TP_OPF_RANDOM = 1 << 7,       /* the caller appends the generator's key (SCALAR i64) */
  TP_OPF_GRAPH = 1 << 8,        /* whole graphs only: in eager mode PyTorch's view machinery or
                                   composite kernels serve the op (views, factories) */
  TP_OPF_COMPLEX = 1 << 9,      /* the row lowers complex arguments and results correctly; rows
                                   without it leave every complex call to CPU */
  TP_OPF_LIST_CHUNKS = 1 << 10, /* the op over a tensor list equals the op over the results of the
                                   op over consecutive chunks of it (cat): a list too long for one
                                   call (TP_MAX_ARGS) is reduced that way first */
  /* PyTorch's rules for the out= tensors (and the self of an in-place form) of the row's ops. */
  TP_OPF_OUT_CAST = 1 << 11,     /* an out= tensor may have any dtype the result can be cast to
                                    (TensorIterator ops); without it, exactly the result's dtype,
                                    as structured and most other kernels require */
  TP_OPF_DISJOINT_ARG0 = 1 << 12, /* the written tensor shares no memory with argument 0 (a tensor
                                    or tensor list), not even by being it (assert_no_overlap);
                                    without it, only a partial overlap is refused, so an input
                                    may be the output itself, as for elementwise ops */
  TP_OPF_DISJOINT_ARGS = 1 << 13, /* the same for every later tensor argument (an index, a src) */
  TP_OPF_OUTS_DISJOINT = 1 << 14, /* its out= tensors share no memory with each other (aminmax:
                                    a ValueError) */
  TP_OPF_COUNTED = 1 << 15,      /* a call's result size may depend on the values (nonzero): the
                                    caller appends a count argument (TP_COUNT_UNKNOWN below) */
  TP_OPF_LIST_ZIP = 1 << 16,     /* the op applies at each index of its tensor-list arguments
                                    in turn (an optimizer step, parameter by parameter): the glue
                                    makes one call per index, each list replaced by its element
                                    (an empty list by None), so each shape compiles once and no
                                    list length meets TP_MAX_ARGS. Every output is written into
                                    an argument (writes_arg); nothing runs unless every index
                                    infers */
};

/* The count protocol of TP_OPF_COUNTED rows. The caller appends an INT argument, the count,
 * first TP_COUNT_UNKNOWN. A call whose sizes are known ignores it. A call whose result's size
 * depends on the values sets it to TP_COUNT_PASS (or TP_COUNT_PASS_EXACT) and infers (and emits)
 * the count pass instead: one 0-d i64 output, the number n of the result's rows. The caller runs
 * the pass, reads n (one device-to-host sync, as CUDA's nonzero makes), sets the argument and
 * infers again. After TP_COUNT_PASS it may set tp_op_count_capacity(n): the outputs' leading size
 * is then at most that and at least n, and their first n rows are the result (the caller drops
 * the rest), so a shape compiles a few programs (one per power of two) rather than one per count.
 * After TP_COUNT_PASS_EXACT (the rows are not the leading dim, or must broadcast with other
 * sizes), or for outputs of a given size, it sets n itself. The pass may also count what CPU
 * checks of the values before it runs (multinomial's probabilities: a verdict, set exactly), and
 * infer then raises CPU's error. A whole graph appends no count: such calls are UNIMPLEMENTED
 * there. */
enum { TP_COUNT_UNKNOWN = -1, TP_COUNT_PASS = -2, TP_COUNT_PASS_EXACT = -3 };
/* The capacity for a count of |count| rows: 0, or the next power of two (at most twice it). */
int64_t tp_op_count_capacity(int64_t count);

/* How PyTorch's CPU kernels lay out a row's fresh (functional) outputs, which the eager glue
 * allocates alike: row-major; as TensorIterator does (elementwise rows: the dims ordered by the
 * tensor arguments' strides, so a channels-last or transposed input gives a like output); or in
 * the channels-last format (4-d, 5-d outputs) when one of the tensor arguments [first, first +
 * count) suggests it (convolution, normalization, pooling, padding, resampling). */
typedef enum { TP_LAYOUT_CONTIGUOUS, TP_LAYOUT_ITERATOR, TP_LAYOUT_SUGGESTED } tp_layout_kind_t;
typedef struct {
  tp_layout_kind_t kind;
  int first, count; /* TP_LAYOUT_SUGGESTED: the arguments that decide */
} tp_layout_t;

struct tp_op_def {
  const char *name;     /* ATen schema name "add.Tensor"; the functional form */
  const char *inplace;  /* "add_.Tensor" or NULL */
  const char *out;      /* "add.out" or NULL */
  tp_op_infer_fn infer;
  tp_op_emit_fn emit;
  int code;             /* family parameter: a tp_unary_t / tp_binary_t (families.h) */
  unsigned flags;
};

/* The table, sorted by name. */
extern const tp_op_def_t tp_op_table[];
extern const int tp_op_count;
/* The layout rule of |op|'s fresh outputs, by its family (layout.c). */
tp_layout_t tp_op_layout(const tp_op_def_t *op);
/* The shape buckets' per-op padding rules: the one table both executors follow (exec/bucket.c for
 * eager calls, the torch.compile backend's graph rewrite through torch_pjrt._C.pad_rule).
 * How a call of a row may run on padded values (a program compiled for a shape bucket serves
 * every shape inside it): what the padding of each tensor argument must read as so that the
 * values it computes at the live positions equal the unpadded call's. NONE: the call cannot (the
 * row's family is not bucketed, or a padded dim is one it reads in a way no fill value makes
 * exact, like var's count). ANY: nothing at a live position reads that padding (elementwise ops,
 * reductions over unpadded dims, per-sample ops padded in the batch). Otherwise padding reads as
 * 0 (sums, contractions: 0 * 0 adds nothing; indices: 0 is in range), 1 (products, all), the
 * lowest value (maxima, softmax: -inf adds exp(-inf) = 0), the highest (minima), or VALUE (an
 * argument's value: nll_loss's ignore_index, so a padded sample counts nowhere); bool as
 * false/true alike. |live|: the call also needs its live sizes (tp_op_emit_live: cat along a
 * padded dim, index_copy's entries, mean's count; the graph rewrite's constant_pad_nd); an
 * executor that cannot give them refuses the call. */
typedef enum { TP_PAD_NONE, TP_PAD_ANY, TP_PAD_ZERO, TP_PAD_ONE, TP_PAD_LOWEST, TP_PAD_HIGHEST,
               TP_PAD_VALUE } tp_pad_t;
typedef struct {
  tp_pad_t fill[TP_MAX_ARGS]; /* per argument; ANY for one that is not a padded tensor */
  int64_t value[TP_MAX_ARGS]; /* TP_PAD_VALUE: what the padding reads as */
  bool live;
} tp_pad_rule_t;
/* False: the call cannot run padded so. |padded[i]|: a bit per dim of argument i that is padded
 * (none at all asks whether the row is bucketed). */
bool tp_op_pad_rule(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                    const uint32_t *padded, tp_pad_rule_t *rule);
/* Whether the row's outputs may be padded where their own sizes change from call to call, with
 * no tensor argument padded: its sizes come from scalar values (arange's end), and the live
 * values are the front of the same computation at the bucket's sizes. */
bool tp_op_pads_outputs(const tp_op_def_t *op);
/* Whether the call treats the first |k| dims of its outputs as rows: each output row comes from
 * the same row of each argument that has those dims (its first k dims, sizes equal) and from
 * the other arguments whole, so the rows may be taken in any consistent order and padding rows
 * reach only padding rows. Elementwise ops (any k; an argument without the row dims broadcasts
 * over them), layer norm, softmax and reductions over later dims, and a matrix product's rows
 * (k = 1). *whole (a bit per argument) gets the arguments taken whole although they have k
 * leading dims (a matrix product's right operand). */
bool tp_op_rowwise(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args, int k,
                   uint32_t *whole);
/* Emits the call at the bucket's sizes where its result depends on where the live values end,
 * not only on the values (cat along a padded dim: each part starts where the last one's live
 * values end; mean over a padded dim: the live count). live(ctx, i, d): argument i's live size in dim d, an integer scalar of the
 * program. False: the op's own emitter serves (padding at the end of each dim reaches only
 * padding). */
typedef tp_hlo_value_t (*tp_live_size_fn)(void *ctx, int arg, int dim);
/* Whether tp_op_emit_live serves the row's calls whose rule asks for live sizes. */
bool tp_op_emits_live(const tp_op_def_t *op);
bool tp_op_emit_live(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                     int n_args, const uint32_t *padded, const tp_hlo_value_t *in,
                     tp_live_size_fn live, void *live_ctx, const tp_meta_t *out_meta,
                     tp_hlo_value_t *out);
/* Binary search by functional, in-place or out name; returns the index or -1.
 * *out_variant (may be NULL) says which of the row's forms |name| is. */
typedef enum { TP_VARIANT_FUNCTIONAL, TP_VARIANT_INPLACE, TP_VARIANT_OUT } tp_op_variant_t;
int tp_op_lookup(const char *name, tp_op_variant_t *out_variant);

/* Shared helpers for emitters and infer functions. */
tp_status_t *tp_broadcast_shapes(const tp_meta_t *a, const tp_meta_t *b, tp_meta_t *out);
/* PyTorch's result_type over the TENSOR/SCALAR args among |args[0..n)|. */
tp_dtype_t tp_result_type(const tp_op_arg_t *args, int n);
/* Converts and broadcasts |v| to |meta|. */
tp_hlo_value_t tp_emit_cast_to(tp_hlo_builder_t *b, tp_hlo_value_t v, const tp_meta_t *meta);
int64_t tp_meta_numel(const tp_meta_t *m);
/* UNIMPLEMENTED when a TENSOR/SCALAR of |args| or one of |outs| is complex (or has no
 * representable type) and |op| lacks TP_OPF_COMPLEX: both executors call it around infer. */
tp_status_t *tp_op_check_complex(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args,
                                 const tp_meta_t *outs, int n_outs);
/* UNIMPLEMENTED when infer left a STR of |args| longer than its s holds (only an op that turns
 * the whole text into another kind of argument takes one): both executors call it after infer. */
tp_status_t *tp_op_check_text(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args);

#ifdef __cplusplus
}
#endif
#endif  /* TP_OPS_OP_H_ */
