// The reference backend: one plain-loop kernel per op, written for clarity,
// not speed. Sums accumulate in double. It is the oracle every other backend
// is compared with, so it never calls a library.
#pragma once

#include <variant>
#include <vector>

#include "runtime/kernel.h"

namespace memfit {

// Everything a reference kernel sees: the node's types and attributes, and the buffers.
struct RefCall {
  const Node& node;
  const std::vector<TensorType>& in;   // input types
  const std::vector<TensorType>& out;  // output types
  const KernelArgs& args;

  const float* in_f32(size_t i) const { return static_cast<const float*>(args.inputs[i]); }
  const int32_t* in_i32(size_t i) const { return static_cast<const int32_t*>(args.inputs[i]); }
  float* out_f32(size_t i) const { return static_cast<float*>(args.outputs[i]); }
  template <class A>
  const A& attrs() const {
    return std::get<A>(node.attrs);
  }
};

using RefKernelFn = void (*)(const RefCall& call);

// The reference kernel of `op`; every op of the table has one.
RefKernelFn reference_kernel(OpKind op);

}  // namespace memfit
