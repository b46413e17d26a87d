// The cuda backend's normalization kernels (cuda_norm_kernels.cpp, over
// cuda_norm.cu): batch_norm, batch_norm_inference, layer_norm and their
// gradients.
#pragma once

#include <memory>

#include "backends/cuda/cuda_kernels.h"

namespace memfit::cuda {

bool norm_has_kernel(const Graph& graph, const Node& node);
Result<std::unique_ptr<Kernel>> make_norm_kernel(const Graph& graph, const Node& node,
                                                 std::shared_ptr<const Context> context);

}  // namespace memfit::cuda
