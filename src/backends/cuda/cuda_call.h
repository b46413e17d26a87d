// The CUDA runtime's errors as Status values: MEMFIT_CUDA_CALL(call) returns
// from the enclosing function, with the call and the runtime's words, when
// `call` fails. For the cuda backend's host code built with CUDA.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "memfit/status.h"

namespace memfit::cuda {

inline Status failed(const char* call, cudaError_t error) {
  return Status::error(std::string(call) + ": " + cudaGetErrorString(error));
}

}  // namespace memfit::cuda

#define MEMFIT_CUDA_CALL(call)                                    \
  do {                                                            \
    if (const cudaError_t error_ = (call); error_ != cudaSuccess) \
      return ::memfit::cuda::failed(#call, error_);               \
  } while (0)
