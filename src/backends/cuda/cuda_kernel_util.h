// What the cuda backend's kernel files share (cuda_kernels.cpp and the
// per-area *_kernels.cpp beside it): LaunchKernel, a Kernel whose run() only
// calls a launcher (cuda_*launchers.h) with what its node fixed, and typed
// views of a kernel's arguments.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <utility>

#include "backends/cuda/cuda_kernels.h"

namespace memfit::cuda {

// A kernel that calls `launch` with its arguments and the context's stream;
// the launch captures what the node fixed (shapes, attributes) by value.
class LaunchKernel final : public Kernel {
 public:
  using Launch = std::function<void(const KernelArgs&, void* stream)>;
  LaunchKernel(std::shared_ptr<const Context> context, Launch launch, size_t workspace_bytes = 0)
      : context_(std::move(context)), launch_(std::move(launch)), workspace_(workspace_bytes) {}
  size_t workspace_bytes() const override { return workspace_; }
  void run(const KernelArgs& args) override { launch_(args, context_->stream); }

 private:
  std::shared_ptr<const Context> context_;
  Launch launch_;
  size_t workspace_;
};

// What an area's make_*_kernel returns for its node: the launch it chose,
// with the workspace it needs.
inline Result<std::unique_ptr<Kernel>> launch_kernel(std::shared_ptr<const Context> context,
                                                     LaunchKernel::Launch launch,
                                                     size_t workspace_bytes = 0) {
  return std::unique_ptr<Kernel>(
      std::make_unique<LaunchKernel>(std::move(context), std::move(launch), workspace_bytes));
}

// The error for a node no cuda kernel runs.
Status no_kernel_for(OpKind op);

inline const float* in(const KernelArgs& args, size_t i) {
  return static_cast<const float*>(args.inputs[i]);
}
inline float* out(const KernelArgs& args, size_t i) { return static_cast<float*>(args.outputs[i]); }

// Whether every input and output is in the plain (row-major) layout.
bool plain(const Graph& graph, const Node& node);

}  // namespace memfit::cuda
