/* Assertions checked on the device: _assert_async, which CUDA checks in a kernel and reports at a
 * later synchronizing call (a device-side assert). The program's check flag carries the failure
 * (hlo/builder.h), so asserting costs no device-to-host round trip. */
#include <string.h>

#include "ops/families.h"

/* What CPU's kernel says of an assertion without a message. */
static const char kNoMessage[] = "Expected Tensor with single nonzero value, but got zero";

tp_status_t *tp_infer_assert_async(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                   tp_meta_t *out, int *n_out) {
  (void)out;
  if (n_args < 1 || args[0].kind != TP_ARG_TENSOR)
    return tp_make_status(TP_UNIMPLEMENTED, "%s: expects a tensor", op->name);
  int64_t n = tp_meta_numel(&args[0].meta);
  if (n != 1)
    return tp_make_status(TP_INVALID_ARGUMENT, "Boolean value of Tensor with %s is ambiguous",
                          n == 0 ? "no values" : "more than one value");
  const char *message = kNoMessage;
  if (n_args > 1) {
    if (args[1].kind != TP_ARG_STR)
      return tp_make_status(TP_UNIMPLEMENTED, "%s: expects a message", op->name);
    message = args[1].text ? args[1].text : args[1].s;
  }
  /* The message becomes its check code, a program input: one program serves every message. */
  tp_op_arg_t *code = &args[n_args > 1 ? 1 : 0];
  if (n_args > 1) {
    memset(code, 0, sizeof(*code));
    code->kind = TP_ARG_SCALAR;
    code->meta.dtype = code->scalar_dtype = TP_DTYPE_I32;
    code->i = tp_check_register(message);
  } else {
    tp_check_register(message);
  }
  *n_out = 0;
  return NULL;
}

void tp_emit_assert_async(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                          int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                          tp_hlo_value_t *out) {
  (void)op, (void)out_meta, (void)out;
  tp_hlo_value_t truth = tp_hlo_convert(b, in[0], TP_DTYPE_BOOL);
  tp_hlo_value_t zero = tp_hlo_compare(b, TP_CMP_EQ, truth, tp_k(b, 0, truth));
  tp_hlo_value_t code = n_args > 1 && args[1].kind == TP_ARG_SCALAR
                            ? in[1]
                            : tp_hlo_constant_i(b, TP_DTYPE_I32, tp_check_register(kNoMessage));
  tp_hlo_check(b, zero, code);
}
