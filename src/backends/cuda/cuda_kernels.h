// The cuda backend's kernels: cuBLAS for the products (matmul, linear,
// linear_relu), memfit's own kernels (cuda_launch.h) for the rest. Each
// kernel launches on the device's compute stream and returns at once.
#pragma once

#include <cstddef>
#include <memory>

#include "runtime/kernel.h"

namespace memfit::cuda {

// What every kernel of one backend shares: the device, its compute stream,
// the cuBLAS handle bound to that stream (created by the backend, destroyed
// with the last kernel or backend that holds it), and how large a workspace
// cuBLAS asks for on this GPU.
struct Context {
  std::shared_ptr<const Device> device;
  void* stream = nullptr;  // cudaStream_t
  void* blas = nullptr;    // cublasHandle_t
  size_t blas_workspace_bytes = 0;
  Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();
};

// Whether the cuda backend has a kernel for `node`.
bool has_kernel(const Graph& graph, const Node& node);
// The kernel of `node` (has_kernel must hold).
Result<std::unique_ptr<Kernel>> make_kernel(const Graph& graph, const Node& node,
                                            std::shared_ptr<const Context> context);

}  // namespace memfit::cuda
