/* Element types shared by every C layer: sizes, StableHLO names, PyTorch's promotion lattice.
 * Header-only tables; depends on nothing. */
#ifndef TP_BASE_DTYPE_H_
#define TP_BASE_DTYPE_H_

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  TP_DTYPE_BOOL = 0,
  TP_DTYPE_U8,
  TP_DTYPE_I8,
  TP_DTYPE_I16,
  TP_DTYPE_I32,
  TP_DTYPE_I64,
  TP_DTYPE_F16,
  TP_DTYPE_BF16,
  TP_DTYPE_F32,
  TP_DTYPE_F64,
  /* complex<f32>. A storage holds it as interleaved f32 (real, imag) pairs: the buffer's element
   * type is tp_dtype_storage(C64), so real views of the same storage read the same bytes. */
  TP_DTYPE_C64,
  TP_DTYPE_C128, /* complex<f64>, stored as f64 pairs */
  TP_DTYPE_COUNT,
  TP_DTYPE_INVALID = -1,
} tp_dtype_t;

size_t tp_dtype_size(tp_dtype_t t);
/* StableHLO element type spelling: "i1", "ui8", "i32", "bf16", "f32", ... */
const char *tp_dtype_hlo_name(tp_dtype_t t);
/* PyTorch-style name: "bool", "uint8", "float32", ... */
const char *tp_dtype_name(tp_dtype_t t);
/* c10::ScalarType's name, as PyTorch's messages print it: "Bool", "Long", "Float", ... */
const char *tp_dtype_scalar_type_name(tp_dtype_t t);
bool tp_dtype_is_float(tp_dtype_t t);
bool tp_dtype_is_int(tp_dtype_t t); /* integral, excluding bool */
bool tp_dtype_is_unsigned(tp_dtype_t t); /* bool and u8 */
bool tp_dtype_is_complex(tp_dtype_t t);
/* The real type of a complex type's components (C64 -> F32); |t| itself otherwise. */
tp_dtype_t tp_dtype_real_part(tp_dtype_t t);
/* The complex type with |t| as its parts (F32 -> C64, F64 -> C128); complex |t| itself;
 * INVALID otherwise. */
tp_dtype_t tp_dtype_to_complex(tp_dtype_t t);
/* The element type a device buffer holding |t| has: the component type for complex types. */
tp_dtype_t tp_dtype_storage(tp_dtype_t t);
/* torch.promote_types for two dtypes (INVALID for a complex type with a 16-bit float wider
 * than the complex type's parts, which would need complex32 handling; never in practice). */
tp_dtype_t tp_dtype_promote(tp_dtype_t a, tp_dtype_t b);
/* c10::canCast: may a result of |from| be written into a tensor of |to|? */
bool tp_dtype_can_cast(tp_dtype_t from, tp_dtype_t to);

#ifdef __cplusplus
}
#endif
#endif  /* TP_BASE_DTYPE_H_ */
