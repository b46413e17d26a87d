#include "passes/recompute.h"

#include <utility>

#include "core/check.h"
#include "ir/rebuild.h"
#include "passes/phase.h"

namespace memfit {
namespace {

// Stage 2: which values stay as the forward pass made them.
Result<std::vector<bool>> kept_values(const Graph& graph, const std::vector<bool>& forward,
                                      const RecomputeOptions& options) {
  // Values the forward pass itself needs: read by a forward node, returned,
  // or carried to the next step.
  std::vector<bool> needed(graph.num_values(), false);
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    if (!forward[n]) continue;
    for (ValueId in : graph.nodes()[n].inputs) needed[in.idx()] = true;
  }
  for (ValueId v : graph.outputs()) needed[v.idx()] = true;
  for (const StateUpdate& u : graph.updates()) needed[u.next.idx()] = true;

  std::vector<bool> keep(graph.num_values(), true);
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    const Node& node = graph.nodes()[n];
    if (!forward[n]) continue;
    bool any_needed = false;
    for (ValueId out : node.outputs) any_needed = any_needed || needed[out.idx()];
    if (!any_needed) continue;
    for (ValueId out : node.outputs) keep[out.idx()] = false;
  }
  for (ValueId v : graph.outputs()) keep[v.idx()] = true;
  for (const StateUpdate& u : graph.updates()) keep[u.next.idx()] = true;
  for (ValueId v : options.keep) {
    if (!v.valid() || v.idx() >= graph.num_values()) {
      return Status::error("a checkpoint is not a value of the graph");
    }
    const Value& value = graph.value(v);
    if (!value.producer.valid() || !forward[value.producer.idx()]) {
      return Status::error("checkpoint '" + value.name + "' is not an output of a forward node");
    }
    keep[v.idx()] = true;
  }
  return keep;
}

}  // namespace

Result<bool> recompute(Graph& graph, const RecomputeOptions& options, RecomputeStats* stats) {
  // Stage 1.
  const size_t num_nodes = graph.num_nodes();
  std::vector<bool> forward(num_nodes);
  for (size_t n = 0; n < num_nodes; ++n) {
    forward[n] = node_phase(graph, graph.nodes()[n]) == Phase::forward;
  }
  MEMFIT_ASSIGN_OR_RETURN(const std::vector<bool> keep, kept_values(graph, forward, options));

  // Stage 3. Clones are appended to `graph` (out of order for now) and take
  // their place in `order`; clone_of[v] is the clone of a dropped value v.
  const size_t num_values = graph.num_values();
  std::vector<ValueId> clone_of(num_values);
  std::vector<bool> cloned(num_nodes, false);
  std::vector<NodeId> order;
  order.reserve(num_nodes);
  RecomputeStats counted;
  auto clone_node = [&](NodeId original) {
    Node node = graph.node(original);  // a copy: appending moves the graph's storage
    const NodeId id(static_cast<int32_t>(graph.num_nodes()));
    node.name = graph.unique_node_name(node.name + ".recompute");
    for (ValueId& in : node.inputs) {
      if (!keep[in.idx()]) in = clone_of[in.idx()];
      MEMFIT_CHECK(in.valid());
    }
    for (ValueId& out : node.outputs) {
      Value value = graph.value(out);
      value.name = graph.unique_value_name(value.name + ".recompute");
      value.producer = id;
      const ValueId copy = graph.add_value_raw(std::move(value));
      if (!keep[out.idx()]) clone_of[out.idx()] = copy;
      out = copy;
    }
    graph.add_node_raw(std::move(node));
    cloned[original.idx()] = true;
    order.push_back(id);
    ++counted.recomputed_nodes;
  };
  // Clones the producer of dropped value `v` and, first, the producers of the
  // dropped values it reads: a depth-first walk with an explicit stack, since
  // a segment may be thousands of nodes long. A producer reached twice before
  // it is cloned (two paths to it) is cloned once.
  std::vector<std::pair<NodeId, size_t>> stack;  // (original node, next input to look at)
  auto materialize = [&](ValueId v) {
    stack.emplace_back(graph.value(v).producer, 0);
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < graph.node(node).inputs.size()) {
        const ValueId in = graph.node(node).inputs[next++];
        if (!keep[in.idx()] && !cloned[graph.value(in).producer.idx()]) {
          stack.emplace_back(graph.value(in).producer, 0);
        }
        continue;
      }
      const NodeId done = node;
      stack.pop_back();
      if (!cloned[done.idx()]) clone_node(done);
    }
  };
  std::vector<bool> redirected(num_values, false);
  for (size_t n = 0; n < num_nodes; ++n) {
    const NodeId id(static_cast<int32_t>(n));
    if (!forward[n]) {
      std::vector<ValueId> inputs = graph.node(id).inputs;
      for (ValueId& in : inputs) {
        if (keep[in.idx()]) continue;
        if (!cloned[graph.value(in).producer.idx()]) materialize(in);
        if (!redirected[in.idx()]) ++counted.dropped_values;
        redirected[in.idx()] = true;
        in = clone_of[in.idx()];
      }
      graph.node(id).inputs = std::move(inputs);
    }
    order.push_back(id);
  }
  if (stats) *stats = counted;
  // Without clones no input was redirected: the graph is as it was.
  if (counted.recomputed_nodes == 0) return false;

  // Stage 4.
  graph = rebuild_graph(graph, order);
  return true;
}

}  // namespace memfit
