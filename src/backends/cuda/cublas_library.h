// cuBLAS, opened when the cuda backend is first made (dlopen), not linked:
// its shared libraries map over 200 MB into every process that links them,
// at every start, GPU or not. Only the calls the cuda backend makes.
#pragma once

#include "memfit/status.h"

#ifdef MEMFIT_HAVE_CUDA
#include <cublas_v2.h>

namespace memfit::cuda {

struct CublasLibrary {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// The library of the cuBLAS major version memfit was compiled against
// (libcublas.so.13 for CUDA 13), opened once; an error names the file and
// dlopen's words.
Result<const CublasLibrary*> cublas_library();

}  // namespace memfit::cuda

#endif  // MEMFIT_HAVE_CUDA
