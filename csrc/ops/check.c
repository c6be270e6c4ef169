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
  /* Registered on every call (a program from the disk cache never runs emit); with a message,
   * its code becomes a program input, so one program serves every message. */
  int32_t code = tp_check_register(message);
  if (n_args > 1) {
    memset(&args[1], 0, sizeof(args[1]));
    args[1].kind = TP_ARG_SCALAR;
    args[1].meta.dtype = args[1].scalar_dtype = TP_DTYPE_I32;
    args[1].i = code;
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
