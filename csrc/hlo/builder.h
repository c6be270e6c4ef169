/* StableHLO text builder: one `main` function in generic op form, built value by value.
 * Emitters call these functions; errors (bad shapes, host OOM) are sticky in the builder and
 * reported once by tp_hlo_finish, so an emitter can chain calls without checking each one.
 * Knows nothing of PJRT or PyTorch. Not thread-safe: one builder per thread. */
#ifndef TP_HLO_BUILDER_H_
#define TP_HLO_BUILDER_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TP_MAX_DIMS 8

/* A value: its SSA id and tensor type. Plain data, passed by value. id < 0 marks an error. */
typedef struct {
  int id;
  tp_dtype_t dtype;
  int ndim;
  int64_t dims[TP_MAX_DIMS];
} tp_hlo_value_t;

typedef struct tp_hlo_builder tp_hlo_builder_t;

typedef enum {
  TP_HLO_ADD, TP_HLO_SUB, TP_HLO_MUL, TP_HLO_DIV, TP_HLO_REM, TP_HLO_MAX, TP_HLO_MIN,
  TP_HLO_POW, TP_HLO_AND, TP_HLO_OR, TP_HLO_XOR, TP_HLO_ATAN2,
  TP_HLO_SHL, TP_HLO_SHR_A, TP_HLO_SHR_L, TP_HLO_NEXT_AFTER,
  /* CHLO special functions: polygamma(n, x), zeta(x, q). */
  TP_HLO_POLYGAMMA, TP_HLO_ZETA,
} tp_hlo_binary_t;

typedef enum {
  TP_HLO_NEG, TP_HLO_ABS, TP_HLO_EXP, TP_HLO_EXPM1, TP_HLO_LOG, TP_HLO_LOG1P, TP_HLO_SQRT,
  TP_HLO_RSQRT, TP_HLO_CBRT, TP_HLO_TANH, TP_HLO_LOGISTIC, TP_HLO_SIN, TP_HLO_COS, TP_HLO_TAN,
  TP_HLO_FLOOR, TP_HLO_CEIL, TP_HLO_ROUND_EVEN, TP_HLO_SIGN, TP_HLO_NOT, TP_HLO_IS_FINITE,
  /* CHLO ops, which the plugins' MLIR parser accepts alongside StableHLO. */
  TP_HLO_ASIN, TP_HLO_ACOS, TP_HLO_ATAN, TP_HLO_SINH, TP_HLO_COSH, TP_HLO_ASINH, TP_HLO_ACOSH,
  TP_HLO_ATANH, TP_HLO_ERF, TP_HLO_ERFC, TP_HLO_ERF_INV, TP_HLO_LGAMMA, TP_HLO_DIGAMMA,
  TP_HLO_IS_INF, TP_HLO_IS_POS_INF, TP_HLO_IS_NEG_INF, TP_HLO_BESSEL_I1E,
} tp_hlo_unary_t;

typedef enum { TP_CMP_EQ, TP_CMP_NE, TP_CMP_LT, TP_CMP_LE, TP_CMP_GT, TP_CMP_GE } tp_hlo_cmp_t;

/* Creates an empty builder; caller owns it. */
tp_status_t *tp_hlo_builder_create(tp_hlo_builder_t **out_builder);
void tp_hlo_builder_free(tp_hlo_builder_t *b);
/* Tunes emission for XLA's CPU code generator (the client's platform is "cpu"). That generator
 * reduces leading dims inside a fusion one element at a time, so a reduction that keeps the
 * innermost dim gets its input materialized first (an optimization barrier) and runs a vector at
 * a time. Other backends fuse such reductions well and keep the plain form. */
void tp_hlo_builder_set_xla_cpu(tp_hlo_builder_t *b, bool on);
bool tp_hlo_builder_xla_cpu(const tp_hlo_builder_t *b);
/* The program is a whole graph or a fused region (many ops), not one eager op: an emitter may
 * add boundaries that keep XLA from fusing its result into its consumers. */
void tp_hlo_builder_set_whole_graph(tp_hlo_builder_t *b, bool on);
bool tp_hlo_builder_whole_graph(const tp_hlo_builder_t *b);
/* The replica count of the program being built (1 unless set): a collective emitted without a
 * count of its own runs over all of them. */
void tp_hlo_builder_set_replicas(tp_hlo_builder_t *b, int n);
int tp_hlo_builder_replicas(const tp_hlo_builder_t *b);
/* Sets the builder's sticky error (keeps the first). Emitters use it for their own checks. */
void tp_hlo_fail(tp_hlo_builder_t *b, tp_status_t *status);
bool tp_hlo_ok(const tp_hlo_builder_t *b);

/* Runtime checks. tp_hlo_check records |bad| (pred, any shape; ignored inside a while body)
 * failing with |code| (an integer scalar, constant or not; base/status.h's check codes): the
 * program's check flag is the largest code of the checks any element of whose |bad| is true,
 * TP_CHECK_NONE when none is. tp_hlo_check_flag yields that flag (s32[]) for the caller to return
 * as an extra output; false when nothing was recorded. */
void tp_hlo_check(tp_hlo_builder_t *b, tp_hlo_value_t bad, tp_hlo_value_t code);
bool tp_hlo_check_flag(tp_hlo_builder_t *b, tp_hlo_value_t *out_flag);

/* Adds a parameter of `main`. alias_output >= 0 donates it to that output (tf.aliasing_output). */
tp_hlo_value_t tp_hlo_param(tp_hlo_builder_t *b, tp_dtype_t dtype, int ndim, const int64_t *dims,
                            int alias_output);
/* Finishes `main` returning |outs| and yields the module text (caller owns, free()).
 * Returns the first error recorded while building, if any. */
tp_status_t *tp_hlo_finish(tp_hlo_builder_t *b, const tp_hlo_value_t *outs, int n_outs,
                           char **out_text);

/* Ops. Shapes are checked where a mistake would otherwise reach the compiler. */
tp_hlo_value_t tp_hlo_constant(tp_hlo_builder_t *b, tp_dtype_t dtype, double value);
tp_hlo_value_t tp_hlo_constant_i(tp_hlo_builder_t *b, tp_dtype_t dtype, int64_t value);
/* A complex scalar constant re + im*i of complex |dtype|. */
tp_hlo_value_t tp_hlo_constant_c(tp_hlo_builder_t *b, tp_dtype_t dtype, double re, double im);
tp_hlo_value_t tp_hlo_iota(tp_hlo_builder_t *b, tp_dtype_t dtype, int ndim, const int64_t *dims,
                           int dim);
/* Converts elementwise as PyTorch does: complex to real keeps the real part (to bool: either part
 * nonzero); real to complex has a zero imaginary part. */
tp_hlo_value_t tp_hlo_convert(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_dtype_t to);
/* Complex values from f32 (f64) parts of one shape, and the parts of a complex value (real of a real
 * value is itself, imag of it zeros). */
tp_hlo_value_t tp_hlo_complex(tp_hlo_builder_t *b, tp_hlo_value_t re, tp_hlo_value_t im);
tp_hlo_value_t tp_hlo_real(tp_hlo_builder_t *b, tp_hlo_value_t x);
tp_hlo_value_t tp_hlo_imag(tp_hlo_builder_t *b, tp_hlo_value_t x);
/* stablehlo.fft over the trailing |n| (1..3) dims with |lengths| (the signal sizes). FFT/IFFT:
 * complex -> complex; RFFT: f32/f64 -> its complex type, last dim lengths[n-1]/2+1; IRFFT:
 * complex (last dim lengths[n-1]/2+1) -> its parts' type. IFFT and IRFFT divide by the product of |lengths|. */
typedef enum { TP_HLO_FFT, TP_HLO_IFFT, TP_HLO_RFFT, TP_HLO_IRFFT } tp_hlo_fft_t;
tp_hlo_value_t tp_hlo_fft(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_fft_t type, int n,
                          const int64_t *lengths);
/* Reinterprets bits; element sizes may differ (the last dim grows or shrinks as StableHLO says). */
tp_hlo_value_t tp_hlo_bitcast(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_dtype_t to, int ndim,
                              const int64_t *dims);
tp_hlo_value_t tp_hlo_reshape(tp_hlo_builder_t *b, tp_hlo_value_t x, int ndim,
                              const int64_t *dims);
tp_hlo_value_t tp_hlo_broadcast_in_dim(tp_hlo_builder_t *b, tp_hlo_value_t x, int ndim,
                                       const int64_t *dims, const int64_t *bcast_dims);
/* Broadcasts |x| to |ndim|/|dims| with numpy rules (trailing alignment). */
tp_hlo_value_t tp_hlo_broadcast_to(tp_hlo_builder_t *b, tp_hlo_value_t x, int ndim,
                                   const int64_t *dims);
tp_hlo_value_t tp_hlo_slice(tp_hlo_builder_t *b, tp_hlo_value_t x, const int64_t *start,
                            const int64_t *limit, const int64_t *stride);
tp_hlo_value_t tp_hlo_transpose(tp_hlo_builder_t *b, tp_hlo_value_t x, const int64_t *perm);
tp_hlo_value_t tp_hlo_unary(tp_hlo_builder_t *b, tp_hlo_unary_t op, tp_hlo_value_t x);
/* |x| as it is, materialized: the compiler neither moves work across it nor merges through it. */
tp_hlo_value_t tp_hlo_optimization_barrier(tp_hlo_builder_t *b, tp_hlo_value_t x);

/* Functions (MLIR text: func.func ops, their symbols apart from every other, hlo/module.h) placed
 * in the module after @main, for tp_hlo_call; once per |key| (a module called twice). */
void tp_hlo_add_functions(tp_hlo_builder_t *b, int64_t key, const char *text);
/* func.call @|callee|(args) with results of |result_types|' types (their dtype, ndim and dims). */
void tp_hlo_call(tp_hlo_builder_t *b, const char *callee, const tp_hlo_value_t *args, int n_args,
                 const tp_hlo_value_t *result_types, int n_results, tp_hlo_value_t *outs);
/* Elementwise binary; operands must already share shape and dtype. */
tp_hlo_value_t tp_hlo_binary(tp_hlo_builder_t *b, tp_hlo_binary_t op, tp_hlo_value_t x,
                             tp_hlo_value_t y);
tp_hlo_value_t tp_hlo_compare(tp_hlo_builder_t *b, tp_hlo_cmp_t dir, tp_hlo_value_t x,
                              tp_hlo_value_t y);
tp_hlo_value_t tp_hlo_select(tp_hlo_builder_t *b, tp_hlo_value_t pred, tp_hlo_value_t on_true,
                             tp_hlo_value_t on_false);
/* Cholesky factor of the (batched) matrices in the last two dims of |x|, lower or upper. */
tp_hlo_value_t tp_hlo_cholesky(tp_hlo_builder_t *b, tp_hlo_value_t x, bool lower);
/* Solves op(a) x = rhs (left_side) or x op(a) = rhs for triangular |a|; op = transpose when
 * |transpose_a|. Batch dims must agree. */
tp_hlo_value_t tp_hlo_triangular_solve(tp_hlo_builder_t *b, tp_hlo_value_t a, tp_hlo_value_t rhs,
                                       bool left_side, bool lower, bool unit_diagonal,
                                       bool transpose_a);
/* dot_general with batch and contracting dims; result dtype |out_dtype|. */
tp_hlo_value_t tp_hlo_dot_general(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t y,
                                  int n_batch, const int64_t *x_batch, const int64_t *y_batch,
                                  int n_contract, const int64_t *x_contract,
                                  const int64_t *y_contract, tp_dtype_t out_dtype);
/* Reduces |dims| of |x| with |op| (ADD, MUL, MAX, MIN, AND, OR) from scalar |init|. */
tp_hlo_value_t tp_hlo_reduce(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t init,
                             tp_hlo_binary_t op, int n_dims, const int64_t *dims);
/* reduce_window over |x| with per-dim window sizes and (low, high) padding, stride 1, filling the
 * padding with |init|: a cumulative sum along d is a window of the dim's size padded (n-1, 0). */
tp_hlo_value_t tp_hlo_reduce_window(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t init,
                                    tp_hlo_binary_t op, const int64_t *window,
                                    const int64_t *pad_lo, const int64_t *pad_hi);
/* stablehlo.convolution. |spec| is the dimension-numbers body, e.g. "[b, f, 0, 1]x[o, i, 0, 1]->
 * [b, f, 0, 1]"; per spatial dim: window stride, low/high padding, lhs and rhs dilation. The
 * caller computes the output shape |out_dims| (rank of lhs). */
tp_hlo_value_t tp_hlo_convolution(tp_hlo_builder_t *b, tp_hlo_value_t lhs, tp_hlo_value_t rhs,
                                  const char *spec, int n_spatial, const int64_t *strides,
                                  const int64_t *pad_lo, const int64_t *pad_hi,
                                  const int64_t *lhs_dil, const int64_t *rhs_dil,
                                  int64_t feature_groups, int64_t batch_groups, tp_dtype_t out_dtype,
                                  const int64_t *out_dims);
/* Reverses |x| along |dims|. */
tp_hlo_value_t tp_hlo_reverse(tp_hlo_builder_t *b, tp_hlo_value_t x, int n_dims,
                              const int64_t *dims);
/* Gathers elements of 1-D |x| at integer |indices| (any shape); result has indices' shape. */
tp_hlo_value_t tp_hlo_gather_1d(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t indices);
/* Writes |updates| (indices' shape) into 1-D |x| at |indices|; later duplicates win. */
tp_hlo_value_t tp_hlo_scatter_1d(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t indices,
                                 tp_hlo_value_t updates);
/* Like tp_hlo_scatter_1d but combines with |op| (e.g. ADD accumulates duplicates). */
tp_hlo_value_t tp_hlo_scatter_1d_op(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t indices,
                                    tp_hlo_value_t updates, tp_hlo_binary_t op);
/* Pads |x| with scalar |value|: |lo|/|hi| per dim (negative values crop), no interior padding. */
tp_hlo_value_t tp_hlo_pad(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t value,
                          const int64_t *lo, const int64_t *hi);
/* The same with |interior| values between each two of a dim's elements (a stride's gaps). */
tp_hlo_value_t tp_hlo_pad_interior(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t value,
                                   const int64_t *lo, const int64_t *hi, const int64_t *interior);
/* Writes |update| into |x| starting at constant |start| (one index per dim). */
tp_hlo_value_t tp_hlo_update_slice(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t update,
                                   const int64_t *start);
tp_hlo_value_t tp_hlo_concatenate(tp_hlo_builder_t *b, const tp_hlo_value_t *xs, int n, int dim);
/* Stable sort of |n| (1..4) same-shaped operands along |dim| by operand 0, ascending or
 * descending, NaN ordered as the largest value (PyTorch's order); writes the sorted operands to
 * |outs| and returns outs[0]. */
tp_hlo_value_t tp_hlo_sort(tp_hlo_builder_t *b, const tp_hlo_value_t *xs, int n, int dim,
                           bool descending, tp_hlo_value_t *outs);

/* Loops: stablehlo.while over |n| (1..TP_HLO_WHILE_MAX) carried values, nestable
 * TP_HLO_WHILE_DEPTH deep. The condition and the body are built between the calls:
 *   tp_hlo_value_t s[2];
 *   tp_hlo_while_begin(b, init, 2, s);      // s: the condition's view of the carried values
 *   tp_hlo_while_body(b, <scalar bool from s>, s);  // s: now the body's view
 *   tp_hlo_while_end(b, next, outs);        // next: the body's results; outs: the loop's
 * Values made inside a region exist only there; a region may read values made before the loop. */
#define TP_HLO_WHILE_MAX 12
#define TP_HLO_WHILE_DEPTH 4
void tp_hlo_while_begin(tp_hlo_builder_t *b, const tp_hlo_value_t *init, int n,
                        tp_hlo_value_t *args);
void tp_hlo_while_body(tp_hlo_builder_t *b, tp_hlo_value_t pred, tp_hlo_value_t *args);
void tp_hlo_while_end(tp_hlo_builder_t *b, const tp_hlo_value_t *next, tp_hlo_value_t *outs);
/* x[start[0]:start[0]+sizes[0], ...] with start a scalar integer per dim (clamped into range, as
 * StableHLO does), and its update form. */
tp_hlo_value_t tp_hlo_dynamic_slice(tp_hlo_builder_t *b, tp_hlo_value_t x,
                                    const tp_hlo_value_t *start, const int64_t *sizes);
tp_hlo_value_t tp_hlo_dynamic_update_slice(tp_hlo_builder_t *b, tp_hlo_value_t x,
                                           tp_hlo_value_t update, const tp_hlo_value_t *start);

/* Collectives of a replicated program (compiled for |n| replicas), over one group holding every
 * replica, on 1-D |x| (the same shape on every replica):
 *   ALL_REDUCE      [m] -> [m]      elementwise |op| (ADD, MUL, MAX, MIN, AND, OR, XOR)
 *   ALL_GATHER      [m] -> [n*m]    replica r's |x| at [r*m, (r+1)*m)
 *   REDUCE_SCATTER  [n*m] -> [m]    replica r keeps chunk r of the all_reduce
 *   ALL_TO_ALL      [n*m] -> [n*m]  chunk j of replica r becomes chunk r of replica j
 * |op| is ignored by the two that do not reduce. */
typedef enum {
  TP_HLO_ALL_REDUCE, TP_HLO_ALL_GATHER, TP_HLO_REDUCE_SCATTER, TP_HLO_ALL_TO_ALL
} tp_hlo_collective_t;
tp_hlo_value_t tp_hlo_collective(tp_hlo_builder_t *b, tp_hlo_collective_t kind, tp_hlo_value_t x,
                                 int n, tp_hlo_binary_t op);
/* This replica's index in a replicated program, as an i32 scalar. */
tp_hlo_value_t tp_hlo_replica_id(tp_hlo_builder_t *b);

/* Helpers on types. */
int64_t tp_hlo_numel(const tp_hlo_value_t *v);
/* Writes "tensor<2x3xf32>" into |buf| (size >= 160 is always enough). */
void tp_hlo_type_str(char *buf, size_t size, tp_dtype_t dtype, int ndim, const int64_t *dims);

#ifdef __cplusplus
}
#endif
#endif  /* TP_HLO_BUILDER_H_ */
