// The list of ops: one row each, MEMFIT_OP(identifier, attribute struct).
// The op table (src/ops/) gives every row its shape inference, gradient rule,
// in-place pairs, cost and test example; tests iterate over this list.
#pragma once

#define MEMFIT_OPS(MEMFIT_OP)                          \
  MEMFIT_OP(matmul, MatmulAttrs)                       \
  MEMFIT_OP(linear, NoAttrs)                           \
  MEMFIT_OP(conv2d, Conv2dAttrs)                       \
  MEMFIT_OP(conv2d_grad_input, Conv2dGradAttrs)        \
  MEMFIT_OP(conv2d_grad_weight, Conv2dGradAttrs)       \
  MEMFIT_OP(conv3d, Conv3dAttrs)                       \
  MEMFIT_OP(conv3d_grad_input, Conv3dGradAttrs)        \
  MEMFIT_OP(conv3d_grad_weight, Conv3dGradAttrs)       \
  MEMFIT_OP(conv_transpose2d, ConvTranspose2dAttrs)    \
  MEMFIT_OP(conv_transpose3d, ConvTranspose3dAttrs)    \
  MEMFIT_OP(max_pool2d, Pool2dAttrs)                   \
  MEMFIT_OP(max_pool2d_grad, Pool2dAttrs)              \
  MEMFIT_OP(avg_pool2d, Pool2dAttrs)                   \
  MEMFIT_OP(avg_pool2d_grad, Pool2dGradAttrs)          \
  MEMFIT_OP(global_avg_pool, NoAttrs)                  \
  MEMFIT_OP(global_avg_pool_grad, ShapeAttrs)          \
  MEMFIT_OP(batch_norm, BatchNormAttrs)                \
  MEMFIT_OP(batch_norm_grad, BatchNormAttrs)           \
  MEMFIT_OP(relu, NoAttrs)                             \
  MEMFIT_OP(relu_grad, NoAttrs)                        \
  MEMFIT_OP(gelu, NoAttrs)                             \
  MEMFIT_OP(gelu_grad, NoAttrs)                        \
  MEMFIT_OP(tanh, NoAttrs)                             \
  MEMFIT_OP(tanh_grad, NoAttrs)                        \
  MEMFIT_OP(sigmoid, NoAttrs)                          \
  MEMFIT_OP(sigmoid_grad, NoAttrs)                     \
  MEMFIT_OP(add, NoAttrs)                              \
  MEMFIT_OP(sub, NoAttrs)                              \
  MEMFIT_OP(mul, NoAttrs)                              \
  MEMFIT_OP(scale, ScaleAttrs)                         \
  MEMFIT_OP(reshape, ShapeAttrs)                       \
  MEMFIT_OP(broadcast_to, ShapeAttrs)                  \
  MEMFIT_OP(transpose, PermAttrs)                      \
  MEMFIT_OP(concat, AxisAttrs)                         \
  MEMFIT_OP(slice, SliceAttrs)                         \
  MEMFIT_OP(slice_grad, SliceAttrs)                    \
  MEMFIT_OP(dropout, DropoutAttrs)                     \
  MEMFIT_OP(softmax, AxisAttrs)                        \
  MEMFIT_OP(softmax_grad, AxisAttrs)                   \
  MEMFIT_OP(log_softmax, AxisAttrs)                    \
  MEMFIT_OP(log_softmax_grad, AxisAttrs)               \
  MEMFIT_OP(softmax_cross_entropy, NoAttrs)            \
  MEMFIT_OP(softmax_cross_entropy_grad, NoAttrs)       \
  MEMFIT_OP(reduce_sum, ReduceAttrs)                   \
  MEMFIT_OP(reduce_mean, ReduceAttrs)                  \
  MEMFIT_OP(fill, FillAttrs)                           \
  MEMFIT_OP(sgd_update, SgdAttrs)                      \
  MEMFIT_OP(adamw_update, AdamWAttrs)
