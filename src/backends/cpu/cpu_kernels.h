// The oneDNN kernels of the CPU backend, one factory per family of ops. Each
// creates its primitives once; it throws dnnl::error when oneDNN rejects the
// node, which the backend turns into a Status.
#pragma once

#include <cstddef>
#include <memory>

#include "runtime/kernel.h"

namespace memfit::cpu {

// Whether a loop over `bytes` of memory is worth the OpenMP team: below this
// size one thread finishes a copy or an add before threads asleep in the team
// (OMP_WAIT_POLICY=passive) are awake, so the small per-time-step nodes of an
// unrolled LSTM run on the calling thread alone (`#pragma omp parallel for
// if(worth_threads(bytes))`). The results do not depend on it.
inline bool worth_threads(size_t bytes) { return bytes >= (size_t{1} << 18); }

// conv2d, conv3d and their gradients; conv_transpose2d, conv_transpose3d
std::unique_ptr<Kernel> make_conv_kernel(const Graph& graph, const Node& node);
// False for the transposed convolutions oneDNN cannot express (an output_padding
// of pad + stride or more); the reference kernel runs them.
bool conv_supported(const Node& node);
// Whether the kernel of conv2d_grad_weight or conv3d_grad_weight `node`
// reads its x (a first layer's image) plain beside a dy in `blocked` on one
// of oneDNN's direct kernels: then dy needs no reorder into the plain layout.
bool image_grad_weight_reads_blocked_dy(const Graph& graph, const Node& node, Layout blocked);
// The layout of the weights that the kernel of convolution `node` reads
// (conv2d, its fused forms, conv3d: input 1) or writes (conv2d_grad_weight,
// conv3d_grad_weight: output 0) as they are, with x in `x_layout` and y or dy
// in `blocked`: oi8 or oi16, or plain when oneDNN chooses another format (a
// first layer's, a grouped convolution's).
Layout conv_weight_layout(const Graph& graph, const Node& node, Layout x_layout, Layout blocked);
// avg_pool2d, avg_pool3d, global_avg_pool and their gradients
std::unique_ptr<Kernel> make_pool_kernel(const Graph& graph, const Node& node);
// max_pool2d, max_pool3d and their gradients, plain or blocked (OpenMP loops)
std::unique_ptr<Kernel> make_max_pool_kernel(const Graph& graph, const Node& node);
// upsample, upsample_grad
std::unique_ptr<Kernel> make_resample_kernel(const Graph& graph, const Node& node);
// batch_norm, batch_norm_inference, layer_norm and their gradients; batch
// norm in a blocked layout goes to make_blocked_batch_norm_kernel
std::unique_ptr<Kernel> make_norm_kernel(const Graph& graph, const Node& node);
// batch norm and its gradients on channel-blocked tensors (OpenMP loops, the
// reference's bits)
std::unique_ptr<Kernel> make_blocked_batch_norm_kernel(const Graph& graph, const Node& node);
// matmul, linear
std::unique_ptr<Kernel> make_matmul_kernel(const Graph& graph, const Node& node);
// relu, gelu, tanh, sigmoid, their gradients, scale
std::unique_ptr<Kernel> make_eltwise_kernel(const Graph& graph, const Node& node);
// add, sub, mul, broadcasting or not; plain OpenMP loops, not oneDNN
// (src/backends/cpu/cpu_binary.cpp says why)
std::unique_ptr<Kernel> make_binary_kernel(const Graph& graph, const Node& node);
// causal_mask
std::unique_ptr<Kernel> make_causal_mask_kernel(const Graph& graph, const Node& node);
// attention and attention_grad (their key masks are i32): FlashAttention-2's
// tiles on threads (cpu_attention_tiles.h)
std::unique_ptr<Kernel> make_attention_kernel(const Graph& graph, const Node& node);
// embedding (its ids are i32): rows copied on threads
std::unique_ptr<Kernel> make_embedding_kernel(const Graph& graph, const Node& node);
// embedding_grad (its ids are i32); the reference kernel's bits, on threads
std::unique_ptr<Kernel> make_embedding_grad_kernel(const Graph& graph, const Node& node);
// softmax, log_softmax and their gradients
std::unique_ptr<Kernel> make_softmax_kernel(const Graph& graph, const Node& node);
// softmax_cross_entropy and its gradient (their labels are i32)
std::unique_ptr<Kernel> make_loss_kernel(const Graph& graph, const Node& node);
// reduce_sum, reduce_mean over one or more axes (reduce_supported)
bool reduce_supported(const Node& node);
std::unique_ptr<Kernel> make_reduce_kernel(const Graph& graph, const Node& node);
// reshape, transpose, concat, split, slice, slice_grad (any dtype: exact
// copies) and fill
std::unique_ptr<Kernel> make_shape_kernel(const Graph& graph, const Node& node);
// reorder between the plain and the channel-blocked layouts
std::unique_ptr<Kernel> make_reorder_kernel(const Graph& graph, const Node& node);
// lstm_cell and lstm_cell_grad (OpenMP loops over the hidden units)
std::unique_ptr<Kernel> make_lstm_kernel(const Graph& graph, const Node& node);
// dropout, with the reference kernel's mask
std::unique_ptr<Kernel> make_dropout_kernel(const Graph& graph, const Node& node);
// sgd_update, adamw_update, with the reference kernels' bits
std::unique_ptr<Kernel> make_optimizer_kernel(const Graph& graph, const Node& node);

}  // namespace memfit::cpu
