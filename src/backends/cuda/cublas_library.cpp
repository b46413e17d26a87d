// cuBLAS opened with dlopen (cublas_library.h).
#include "backends/cuda/cublas_library.h"

#ifdef MEMFIT_HAVE_CUDA

#include <string>

#include "backends/cuda/shared_library.h"

namespace memfit::cuda {
namespace {

Result<CublasLibrary> open_cublas() {
  MEMFIT_ASSIGN_OR_RETURN(void* library,
                          open_library("libcublas.so." + std::to_string(CUBLAS_VER_MAJOR),
                                       "cuBLAS, from the CUDA toolkit"));
  CublasLibrary calls;
  MEMFIT_RETURN_IF_ERROR(find_call(library, "cuBLAS", "cublasCreate_v2", calls.create));
  MEMFIT_RETURN_IF_ERROR(find_call(library, "cuBLAS", "cublasDestroy_v2", calls.destroy));
  MEMFIT_RETURN_IF_ERROR(find_call(library, "cuBLAS", "cublasSetStream_v2", calls.set_stream));
  MEMFIT_RETURN_IF_ERROR(
      find_call(library, "cuBLAS", "cublasSetWorkspace_v2", calls.set_workspace));
  MEMFIT_RETURN_IF_ERROR(find_call(library, "cuBLAS", "cublasSetMathMode", calls.set_math_mode));
  MEMFIT_RETURN_IF_ERROR(
      find_call(library, "cuBLAS", "cublasSgemmStridedBatched", calls.sgemm_strided_batched));
  MEMFIT_RETURN_IF_ERROR(
      find_call(library, "cuBLAS", "cublasGetStatusString", calls.status_string));
  return calls;  // the library stays open for the rest of the process
}

}  // namespace

Result<const CublasLibrary*> cublas_library() {
  static const Result<CublasLibrary> opened = open_cublas();
  if (!opened) return opened.status();
  return &opened.value();
}

}  // namespace memfit::cuda

#endif  // MEMFIT_HAVE_CUDA
