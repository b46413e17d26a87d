#include "backends/cuda/cuda_backend.h"

#include "backends/cuda/cuda_device.h"

namespace memfit {

Result<std::unique_ptr<Backend>> make_cuda_backend(int device) {
  auto info = cuda::device_info(device);
  if (!cuda::built_with_cuda()) return Status::error("--backend cuda: " + info.message());
  if (!info) {
    return Status::error(
        "--backend cuda needs a GPU: the algorithms cuDNN and cuBLAS choose, and so the workspaces "
        "the plan places, are their answers for the device (" + info.message() + ")");
  }
  return Status::error("--backend cuda: found " + cuda::describe(*info) +
                       "; memfit's CUDA kernels are not written yet (the device layer is: its "
                       "memory, pinned host memory and copy stream); use --backend cpu");
}

}  // namespace memfit
