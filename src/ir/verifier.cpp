// The structural graph verifier. verify_graph (src/ops/typed_graph.h) runs it
// after every pass in debug builds and on every parsed text, so it must
// accept any Graph object without crashing, however broken, and report the
// first broken invariant with the node or value it concerns. The invariants:
//   1. names are unique (values and nodes have separate name spaces);
//   2. a value's dimensions are non-negative and its size fits in int64;
//   3. a value with a producer is listed by that node at its output index, and
//      a graph input (no producer) has output index -1;
//   4. nodes are in topological order: every input is a graph input or is
//      produced by an earlier node;
//   5. each node's arity is within its op's and its attributes are the op's
//      struct;
//   6. graph outputs are values of the graph;
//   7. an update replaces a persistent graph input (parameter, optimizer state,
//      state) by a value of the same type, and no state is updated twice.
// Cost: O(values + nodes + edges).
#include "ir/verifier.h"

#include <string>
#include <unordered_set>

namespace memfit {
namespace {

// Sizes up to this many elements keep byte sizes (at most 16 bytes per
// element) inside int64, so num_elements and Value::bytes cannot overflow.
constexpr int64_t kMaxElements = INT64_MAX / 16;

std::string node_label(const Node& node) {
  return "node '" + node.name + "' (" + std::string(op_name(node.op)) + ")";
}

bool in_range(const Graph& graph, ValueId id) {
  return id.valid() && id.idx() < graph.num_values();
}

std::string ref(const Graph& graph, ValueId id) {
  if (in_range(graph, id)) return "%" + graph.value(id).name;
  return "value id " + std::to_string(id.index) + " (not a value of the graph)";
}

Status check_values(const Graph& graph) {
  std::unordered_set<std::string_view> names;
  for (size_t i = 0; i < graph.num_values(); ++i) {
    const ValueId id(static_cast<int32_t>(i));
    const Value& value = graph.value(id);
    const std::string label = "value %" + value.name;
    if (!names.insert(value.name).second) return Status::error(label + " is defined twice");
    int64_t elements = 1;
    for (int64_t dim : value.type.shape) {
      if (dim < 0) {
        return Status::error(label + " has a negative dimension: " + type_string(value.type));
      }
      if (dim > 0 && elements > kMaxElements / dim) {
        return Status::error(label + " is too large: " + type_string(value.type));
      }
      elements *= dim;
    }
    if (value.layout != Layout::plain) {
      const size_t rank = value.type.shape.size();
      if ((rank != 4 && rank != 5) || value.type.dtype != DType::f32) {
        return Status::error(label + " has layout " + std::string(layout_name(value.layout)) +
                             ", which only f32 values of rank 4 or 5 may have: " +
                             type_string(value.type));
      }
      if (!value.producer.valid() && !is_persistent(value.role)) {
        return Status::error(label + " is a graph input in layout " +
                             std::string(layout_name(value.layout)) +
                             "; graph inputs other than persistent state are plain (a host "
                             "writes them)");
      }
    }
    if (!value.producer.valid()) {
      if (value.output_index != -1) {
        return Status::error(label + " has no producer (a graph input) but output index " +
                             std::to_string(value.output_index) + " instead of -1");
      }
      continue;
    }
    if (value.producer.idx() >= graph.num_nodes()) {
      return Status::error(label + " has producer id " + std::to_string(value.producer.index) +
                           ", which is not a node of the graph");
    }
    const Node& producer = graph.node(value.producer);
    const size_t index = static_cast<size_t>(value.output_index);
    if (value.output_index < 0 || index >= producer.outputs.size() ||
        producer.outputs[index] != id) {
      return Status::error(label + " names " + node_label(producer) + " as its producer, output " +
                           std::to_string(value.output_index) +
                           ", but the node does not list it there");
    }
  }
  return Status::ok();
}

Status check_node(const Graph& graph, NodeId id) {
  const Node& node = graph.node(id);
  const std::string label = node_label(node);
  const Arity arity = op_arity(node.op);
  const int inputs = static_cast<int>(node.inputs.size());
  if (!arity.admits(inputs)) {
    std::string expected = std::to_string(arity.min);
    if (arity.max < 0) expected = "at least " + expected;
    if (arity.max > arity.min) expected += " to " + std::to_string(arity.max);
    return Status::error(label + " has " + std::to_string(inputs) + " inputs, expected " +
                         expected);
  }
  const size_t expected_attrs = default_attrs(node.op).index();
  if (node.attrs.index() != expected_attrs) {
    return Status::error(label + " has attributes of the wrong kind: alternative " +
                         std::to_string(node.attrs.index()) + " of Attrs, the op's is " +
                         std::to_string(expected_attrs));
  }

  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const ValueId input = node.inputs[i];
    if (!in_range(graph, input)) {
      return Status::error(label + ": input " + std::to_string(i) + " is " + ref(graph, input));
    }
    const Value& value = graph.value(input);
    // check_values has made sure that a valid producer is a node of the graph.
    if (value.producer.valid() && !(value.producer < id)) {
      return Status::error(label + ": input " + std::to_string(i) + " (%" + value.name +
                           ") is produced by node '" + graph.node(value.producer).name +
                           "', which does not come before it (nodes must be in topological order)");
    }
  }

  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const ValueId output = node.outputs[i];
    if (!in_range(graph, output)) {
      return Status::error(label + ": output " + std::to_string(i) + " is " + ref(graph, output));
    }
    const Value& value = graph.value(output);
    if (value.producer != id || value.output_index != static_cast<int>(i)) {
      return Status::error(label + ": output " + std::to_string(i) + " (%" + value.name +
                           ") does not name the node as its producer at output index " +
                           std::to_string(i));
    }
  }
  return Status::ok();
}

Status check_updates(const Graph& graph) {
  std::unordered_set<int32_t> updated;
  for (const StateUpdate& update : graph.updates()) {
    const std::string label =
        "update " + ref(graph, update.state) + " <- " + ref(graph, update.next);
    if (!in_range(graph, update.state) || !in_range(graph, update.next)) {
      return Status::error(label + ": both sides must be values of the graph");
    }
    const Value& state = graph.value(update.state);
    const Value& next = graph.value(update.next);
    if (state.producer.valid()) {
      return Status::error(label + ": %" + state.name + " is produced by node '" +
                           graph.node(state.producer).name +
                           "'; only graph inputs carry state across steps");
    }
    if (!is_persistent(state.role)) {
      return Status::error(label + ": %" + state.name + " has role " +
                           std::string(role_name(state.role)) +
                           ", which does not persist across steps (parameter, optimizer_state "
                           "and state do)");
    }
    if (next.layout != state.layout) {
      return Status::error(label + ": %" + next.name + " is in layout " +
                           std::string(layout_name(next.layout)) + ", its state in " +
                           std::string(layout_name(state.layout)) +
                           "; the next value of state is in the state's layout");
    }
    if (next.type != state.type) {
      return Status::error(label + ": %" + next.name + " has type " + type_string(next.type) +
                           ", the state " + type_string(state.type));
    }
    if (!updated.insert(update.state.index).second) {
      return Status::error(label + ": %" + state.name + " is updated twice");
    }
  }
  return Status::ok();
}

}  // namespace

Status verify_graph_structure(const Graph& graph) {
  MEMFIT_RETURN_IF_ERROR(check_values(graph));
  std::unordered_set<std::string_view> node_names;
  for (size_t i = 0; i < graph.num_nodes(); ++i) {
    const NodeId id(static_cast<int32_t>(i));
    if (!node_names.insert(graph.node(id).name).second) {
      return Status::error("node '" + graph.node(id).name + "' is defined twice");
    }
    MEMFIT_RETURN_IF_ERROR(check_node(graph, id));
  }
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const ValueId id = graph.outputs()[i];
    if (!in_range(graph, id)) {
      return Status::error("graph output " + std::to_string(i) + " is " + ref(graph, id));
    }
    if (graph.value(id).layout != Layout::plain) {
      return Status::error("graph output " + ref(graph, id) + " is in layout " +
                           std::string(layout_name(graph.value(id).layout)) +
                           "; a host reads graph outputs, which are plain");
    }
  }
  return check_updates(graph);
}

}  // namespace memfit
