/* Infer and emit functions of every op family, as op_table.def names them, and the family codes
 * the table's `code` column holds. Private to ops/. */
#ifndef TP_OPS_FAMILIES_H_
#define TP_OPS_FAMILIES_H_

#include <stddef.h>

#include "ops/collective.h"
#include "ops/common.h"
#include "ops/emit.h"
#include "ops/op.h"

/* Unary family: what the `code` column of a TP_OP_UNARY row means. */
typedef enum {
  TP_U_ABS, TP_U_NEG, TP_U_EXP, TP_U_EXP2, TP_U_EXPM1, TP_U_LOG, TP_U_LOG2, TP_U_LOG10,
  TP_U_LOG1P, TP_U_SQRT, TP_U_RSQRT, TP_U_SIN, TP_U_COS, TP_U_TAN, TP_U_ASIN, TP_U_ACOS,
  TP_U_ATAN, TP_U_SINH, TP_U_COSH, TP_U_TANH, TP_U_ASINH, TP_U_ACOSH, TP_U_ATANH, TP_U_SIGMOID,
  TP_U_ERF, TP_U_ERFC, TP_U_ERFINV, TP_U_LGAMMA, TP_U_DIGAMMA, TP_U_RECIPROCAL, TP_U_FLOOR,
  TP_U_CEIL, TP_U_ROUND, TP_U_TRUNC, TP_U_FRAC, TP_U_SIGN, TP_U_BITWISE_NOT, TP_U_LOGICAL_NOT,
  TP_U_ISNAN, TP_U_ISINF, TP_U_ISFINITE, TP_U_ISPOSINF, TP_U_ISNEGINF, TP_U_SIGNBIT, TP_U_RELU,
  TP_U_ZERO, TP_U_SILU, TP_U_CBRT, TP_U_SINC, TP_U_ENTR, TP_U_I0, TP_U_I0E, TP_U_I1, TP_U_I1E,
  TP_U_NDTRI, TP_U_LOG_NDTR, TP_U_ERFCX, TP_U_HARDSIGMOID, TP_U_HARDSWISH, TP_U_MISH,
} tp_unary_t;

/* Binary family codes. */
typedef enum {
  TP_B_ADD, TP_B_SUB, TP_B_MUL, TP_B_DIV, TP_B_REMAINDER, TP_B_FMOD, TP_B_POW, TP_B_ATAN2,
  TP_B_MAXIMUM, TP_B_MINIMUM, TP_B_FMAX, TP_B_FMIN, TP_B_HYPOT, TP_B_COPYSIGN,
  TP_B_FLOOR_DIVIDE, TP_B_BITAND, TP_B_BITOR, TP_B_BITXOR, TP_B_LOGICAL_AND, TP_B_LOGICAL_OR,
  TP_B_LOGICAL_XOR, TP_B_EQ, TP_B_NE, TP_B_LT, TP_B_LE, TP_B_GT, TP_B_GE, TP_B_XLOGY,
  TP_B_NEXTAFTER, TP_B_RSUB, TP_B_LOGADDEXP, TP_B_LOGADDEXP2, TP_B_XLOG1PY, TP_B_ZETA,
  TP_B_HEAVISIDE, TP_B_HARDSIGMOID_BACKWARD, TP_B_HARDSWISH_BACKWARD, TP_B_MISH_BACKWARD,
} tp_binary_t;

/* Ternary family codes (TP_OP rows with tp_infer_ternary). */
typedef enum {
  TP_T_WHERE, TP_T_CLAMP, TP_T_CLAMP_MIN, TP_T_CLAMP_MAX, TP_T_ADDCMUL, TP_T_ADDCDIV, TP_T_LERP,
} tp_ternary_t;

/* Reduction family codes (TP_OP_REDUCE rows). */
typedef enum {
  TP_R_SUM, TP_R_MEAN, TP_R_PROD, TP_R_AMAX, TP_R_AMIN, TP_R_MAX, TP_R_MIN, TP_R_ARGMAX,
  TP_R_ARGMIN, TP_R_ANY, TP_R_ALL, TP_R_VAR, TP_R_STD, TP_R_LOGSUMEXP, TP_R_NORM, TP_R_CUMSUM,
  TP_R_CUMPROD, TP_R_VAR_MEAN, TP_R_STD_MEAN, TP_R_AMINMAX, TP_R_NANSUM, TP_R_COUNT_NONZERO,
  TP_R_TRACE, TP_R_CUMMAX, TP_R_CUMMIN,
} tp_reduce_t;

/* Activation family codes (activation.c); backward forms come after TP_A_BACKWARD. */
typedef enum {
  TP_A_GELU, TP_A_LEAKY_RELU, TP_A_HARDTANH, TP_A_ELU,
  TP_A_BACKWARD,
  TP_A_GELU_BACKWARD = TP_A_BACKWARD, TP_A_LEAKY_RELU_BACKWARD, TP_A_HARDTANH_BACKWARD,
  TP_A_SIGMOID_BACKWARD, TP_A_TANH_BACKWARD, TP_A_SILU_BACKWARD, TP_A_DROPOUT_BACKWARD,
} tp_activation_t;

/* The code of a family whose rows all lower one way (mm, copy, fill, layer norm, ...). */
enum { TP_CODE_NONE = 0 };

/* Forward or backward, for the families that hold both forms of an op (mse and nll losses,
 * group norm). */
typedef enum { TP_DIR_FORWARD, TP_DIR_BACKWARD } tp_direction_t;

/* Softmax family (softmax.c): softmax, or log_softmax; the same codes for their backwards. */
typedef enum { TP_SM_SOFTMAX, TP_SM_LOG_SOFTMAX } tp_softmax_t;

/* convolution_backward (conv.c): with the bias_sizes argument (ATen's convolution_backward, infer
 * drops it) or without (the overrideable form's argument list). */
typedef enum { TP_CONVB_NO_BIAS_SIZES, TP_CONVB_BIAS_SIZES } tp_conv_backward_t;

/* Batched and vector products (linalg.c). */
typedef enum { TP_BMM_BMM, TP_BMM_BADDBMM, TP_BMM_ADDBMM } tp_bmm_t;
typedef enum { TP_MV_DOT, TP_MV_MV, TP_MV_ADDMV } tp_matvec_t;

/* Sort family (sort.c). */
typedef enum { TP_SORT_SORT, TP_SORT_STABLE, TP_SORT_TOPK, TP_SORT_KTHVALUE } tp_sort_t;

/* Scatter-reduce family (index.c): scatter_reduce, index_reduce, and index_fill. */
typedef enum { TP_XR_SCATTER_REDUCE, TP_XR_INDEX_REDUCE, TP_XR_INDEX_FILL } tp_index_reduce_t;

/* Lookup family (index.c): take, isin, eye, put. */
typedef enum { TP_LK_TAKE, TP_LK_ISIN, TP_LK_EYE, TP_LK_PUT } tp_lookup_t;

/* linspace family (range.c): linspace, or logspace (base ** the linspace). */
typedef enum { TP_LIN_LINSPACE, TP_LIN_LOGSPACE } tp_linspace_t;

/* Reflection and replication padding (pad.c): the fields a code packs, and their combinations
 * (the row's name gives the number of padded dims). */
enum { TP_PADF_REPLICATION = 1, TP_PADF_BACKWARD = 2 };
typedef enum {
  TP_PAD_REFLECTION = 0,
  TP_PAD_REPLICATION = TP_PADF_REPLICATION,
  TP_PAD_REFLECTION_BACKWARD = TP_PADF_BACKWARD,
  TP_PAD_REPLICATION_BACKWARD = TP_PADF_REPLICATION | TP_PADF_BACKWARD,
} tp_pad_mode_t;

/* Max pooling (maxpool.c): the fields a max_pool code packs (2-d unless 3D), and their combinations;
 * a max_unpool code is its spatial rank. */
enum { TP_MPF_BACKWARD = 1, TP_MPF_3D = 2, TP_MPF_ADAPTIVE = 4 };
typedef enum {
  TP_MP_2D = 0,
  TP_MP_2D_BACKWARD = TP_MPF_BACKWARD,
  TP_MP_3D = TP_MPF_3D,
  TP_MP_3D_BACKWARD = TP_MPF_3D | TP_MPF_BACKWARD,
  TP_MP_ADAPTIVE_2D = TP_MPF_ADAPTIVE,
  TP_MP_ADAPTIVE_2D_BACKWARD = TP_MPF_ADAPTIVE | TP_MPF_BACKWARD,
  TP_MP_ADAPTIVE_3D = TP_MPF_ADAPTIVE | TP_MPF_3D,
  TP_MP_ADAPTIVE_3D_BACKWARD = TP_MPF_ADAPTIVE | TP_MPF_3D | TP_MPF_BACKWARD,
} tp_max_pool_t;
typedef enum { TP_UNPOOL_2D = 2, TP_UNPOOL_3D = 3 } tp_max_unpool_t;

/* Average pooling (avgpool.c): the spatial rank (the RANK bits), adaptive, backward. */
enum { TP_APF_RANK = 3, TP_APF_ADAPTIVE = 4, TP_APF_BACKWARD = 8 };
typedef enum {
  TP_AP_2D = 2,
  TP_AP_3D = 3,
  TP_AP_ADAPTIVE_2D = TP_APF_ADAPTIVE | 2,
  TP_AP_ADAPTIVE_3D = TP_APF_ADAPTIVE | 3,
  TP_AP_2D_BACKWARD = TP_APF_BACKWARD | 2,
  TP_AP_3D_BACKWARD = TP_APF_BACKWARD | 3,
  TP_AP_ADAPTIVE_2D_BACKWARD = TP_APF_BACKWARD | TP_APF_ADAPTIVE | 2,
  TP_AP_ADAPTIVE_3D_BACKWARD = TP_APF_BACKWARD | TP_APF_ADAPTIVE | 3,
} tp_avg_pool_t;

/* Upsampling (upsample.c): the spatial rank (the RANK bits), the mode (nearest unless
 * NEAREST_EXACT or LINEAR: linear, bilinear, trilinear by rank), backward. */
enum { TP_UPF_RANK = 3, TP_UPF_NEAREST_EXACT = 4, TP_UPF_BACKWARD = 8, TP_UPF_LINEAR = 16 };
typedef enum {
  TP_UP_NEAREST_1D = 1,
  TP_UP_NEAREST_2D = 2,
  TP_UP_NEAREST_3D = 3,
  TP_UP_NEAREST_EXACT_1D = TP_UPF_NEAREST_EXACT | 1,
  TP_UP_NEAREST_EXACT_2D = TP_UPF_NEAREST_EXACT | 2,
  TP_UP_NEAREST_EXACT_3D = TP_UPF_NEAREST_EXACT | 3,
  TP_UP_LINEAR_1D = TP_UPF_LINEAR | 1,
  TP_UP_BILINEAR_2D = TP_UPF_LINEAR | 2,
  TP_UP_TRILINEAR_3D = TP_UPF_LINEAR | 3,
  TP_UP_NEAREST_1D_BACKWARD = TP_UPF_BACKWARD | TP_UP_NEAREST_1D,
  TP_UP_NEAREST_2D_BACKWARD = TP_UPF_BACKWARD | TP_UP_NEAREST_2D,
  TP_UP_NEAREST_3D_BACKWARD = TP_UPF_BACKWARD | TP_UP_NEAREST_3D,
  TP_UP_NEAREST_EXACT_1D_BACKWARD = TP_UPF_BACKWARD | TP_UP_NEAREST_EXACT_1D,
  TP_UP_NEAREST_EXACT_2D_BACKWARD = TP_UPF_BACKWARD | TP_UP_NEAREST_EXACT_2D,
  TP_UP_NEAREST_EXACT_3D_BACKWARD = TP_UPF_BACKWARD | TP_UP_NEAREST_EXACT_3D,
  TP_UP_LINEAR_1D_BACKWARD = TP_UPF_BACKWARD | TP_UP_LINEAR_1D,
  TP_UP_BILINEAR_2D_BACKWARD = TP_UPF_BACKWARD | TP_UP_BILINEAR_2D,
  TP_UP_TRILINEAR_3D_BACKWARD = TP_UPF_BACKWARD | TP_UP_TRILINEAR_3D,
} tp_upsample_t;

/* Batch norm forms (norm.c, parse_batch_norm). */
typedef enum { TP_BN_NATIVE, TP_BN_FUNCTIONAL, TP_BN_NO_TRAINING } tp_batch_norm_t;

/* Indexing family codes (index.c). */
typedef enum {
  TP_X_INDEX_SELECT, TP_X_GATHER, TP_X_SCATTER, TP_X_SCATTER_ADD, TP_X_INDEX_ADD, TP_X_MASKED_FILL,
  TP_X_EMBEDDING_BACKWARD, TP_X_INDEX, TP_X_INDEX_PUT,
} tp_index_t;

/* Arrange family codes (arrange.c). */
typedef enum { TP_AR_CAT, TP_AR_FLIP, TP_AR_ROLL } tp_arrange_t;

/* Band family codes (triangular.c). */
typedef enum { TP_BAND_TRIL, TP_BAND_TRIU } tp_band_t;

/* Shape family codes (shape.c): rows that serve whole graphs (TP_OPF_GRAPH). */
typedef enum {
  TP_S_VIEW, TP_S_PERMUTE, TP_S_EXPAND, TP_S_SLICE, TP_S_SELECT, TP_S_UNSQUEEZE, TP_S_SQUEEZE,
  TP_S_TRANSPOSE, TP_S_ALIAS, TP_S_TO_COPY, TP_S_FULL, TP_S_EMPTY, TP_S_SCALAR_TENSOR,
  TP_S_FULL_LIKE, TP_S_EMPTY_LIKE, TP_S_SPLIT, TP_S_SLICE_SCATTER, TP_S_SELECT_SCATTER, TP_S_EMBEDDING,
} tp_shape_t;

/* Pointwise ops with their own argument lists (pointwise.c). */
typedef enum {
  TP_P_POLYGAMMA, TP_P_ROUND_DECIMALS, TP_P_NAN_TO_NUM, TP_P_SOFTPLUS, TP_P_SOFTPLUS_BACKWARD,
  TP_P_SOFTSHRINK, TP_P_SOFTSHRINK_BACKWARD, TP_P_HARDSHRINK, TP_P_HARDSHRINK_BACKWARD,
  TP_P_THRESHOLD, TP_P_LOGIT, TP_P_LOGIT_BACKWARD, TP_P_LOG_SIGMOID, TP_P_LOG_SIGMOID_BACKWARD,
} tp_pointwise_t;

/* Special functions (special.c): the unary ones, then the binary ones: the polynomials P_n(x)
 * of (x, n) and the incomplete gamma functions of (a, x). */
typedef enum {
  TP_SP_AIRY_AI, TP_SP_BESSEL_J0, TP_SP_BESSEL_J1, TP_SP_BESSEL_Y0, TP_SP_BESSEL_Y1,
  TP_SP_MODIFIED_BESSEL_I0, TP_SP_MODIFIED_BESSEL_I1, TP_SP_MODIFIED_BESSEL_K0,
  TP_SP_MODIFIED_BESSEL_K1, TP_SP_SCALED_MODIFIED_BESSEL_K0, TP_SP_SCALED_MODIFIED_BESSEL_K1,
  TP_SP_SPHERICAL_BESSEL_J0,
  TP_SP_BINARY,
  TP_SP_CHEBYSHEV_T = TP_SP_BINARY, TP_SP_CHEBYSHEV_U, TP_SP_CHEBYSHEV_V, TP_SP_CHEBYSHEV_W,
  TP_SP_SHIFTED_CHEBYSHEV_T, TP_SP_SHIFTED_CHEBYSHEV_U, TP_SP_SHIFTED_CHEBYSHEV_V,
  TP_SP_SHIFTED_CHEBYSHEV_W, TP_SP_HERMITE_H, TP_SP_HERMITE_HE, TP_SP_LAGUERRE_L,
  TP_SP_LEGENDRE_P, TP_SP_IGAMMA, TP_SP_IGAMMAC,
} tp_special_t;

/* Triangular family codes (triangular.c). */
typedef enum { TP_TRI_CHOLESKY_EX, TP_TRI_SOLVE, TP_TRI_LEGACY, TP_TRI_CHOLESKY_SOLVE } tp_triangular_t;

/* Complex family codes (complex.c). */
typedef enum {
  TP_CX_CONJ, TP_CX_COMPLEX, TP_CX_POLAR, TP_CX_FFT_R2C, TP_CX_FFT_C2C, TP_CX_FFT_C2R,
  TP_CX_ANGLE,
} tp_complex_t;

/* Factorization family codes (linalg_lu.c). */
typedef enum {
  TP_FAC_LU_FACTOR_EX, TP_FAC_LU, TP_FAC_LU_UNPACK, TP_FAC_LU_SOLVE, TP_FAC_SOLVE_EX,
  TP_FAC_INV_EX, TP_FAC_DET, TP_FAC_SLOGDET, TP_FAC_GEQRF, TP_FAC_HOUSEHOLDER, TP_FAC_ORMQR,
  TP_FAC_QR, TP_FAC_EIGVALSH, TP_FAC_SVDVALS, TP_FAC_CHOLESKY_INVERSE,
} tp_factor_t;

/* Median family (sort.c): median, or nanmedian (NaNs skipped). */
typedef enum { TP_MED_MEDIAN, TP_MED_NANMEDIAN } tp_median_t;

/* Search family (sort.c): searchsorted, or bucketize (the arguments swapped). */
typedef enum { TP_SEARCH_SEARCHSORTED, TP_SEARCH_BUCKETIZE } tp_search_t;

/* Shift family (elementwise.c): __lshift__ and __rshift__ (arithmetic for signed types). */
typedef enum { TP_SHIFT_LEFT, TP_SHIFT_RIGHT } tp_shift_t;

/* im2col family (conv.c): im2col, or col2im (its adjoint). */
typedef enum { TP_IC_IM2COL, TP_IC_COL2IM } tp_im2col_t;

/* Recurrent cell codes (rnn.c): the fused LSTM and GRU cells and their backwards. */
typedef enum {
  TP_RNN_LSTM_CELL, TP_RNN_LSTM_CELL_BACKWARD, TP_RNN_GRU_CELL, TP_RNN_GRU_CELL_BACKWARD,
} tp_rnn_t;

/* Optimizer and gradient scaling codes (optim.c): every output is written into an argument. */
typedef enum { TP_OPT_ADAM, TP_OPT_ADAMW, TP_OPT_UNSCALE, TP_OPT_UPDATE_SCALE } tp_optim_t;

/* Random family codes (random.c); TP_OPF_RANDOM rows get the generator key as a last argument. */
typedef enum {
  TP_RAND_UNIFORM, TP_RAND_BERNOULLI, TP_RAND_DROPOUT, TP_RAND_NORMAL, TP_RAND_INT,
  TP_RAND_MULTINOMIAL, /* also TP_OPF_COUNTED: its count pass checks the probabilities */
} tp_random_t;

/* Results of a data-dependent size (compact.c). */
typedef enum {
  TP_CP_NONZERO, TP_CP_MASKED_SELECT, TP_CP_NONZERO_STATIC,
  TP_CP_UNIQUE,             /* _unique2: sorted distinct values, inverse, counts */
  TP_CP_UNIQUE_CONSECUTIVE, /* unique_consecutive (no dim): runs of equal values */
} tp_compact_t;

#define TP_DECLARE_INFER(infer)                                                             \
  tp_status_t *infer(const tp_op_def_t *op, tp_op_arg_t *args, int n_args, tp_meta_t *out,  \
                     int *n_out);
#define TP_DECLARE_EMIT(emit)                                                                \
  void emit(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args, \
            const tp_hlo_value_t *in, const tp_meta_t *out_meta, tp_hlo_value_t *out);
#define TP_DECLARE_OP(infer, emit) TP_DECLARE_INFER(infer) TP_DECLARE_EMIT(emit)

/* check.c */
TP_DECLARE_OP(tp_infer_assert_async, tp_emit_assert_async)
/* collective.c (codes: tp_coll_kind_t, ops/collective.h) */
TP_DECLARE_OP(tp_infer_collective, tp_emit_collective)
/* elementwise.c */
TP_DECLARE_OP(tp_infer_unary, tp_emit_unary)
TP_DECLARE_OP(tp_infer_binary, tp_emit_binary)
TP_DECLARE_OP(tp_infer_ternary, tp_emit_ternary)
TP_DECLARE_OP(tp_infer_copy, tp_emit_copy)
TP_DECLARE_OP(tp_infer_fill, tp_emit_fill)
TP_DECLARE_OP(tp_infer_threshold_backward, tp_emit_threshold_backward)
TP_DECLARE_OP(tp_infer_shift, tp_emit_shift)
/* reduce.c */
TP_DECLARE_OP(tp_infer_reduce, tp_emit_reduce)
/* The dims a reduction row's call reduces (mask over args[0]'s dims); false when its arguments do
 * not parse (bucket.c). */
bool tp_reduce_dims(const tp_op_def_t *op, const tp_op_arg_t *args, int n_args, bool *mask);
TP_DECLARE_OP(tp_infer_equal, tp_emit_equal)
TP_DECLARE_OP(tp_infer_logcumsumexp, tp_emit_logcumsumexp)
/* softmax.c */
TP_DECLARE_OP(tp_infer_softmax, tp_emit_softmax)
TP_DECLARE_OP(tp_infer_softmax_backward, tp_emit_softmax_backward)
/* activation.c */
TP_DECLARE_OP(tp_infer_activation, tp_emit_activation)
TP_DECLARE_OP(tp_infer_glu, tp_emit_glu)
TP_DECLARE_OP(tp_infer_prelu, tp_emit_prelu)
TP_DECLARE_OP(tp_infer_elu_backward, tp_emit_elu_backward)
/* norm.c */
TP_DECLARE_OP(tp_infer_layer_norm, tp_emit_layer_norm)
TP_DECLARE_OP(tp_infer_layer_norm_backward, tp_emit_layer_norm_backward)
TP_DECLARE_OP(tp_infer_batch_norm, tp_emit_batch_norm)
TP_DECLARE_OP(tp_infer_batch_norm_backward, tp_emit_batch_norm_backward)
TP_DECLARE_OP(tp_infer_group_norm, tp_emit_group_norm)
TP_DECLARE_OP(tp_infer_renorm, tp_emit_renorm)
/* loss.c */
TP_DECLARE_OP(tp_infer_mse, tp_emit_mse)
TP_DECLARE_OP(tp_infer_nll, tp_emit_nll)
TP_DECLARE_OP(tp_infer_bce, tp_emit_bce)
/* index.c */
TP_DECLARE_OP(tp_infer_index, tp_emit_index)
TP_DECLARE_OP(tp_infer_index_reduce, tp_emit_index_reduce)
TP_DECLARE_OP(tp_infer_lookup, tp_emit_lookup)
TP_DECLARE_OP(tp_infer_index_copy, tp_emit_index_copy)
/* index_copy at the bucket's sizes (ops/bucket.c): |live| the index's live entries, |rows| the
 * live rows of self's dim; NULL where that dim is not padded. */
tp_hlo_value_t tp_emit_index_copy_live(tp_hlo_builder_t *b, const tp_op_arg_t *args, const tp_hlo_value_t *in,
                                       const tp_hlo_value_t *live, const tp_hlo_value_t *rows,
                                       const tp_meta_t *om);
TP_DECLARE_OP(tp_infer_masked_scatter, tp_emit_masked_scatter)
/* conv.c */
TP_DECLARE_OP(tp_infer_conv, tp_emit_conv)
TP_DECLARE_OP(tp_infer_conv_backward, tp_emit_conv_backward)
TP_DECLARE_OP(tp_infer_im2col, tp_emit_im2col)
/* random.c */
TP_DECLARE_OP(tp_infer_random, tp_emit_random)
/* pointwise.c */
TP_DECLARE_OP(tp_infer_pointwise, tp_emit_pointwise)
/* special.c */
TP_DECLARE_OP(tp_infer_special, tp_emit_special)
/* pad.c */
TP_DECLARE_OP(tp_infer_pad_mode, tp_emit_pad_mode)
TP_DECLARE_OP(tp_infer_constant_pad, tp_emit_constant_pad)
/* arrange.c */
TP_DECLARE_OP(tp_infer_arrange, tp_emit_arrange)
/* cat's dim (normalized for |ndim|), or -1; cat at the bucket's sizes with |live[i]| the live
 * size of argument i along that dim (ops/bucket.c). */
int tp_cat_dim(const tp_op_arg_t *args, int n_args, int ndim);
/* mean over dims some of which are padded: the sum at the bucket's sizes (padding read as 0) over
 * |live_count| (an integer scalar of the program), in mean's precision. */
tp_hlo_value_t tp_emit_mean_live(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                                 int n_args, const tp_hlo_value_t *in, tp_hlo_value_t live_count,
                                 const tp_meta_t *out_meta);
tp_hlo_value_t tp_emit_cat_live(tp_hlo_builder_t *b, const tp_op_arg_t *args, int n_args,
                                const tp_hlo_value_t *in, const tp_hlo_value_t *live,
                                const tp_meta_t *om);
/* shape.c */
TP_DECLARE_OP(tp_infer_shape, tp_emit_shape)
TP_DECLARE_OP(tp_infer_channel_shuffle, tp_emit_channel_shuffle)
/* sort.c */
TP_DECLARE_OP(tp_infer_sort, tp_emit_sort)
TP_DECLARE_OP(tp_infer_mode, tp_emit_mode)
TP_DECLARE_OP(tp_infer_median, tp_emit_median)
TP_DECLARE_OP(tp_infer_search, tp_emit_search)
/* maxpool.c */
TP_DECLARE_OP(tp_infer_max_pool, tp_emit_max_pool)
TP_DECLARE_OP(tp_infer_max_unpool, tp_emit_max_unpool)
/* avgpool.c */
TP_DECLARE_OP(tp_infer_avg_pool, tp_emit_avg_pool)
/* upsample.c */
TP_DECLARE_OP(tp_infer_upsample, tp_emit_upsample)
/* frexp.c */
TP_DECLARE_OP(tp_infer_frexp, tp_emit_frexp)
/* range.c */
TP_DECLARE_OP(tp_infer_linspace, tp_emit_linspace)
TP_DECLARE_OP(tp_infer_arange, tp_emit_arange)
/* linalg.c */
TP_DECLARE_OP(tp_infer_bmm, tp_emit_bmm)
TP_DECLARE_OP(tp_infer_matvec, tp_emit_matvec)
TP_DECLARE_OP(tp_infer_mm, tp_emit_mm)
TP_DECLARE_OP(tp_infer_addmm, tp_emit_addmm)
TP_DECLARE_OP(tp_infer_cross, tp_emit_cross)

/* complex.c */
TP_DECLARE_OP(tp_infer_complex, tp_emit_complex)
TP_DECLARE_OP(tp_infer_fft, tp_emit_fft)
/* histc.c */
TP_DECLARE_OP(tp_infer_histc, tp_emit_histc)
/* nms.c */
TP_DECLARE_OP(tp_infer_nms, tp_emit_nms)
/* module.c */
TP_DECLARE_OP(tp_infer_call_module, tp_emit_call_module)
/* triangular.c */
TP_DECLARE_OP(tp_infer_triangular, tp_emit_triangular)
TP_DECLARE_OP(tp_infer_band, tp_emit_band)
/* linalg_lu.c, with linalg_qr.c and linalg_eigh.c */
TP_DECLARE_OP(tp_infer_factor, tp_emit_factor)
/* rnn.c */
TP_DECLARE_OP(tp_infer_rnn, tp_emit_rnn)
/* optim.c */
TP_DECLARE_OP(tp_infer_optim, tp_emit_optim)
/* compact.c */
TP_DECLARE_OP(tp_infer_compact, tp_emit_compact)
/* The count protocol (op.h) for a call whose result has at most |bound| rows, given its count
 * argument |count| (NULL when the caller appended none: UNIMPLEMENTED). Either asks for the count
 * pass (|exact|: for exactly n rows; fills out[0], *n_out = 1, *out_rows = -1) or yields the
 * rows the outputs get. */
tp_status_t *tp_infer_count(const tp_op_def_t *op, tp_op_arg_t *count, int64_t bound, bool exact,
                            tp_meta_t *out, int *n_out, int64_t *out_rows);
/* Whether |count| (the count argument, or NULL) asks for the count pass. */
bool tp_count_pass(const tp_op_arg_t *count);
/* The count pass's value: how many elements of |pred| (bool, any shape) are true, as 0-d i64. */
tp_hlo_value_t tp_emit_count_true(tp_hlo_builder_t *b, tp_hlo_value_t pred);
/* The row-major positions of the true elements of |pred| (bool, any shape) as [count] i64,
 * ascending; past the true elements, the positions are numel(pred) (past the end). */
tp_hlo_value_t tp_emit_true_positions(tp_hlo_builder_t *b, tp_hlo_value_t pred, int64_t count);
/* Coordinate |d| of the flat row-major positions |pos| (i64, any shape) in a shape of |sizes|. */
tp_hlo_value_t tp_emit_unravel(tp_hlo_builder_t *b, tp_hlo_value_t pos, const int64_t *sizes, int d,
                               int ndim);
/* A user's index tensor (any integer type) into a dim of size |n|, as i64 (index.c). Values
 * outside [-n, n) (|negative_ok|, negatives then count from the end) or [0, n) set the program's
 * check flag: the next synchronizing call raises IndexError naming the op, as CUDA reports its
 * device-side asserts. What the op computed from such an index is unspecified. */
tp_hlo_value_t tp_emit_checked_index(tp_hlo_builder_t *b, tp_hlo_value_t index, int64_t n,
                                     bool negative_ok);
/* Special functions the unary, binary and pointwise families emit (special.c), of a float |x| in
 * its math dtype, as PyTorch's CPU kernels compute them: exp(-|x|) I0(|x|), exp(x^2) erfc(x),
 * log of the normal CDF, digamma (-+inf at +-0), Hurwitz zeta(x, q) (|int_x| > 0: x is that
 * known integer, summed exactly) and polygamma(n, x). */
tp_hlo_value_t tp_emit_i0e(tp_hlo_builder_t *b, tp_hlo_value_t x);
tp_hlo_value_t tp_emit_erfcx(tp_hlo_builder_t *b, tp_hlo_value_t x);
tp_hlo_value_t tp_emit_log_ndtr(tp_hlo_builder_t *b, tp_hlo_value_t x);
tp_hlo_value_t tp_emit_digamma(tp_hlo_builder_t *b, tp_hlo_value_t x);
tp_hlo_value_t tp_emit_zeta(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t q, int64_t int_x);
tp_hlo_value_t tp_emit_polygamma(tp_hlo_builder_t *b, int64_t n, tp_hlo_value_t x);
#endif

