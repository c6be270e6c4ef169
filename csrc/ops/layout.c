/* How PyTorch's CPU kernels lay out the fresh outputs of each row, by its family: what the eager
 * glue allocates them as (exec/layout.c turns the rule into strides), so that a channels-last
 * network stays channels-last and `y.stride()` equals CPU's. Depends on ops/ only. */
#include "ops/families.h"

tp_layout_t tp_op_layout(const tp_op_def_t *op) {
  const tp_op_infer_fn f = op->infer;
  const int c = op->code;
  tp_layout_t l = {TP_LAYOUT_CONTIGUOUS, 0, 0};
  /* TensorIterator ops: the output's dims ordered as the inputs' strides order them (but
   * bernoulli(p), mse_loss_backward and log_sigmoid_forward allocate row-major on CPU). */
  if (f == tp_infer_unary || f == tp_infer_binary || f == tp_infer_ternary ||
      f == tp_infer_special || f == tp_infer_activation || f == tp_infer_threshold_backward ||
      (f == tp_infer_mse && c == TP_DIR_FORWARD) ||
      (f == tp_infer_random && c != TP_RAND_MULTINOMIAL && c != TP_RAND_BERNOULLI) ||
      (f == tp_infer_pointwise && c != TP_P_LOG_SIGMOID)) {
    l.kind = TP_LAYOUT_ITERATOR;
    return l;
  }
  /* Kernels that allocate in the memory format their input suggests: the input (a backward's
   * second argument: its first is the incoming gradient) and, for a convolution, the weight.
   * CPU's 3-d average and adaptive pooling, max unpooling and upsampling backward have no
   * channels-last-3d kernels: row-major. */
  int first = -1, count = 1;
  if (f == tp_infer_conv) first = 0, count = 2;
  else if (f == tp_infer_conv_backward) first = 1, count = 2;
  else if (f == tp_infer_batch_norm) first = 0;
  else if (f == tp_infer_batch_norm_backward) first = 1;
  else if (f == tp_infer_group_norm) first = c == TP_DIR_BACKWARD;
  else if (f == tp_infer_max_unpool && c == TP_UNPOOL_2D) first = 0;
  else if (f == tp_infer_max_pool && (c & (TP_MPF_3D | TP_MPF_ADAPTIVE)) != (TP_MPF_3D | TP_MPF_ADAPTIVE))
    first = (c & TP_MPF_BACKWARD) != 0;
  else if (f == tp_infer_avg_pool && (c & TP_APF_RANK) == 2) first = (c & TP_APF_BACKWARD) != 0;
  else if (f == tp_infer_upsample && !((c & TP_UPF_BACKWARD) && (c & TP_UPF_RANK) == 3))
    first = 0; /* a backward follows the gradient */
  else if (f == tp_infer_pad_mode) first = (c & TP_PADF_BACKWARD) != 0;
  else if (f == tp_infer_constant_pad) first = 0;
  if (first >= 0) {
    l.kind = TP_LAYOUT_SUGGESTED;
    l.first = first;
    l.count = count;
  }
  return l;
}
