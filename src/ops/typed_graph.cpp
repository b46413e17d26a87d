#include "ops/typed_graph.h"

#include "ir/verifier.h"
#include "ops/op_table.h"

namespace memfit {

Result<NodeId> add_node(Graph& graph, OpKind op, std::vector<ValueId> inputs, Attrs attrs,
                        std::string name, Role output_role) {
  std::vector<TensorType> input_types;
  for (ValueId id : inputs) {
    if (!id.valid() || id.idx() >= graph.num_values()) {
      return Status::error("node '" + name + "' (" + std::string(op_name(op)) +
                           "): an input is not a value of this graph");
    }
    input_types.push_back(graph.value(id).type);
  }
  auto types = infer_types(op, input_types, attrs);
  if (!types) return Status::error("node '" + name + "': " + types.message());
  Node node;
  node.op = op;
  node.name = graph.unique_node_name(name);
  node.inputs = std::move(inputs);
  node.attrs = std::move(attrs);
  const NodeId id(static_cast<int32_t>(graph.num_nodes()));
  for (size_t i = 0; i < types->size(); ++i) {
    Value value;
    value.name = graph.unique_value_name(types->size() == 1 ? node.name
                                                            : node.name + "." + std::to_string(i));
    value.type = std::move((*types)[i]);
    value.role = output_role;
    value.producer = id;
    value.output_index = static_cast<int>(i);
    node.outputs.push_back(graph.add_value_raw(std::move(value)));
  }
  return graph.add_node_raw(std::move(node));
}

namespace {

// A node of a structurally sound graph: its outputs are what shape inference gives.
Status check_types(const Graph& graph, const Node& node) {
  const std::string label = "node '" + node.name + "' (" + std::string(op_name(node.op)) + ")";
  std::vector<TensorType> input_types;
  for (ValueId input : node.inputs) input_types.push_back(graph.value(input).type);
  const Result<std::vector<TensorType>> types = infer_types(node.op, input_types, node.attrs);
  if (!types) return Status::error(label + ": " + types.message());
  if (types->size() != node.outputs.size()) {
    return Status::error(label + " has " + std::to_string(node.outputs.size()) +
                         " outputs; shape inference gives " + std::to_string(types->size()));
  }
  for (size_t i = 0; i < types->size(); ++i) {
    const Value& value = graph.value(node.outputs[i]);
    if (value.type != (*types)[i]) {
      return Status::error(label + ": output " + std::to_string(i) + " (%" + value.name +
                           ") has type " + type_string(value.type) + ", expected " +
                           type_string((*types)[i]));
    }
  }
  return Status::ok();
}

}  // namespace

Status verify_graph(const Graph& graph) {
  MEMFIT_RETURN_IF_ERROR(verify_graph_structure(graph));
  for (const Node& node : graph.nodes()) MEMFIT_RETURN_IF_ERROR(check_types(graph, node));
  return Status::ok();
}

}  // namespace memfit
