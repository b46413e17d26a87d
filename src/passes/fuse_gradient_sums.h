// Gradient sums written into by their products. Autodiff sums the gradient
// contributions of a value with add nodes (a weight used at every step of an
// unrolled network gets one contribution per step; a sequence sliced once per
// step gets one slice_grad per step, an embedding table read once per window
// one embedding_grad per window); where a contribution is a matmul, a
// slice_grad or an embedding_grad read by nothing but its add, the pass makes
// it add its part into the running sum instead (matmul's optional third input
// c, slice_grad's and embedding_grad's acc), which the planner then writes in
// place: the part needs no buffer of its own and the sum is not read and
// written again by a separate add (a slice_grad then touches only its slice,
// an embedding_grad only the rows its ids name, not the zeros around them).
#pragma once

#include <cstddef>

#include "memfit/ir.h"

namespace memfit {

// `graph` with every such pair made one matmul(a, b, c), slice_grad(dy, acc)
// or embedding_grad(dy, ids, acc), at the add's place in the order, writing
// the add's output value;
// `fused` (if given) receives how many pairs were fused.
Graph fuse_gradient_sums(const Graph& graph, size_t* fused = nullptr);

}  // namespace memfit
