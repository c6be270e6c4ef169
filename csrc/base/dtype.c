/* Element type tables. Depends on nothing. */
#include "base/dtype.h"

static const struct {
  size_t size;
  const char *hlo;
  const char *name;
  const char *scalar_type; /* c10::ScalarType's name, as PyTorch's messages print it */
} kInfo[TP_DTYPE_COUNT] = {
    [TP_DTYPE_BOOL] = {1, "i1", "bool", "Bool"},      [TP_DTYPE_U8] = {1, "ui8", "uint8", "Byte"},
    [TP_DTYPE_I8] = {1, "i8", "int8", "Char"},        [TP_DTYPE_I16] = {2, "i16", "int16", "Short"},
    [TP_DTYPE_I32] = {4, "i32", "int32", "Int"},     [TP_DTYPE_I64] = {8, "i64", "int64", "Long"},
    [TP_DTYPE_F16] = {2, "f16", "float16", "Half"},   [TP_DTYPE_BF16] = {2, "bf16", "bfloat16", "BFloat16"},
    [TP_DTYPE_F32] = {4, "f32", "float32", "Float"},   [TP_DTYPE_F64] = {8, "f64", "float64", "Double"},
    [TP_DTYPE_C64] = {8, "complex<f32>", "complex64", "ComplexFloat"},
    [TP_DTYPE_C128] = {16, "complex<f64>", "complex128", "ComplexDouble"},
};

static bool valid(tp_dtype_t t) { return t >= 0 && t < TP_DTYPE_COUNT; }

size_t tp_dtype_size(tp_dtype_t t) { return valid(t) ? kInfo[t].size : 0; }
const char *tp_dtype_hlo_name(tp_dtype_t t) { return valid(t) ? kInfo[t].hlo : "?"; }
const char *tp_dtype_name(tp_dtype_t t) { return valid(t) ? kInfo[t].name : "invalid"; }
const char *tp_dtype_scalar_type_name(tp_dtype_t t) { return valid(t) ? kInfo[t].scalar_type : "Undefined"; }

bool tp_dtype_is_float(tp_dtype_t t) {
  return t == TP_DTYPE_F16 || t == TP_DTYPE_BF16 || t == TP_DTYPE_F32 || t == TP_DTYPE_F64;
}
bool tp_dtype_is_int(tp_dtype_t t) { return t >= TP_DTYPE_U8 && t <= TP_DTYPE_I64; }
bool tp_dtype_is_unsigned(tp_dtype_t t) { return t == TP_DTYPE_BOOL || t == TP_DTYPE_U8; }
bool tp_dtype_is_complex(tp_dtype_t t) { return t == TP_DTYPE_C64 || t == TP_DTYPE_C128; }
tp_dtype_t tp_dtype_real_part(tp_dtype_t t) {
  return t == TP_DTYPE_C64 ? TP_DTYPE_F32 : t == TP_DTYPE_C128 ? TP_DTYPE_F64 : t;
}
tp_dtype_t tp_dtype_to_complex(tp_dtype_t t) {
  if (tp_dtype_is_complex(t)) return t;
  return t == TP_DTYPE_F32 ? TP_DTYPE_C64 : t == TP_DTYPE_F64 ? TP_DTYPE_C128 : TP_DTYPE_INVALID;
}
tp_dtype_t tp_dtype_storage(tp_dtype_t t) { return tp_dtype_real_part(t); }

tp_dtype_t tp_dtype_promote(tp_dtype_t a, tp_dtype_t b) {
  if (!valid(a) || !valid(b)) return TP_DTYPE_INVALID;
  if (a == b) return a;
  if (a == TP_DTYPE_BOOL) return b;
  if (b == TP_DTYPE_BOOL) return a;
  if (tp_dtype_is_complex(a) || tp_dtype_is_complex(b)) {
    /* the wider of the complex type and the other type's float width */
    tp_dtype_t c = tp_dtype_is_complex(a) ? a : b, other = c == a ? b : a;
    if (other == TP_DTYPE_C128 || other == TP_DTYPE_F64) return TP_DTYPE_C128;
    return c;
  }
  bool fa = tp_dtype_is_float(a), fb = tp_dtype_is_float(b);
  if (fa && !fb) return a;
  if (fb && !fa) return b;
  if (fa && fb) {
    /* f16 with bf16 promotes to f32; otherwise the wider type. */
    if ((a == TP_DTYPE_F16 && b == TP_DTYPE_BF16) || (a == TP_DTYPE_BF16 && b == TP_DTYPE_F16))
      return TP_DTYPE_F32;
    return a > b ? a : b;
  }
  /* Both integral: u8 with a signed type needs a signed type wider than 8 bits. */
  if (a == TP_DTYPE_U8 || b == TP_DTYPE_U8) {
    tp_dtype_t other = a == TP_DTYPE_U8 ? b : a;
    return other == TP_DTYPE_I8 ? TP_DTYPE_I16 : other;
  }
  return a > b ? a : b;
}

bool tp_dtype_can_cast(tp_dtype_t from, tp_dtype_t to) {
  if (tp_dtype_is_complex(from) && !tp_dtype_is_complex(to)) return false;
  if (tp_dtype_is_float(from) && !tp_dtype_is_float(to) && !tp_dtype_is_complex(to)) return false;
  if (from != TP_DTYPE_BOOL && to == TP_DTYPE_BOOL) return false;
  return true;
}
