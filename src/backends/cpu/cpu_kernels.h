// The kernels of the CPU backend. Each kernel file makes the kernels of a
// family of ops, creating their primitives once (a factory throws dnnl::error
// when oneDNN rejects the node, which the backend turns into a Status), and
// says with MEMFIT_CPU_KERNEL which ops its factory makes.
#pragma once

#include <cstddef>
#include <memory>

#include "ops/op_table.h"
#include "runtime/kernel.h"

namespace memfit::cpu {

using KernelFactory = std::unique_ptr<Kernel> (*)(const Graph& graph, const Node& node);
using NodeCondition = bool (*)(const Graph& graph, const Node& node);

// How the cpu backend runs the nodes of one op.
struct KernelEntry {
  // Makes the kernel of a node; null: the reference kernels run the op.
  KernelFactory make = nullptr;
  // What a node must be for `make`, besides what the backend asks of every
  // node (tensors indexed by 32-bit integers, blocked operands the kernel
  // takes): by default the op's dtypes.
  NodeCondition takes = has_op_dtypes;
};

// The entry of each op of the list, kernel_entry_<op>(): defined with
// MEMFIT_CPU_KERNEL by the kernel file of its factory, or with a null
// factory by cpu_reference_ops.cpp. An op without one fails to link.
#define MEMFIT_CPU_KERNEL_DECLARATION(id, attrs, min_inputs, max_inputs) \
  KernelEntry kernel_entry_##id();
MEMFIT_OPS(MEMFIT_CPU_KERNEL_DECLARATION)
#undef MEMFIT_CPU_KERNEL_DECLARATION

// Defines the entry of `op`: MEMFIT_CPU_KERNEL(relu, make_eltwise_kernel),
// or with a condition of its own: MEMFIT_CPU_KERNEL(reduce_sum,
// make_reduce_kernel, reduce_takes).
#define MEMFIT_CPU_KERNEL(op, ...) \
  KernelEntry kernel_entry_##op() { return KernelEntry{__VA_ARGS__}; }

// Whether a loop over `bytes` of memory is worth the OpenMP team: below this
// size one thread finishes a copy or an add before threads asleep in the team
// (OMP_WAIT_POLICY=passive) are awake, so the small per-time-step nodes of an
// unrolled LSTM run on the calling thread alone (`#pragma omp parallel for
// if(worth_threads(bytes))`). The results do not depend on it.
inline bool worth_threads(size_t bytes) { return bytes >= (size_t{1} << 18); }

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
// batch norm and its gradients on channel-blocked tensors (OpenMP loops, the
// reference's bits): the kernels of cpu_norm.cpp's factory for blocked values
std::unique_ptr<Kernel> make_blocked_batch_norm_kernel(const Graph& graph, const Node& node);

}  // namespace memfit::cpu
