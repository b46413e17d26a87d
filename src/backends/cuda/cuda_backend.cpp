// The cuda backend (cuda_backend.h): the GPU as its device, cuBLAS bound to
// the device's compute stream, and the kernels of cuda_kernels.h.
#include "backends/cuda/cuda_backend.h"

#include <string>

#include "backends/cuda/cublas_library.h"
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/cuda_kernels.h"
#include "memfit/dist.h"

#ifdef MEMFIT_HAVE_CUDA
#include <cuda_runtime.h>
#include <cudnn.h>
#endif

namespace memfit {

#ifdef MEMFIT_HAVE_CUDA
namespace {

class CudaBackend final : public Backend {
 public:
  CudaBackend(cuda::DeviceInfo info, std::shared_ptr<const cuda::Context> context, double link_gbps)
      : info_(std::move(info)), context_(std::move(context)), link_gbps_(link_gbps) {}
  std::string_view name() const override { return "cuda"; }
  bool supports(const Graph& graph, const Node& node) const override {
    return cuda::has_kernel(graph, node);
  }
  Result<std::unique_ptr<Kernel>> make_kernel(const Graph& graph, NodeId node) const override {
    return cuda::make_kernel(graph, graph.node(node), context_);
  }
  // The kernels' choices depend on the GPU.
  std::string isa() const override {
    return "cuda sm_" + std::to_string(info_.major) + std::to_string(info_.minor) + " " +
           info_.name;
  }
  std::shared_ptr<const Device> device() const override { return context_->device; }
  double link_gbps() const override { return link_gbps_; }
  // The GPU's peaks: FP32 lanes (64 per multiprocessor on compute
  // capability 8.0, 128 on the others since) x 2 (a fused multiply-add) x
  // clock, the memory's bandwidth, 5 microseconds per kernel.
  MachineSpec roofline_machine() const override {
    const int lanes = info_.major == 8 && info_.minor == 0 ? 64 : 128;
    return {.flops_per_second = info_.multiprocessors * lanes * 2.0 * info_.clock_hz,
            .bytes_per_second = info_.memory_bytes_per_second,
            .launch_seconds = 5e-6};
  }

 private:
  cuda::DeviceInfo info_;
  std::shared_ptr<const cuda::Context> context_;
  double link_gbps_;
};

}  // namespace
#endif

Result<std::unique_ptr<Backend>> make_cuda_backend(int device,
                                                   [[maybe_unused]] bool fastest_kernels) {
  auto info = cuda::device_info(device);
  if (!cuda::built_with_cuda()) return Status::error("--backend cuda: " + info.message());
  if (!info) {
    return Status::error(
        "--backend cuda needs a GPU: the algorithms cuDNN and cuBLAS choose, and so the workspaces "
        "the plan places, are their answers for the device (" +
        info.message() + ")" +
        (device > 0 ? "; this rank takes GPU " + std::to_string(device) +
                          ", its rank among the ranks on this machine: start at most as many "
                          "ranks on a machine as it has GPUs"
                    : std::string()));
  }
#ifdef MEMFIT_HAVE_CUDA
  auto context = std::make_shared<cuda::Context>();
  MEMFIT_ASSIGN_OR_RETURN(context->device, cuda::make_gpu_device(device));
  context->stream = cuda::compute_stream(*context->device);
  MEMFIT_ASSIGN_OR_RETURN(const cuda::CublasLibrary* cublas, cuda::cublas_library());
  cublasHandle_t blas = nullptr;
  if (const cublasStatus_t s = cublas->create(&blas); s != CUBLAS_STATUS_SUCCESS) {
    return Status::error(std::string("--backend cuda: cublasCreate: ") + cublas->status_string(s));
  }
  context->blas = blas;
  cublas->set_stream(blas, static_cast<cudaStream_t>(context->stream));
  context->fastest = fastest_kernels;
  if (fastest_kernels) cublas->set_math_mode(blas, CUBLAS_TF32_TENSOR_OP_MATH);
  cudnnHandle_t dnn = nullptr;
  if (const cudnnStatus_t s = cudnnCreate(&dnn); s != CUDNN_STATUS_SUCCESS) {
    return Status::error(std::string("--backend cuda: cudnnCreate: ") + cudnnGetErrorString(s));
  }
  context->dnn = dnn;
  cudnnSetStream(dnn, static_cast<cudaStream_t>(context->stream));
  // cuBLAS's guidance for the workspace of its products: 32 MiB on Hopper
  // and newer, 4 MiB before; the plan places it under every product node.
  context->blas_workspace_bytes = info->major >= 9 ? size_t{32} << 20 : size_t{4} << 20;
  // The host link, pinned memory to the device and back: what a swap copy gets.
  MEMFIT_ASSIGN_OR_RETURN(const double link_gbps, cuda::measure_link_gbps(size_t{64} << 20, 2));
  return std::unique_ptr<Backend>(
      std::make_unique<CudaBackend>(*info, std::move(context), link_gbps));
#else
  return info.status();
#endif
}

int rank_gpu(int local_rank, int visible_gpus) { return visible_gpus == 1 ? 0 : local_rank; }

int rank_gpu() {
  int visible = 0;
#ifdef MEMFIT_HAVE_CUDA
  if (cudaGetDeviceCount(&visible) != cudaSuccess) visible = 0;  // device_info says why
#endif
  return rank_gpu(local_rank(), visible);
}

}  // namespace memfit
