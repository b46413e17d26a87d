// What memfit's elementwise CUDA kernels share: the block size, a grid for
// `count` elements (bounded; the kernels loop over the rest), the stream
// handed in as void*, and the grid-stride loop.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace memfit::cuda {

inline constexpr int kThreads = 256;

inline int blocks_for(int64_t count) {
  return static_cast<int>(std::clamp<int64_t>((count + kThreads - 1) / kThreads, 1, 65535 * 16));
}

inline cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace memfit::cuda

// for (i = this thread's first element; i < count; i += the grid's threads)
#define MEMFIT_FOR_EACH(i, count)                                                            \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (count); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
