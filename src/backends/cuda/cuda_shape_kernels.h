// The cuda backend's kernels of the data-movement and sequence ops
// (cuda_shape_kernels.cpp, launching cuda_shape_launchers.h's kernels):
// transpose, broadcast_to, slice, slice_grad, concat, split, pad, pad_grad,
// where, causal_mask, upsample, upsample_grad, embedding, embedding_grad,
// on plain (row-major) values.
#pragma once

#include <memory>

#include "backends/cuda/cuda_kernels.h"

namespace memfit::cuda {

// Whether these kernels serve `node`: one of the ops above, every operand
// plain, f32 (slice: f32 or i32; where's cond and embedding's ids i32), and
// a shape the kernels take (at most kMaxDims dimensions once neighbouring
// dimensions that move together are merged; embedding_grad: fewer than 2^31
// ids and rows).
bool shape_has_kernel(const Graph& graph, const Node& node);
// The kernel of `node` (shape_has_kernel must hold).
Result<std::unique_ptr<Kernel>> make_shape_kernel(const Graph& graph, const Node& node,
                                                  std::shared_ptr<const Context> context);

}  // namespace memfit::cuda
