/* torch_pjrt::call_module(Tensor[] inputs, int module): runs a registered StableHLO module
 * (hlo/module.h: a JAX function exported by jax.export, a Pallas kernel, a user's text) on its
 * inputs, its functions taken into the program and called. In a compiled graph the module is
 * part of the graph's one program. Depends on hlo/. */
#include <string.h>

#include "hlo/module.h"
#include "ops/families.h"

/* The module argument follows the flattened list: its length, then its tensors. */
static const tp_hlo_module_t *module_of(const tp_op_arg_t *args, int n_args, int *n_in) {
  if (n_args < 2 || args[0].kind != TP_ARG_INT) return NULL;
  *n_in = (int)args[0].i;
  if (*n_in < 0 || 1 + *n_in + 1 > n_args || args[1 + *n_in].kind != TP_ARG_INT) return NULL;
  return tp_hlo_module_lookup(args[1 + *n_in].i);
}

tp_status_t *tp_infer_call_module(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                                  tp_meta_t *out, int *n_out) {
  int n_in = 0;
  const tp_hlo_module_t *m = module_of(args, n_args, &n_in);
  if (!m)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: no StableHLO module registered under %lld",
                          op->name, (long long)(n_args > 1 ? args[n_args - 1].i : -1));
  const tp_hlo_signature_t *s = &m->sig;
  if (n_in != s->n_params)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: the module takes %d tensors, got %d",
                          op->name, s->n_params, n_in);
  for (int i = 0; i < n_in; i++) {
    const tp_op_arg_t *a = &args[1 + i];
    const tp_hlo_type_t *p = &s->params[i];
    bool same = a->kind == TP_ARG_TENSOR && a->meta.dtype == p->dtype && a->meta.ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++) same = a->meta.sizes[d] == p->dims[d];
    if (!same) {
      char want[160], got[160] = "not a tpu tensor";
      tp_hlo_type_str(want, sizeof(want), p->dtype, p->ndim, p->dims);
      if (a->kind == TP_ARG_TENSOR)
        tp_hlo_type_str(got, sizeof(got), a->meta.dtype, a->meta.ndim, a->meta.sizes);
      return tp_make_status(TP_INVALID_ARGUMENT, "%s: input %d must be %s (as the module's @main "
                            "takes it), got %s", op->name, i, want, got);
    }
  }
  if (s->n_results > TP_MAX_OUTS)
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: a module of more than %d results",
                          op->name, TP_MAX_OUTS);
  for (int k = 0; k < s->n_results; k++) {
    memset(&out[k], 0, sizeof(out[k]));
    out[k].dtype = s->results[k].dtype;
    out[k].ndim = s->results[k].ndim;
    memcpy(out[k].sizes, s->results[k].dims, sizeof(int64_t) * (size_t)s->results[k].ndim);
  }
  *n_out = s->n_results;
  return NULL;
}

void tp_emit_call_module(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                         int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                         tp_hlo_value_t *out) {
  (void)op;
  int n_in = 0;
  const tp_hlo_module_t *m = module_of(args, n_args, &n_in);
  tp_hlo_value_t types[TP_MAX_OUTS];
  for (int k = 0; k < m->sig.n_results; k++) {
    memset(&types[k], 0, sizeof(types[k]));
    types[k].dtype = out_meta[k].dtype;
    types[k].ndim = out_meta[k].ndim;
    memcpy(types[k].dims, out_meta[k].sizes, sizeof(int64_t) * (size_t)out_meta[k].ndim);
  }
  tp_hlo_add_functions(b, m->id, m->functions);
  tp_hlo_call(b, m->main, in + 1, n_in, types, m->sig.n_results, out);
}
