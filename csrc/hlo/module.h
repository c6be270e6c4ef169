/* StableHLO modules written elsewhere (jax.export's, a user's text), taken into programs of ours:
 * the signature of their public @main, and their functions, renamed apart so that several
 * modules (and ours) share one program. */
#ifndef TP_HLO_MODULE_H_
#define TP_HLO_MODULE_H_

#include "hlo/builder.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TP_HLO_MODULE_MAX_VALUES 16 /* parameters, and results, of a module's @main */

typedef struct {
  tp_dtype_t dtype;
  int ndim;
  int64_t dims[TP_MAX_DIMS];
} tp_hlo_type_t;

typedef struct {
  int n_params, n_results;
  tp_hlo_type_t params[TP_HLO_MODULE_MAX_VALUES];
  tp_hlo_type_t results[TP_HLO_MODULE_MAX_VALUES];
} tp_hlo_signature_t;

/* The parameter and result types of |text|'s public function @main (static shapes of the dtypes
 * torch has). A clear error for a module without one, a dynamic or unknown type, a token. */
tp_status_t *tp_hlo_module_signature(const char *text, tp_hlo_signature_t *out);

/* |text|'s functions, to place in another module: locations dropped, every symbol prefixed with
 * |prefix| (@main becomes @<prefix>main), every function private. Caller frees *out. */
tp_status_t *tp_hlo_module_functions(const char *text, const char *prefix, char **out);

/* The process's registered modules: a module is registered once (its id a hash of its text, the
 * same in every process, so programs calling it are keyed alike on disk) and kept for the
 * process's life. */
typedef struct {
  int64_t id;
  tp_hlo_signature_t sig;
  char main[32];    /* its @main's symbol in |functions| */
  char *functions;  /* tp_hlo_module_functions' text, prefixed by the id */
  char *text;       /* as given */
} tp_hlo_module_t;

/* Registers |text| (checked: a signature, functions to take in) and sets *out_id; registering the
 * same text again gives the same id. */
tp_status_t *tp_hlo_module_register(const char *text, int64_t *out_id);
/* Module |id|, or NULL when none is registered under it. */
const tp_hlo_module_t *tp_hlo_module_lookup(int64_t id);

#ifdef __cplusplus
}
#endif
#endif /* TP_HLO_MODULE_H_ */
