#include "ops/grad_context.h"

#include "core/check.h"
#include "ops/typed_graph.h"

namespace memfit {

Result<std::vector<ValueId>> GradContext::emit_all(OpKind op, std::vector<ValueId> inputs,
                                                   Attrs attrs) {
  const std::string name = node.name + ".grad." + std::string(op_name(op));
  MEMFIT_ASSIGN_OR_RETURN(
      NodeId id, add_node(graph, op, std::move(inputs), std::move(attrs), name, Role::gradient));
  return graph.node(id).outputs;
}

Result<ValueId> GradContext::emit(OpKind op, std::vector<ValueId> inputs, Attrs attrs) {
  MEMFIT_ASSIGN_OR_RETURN(auto outputs, emit_all(op, std::move(inputs), std::move(attrs)));
  MEMFIT_CHECK(outputs.size() == 1);
  return outputs[0];
}

Result<ValueId> GradContext::unbroadcast(ValueId grad, const Shape& shape) {
  const Shape from = graph.value(grad).type.shape;  // a copy: emit() may reallocate
  if (from == shape) return grad;
  // Leading dimensions that `shape` lacks, and dimensions where it has size 1.
  const size_t extra = from.size() - shape.size();
  ReduceAttrs reduce;
  for (size_t i = 0; i < from.size(); ++i) {
    if (i < extra || (shape[i - extra] == 1 && from[i] != 1)) {
      reduce.axes.push_back(static_cast<int64_t>(i));
    }
  }
  ValueId summed = grad;
  if (!reduce.axes.empty()) {
    MEMFIT_ASSIGN_OR_RETURN(summed, emit(OpKind::reduce_sum, {grad}, reduce));
  }
  if (graph.value(summed).type.shape == shape) return summed;
  return emit(OpKind::reshape, {summed}, ShapeAttrs{shape});
}

}  // namespace memfit
