// The libraries the cuda backend opens with dlopen rather than links
// (cuBLAS, NCCL): opening one for the rest of the process, and finding its
// calls.
#pragma once

#include <dlfcn.h>

#include <string>

#include "memfit/status.h"

namespace memfit::cuda {

// `file` opened; an error names it, what it is (`what`) and dlopen's words.
inline Result<void*> open_library(const std::string& file, const std::string& what) {
  void* library = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    return Status::error("cannot open " + file + " (" + what + "): " + ::dlerror());
  }
  return library;
}

// `function` = the call `name` of `library` (named `what` in the error).
template <class F>
Status find_call(void* library, const char* what, const char* name, F& function) {
  function = reinterpret_cast<F>(::dlsym(library, name));
  if (function == nullptr) return Status::error(std::string(what) + " has no " + name);
  return Status::ok();
}

}  // namespace memfit::cuda
