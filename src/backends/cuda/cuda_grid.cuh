// What memfit's CUDA kernels share: the block size, a grid for `count`
// elements (bounded; the kernels loop over the rest), the stream handed in
// as void*, the grid-stride loop, and a block's sum and maximum in a fixed
// tree order (blocks of kThreads threads).
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

// The block's sum of every thread's `value`, in a fixed tree; every thread
// gets it.
__device__ inline double block_sum(double value, double* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  const double sum = shared[0];
  __syncthreads();
  return sum;
}

// The block's largest `value`; every thread gets it.
__device__ inline double block_max(double value, double* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      shared[threadIdx.x] = fmax(shared[threadIdx.x], shared[threadIdx.x + half]);
    __syncthreads();
  }
  const double max = shared[0];
  __syncthreads();
  return max;
}

}  // namespace memfit::cuda

// for (i = this thread's first element; i < count; i += the grid's threads)
#define MEMFIT_FOR_EACH(i, count)                                                            \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (count); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
