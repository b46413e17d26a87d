// The cuda backend's kernels of the sequence ops (cuda_sequence_kernels.cpp,
// launching cuda_sequence.cu): lstm_cell, lstm_cell_grad, attention and
// attention_grad, f32 (the key mask i32) in the plain layout.
#pragma once

#include <memory>

#include "backends/cuda/cuda_kernels.h"

namespace memfit::cuda {

// Whether `node` is one of the sequence ops with a kernel here.
bool sequence_has_kernel(const Graph& graph, const Node& node);
// Its kernel (sequence_has_kernel must hold).
Result<std::unique_ptr<Kernel>> make_sequence_kernel(const Graph& graph, const Node& node,
                                                     std::shared_ptr<const Context> context);

}  // namespace memfit::cuda
