/* Whole graphs as one program: a graph of op-table nodes over values (graph inputs and node
 * outputs), lowered with the same emitters as single eager calls into one StableHLO module and
 * run as one PJRT execute. The torch.compile backend builds one per partition of a captured
 * graph. Programs are found in the same executable cache (memory and disk), keyed by the graph's
 * description plus the layouts of the actual inputs, so a strided input is read inside the
 * program exactly as in eager mode. Not thread-safe per graph; runs serialize with eager calls. */
#ifndef TP_EXEC_GRAPH_H_
#define TP_EXEC_GRAPH_H_

#include <stdbool.h>

#include "exec/view.h"
#include "ops/op.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tp_graph tp_graph_t;

tp_status_t *tp_graph_create(tp_graph_t **out_graph);
void tp_graph_free(tp_graph_t *g);

/* Adds a graph input of |meta|; returns its value id. */
int tp_graph_input(tp_graph_t *g, const tp_meta_t *meta);

/* Adds a call of table op |op|. Arguments are as for tp_eager_infer (eager.h), except that each TENSOR
 * argument names a value: arg_values[i] (ignored for other kinds). SCALAR values become
 * constants of the program, except the generator key a TP_OPF_RANDOM op gets, which becomes a
 * program input (tp_graph_random_count). Fills the outputs' metas and their value ids
 * (consecutive from *first_value). UNIMPLEMENTED: no native lowering; the graph is unchanged. */
tp_status_t *tp_graph_node(tp_graph_t *g, int op, tp_op_arg_t *args, const int *arg_values,
                           int n_args, tp_meta_t *out_metas, int *n_out, int *first_value);

/* The values the program returns, in order (a value may appear more than once). */
tp_status_t *tp_graph_set_outputs(tp_graph_t *g, const int *values, int n);

const tp_meta_t *tp_graph_value_meta(const tp_graph_t *g, int value);
int tp_graph_input_count(const tp_graph_t *g);
int tp_graph_output_count(const tp_graph_t *g);
int tp_graph_node_count(const tp_graph_t *g);
/* Names the graph's program in traces (the profiler's device track). */
void tp_graph_set_name(tp_graph_t *g, const char *name);
/* Random ops in the graph: each takes one key per run. */
int tp_graph_random_count(const tp_graph_t *g);

/* What a run did: whether it compiled a program (a cache miss), and whether it failed building
 * or compiling the program (the graph cannot be lowered as it is; its nodes can still run one by
 * one) rather than running it. */
typedef struct {
  bool compiled;
  bool build_failed;
} tp_graph_outcome_t;

/* Runs the graph on |device|: |inputs| are views for the graph inputs (in tp_graph_input order,
 * shapes and dtypes as declared), |keys| one generator key per random op, |outs| fresh storages
 * (of the outputs' sizes) that receive the results densely. Fills *out. */
tp_status_t *tp_graph_run(tp_graph_t *g, int device, const tp_view_t *inputs, const int64_t *keys,
                          tp_storage_t *const *outs, tp_graph_outcome_t *out);

/* Runs the graph as one replicated program over |n| participants, replica r on devices[r] (all
 * different): the graph's collectives (the _c10d_functional rows) run across them, every other
 * op on each replica's own values. Participant r's inputs, keys and output storages are
 * inputs[r * inputs...], keys[r * random ops...] and outs[r * outputs...], as tp_graph_run's.
 * The program is the same on every replica, so it reads every participant's inputs laid out
 * alike (strides, offsets, buffers): an input laid out otherwise on some participant is read
 * through an exact dense copy on each (a copy the same calls on every rank never need). The
 * program is compiled once for the devices and kept like any other. n = 1 is tp_graph_run. */
tp_status_t *tp_graph_run_replicated(tp_graph_t *g, int n, const int *devices,
                                     const tp_view_t *inputs, const int64_t *keys,
                                     tp_storage_t *const *outs, tp_graph_outcome_t *out);

/* A hash of the graph's description (its inputs' metas, nodes and arguments): the same for the
 * same graph built anywhere, so ranks can check that they run one graph. */
uint64_t tp_graph_fingerprint(const tp_graph_t *g);

#ifdef __cplusplus
}
#endif
#endif  /* TP_EXEC_GRAPH_H_ */
