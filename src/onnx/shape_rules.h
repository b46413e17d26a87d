// The shape rules that constant folding (fold_constants.cpp) and the
// operators' mappings (onnx_operators.cpp) share: the output shapes of
// Reshape, Flatten, Squeeze and Unsqueeze, and axis normalization. Errors
// say what is wrong; callers add the node.
#pragma once

#include <cstdint>
#include <vector>

#include "memfit/ir.h"

namespace memfit {

// axis in [-rank, rank) as a dimension index.
Result<int64_t> onnx_axis(int64_t axis, size_t rank);

// Reshape's target for `in` from its shape input: 0 copies the input's
// dimension (unless allowzero), one -1 takes what is left.
Result<Shape> reshape_target(const Shape& in, const std::vector<int64_t>& spec, bool allowzero);

// Flatten at `axis`: (product before, product from it on).
Result<Shape> flatten_target(const Shape& in, int64_t axis);

// Squeeze (the given axes, or every 1 when none) and Unsqueeze (a 1 inserted
// at each axis of the output); a repeated axis is an error.
Result<Shape> squeeze_target(const Shape& in, const std::vector<int64_t>& axes, bool unsqueeze);

}  // namespace memfit
