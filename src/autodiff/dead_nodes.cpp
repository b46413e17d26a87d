// Dead-node removal: a node is live when one of its outputs is a graph output,
// the next value of an update, or read by a live node. One backward sweep
// marks liveness; the graph is then rebuilt with dense ids in the same order.
#include "autodiff/autodiff.h"

namespace memfit {

Graph remove_dead_nodes(const Graph& graph) {
  std::vector<bool> live_value(graph.num_values(), false);
  for (ValueId v : graph.outputs()) live_value[v.idx()] = true;
  for (const StateUpdate& u : graph.updates()) live_value[u.next.idx()] = true;
  std::vector<bool> live_node(graph.num_nodes(), false);
  for (size_t n = graph.num_nodes(); n-- > 0;) {
    const Node& node = graph.nodes()[n];
    for (ValueId out : node.outputs) live_node[n] = live_node[n] || live_value[out.idx()];
    if (!live_node[n]) continue;
    for (ValueId in : node.inputs) live_value[in.idx()] = true;
  }

  Graph pruned;
  std::vector<ValueId> remap(graph.num_values());
  auto copy_value = [&](ValueId old_id, NodeId producer) {
    Value value = graph.value(old_id);
    value.producer = producer;
    remap[old_id.idx()] = pruned.add_value_raw(std::move(value));
  };
  // Graph inputs keep their order; states and inputs stay even when unread.
  for (size_t v = 0; v < graph.num_values(); ++v) {
    if (!graph.values()[v].producer.valid()) copy_value(ValueId(static_cast<int32_t>(v)), NodeId());
  }
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    if (!live_node[n]) continue;
    Node node = graph.nodes()[n];
    const NodeId id(static_cast<int32_t>(pruned.num_nodes()));
    for (ValueId& in : node.inputs) in = remap[in.idx()];
    for (ValueId& out : node.outputs) {
      copy_value(out, id);
      out = remap[out.idx()];
    }
    pruned.add_node_raw(std::move(node));
  }
  for (ValueId v : graph.outputs()) pruned.mark_output(remap[v.idx()]);
  for (const StateUpdate& u : graph.updates()) pruned.add_update(remap[u.state.idx()], remap[u.next.idx()]);
  return pruned;
}

}  // namespace memfit
