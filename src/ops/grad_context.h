// What a gradient rule sees: the forward node, the gradients of its outputs,
// and a way to append backward nodes. A rule sets the gradient of each input
// it differentiates; inputs left invalid receive no gradient.
#pragma once

#include <string>
#include <vector>

#include "memfit/ir.h"

namespace memfit {

struct GradContext {
  Graph& graph;
  Node node;                          // a copy: appending nodes may move the graph's storage
  std::vector<ValueId> output_grads;  // one per output; invalid where no gradient flows
  std::vector<ValueId> input_grads;   // one per input; set by the rule

  ValueId in(size_t i) const { return node.inputs.at(i); }
  ValueId out(size_t i) const { return node.outputs.at(i); }
  ValueId dout(size_t i) const { return output_grads.at(i); }
  // A copy: appending nodes may reallocate the values.
  Shape shape(ValueId v) const { return graph.value(v).type.shape; }
  template <class A>
  const A& attrs() const {
    return std::get<A>(node.attrs);
  }

  // Appends a backward node named after the forward one; returns its outputs.
  Result<std::vector<ValueId>> emit_all(OpKind op, std::vector<ValueId> inputs,
                                        Attrs attrs = NoAttrs{});
  // The same for a node with one output.
  Result<ValueId> emit(OpKind op, std::vector<ValueId> inputs, Attrs attrs = NoAttrs{});
  // Sums a gradient of a broadcast result back to `shape`.
  Result<ValueId> unbroadcast(ValueId grad, const Shape& shape);
};

}  // namespace memfit
