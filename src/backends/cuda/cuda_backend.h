// The cuda backend (--backend cuda): cuDNN, cuBLAS and memfit's own kernels
// on an NVIDIA GPU, in the planned device arena. What exists so far is the
// device layer (cuda_device.h); make_cuda_backend says what is missing.
#pragma once

#include <memory>

#include "memfit/status.h"
#include "runtime/kernel.h"

namespace memfit {

// The backend on GPU `device`. Errors, each saying what to do: memfit
// built without CUDA; no GPU (the plan's algorithms and workspace sizes are
// cuDNN's and cuBLAS's answers for the device, so even `memfit plan` needs
// one); and, on a GPU, that the kernels are not written yet.
Result<std::unique_ptr<Backend>> make_cuda_backend(int device = 0);

}  // namespace memfit
