// cuBLAS opened with dlopen (cublas_library.h).
#include "backends/cuda/cublas_library.h"

#ifdef MEMFIT_HAVE_CUDA

#include <dlfcn.h>

#include <string>

namespace memfit::cuda {
namespace {

template <class F>
Status find(void* library, const char* name, F& function) {
  function = reinterpret_cast<F>(::dlsym(library, name));
  if (function == nullptr) return Status::error(std::string("cuBLAS has no ") + name);
  return Status::ok();
}

Result<CublasLibrary> open_cublas() {
  const std::string file = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* library = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    return Status::error("cannot open " + file +
                         " (cuBLAS, from the CUDA toolkit): " + ::dlerror());
  }
  CublasLibrary calls;
  MEMFIT_RETURN_IF_ERROR(find(library, "cublasCreate_v2", calls.create));
  MEMFIT_RETURN_IF_ERROR(find(library, "cublasDestroy_v2", calls.destroy));
  MEMFIT_RETURN_IF_ERROR(find(library, "cublasSetStream_v2", calls.set_stream));
  MEMFIT_RETURN_IF_ERROR(find(library, "cublasSetWorkspace_v2", calls.set_workspace));
  MEMFIT_RETURN_IF_ERROR(find(library, "cublasSetMathMode", calls.set_math_mode));
  MEMFIT_RETURN_IF_ERROR(find(library, "cublasSgemmStridedBatched", calls.sgemm_strided_batched));
  MEMFIT_RETURN_IF_ERROR(find(library, "cublasGetStatusString", calls.status_string));
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
