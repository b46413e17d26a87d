// Fusion of forward ops into the products they follow, before autodiff: the
// fused ops (src/ops/ops_fused.cpp) run the follower as a oneDNN post-op
// while the product's result is in registers, so it is written once instead
// of written, read and written again, and the product's own output needs no
// buffer. Patterns, where the product's output has no reader but the
// follower and is no graph output:
//   relu(conv2d(x, w [, b]))          -> conv2d_relu(x, w [, b])
//   add(conv2d(x, w [, b]), r), or add(r, conv2d(...)), of r with the
//   convolution's shape              -> conv2d_add(x, w, r [, b])
//   relu(linear(x, w [, b]))          -> linear_relu(x, w [, b])
//   relu(batch_norm(...))             -> batch_norm(...) {relu=true}, and the
//                                        same for batch_norm_inference
// (GELU after a linear, whose gradient reads the pre-activation, and 3-D
// convolutions are not fused).
#pragma once

#include <cstddef>

#include <vector>

#include "memfit/ir.h"

namespace memfit {

struct FusedOps {
  size_t conv_relu = 0, conv_add = 0, linear_relu = 0, norm_relu = 0;
  size_t total() const { return conv_relu + conv_add + linear_relu + norm_relu; }
};

// `graph` (a forward graph) with every such pair made one fused node at the
// follower's place, writing the follower's output value. Values are
// renumbered when a pair fuses: value_map (if given) receives, for each old
// value, its new id (invalid for the dropped products' outputs), or is left
// empty when nothing fused.
Graph fuse_forward_ops(const Graph& graph, FusedOps* fused = nullptr,
                       std::vector<ValueId>* value_map = nullptr);

}  // namespace memfit
