/* Op table, shape/dtype inference and emitted StableHLO (golden text). Needs no device. */
#include <string.h>

#include "hlo/builder.h"
#include "ops/op.h"
#include "op_args.h"
#include "test.h"

static void test_table(void) {
  for (int i = 1; i < tp_op_count; i++) CHECK(strcmp(tp_op_table[i - 1].name, tp_op_table[i].name) < 0);
  for (int i = 0; i < tp_op_count; i++) {
    tp_op_variant_t v = (tp_op_variant_t)-1;
    CHECK(tp_op_lookup(tp_op_table[i].name, &v) == i && v == TP_VARIANT_FUNCTIONAL);
    if (tp_op_table[i].inplace) CHECK(tp_op_lookup(tp_op_table[i].inplace, &v) == i && v == TP_VARIANT_INPLACE);
    if (tp_op_table[i].out) CHECK(tp_op_lookup(tp_op_table[i].out, &v) == i && v == TP_VARIANT_OUT);
  }
  CHECK(tp_op_lookup("no_such_op", NULL) == -1);
}

static void test_promotion(void) {
  CHECK(tp_dtype_promote(TP_DTYPE_U8, TP_DTYPE_I8) == TP_DTYPE_I16);
  CHECK(tp_dtype_promote(TP_DTYPE_BF16, TP_DTYPE_F16) == TP_DTYPE_F32);
  CHECK(tp_dtype_promote(TP_DTYPE_BOOL, TP_DTYPE_I32) == TP_DTYPE_I32);
  CHECK(tp_dtype_promote(TP_DTYPE_I64, TP_DTYPE_F16) == TP_DTYPE_F16);
  CHECK(!tp_dtype_can_cast(TP_DTYPE_F32, TP_DTYPE_I64));
  CHECK(tp_dtype_can_cast(TP_DTYPE_I64, TP_DTYPE_F32));
}

static void test_binary_infer(void) {
  const tp_op_def_t *add = op("add.Tensor");
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  /* (2,3) f32 + (3) i64 -> (2,3) f32 */
  tp_op_arg_t args[3] = {tensor(TP_DTYPE_F32, 2, (int64_t[]){2, 3}),
                         tensor(TP_DTYPE_I64, 1, (int64_t[]){3}), scalar(TP_DTYPE_I64, 1, false)};
  CHECK_OK(add->infer(add, args, 3, out, &n));
  CHECK(n == 1 && out[0].dtype == TP_DTYPE_F32 && out[0].ndim == 2 && out[0].sizes[1] == 3);
  CHECK(args[2].scalar_dtype == TP_DTYPE_F32);
  /* int tensor * python float -> default float; 0-dim f64 tensor does not widen a f32 tensor */
  const tp_op_def_t *mul = op("mul.Tensor");
  tp_op_arg_t a2[2] = {tensor(TP_DTYPE_I64, 1, (int64_t[]){4}), scalar(TP_DTYPE_F64, 0.5, true)};
  CHECK_OK(mul->infer(mul, a2, 2, out, &n));
  CHECK(out[0].dtype == TP_DTYPE_F32);
  tp_op_arg_t a3[2] = {tensor(TP_DTYPE_F32, 1, (int64_t[]){4}), tensor(TP_DTYPE_F64, 0, NULL)};
  CHECK_OK(mul->infer(mul, a3, 2, out, &n));
  CHECK(out[0].dtype == TP_DTYPE_F32);
  /* mismatched shapes */
  tp_op_arg_t a4[2] = {tensor(TP_DTYPE_F32, 1, (int64_t[]){4}), tensor(TP_DTYPE_F32, 1, (int64_t[]){5})};
  tp_status_t *st = mul->infer(mul, a4, 2, out, &n);
  CHECK(st && tp_status_code(st) == TP_INVALID_ARGUMENT && strstr(tp_status_message(st), "must match"));
  tp_status_free(st);
  /* integer division promotes to float */
  const tp_op_def_t *div = op("div.Tensor");
  tp_op_arg_t a5[2] = {tensor(TP_DTYPE_I32, 1, (int64_t[]){4}), tensor(TP_DTYPE_I32, 1, (int64_t[]){4})};
  CHECK_OK(div->infer(div, a5, 2, out, &n));
  CHECK(out[0].dtype == TP_DTYPE_F32);
}

static void test_reduce_linalg_infer(void) {
  const tp_op_def_t *sum = op("sum.dim_IntList");
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  tp_op_arg_t dim;
  memset(&dim, 0, sizeof(dim));
  dim.kind = TP_ARG_INTS;
  dim.n = 1;
  dim.ints[0] = -1;
  tp_op_arg_t keep = {0};
  keep.kind = TP_ARG_INT;
  keep.i = 1;
  tp_op_arg_t none = {0};
  tp_op_arg_t args[4] = {tensor(TP_DTYPE_I32, 3, (int64_t[]){2, 3, 4}), dim, keep, none};
  CHECK_OK(sum->infer(sum, args, 4, out, &n));
  CHECK(out[0].dtype == TP_DTYPE_I64 && out[0].ndim == 3 && out[0].sizes[2] == 1);
  args[1].ints[0] = 3;
  tp_status_t *st = sum->infer(sum, args, 4, out, &n);
  CHECK(st && strstr(tp_status_message(st), "Dimension out of range"));
  tp_status_free(st);

  const tp_op_def_t *mm = op("mm");
  tp_op_arg_t m[2] = {tensor(TP_DTYPE_F32, 2, (int64_t[]){2, 3}), tensor(TP_DTYPE_F32, 2, (int64_t[]){4, 5})};
  st = mm->infer(mm, m, 2, out, &n);
  CHECK(st && strstr(tp_status_message(st), "cannot be multiplied (2x3 and 4x5)"));
  tp_status_free(st);
  m[1] = tensor(TP_DTYPE_F32, 2, (int64_t[]){3, 5});
  CHECK_OK(mm->infer(mm, m, 2, out, &n));
  CHECK(out[0].sizes[0] == 2 && out[0].sizes[1] == 5);
}

/* The program |name| emits over params of the inferred shapes (caller frees), or NULL. */
static char *emit_text(const char *name, tp_op_arg_t *args, int n_args) {
  const tp_op_def_t *d = op(name);
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  CHECK_OK(d->infer(d, args, n_args, out, &n));
  tp_hlo_builder_t *b;
  CHECK_OK(tp_hlo_builder_create(&b));
  tp_hlo_value_t in[TP_MAX_ARGS];
  for (int i = 0; i < n_args; i++) {
    if (args[i].kind == TP_ARG_TENSOR)
      in[i] = tp_hlo_param(b, args[i].meta.dtype, args[i].meta.ndim, args[i].meta.sizes, -1);
    else if (args[i].kind == TP_ARG_SCALAR)
      in[i] = tp_hlo_param(b, args[i].scalar_dtype, 0, NULL, -1);
  }
  tp_hlo_value_t res[TP_MAX_OUTS];
  d->emit(d, b, args, n_args, in, out, res);
  char *text = NULL;
  CHECK_OK(tp_hlo_finish(b, res, n, &text));
  tp_hlo_builder_free(b);
  return text;
}

/* Emits |name| and compares with tests/c/golden/<file>. */
static void check_golden(const char *name, tp_op_arg_t *args, int n_args, const char *file) {
  char *text = emit_text(name, args, n_args);
  char path[256];
  snprintf(path, sizeof(path), "%s/%s", GOLDEN_DIR, file);
  FILE *f = fopen(path, "rb");
  char expect[1 << 15] = {0};
  if (f) {
    size_t r = fread(expect, 1, sizeof(expect) - 1, f);
    expect[r] = 0;
    fclose(f);
  } else if (getenv("TP_UPDATE_GOLDEN") && text) {
    f = fopen(path, "wb");
    fputs(text, f);
    fclose(f);
    strcpy(expect, text);
  }
  CHECK(text && strcmp(text, expect) == 0);
  if (text && strcmp(text, expect) != 0) fprintf(stderr, "emitted for %s:\n%s\n", name, text);
  free(text);
}

static void test_golden(void) {
  tp_op_arg_t add[3] = {tensor(TP_DTYPE_BF16, 2, (int64_t[]){2, 3}),
                        tensor(TP_DTYPE_BF16, 1, (int64_t[]){3}), scalar(TP_DTYPE_F64, 2.0, false)};
  check_golden("add.Tensor", add, 3, "add_bf16_alpha.mlir");
  tp_op_arg_t mm[2] = {tensor(TP_DTYPE_F32, 2, (int64_t[]){2, 3}), tensor(TP_DTYPE_F32, 2, (int64_t[]){3, 4})};
  check_golden("mm", mm, 2, "mm_f32.mlir");
  tp_op_arg_t none = {0};
  tp_op_arg_t sum[2] = {tensor(TP_DTYPE_F16, 2, (int64_t[]){2, 3}), none};
  check_golden("sum", sum, 2, "sum_f16.mlir");
  tp_op_arg_t relu[1] = {tensor(TP_DTYPE_F32, 1, (int64_t[]){5})};
  check_golden("relu", relu, 1, "relu_f32.mlir");
  /* sort.stable(self, stable=True, dim=1, descending=True): the comparator puts NaN first. */
  tp_op_arg_t sort[4] = {tensor(TP_DTYPE_F32, 2, (int64_t[]){2, 5}), int_arg(1), int_arg(1), int_arg(1)};
  check_golden("sort.stable", sort, 4, "sort_stable_f32_desc.mlir");
  /* scatter_reduce.two(self, 0, index, src, "amax", include_self=False) */
  tp_op_arg_t sr[6] = {tensor(TP_DTYPE_I32, 1, (int64_t[]){4}), int_arg(0),
                       tensor(TP_DTYPE_I64, 1, (int64_t[]){3}), tensor(TP_DTYPE_I32, 1, (int64_t[]){3}),
                       str_arg("amax"), int_arg(0)};
  check_golden("scatter_reduce.two", sr, 6, "scatter_reduce_amax_i32.mlir");
}

/* Inference of the special-function, index-reduction, reduction and sorting rows. */
/* Reductions merge adjacent reduced (or kept) dims; for XLA's CPU backend a reduction that keeps
 * the innermost dim reduces a materialized input (an optimization barrier before it). */
static void test_reduce_forms(void) {
  for (int cpu = 0; cpu < 2; cpu++) {
    const int64_t keep_inner[2] = {0, 1}, keep_outer[1] = {2};
    const int64_t *dims[2] = {keep_inner, keep_outer};
    int n_dims[2] = {2, 1};
    for (int k = 0; k < 2; k++) {
      tp_hlo_builder_t *b;
      CHECK_OK(tp_hlo_builder_create(&b));
      tp_hlo_builder_set_xla_cpu(b, cpu);
      tp_hlo_value_t x = tp_hlo_param(b, TP_DTYPE_F32, 3, (int64_t[]){2, 3, 4}, -1);
      tp_hlo_value_t r = tp_hlo_reduce(b, x, tp_hlo_constant(b, TP_DTYPE_F32, 0), TP_HLO_ADD,
                                       n_dims[k], dims[k]);
      CHECK(r.ndim == 3 - n_dims[k] && r.dims[0] == (k == 0 ? 4 : 2));
      char *text = NULL;
      CHECK_OK(tp_hlo_finish(b, &r, 1, &text));
      CHECK(text && strstr(text, k == 0 ? "(tensor<6x4xf32>, tensor<f32>) -> tensor<4xf32>"
                                        : "(tensor<6x4xf32>, tensor<f32>) -> tensor<6xf32>"));
      CHECK(text && (strstr(text, "optimization_barrier") != NULL) == (cpu && k == 0));
      free(text);
      tp_hlo_builder_free(b);
    }
  }
}

static void test_added_ops_infer(void) {
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  const tp_op_def_t *pg = op("polygamma");
  tp_op_arg_t pa[2] = {int_arg(-1), tensor(TP_DTYPE_I64, 1, (int64_t[]){3})};
  tp_status_t *st = pg->infer(pg, pa, 2, out, &n);
  CHECK(st && strstr(tp_status_message(st), "does not support negative n"));
  tp_status_free(st);
  pa[0] = int_arg(2);
  CHECK_OK(pg->infer(pg, pa, 2, out, &n));
  CHECK(n == 1 && out[0].dtype == TP_DTYPE_F32);

  const tp_op_def_t *vm = op("var_mean.correction");
  tp_op_arg_t none = {0};
  tp_op_arg_t va[4] = {tensor(TP_DTYPE_BF16, 2, (int64_t[]){3, 4}), none, none, int_arg(1)};
  CHECK_OK(vm->infer(vm, va, 4, out, &n));
  CHECK(n == 2 && out[1].dtype == TP_DTYPE_BF16 && out[0].ndim == 2 && out[0].sizes[1] == 1);

  const tp_op_def_t *cm = op("_cummax_helper");
  tp_op_arg_t ca[4] = {tensor(TP_DTYPE_F32, 1, (int64_t[]){5}), tensor(TP_DTYPE_F32, 1, (int64_t[]){5}),
                       tensor(TP_DTYPE_I64, 1, (int64_t[]){5}), int_arg(0)};
  CHECK_OK(cm->infer(cm, ca, 4, out, &n));
  CHECK(n == 2 && out[0].writes_arg == 2 && out[1].writes_arg == 3);

  const tp_op_def_t *tk = op("topk");
  tp_op_arg_t ta[3] = {tensor(TP_DTYPE_F32, 2, (int64_t[]){2, 5}), int_arg(6), int_arg(-1)};
  st = tk->infer(tk, ta, 3, out, &n);
  CHECK(st && strstr(tp_status_message(st), "out of range"));
  tp_status_free(st);
  ta[0].meta.dtype = TP_DTYPE_I64; /* CPU's tie order: falls back */
  ta[1] = int_arg(2);
  st = tk->infer(tk, ta, 3, out, &n);
  CHECK(st && tp_status_code(st) == TP_UNIMPLEMENTED);
  tp_status_free(st);

  const tp_op_def_t *ir = op("index_reduce");
  tp_op_arg_t ia[5] = {tensor(TP_DTYPE_F32, 2, (int64_t[]){4, 3}), int_arg(0),
                       tensor(TP_DTYPE_I64, 1, (int64_t[]){2}), tensor(TP_DTYPE_F32, 2, (int64_t[]){2, 3}),
                       str_arg("sum")};
  st = ir->infer(ir, ia, 5, out, &n);
  CHECK(st && strstr(tp_status_message(st), "prod, mean, amax or amin"));
  tp_status_free(st);
}

/* The special functions (special.c): integers and bool compute in float32, 16-bit floats fall
 * back (igamma: integers fall back, 16-bit floats compute in float32), the polynomials broadcast
 * x with n and take a Python number for either; every row builds, the polynomials and igamma
 * with their loops. */
static void test_special(void) {
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  const tp_op_def_t *j0 = op("special_bessel_j0");
  tp_op_arg_t a = tensor(TP_DTYPE_I64, 1, (int64_t[]){3});
  CHECK_OK(j0->infer(j0, &a, 1, out, &n));
  CHECK(n == 1 && out[0].dtype == TP_DTYPE_F32);
  a.meta.dtype = TP_DTYPE_BF16;
  tp_status_t *st = j0->infer(j0, &a, 1, out, &n);
  CHECK(st && tp_status_code(st) == TP_UNIMPLEMENTED);
  tp_status_free(st);
  const tp_op_def_t *t = op("special_chebyshev_polynomial_t");
  tp_op_arg_t p[2] = {tensor(TP_DTYPE_F64, 2, (int64_t[]){3, 1}), tensor(TP_DTYPE_I64, 1, (int64_t[]){4})};
  CHECK_OK(t->infer(t, p, 2, out, &n));
  CHECK(out[0].dtype == TP_DTYPE_F64 && out[0].ndim == 2 && out[0].sizes[0] == 3 && out[0].sizes[1] == 4);
  const tp_op_def_t *xs = op("special_chebyshev_polynomial_t.x_scalar");
  tp_op_arg_t q[2] = {scalar(TP_DTYPE_F64, 0.5, true), tensor(TP_DTYPE_I32, 1, (int64_t[]){4})};
  CHECK_OK(xs->infer(xs, q, 2, out, &n));
  CHECK(out[0].dtype == TP_DTYPE_F32 && q[0].scalar_dtype == TP_DTYPE_F32);
  const tp_op_def_t *ig = op("igamma");
  tp_op_arg_t g[2] = {tensor(TP_DTYPE_BF16, 1, (int64_t[]){4}), tensor(TP_DTYPE_BF16, 1, (int64_t[]){4})};
  CHECK_OK(ig->infer(ig, g, 2, out, &n));
  CHECK(out[0].dtype == TP_DTYPE_BF16);
  g[0].meta.dtype = g[1].meta.dtype = TP_DTYPE_I64;
  st = ig->infer(ig, g, 2, out, &n);
  CHECK(st && tp_status_code(st) == TP_UNIMPLEMENTED);
  tp_status_free(st);
  for (int i = 0; i < tp_op_count; i++) {
    const tp_op_def_t *d = &tp_op_table[i];
    if (d->infer != j0->infer) continue;
    bool poly = strstr(d->name, "polynomial") != NULL, igamma = strstr(d->name, "igamma") != NULL;
    tp_op_arg_t args[2] = {tensor(TP_DTYPE_F32, 1, (int64_t[]){5}), tensor(TP_DTYPE_F32, 0, NULL)};
    if (strstr(d->name, ".x_scalar")) args[0] = scalar(TP_DTYPE_F64, 0.5, true);
    if (strstr(d->name, ".n_scalar")) args[1] = scalar(TP_DTYPE_I64, 3, true);
    char *text = emit_text(d->name, args, poly || igamma ? 2 : 1);
    CHECK(text && (strstr(text, "stablehlo.while") != NULL) == (poly || igamma));
    if (!text) fprintf(stderr, "no program for %s\n", d->name);
    free(text);
  }
}

/* Dtype rules that follow CPU: int64 convolution is native, other integer types fall back; an
 * integer grad of dropout backward promotes to float; half batch norm with float parameters keeps
 * float statistics. */
static void test_conv_nn_dtypes(void) {
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  tp_op_arg_t none = {0}, ints = {0};
  ints.kind = TP_ARG_INTS;
  const tp_op_def_t *cv = op("convolution");
  tp_op_arg_t ca[9] = {tensor(TP_DTYPE_I64, 3, (int64_t[]){2, 3, 7}), tensor(TP_DTYPE_I64, 3, (int64_t[]){4, 3, 2}),
                       none, ints, ints, ints, int_arg(0), ints, int_arg(1)};
  CHECK_OK(cv->infer(cv, ca, 9, out, &n));
  CHECK(n == 1 && out[0].dtype == TP_DTYPE_I64 && out[0].sizes[1] == 4 && out[0].sizes[2] == 6);
  ca[0].meta.dtype = ca[1].meta.dtype = TP_DTYPE_I32;
  tp_status_t *st = cv->infer(cv, ca, 9, out, &n);
  CHECK(st && tp_status_code(st) == TP_UNIMPLEMENTED);
  tp_status_free(st);
  ca[1].meta.dtype = TP_DTYPE_F32;
  st = cv->infer(cv, ca, 9, out, &n);
  CHECK(st && tp_status_code(st) == TP_INVALID_ARGUMENT);
  tp_status_free(st);

  const tp_op_def_t *db = op("native_dropout_backward");
  tp_op_arg_t da[3] = {tensor(TP_DTYPE_I64, 1, (int64_t[]){5}), tensor(TP_DTYPE_BOOL, 1, (int64_t[]){5}), none};
  da[2].kind = TP_ARG_FLOAT;
  da[2].f = 1.5;
  CHECK_OK(db->infer(db, da, 3, out, &n));
  CHECK(n == 1 && out[0].dtype == TP_DTYPE_F32);
  da[0].meta.dtype = TP_DTYPE_BF16;
  CHECK_OK(db->infer(db, da, 3, out, &n));
  CHECK(out[0].dtype == TP_DTYPE_BF16);

  const tp_op_def_t *bn = op("native_batch_norm");
  tp_op_arg_t ba[8] = {tensor(TP_DTYPE_BF16, 3, (int64_t[]){2, 3, 4}), tensor(TP_DTYPE_BF16, 1, (int64_t[]){3}),
                       none, none, none, int_arg(1), none, none};
  CHECK_OK(bn->infer(bn, ba, 8, out, &n));
  CHECK(n == 3 && out[1].dtype == TP_DTYPE_BF16 && out[2].dtype == TP_DTYPE_BF16);
  ba[1].meta.dtype = TP_DTYPE_F32;
  CHECK_OK(bn->infer(bn, ba, 8, out, &n));
  CHECK(n == 3 && out[0].dtype == TP_DTYPE_BF16 && out[1].dtype == TP_DTYPE_F32 && out[2].dtype == TP_DTYPE_F32);
}

/* Average pooling: PyTorch's output sizes (ceil_mode drops a window starting in the right
 * padding), CPU's dtypes (others fall back), and the emitted separable window sums. */
static void test_avg_pool(void) {
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  const tp_op_def_t *ap = op("avg_pool2d");
  tp_op_arg_t none = {0};
  /* avg_pool2d(x[1,2,5,6], kernel 3, stride 2, padding 1, ceil_mode, count_include_pad) */
  tp_op_arg_t a[7] = {tensor(TP_DTYPE_F32, 4, (int64_t[]){1, 2, 5, 6}), ints_arg(1, (int64_t[]){3}),
                      ints_arg(1, (int64_t[]){2}), ints_arg(1, (int64_t[]){1}), int_arg(1), int_arg(1), none};
  CHECK_OK(ap->infer(ap, a, 7, out, &n));
  CHECK(n == 1 && out[0].ndim == 4 && out[0].sizes[2] == 3 && out[0].sizes[3] == 4);
  a[0].meta.dtype = TP_DTYPE_I32; /* CPU has no int32 kernel */
  tp_status_t *st = ap->infer(ap, a, 7, out, &n);
  CHECK(st && tp_status_code(st) == TP_UNIMPLEMENTED);
  tp_status_free(st);
  a[0].meta.dtype = TP_DTYPE_F32;
  a[3] = ints_arg(1, (int64_t[]){2}); /* padding over half the kernel: CPU words the error */
  st = ap->infer(ap, a, 7, out, &n);
  CHECK(st && tp_status_code(st) == TP_UNIMPLEMENTED);
  tp_status_free(st);
  /* _adaptive_avg_pool2d(x[1,3,2], [2,1]): windows [0,2) and [1,3) overlap */
  tp_op_arg_t ad[2] = {tensor(TP_DTYPE_F32, 3, (int64_t[]){1, 3, 2}), ints_arg(2, (int64_t[]){2, 1})};
  check_golden("_adaptive_avg_pool2d", ad, 2, "adaptive_avg_pool2d_f32.mlir");
}

/* Factorization family: output shapes, the calls left to CPU, and one program's text. */
static void test_factor(void) {
  tp_meta_t out[TP_MAX_OUTS];
  int n = 0;
  const tp_op_def_t *lf = op("linalg_lu_factor_ex");
  tp_op_arg_t la[3] = {tensor(TP_DTYPE_F32, 3, (int64_t[]){2, 5, 3}), int_arg(1), int_arg(0)};
  CHECK_OK(lf->infer(lf, la, 3, out, &n));
  CHECK(n == 3 && out[0].ndim == 3 && out[1].dtype == TP_DTYPE_I32 && out[1].ndim == 2 &&
        out[1].sizes[1] == 3 && out[2].ndim == 1 && out[2].sizes[0] == 2);
  la[1] = int_arg(0); /* no pivoting: CPU raises */
  tp_status_t *st = lf->infer(lf, la, 3, out, &n);
  CHECK(st && tp_status_code(st) == TP_UNIMPLEMENTED);
  tp_status_free(st);
  la[0] = tensor(TP_DTYPE_I64, 2, (int64_t[]){3, 3}), la[1] = int_arg(1);
  st = lf->infer(lf, la, 3, out, &n);
  CHECK(st && tp_status_code(st) == TP_UNIMPLEMENTED);
  tp_status_free(st);
  /* A batch of vectors on the right-hand side of solve: result [2, 4], LU [2, 4, 4]. */
  const tp_op_def_t *se = op("_linalg_solve_ex");
  tp_op_arg_t sa[4] = {tensor(TP_DTYPE_F64, 3, (int64_t[]){2, 4, 4}),
                       tensor(TP_DTYPE_F64, 2, (int64_t[]){2, 4}), int_arg(1), int_arg(0)};
  CHECK_OK(se->infer(se, sa, 4, out, &n));
  CHECK(n == 4 && out[0].ndim == 2 && out[0].sizes[1] == 4 && out[1].ndim == 3 &&
        out[2].sizes[1] == 4 && out[3].ndim == 1);
  const tp_op_def_t *qr = op("linalg_qr");
  tp_op_arg_t qa[2] = {tensor(TP_DTYPE_F32, 2, (int64_t[]){5, 3}), str_arg("complete")};
  CHECK_OK(qr->infer(qr, qa, 2, out, &n));
  CHECK(n == 2 && out[0].sizes[0] == 5 && out[0].sizes[1] == 5 && out[1].sizes[0] == 5 &&
        out[1].sizes[1] == 3);
  qa[1] = str_arg("r");
  CHECK_OK(qr->infer(qr, qa, 2, out, &n));
  CHECK(out[0].ndim == 1 && out[0].sizes[0] == 0 && out[1].sizes[0] == 3);
  /* Values only: eigenvectors and singular vectors (unique only up to sign) stay on CPU. */
  const tp_op_def_t *eh = op("_linalg_eigh");
  tp_op_arg_t ea[3] = {tensor(TP_DTYPE_F32, 3, (int64_t[]){2, 4, 4}), str_arg("L"), int_arg(0)};
  CHECK_OK(eh->infer(eh, ea, 3, out, &n));
  CHECK(n == 2 && out[0].ndim == 2 && out[0].sizes[1] == 4 && out[1].ndim == 1 && out[1].sizes[0] == 0);
  ea[2] = int_arg(1);
  st = eh->infer(eh, ea, 3, out, &n);
  CHECK(st && tp_status_code(st) == TP_UNIMPLEMENTED);
  tp_status_free(st);
  const tp_op_def_t *sv = op("_linalg_svd");
  tp_op_arg_t va[4] = {tensor(TP_DTYPE_F32, 2, (int64_t[]){3, 5}), int_arg(0), int_arg(0), {0}};
  CHECK_OK(sv->infer(sv, va, 4, out, &n));
  CHECK(n == 3 && out[1].ndim == 1 && out[1].sizes[0] == 3);
  va[2] = int_arg(1);
  st = sv->infer(sv, va, 4, out, &n);
  CHECK(st && tp_status_code(st) == TP_UNIMPLEMENTED);
  tp_status_free(st);
  tp_op_arg_t g[3] = {tensor(TP_DTYPE_F32, 3, (int64_t[]){2, 3, 3}), int_arg(1), int_arg(0)};
  check_golden("linalg_lu_factor_ex", g, 3, "lu_factor_ex_f32.mlir");
}

int main(void) {
  test_table();
  test_conv_nn_dtypes();
  test_promotion();
  test_binary_infer();
  test_reduce_linalg_infer();
  test_golden();
  test_reduce_forms();
  test_added_ops_infer();
  test_special();
  test_avg_pool();
  test_factor();
  TEST_MAIN_END("ops_test");
}
