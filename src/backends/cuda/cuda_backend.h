// The cuda backend (--backend cuda): cuDNN, cuBLAS and memfit's own kernels
// on an NVIDIA GPU, in the planned device arena (cuda_device.h:
// make_gpu_device). It has kernels for every op of the zoo's steps
// (cuda_kernels.h: has_kernel); the executor refuses a graph with any other
// op, naming it.
#pragma once

#include <memory>

#include "memfit/status.h"
#include "runtime/kernel.h"

namespace memfit {

// The backend on GPU `device`. Errors, each saying what to do: memfit
// built without CUDA; no GPU (the plan's algorithms and workspace sizes are
// cuDNN's and cuBLAS's answers for the device, so even `memfit plan` needs
// one); cuBLAS's library missing.
// `fastest_kernels`: cuDNN's and cuBLAS's fastest algorithms (TF32 tensor
// cores, not deterministic) instead of the first deterministic FP32 one.
Result<std::unique_ptr<Backend>> make_cuda_backend(int device = 0, bool fastest_kernels = false);

// The GPU this rank takes: the one its local rank names (memfit/dist.h:
// local_rank; one GPU per rank), or the only GPU it sees, where its launcher
// gives each rank its own by CUDA_VISIBLE_DEVICES.
int rank_gpu();
int rank_gpu(int local_rank, int visible_gpus);

}  // namespace memfit
