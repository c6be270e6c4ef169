/* PJRT calling helpers: error and event conversion. The only place PJRT_Error becomes a status. */
#include <stdlib.h>

#include "runtime/internal.h"

tp_status_t *tp_pjrt_status(const PJRT_Api *api, PJRT_Error *err, const char *what) {
  if (!err) return NULL;
  TP_PJRT_ARGS(PJRT_Error_Message_Args, margs);
  margs.error = err;
  api->PJRT_Error_Message(&margs);
  TP_PJRT_ARGS(PJRT_Error_GetCode_Args, cargs);
  cargs.error = err;
  int code = TP_UNKNOWN;
  PJRT_Error *cerr = api->PJRT_Error_GetCode(&cargs);
  if (!cerr) code = (int)cargs.code;
  tp_status_t *s = tp_make_status((tp_status_code_t)code, "%s: %.*s", what,
                                  (int)margs.message_size, margs.message);
  if (cerr) {
    TP_PJRT_ARGS(PJRT_Error_Destroy_Args, d2);
    d2.error = cerr;
    api->PJRT_Error_Destroy(&d2);
  }
  TP_PJRT_ARGS(PJRT_Error_Destroy_Args, dargs);
  dargs.error = err;
  api->PJRT_Error_Destroy(&dargs);
  return s;
}

tp_status_t *tp_pjrt_await(const PJRT_Api *api, PJRT_Event *ev, const char *what) {
  if (!ev) return NULL;
  TP_PJRT_ARGS(PJRT_Event_Await_Args, aargs);
  aargs.event = ev;
  tp_status_t *s = tp_pjrt_status(api, api->PJRT_Event_Await(&aargs), what);
  TP_PJRT_ARGS(PJRT_Event_Destroy_Args, dargs);
  dargs.event = ev;
  return tp_status_join(s, tp_pjrt_status(api, api->PJRT_Event_Destroy(&dargs), what));
}

void tp_pjrt_buffer_destroy(const PJRT_Api *api, PJRT_Buffer *buf) {
  if (!buf) return;
  TP_PJRT_ARGS(PJRT_Buffer_Destroy_Args, args);
  args.buffer = buf;
  tp_status_free(tp_pjrt_status(api, api->PJRT_Buffer_Destroy(&args), "destroy buffer"));
}

PJRT_Buffer_Type tp_pjrt_type(tp_dtype_t dtype) {
  switch (dtype) {
    case TP_DTYPE_BOOL: return PJRT_Buffer_Type_PRED;
    case TP_DTYPE_U8: return PJRT_Buffer_Type_U8;
    case TP_DTYPE_I8: return PJRT_Buffer_Type_S8;
    case TP_DTYPE_I16: return PJRT_Buffer_Type_S16;
    case TP_DTYPE_I32: return PJRT_Buffer_Type_S32;
    case TP_DTYPE_I64: return PJRT_Buffer_Type_S64;
    case TP_DTYPE_F16: return PJRT_Buffer_Type_F16;
    case TP_DTYPE_BF16: return PJRT_Buffer_Type_BF16;
    case TP_DTYPE_F32: return PJRT_Buffer_Type_F32;
    case TP_DTYPE_F64: return PJRT_Buffer_Type_F64;
    case TP_DTYPE_C64: return PJRT_Buffer_Type_C64;
    case TP_DTYPE_C128: return PJRT_Buffer_Type_C128;
    default: return PJRT_Buffer_Type_INVALID;
  }
}
