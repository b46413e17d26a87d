// The cuda backend's kernels: cuBLAS for the products (matmul, linear,
// linear_relu), cuDNN for the 2-D convolutions (cudnn_conv.cpp), memfit's
// own .cu kernels (their launchers: cuda_*launchers.h) for the rest, made by
// the per-area *_kernels.cpp files. Each kernel launches on the device's
// compute stream and returns at once.
#pragma once

#include <cstddef>
#include <memory>

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

// Whether the cuda backend has a kernel for `node`.
bool has_kernel(const Graph& graph, const Node& node);
// The kernel of `node` (has_kernel must hold).
Result<std::unique_ptr<Kernel>> make_kernel(const Graph& graph, const Node& node,
                                            std::shared_ptr<const Context> context);

// The products' kernel (cublas_product.cpp): matmul, linear, linear_relu.
std::unique_ptr<Kernel> make_product_kernel(const Graph& graph, const Node& node,
                                            std::shared_ptr<const Context> context);

// The convolutions' part of the two (cudnn_conv.cpp); make_conv_kernel asks
// cuDNN for the algorithm and its workspace, an error when none is
// deterministic.
bool conv_has_kernel(const Graph& graph, const Node& node);
Result<std::unique_ptr<Kernel>> make_conv_kernel(const Graph& graph, const Node& node,
                                                 std::shared_ptr<const Context> context);

// The data-parallel ops' part (cuda_bucket_kernels.cpp): packing gradient
// buckets and unpacking them, copies on the compute stream. The collectives
// themselves are the executor's, through its communicator (NCCL).
bool bucket_has_kernel(const Graph& graph, const Node& node);
Result<std::unique_ptr<Kernel>> make_bucket_kernel(const Graph& graph, const Node& node,
                                                   std::shared_ptr<const Context> context);

}  // namespace memfit::cuda
