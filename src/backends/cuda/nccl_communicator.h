// NCCL as a Communicator: data parallel on the cuda backend, one rank per
// GPU. The gradient buckets live in each rank's arena on its GPU; NCCL sums
// them there, GPU to GPU (NVLink, PCIe or the network), without a trip
// through host memory. NCCL is opened with dlopen (libnccl.so.2) when the
// first such communicator is made, as cuBLAS is.
#pragma once

#include <memory>

#include "memfit/dist.h"
#include "memfit/status.h"

namespace memfit::cuda {

// Whether this memfit was built with NCCL (CMake found nccl.h beside the
// CUDA toolkit).
bool built_with_nccl();

// NCCL over the ranks of `host`, which starts it (rank 0's NCCL id goes to
// every rank by host.broadcast) and keeps serving what lives in host memory.
// The result has host's ranks; this rank uses GPU local_rank(), the one the
// cuda backend takes. Each call goes by where its buffer is:
// - a buffer in GPU memory (cudaPointerGetAttributes says device memory):
//   NCCL, on a stream of the communicator's own, returning once the
//   collective has completed on this rank (sums_gpu_memory() is true);
// - any other buffer (host memory): host's own call.
// barrier() is host's; abort() aborts NCCL, then host.
// NCCL's ring and tree algorithms reduce each element once and pass the sum
// on, so every rank gets the same bits; with the same ranks, GPUs, counts
// and NCCL_* settings it chooses the same algorithm, so runs repeat.
// reduce_scatter_sum and all_gather keep the interface's layout (this rank's
// block of the sum at the buffer's start).
// `host` must outlive the result. Errors: memfit built without CUDA or
// NCCL's header, libnccl.so.2 missing, no GPU for this rank, NCCL failing to
// start (its own words).
Result<std::unique_ptr<Communicator>> make_nccl_communicator(Communicator& host);

}  // namespace memfit::cuda
