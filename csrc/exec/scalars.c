/* Scalar inputs: small device buffers cached by value. See scalars.h. */
#include "exec/scalars.h"

#include <string.h>

#include "exec/exec.h"
#include "runtime/storage.h"

#define SCALAR_CACHE 512
static struct {
  int device;
  tp_dtype_t dtype;
  uint64_t bits[2]; /* the value's bytes (16: complex128) */
  PJRT_Buffer *buffer;
  uint64_t call;    /* the last call (tp_scalars_buffer's |call|) that took this buffer */
} g_scalars[SCALAR_CACHE];
static uint64_t g_calls; /* under g_lock */

uint64_t tp_scalars_next_call(void) { return ++g_calls; }

void tp_scalar_bytes(const tp_op_arg_t *a, tp_dtype_t dtype, unsigned char *out) {
  bool is_f = tp_dtype_is_float(a->meta.dtype) || tp_dtype_is_complex(a->meta.dtype);
  double f = is_f ? a->f : (double)a->i;
  int64_t i = is_f ? (int64_t)a->f : a->i;
  memset(out, 0, 16);
  switch (dtype) {
    case TP_DTYPE_BOOL: out[0] = is_f ? f != 0 : i != 0; break;
    case TP_DTYPE_U8: out[0] = (uint8_t)i; break;
    case TP_DTYPE_I8: { int8_t v = (int8_t)i; memcpy(out, &v, 1); break; }
    case TP_DTYPE_I16: { int16_t v = (int16_t)i; memcpy(out, &v, 2); break; }
    case TP_DTYPE_I32: { int32_t v = (int32_t)i; memcpy(out, &v, 4); break; }
    case TP_DTYPE_I64: memcpy(out, &i, 8); break;
    case TP_DTYPE_F32: { float v = (float)f; memcpy(out, &v, 4); break; }
    case TP_DTYPE_F64: memcpy(out, &f, 8); break;
    case TP_DTYPE_C64: { /* interleaved (real, imag) */
      float v[2] = {(float)f, tp_dtype_is_complex(a->meta.dtype) ? (float)a->fi : 0.0f};
      memcpy(out, v, 8);
      break;
    }
    case TP_DTYPE_C128: {
      double v[2] = {f, tp_dtype_is_complex(a->meta.dtype) ? a->fi : 0.0};
      memcpy(out, v, 16);
      break;
    }
    case TP_DTYPE_BF16: {
      float v = (float)f;
      uint32_t u;
      memcpy(&u, &v, 4);
      uint16_t h = (v != v) ? 0x7FC0 : (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
      memcpy(out, &h, 2);
      break;
    }
    case TP_DTYPE_F16: {
      _Float16 v = (_Float16)(float)f; /* through float, as PyTorch converts */
      memcpy(out, &v, 2);
      break;
    }
    default: break;
  }
}

tp_status_t *tp_scalars_buffer(int device, const tp_op_arg_t *a, uint64_t call, PJRT_Buffer **out,
                               PJRT_Buffer **out_owned) {
  *out_owned = NULL;
  unsigned char bytes[16];
  tp_dtype_t dt = a->scalar_dtype;
  tp_scalar_bytes(a, dt, bytes);
  uint64_t bits[2];
  memcpy(bits, bytes, 16);
  unsigned slot = (unsigned)(((bits[0] ^ (bits[1] * 31)) * 0x9E3779B97F4A7C15ull + (uint64_t)dt * 131 + (unsigned)device) >> 55) %
                  SCALAR_CACHE;
  if (g_scalars[slot].buffer && g_scalars[slot].device == device && g_scalars[slot].dtype == dt &&
      g_scalars[slot].bits[0] == bits[0] && g_scalars[slot].bits[1] == bits[1]) {
    g_scalars[slot].call = call;
    *out = g_scalars[slot].buffer;
    return NULL;
  }
  PJRT_Buffer *buf = NULL;
  TP_RETURN_IF_ERROR(tp_buffer_from_host(tp_exec_client(), device, bytes, dt, 0, NULL, &buf));
  *out = buf;
  /* Another argument of this call holds the slot's buffer: evicting it now would hand the
   * program a destroyed buffer. This value gets a buffer of its own, the caller's to destroy. */
  if (g_scalars[slot].buffer && g_scalars[slot].call == call) {
    *out_owned = buf;
    return NULL;
  }
  /* An evicted buffer may still feed an enqueued program: PJRT frees its memory only once
   * that use completes (PJRT_Buffer_Destroy acts as PJRT_Buffer_Delete). */
  if (g_scalars[slot].buffer) tp_buffer_destroy(tp_exec_client(), g_scalars[slot].buffer);
  g_scalars[slot].device = device;
  g_scalars[slot].dtype = dt;
  g_scalars[slot].bits[0] = bits[0];
  g_scalars[slot].bits[1] = bits[1];
  g_scalars[slot].buffer = buf;
  g_scalars[slot].call = call;
  return NULL;
}

