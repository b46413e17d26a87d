#include "ir/rebuild.h"

#include "core/check.h"

namespace memfit {

Graph rebuild_graph(const Graph& graph, const std::vector<NodeId>& nodes,
                    std::vector<ValueId>* value_map, bool drop_unread_inputs) {
  Graph out;
  std::vector<ValueId> remap(graph.num_values());
  std::vector<bool> needed(graph.num_values(), !drop_unread_inputs);
  for (NodeId id : nodes) {
    for (ValueId in : graph.node(id).inputs) needed[in.idx()] = true;
  }
  for (ValueId v : graph.outputs()) needed[v.idx()] = true;
  for (const StateUpdate& u : graph.updates()) needed[u.state.idx()] = true;
  auto copy_value = [&](ValueId old_id, NodeId producer) {
    Value value = graph.value(old_id);
    value.producer = producer;
    remap[old_id.idx()] = out.add_value_raw(std::move(value));
  };
  for (size_t v = 0; v < graph.num_values(); ++v) {
    if (!graph.values()[v].producer.valid() && needed[v]) {
      copy_value(ValueId(static_cast<int32_t>(v)), NodeId());
    }
  }
  for (NodeId id : nodes) {
    Node node = graph.node(id);
    const NodeId new_id(static_cast<int32_t>(out.num_nodes()));
    for (ValueId& in : node.inputs) {
      in = remap[in.idx()];
      MEMFIT_CHECK(in.valid());
    }
    for (ValueId& o : node.outputs) {
      copy_value(o, new_id);
      o = remap[o.idx()];
    }
    out.add_node_raw(std::move(node));
  }
  for (ValueId v : graph.outputs()) out.mark_output(remap[v.idx()]);
  for (const StateUpdate& u : graph.updates()) out.add_update(remap[u.state.idx()], remap[u.next.idx()]);
  if (value_map) *value_map = std::move(remap);
  return out;
}

}  // namespace memfit
