// The cuda backend's kernels: cuBLAS for the products (matmul, linear,
// linear_relu), cuDNN for the 2-D convolutions (cudnn_conv.cpp), memfit's
// own .cu kernels (their launchers: cuda_*launchers.h) for the rest, made by
// the per-area *_kernels.cpp files. Each kernel launches on the device's
// compute stream and returns at once.
#pragma once

#include <cstddef>
#include <memory>

#include "ops/op_table.h"
#include "runtime/kernel.h"

namespace memfit::cuda {

// What every kernel of one backend shares: the device, its compute stream,
// the cuBLAS and cuDNN handles bound to that stream (created by the
// backend, destroyed with the last kernel or backend that holds them), and
// how large a workspace cuBLAS asks for on this GPU.
struct Context {
  std::shared_ptr<const Device> device;
  void* stream = nullptr;  // cudaStream_t
  void* blas = nullptr;    // cublasHandle_t
  void* dnn = nullptr;     // cudnnHandle_t
  size_t blas_workspace_bytes = 0;
  // The libraries' fastest algorithms (TF32, not deterministic); false: the
  // first deterministic FP32 one.
  bool fastest = false;
  Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();
};

// Whether the cuda backend has a kernel for `node`: every operand plain,
// and the op's entry has one for it.
bool has_kernel(const Graph& graph, const Node& node);
// The kernel of `node` (has_kernel must hold).
Result<std::unique_ptr<Kernel>> make_kernel(const Graph& graph, const Node& node,
                                            std::shared_ptr<const Context> context);

using HasKernelFn = bool (*)(const Graph& graph, const Node& node);
using MakeKernelFn = Result<std::unique_ptr<Kernel>> (*)(const Graph& graph, const Node& node,
                                                         std::shared_ptr<const Context> context);

// How the cuda backend runs the nodes of one op: `make` makes the kernel of
// a node, plain, for which `has` holds (null: the op has no kernel here).
struct KernelEntry {
  HasKernelFn has = nullptr;
  MakeKernelFn make = nullptr;
};

// The entry of each op of the list, kernel_entry_<op>(): defined with
// MEMFIT_CUDA_KERNEL by the kernel file that makes its kernels (in a build
// with CUDA). An op without one fails to link.
#define MEMFIT_CUDA_KERNEL_DECLARATION(id, attrs, min_inputs, max_inputs) \
  KernelEntry kernel_entry_##id();
MEMFIT_OPS(MEMFIT_CUDA_KERNEL_DECLARATION)
#undef MEMFIT_CUDA_KERNEL_DECLARATION

// Defines the entry of `op`: MEMFIT_CUDA_KERNEL(relu, has_op_dtypes, make_launch_kernel).
#define MEMFIT_CUDA_KERNEL(op, has, make) \
  KernelEntry kernel_entry_##op() { return KernelEntry{has, make}; }

// Whether cuDNN runs the convolution `node` (cudnn_conv.cpp: conv2d, conv3d,
// their fused forms and gradients, the transposed convolutions whose data
// gradient cuDNN has), f32 and plain. Its kernel asks cuDNN for the
// algorithm and its workspace, an error when none is deterministic, so it
// needs a GPU.
bool conv_has_kernel(const Graph& graph, const Node& node);

}  // namespace memfit::cuda
