// The list of ops: one row each, MEMFIT_OP(identifier, attribute struct,
// fewest inputs, most inputs (-1: any number)). It makes OpKind and the Attrs
// variant (memfit/ir.h), and the tables of the layers that know each op: the
// op table (src/ops/: op_info_<op>, its shape inference, gradient rule,
// in-place pairs, i32 inputs, cost and test examples) and each backend's
// kernels (docs/ops.md, "Adding an op"). Tests iterate over this list.
#pragma once

#define MEMFIT_OPS(MEMFIT_OP)                                \
  MEMFIT_OP(matmul, MatmulAttrs, 2, 3)                       \
  MEMFIT_OP(linear, NoAttrs, 2, 4)                           \
  MEMFIT_OP(conv2d, Conv2dAttrs, 2, 3)                       \
  MEMFIT_OP(conv2d_grad_input, Conv2dGradAttrs, 2, 2)        \
  MEMFIT_OP(conv2d_grad_weight, Conv2dGradAttrs, 2, 2)       \
  MEMFIT_OP(conv3d, Conv3dAttrs, 2, 3)                       \
  MEMFIT_OP(conv3d_grad_input, Conv3dGradAttrs, 2, 2)        \
  MEMFIT_OP(conv3d_grad_weight, Conv3dGradAttrs, 2, 2)       \
  MEMFIT_OP(conv_transpose2d, ConvTranspose2dAttrs, 2, 3)    \
  MEMFIT_OP(conv_transpose3d, ConvTranspose3dAttrs, 2, 3)    \
  MEMFIT_OP(max_pool2d, Pool2dAttrs, 1, 1)                   \
  MEMFIT_OP(max_pool2d_grad, Pool2dAttrs, 2, 2)              \
  MEMFIT_OP(avg_pool2d, Pool2dAttrs, 1, 1)                   \
  MEMFIT_OP(avg_pool2d_grad, Pool2dGradAttrs, 1, 1)          \
  MEMFIT_OP(max_pool3d, Pool3dAttrs, 1, 1)                   \
  MEMFIT_OP(max_pool3d_grad, Pool3dAttrs, 2, 2)              \
  MEMFIT_OP(avg_pool3d, Pool3dAttrs, 1, 1)                   \
  MEMFIT_OP(avg_pool3d_grad, Pool3dGradAttrs, 1, 1)          \
  MEMFIT_OP(upsample, UpsampleAttrs, 1, 1)                   \
  MEMFIT_OP(upsample_grad, UpsampleAttrs, 1, 1)              \
  MEMFIT_OP(global_avg_pool, NoAttrs, 1, 1)                  \
  MEMFIT_OP(global_avg_pool_grad, ShapeAttrs, 1, 1)          \
  MEMFIT_OP(batch_norm, BatchNormAttrs, 5, 5)                \
  MEMFIT_OP(batch_norm_grad, BatchNormAttrs, 5, 5)           \
  MEMFIT_OP(batch_norm_inference, BatchNormAttrs, 5, 5)      \
  MEMFIT_OP(batch_norm_inference_grad, BatchNormAttrs, 5, 5) \
  MEMFIT_OP(layer_norm, LayerNormAttrs, 3, 3)                \
  MEMFIT_OP(layer_norm_grad, LayerNormAttrs, 5, 5)           \
  MEMFIT_OP(relu, NoAttrs, 1, 1)                             \
  MEMFIT_OP(relu_grad, NoAttrs, 2, 2)                        \
  MEMFIT_OP(gelu, NoAttrs, 1, 1)                             \
  MEMFIT_OP(gelu_grad, NoAttrs, 2, 2)                        \
  MEMFIT_OP(tanh, NoAttrs, 1, 1)                             \
  MEMFIT_OP(tanh_grad, NoAttrs, 2, 2)                        \
  MEMFIT_OP(sigmoid, NoAttrs, 1, 1)                          \
  MEMFIT_OP(sigmoid_grad, NoAttrs, 2, 2)                     \
  MEMFIT_OP(add, NoAttrs, 2, 2)                              \
  MEMFIT_OP(sub, NoAttrs, 2, 2)                              \
  MEMFIT_OP(mul, NoAttrs, 2, 2)                              \
  MEMFIT_OP(scale, ScaleAttrs, 1, 1)                         \
  MEMFIT_OP(reshape, ShapeAttrs, 1, 1)                       \
  MEMFIT_OP(reorder, NoAttrs, 1, 1)                          \
  MEMFIT_OP(broadcast_to, ShapeAttrs, 1, 1)                  \
  MEMFIT_OP(transpose, PermAttrs, 1, 1)                      \
  MEMFIT_OP(concat, AxisAttrs, 1, -1)                        \
  MEMFIT_OP(slice, SliceAttrs, 1, 1)                         \
  MEMFIT_OP(slice_grad, SliceAttrs, 1, 2)                    \
  MEMFIT_OP(split, SplitAttrs, 1, 1)                         \
  MEMFIT_OP(pad, PadAttrs, 1, 1)                             \
  MEMFIT_OP(pad_grad, PadAttrs, 1, 1)                        \
  MEMFIT_OP(embedding, NoAttrs, 2, 2)                        \
  MEMFIT_OP(embedding_grad, ShapeAttrs, 2, 3)                \
  MEMFIT_OP(causal_mask, CausalMaskAttrs, 1, 1)              \
  MEMFIT_OP(where, NoAttrs, 3, 3)                            \
  MEMFIT_OP(attention, AttentionAttrs, 3, 4)                 \
  MEMFIT_OP(attention_grad, AttentionAttrs, 6, 7)            \
  MEMFIT_OP(lstm_cell, NoAttrs, 1, 2)                        \
  MEMFIT_OP(lstm_cell_grad, NoAttrs, 4, 5)                   \
  MEMFIT_OP(dropout, DropoutAttrs, 1, 1)                     \
  MEMFIT_OP(softmax, AxisAttrs, 1, 1)                        \
  MEMFIT_OP(softmax_grad, AxisAttrs, 2, 2)                   \
  MEMFIT_OP(log_softmax, AxisAttrs, 1, 1)                    \
  MEMFIT_OP(log_softmax_grad, AxisAttrs, 2, 2)               \
  MEMFIT_OP(softmax_cross_entropy, NoAttrs, 2, 2)            \
  MEMFIT_OP(softmax_cross_entropy_grad, NoAttrs, 3, 3)       \
  MEMFIT_OP(reduce_sum, ReduceAttrs, 1, 1)                   \
  MEMFIT_OP(reduce_mean, ReduceAttrs, 1, 1)                  \
  MEMFIT_OP(fill, FillAttrs, 0, 1)                           \
  MEMFIT_OP(sgd_update, SgdAttrs, 2, 3)                      \
  MEMFIT_OP(adamw_update, AdamWAttrs, 4, 4)                  \
  MEMFIT_OP(to_host, NoAttrs, 1, 1)                          \
  MEMFIT_OP(to_device, NoAttrs, 1, 1)                        \
  MEMFIT_OP(swap_wait, NoAttrs, 2, 2)                        \
  MEMFIT_OP(all_reduce_start, BucketAttrs, 1, -1)            \
  MEMFIT_OP(all_reduce_wait, BucketAttrs, 1, 1)              \
  MEMFIT_OP(reduce_scatter_start, BucketAttrs, 1, -1)        \
  MEMFIT_OP(reduce_scatter_wait, BucketAttrs, 1, 1)          \
  MEMFIT_OP(shard_pack, BucketAttrs, 1, -1)                  \
  MEMFIT_OP(all_gather_start, BucketAttrs, 1, 1)             \
  MEMFIT_OP(all_gather_wait, BucketAttrs, 2, -1)             \
  MEMFIT_OP(conv2d_relu, Conv2dAttrs, 2, 3)                  \
  MEMFIT_OP(conv2d_add, Conv2dAttrs, 3, 4)                   \
  MEMFIT_OP(linear_relu, NoAttrs, 2, 3)
