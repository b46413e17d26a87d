// Gradient sums written into by their products. Autodiff sums the gradient
// contributions of a value with add nodes (a weight used at every step of an
// unrolled network gets one contribution per step); where a contribution is
// a matmul read by nothing but its add, the pass makes the matmul add its
// product into the running sum instead (matmul's optional third input c),
// which the planner then writes in place: the product needs no buffer of
// its own and the sum is not read and written again by a separate add.
#pragma once

#include <cstddef>

#include "memfit/ir.h"

namespace memfit {

// `graph` with every such add and matmul pair made one matmul(a, b, c), at the
// add's place in the order, writing the add's output value; `fused` (if given)
// receives how many pairs were fused.
Graph fuse_gradient_sums(const Graph& graph, size_t* fused = nullptr);

}  // namespace memfit
