/* The op table: op_table.def expanded into the sorted array and its lookup. */
#include <string.h>

#include "ops/families.h"

#define TP_OP_UNARY(name, inplace, out, code, flags) \
  {name, inplace, out, tp_infer_unary, tp_emit_unary, code, flags},
#define TP_OP_BINARY(name, inplace, out, code, flags) \
  {name, inplace, out, tp_infer_binary, tp_emit_binary, code, flags},
#define TP_OP_TERNARY(name, inplace, out, code, flags) \
  {name, inplace, out, tp_infer_ternary, tp_emit_ternary, code, flags},
#define TP_OP_REDUCE(name, inplace, out, code, flags) \
  {name, inplace, out, tp_infer_reduce, tp_emit_reduce, code, flags},
#define TP_OP(name, inplace, out, family, code, flags) \
  {name, inplace, out, tp_infer_##family, tp_emit_##family, code, flags},

const tp_op_def_t tp_op_table[] = {
#include "ops/op_table.def"
};
const int tp_op_count = (int)(sizeof(tp_op_table) / sizeof(tp_op_table[0]));

int tp_op_lookup(const char *name, tp_op_variant_t *out_variant) {
  int lo = 0, hi = tp_op_count - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    int c = strcmp(name, tp_op_table[mid].name);
    if (c == 0) {
      if (out_variant) *out_variant = TP_VARIANT_FUNCTIONAL;
      return mid;
    }
    if (c < 0) hi = mid - 1; else lo = mid + 1;
  }
  for (int i = 0; i < tp_op_count; i++) {
    const tp_op_def_t *d = &tp_op_table[i];
    if (d->inplace && strcmp(name, d->inplace) == 0) {
      if (out_variant) *out_variant = TP_VARIANT_INPLACE;
      return i;
    }
    if (d->out && strcmp(name, d->out) == 0) {
      if (out_variant) *out_variant = TP_VARIANT_OUT;
      return i;
    }
  }
  return -1;
}
