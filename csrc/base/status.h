/* Status: the one error type of the C core.
 * A tp_status_t* is NULL on success; otherwise it owns a heap record with an error code (PJRT's
 * numbering) and a formatted message that starts with file:line. Depends on nothing. */
#ifndef TP_BASE_STATUS_H_
#define TP_BASE_STATUS_H_

#include <stdint.h>

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Codes mirror PJRT_Error_Code so a plugin error keeps its code across the border. */
typedef enum {
  TP_OK = 0,
  TP_CANCELLED = 1,
  TP_UNKNOWN = 2,
  TP_INVALID_ARGUMENT = 3,
  TP_DEADLINE_EXCEEDED = 4,
  TP_NOT_FOUND = 5,
  TP_ALREADY_EXISTS = 6,
  TP_PERMISSION_DENIED = 7,
  TP_RESOURCE_EXHAUSTED = 8,
  TP_FAILED_PRECONDITION = 9,
  TP_ABORTED = 10,
  TP_OUT_OF_RANGE = 11,
  TP_UNIMPLEMENTED = 12,
  TP_INTERNAL = 13,
  TP_UNAVAILABLE = 14,
  TP_DATA_LOSS = 15,
} tp_status_code_t;

typedef struct tp_status tp_status_t;

/* Creates a status; caller owns it (free with tp_status_free). Never returns NULL for code != OK. */
tp_status_t *tp_status_make_at(const char *file, int line, tp_status_code_t code,
                               const char *fmt, ...) __attribute__((format(printf, 4, 5)));
#define tp_make_status(code, ...) tp_status_make_at(__FILE__, __LINE__, (code), __VA_ARGS__)

/* Accessors borrow; the message is valid while |s| lives. NULL status reads as TP_OK / "". */
tp_status_code_t tp_status_code(const tp_status_t *s);
const char *tp_status_message(const tp_status_t *s);
/* Prepends "context: " to the message of |s| (no-op for NULL); returns |s|. */
tp_status_t *tp_status_annotate(tp_status_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Keeps the first error and frees the second: for cleanup paths. */
tp_status_t *tp_status_join(tp_status_t *first, tp_status_t *second);
void tp_status_free(tp_status_t *s);

/* Runtime checks a device program makes (tp_hlo_check): each failure is a code, 0 for none.
 * TP_CHECK_INDEX is an index out of range (IndexError); any other code is an assertion's message,
 * registered by tp_check_register. Codes are the same in every process (a hash of the message), so
 * a program loaded from the disk cache reports the message its op registers when it runs. */
enum { TP_CHECK_NONE = 0, TP_CHECK_INDEX = 1 };
/* The code of an assertion failing with |message| (registered for the process's lifetime). */
int32_t tp_check_register(const char *message);
/* The error a program reports for |code|; NULL for TP_CHECK_NONE. Caller owns it. */
tp_status_t *tp_check_status(int32_t code);

#define TP_RETURN_IF_ERROR(expr)      \
  do {                                \
    tp_status_t *tp_st_ = (expr);     \
    if (tp_st_) return tp_st_;        \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif  /* TP_BASE_STATUS_H_ */
