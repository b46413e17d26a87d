// The reference kernel of every op, one function each, grouped by the file
// that defines it. reference_backend.cpp maps OpKind to these functions.
#pragma once

#include "backends/reference/reference_kernels.h"

namespace memfit {

// ref_linear.cpp
void ref_matmul(const RefCall& call);
void ref_linear(const RefCall& call);

// ref_fused.cpp
void ref_conv2d_relu(const RefCall& call);
void ref_conv2d_add(const RefCall& call);
void ref_linear_relu(const RefCall& call);

// ref_conv.cpp
void ref_conv2d(const RefCall& call);
void ref_conv2d_grad_input(const RefCall& call);
void ref_conv2d_grad_weight(const RefCall& call);
void ref_conv3d(const RefCall& call);
void ref_conv3d_grad_input(const RefCall& call);
void ref_conv3d_grad_weight(const RefCall& call);
void ref_conv_transpose2d(const RefCall& call);
void ref_conv_transpose3d(const RefCall& call);

// ref_pool.cpp
void ref_max_pool2d(const RefCall& call);
void ref_max_pool2d_grad(const RefCall& call);
void ref_avg_pool2d(const RefCall& call);
void ref_avg_pool2d_grad(const RefCall& call);
void ref_max_pool3d(const RefCall& call);
void ref_max_pool3d_grad(const RefCall& call);
void ref_avg_pool3d(const RefCall& call);
void ref_avg_pool3d_grad(const RefCall& call);
void ref_global_avg_pool(const RefCall& call);
void ref_global_avg_pool_grad(const RefCall& call);

// ref_upsample.cpp
void ref_upsample(const RefCall& call);
void ref_upsample_grad(const RefCall& call);

// ref_norm.cpp
void ref_batch_norm(const RefCall& call);
void ref_batch_norm_grad(const RefCall& call);
void ref_batch_norm_inference(const RefCall& call);
void ref_batch_norm_inference_grad(const RefCall& call);
void ref_layer_norm(const RefCall& call);
void ref_layer_norm_grad(const RefCall& call);

// ref_eltwise.cpp
void ref_relu(const RefCall& call);
void ref_relu_grad(const RefCall& call);
void ref_gelu(const RefCall& call);
void ref_gelu_grad(const RefCall& call);
void ref_tanh(const RefCall& call);
void ref_tanh_grad(const RefCall& call);
void ref_sigmoid(const RefCall& call);
void ref_sigmoid_grad(const RefCall& call);
void ref_add(const RefCall& call);
void ref_sub(const RefCall& call);
void ref_mul(const RefCall& call);
void ref_scale(const RefCall& call);
void ref_dropout(const RefCall& call);

// ref_shape.cpp
void ref_reshape(const RefCall& call);
void ref_broadcast_to(const RefCall& call);
void ref_transpose(const RefCall& call);
void ref_concat(const RefCall& call);
void ref_slice(const RefCall& call);
void ref_slice_grad(const RefCall& call);
void ref_split(const RefCall& call);
void ref_pad(const RefCall& call);
void ref_pad_grad(const RefCall& call);

// ref_sequence.cpp
void ref_embedding(const RefCall& call);
void ref_embedding_grad(const RefCall& call);
void ref_causal_mask(const RefCall& call);
void ref_where(const RefCall& call);

// ref_attention.cpp
void ref_attention(const RefCall& call);
void ref_attention_grad(const RefCall& call);

// ref_lstm.cpp
void ref_lstm_cell(const RefCall& call);
void ref_lstm_cell_grad(const RefCall& call);

// ref_softmax.cpp
void ref_softmax(const RefCall& call);
void ref_softmax_grad(const RefCall& call);
void ref_log_softmax(const RefCall& call);
void ref_log_softmax_grad(const RefCall& call);
void ref_softmax_cross_entropy(const RefCall& call);
void ref_softmax_cross_entropy_grad(const RefCall& call);

// ref_reduce.cpp
void ref_reduce_sum(const RefCall& call);
void ref_reduce_mean(const RefCall& call);
void ref_fill(const RefCall& call);

// ref_swap.cpp
void ref_copy(const RefCall& call);       // to_host, to_device, reorder (plain to plain)
void ref_swap_wait(const RefCall& call);  // nothing to compute: the executor waits
void ref_bucket_pack(const RefCall& call);    // all_reduce_start, reduce_scatter_start
void ref_bucket_unpack(const RefCall& call);  // all_reduce_wait, all_gather_wait
void ref_reduce_scatter_wait(const RefCall& call);
void ref_shard_pack(const RefCall& call);
void ref_all_gather_start(const RefCall& call);

// ref_optimizer.cpp
void ref_sgd_update(const RefCall& call);
void ref_adamw_update(const RefCall& call);

}  // namespace memfit
