// Dead-node removal: a node is live when one of its outputs is a graph output,
// the next value of an update, or read by a live node. One backward sweep
// marks liveness; the graph is then rebuilt with dense ids in the same order
// (graph inputs are kept, even when nothing reads them).
#include "autodiff/autodiff.h"
#include "ir/rebuild.h"

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

  std::vector<NodeId> live;
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    if (live_node[n]) live.push_back(NodeId(static_cast<int32_t>(n)));
  }
  return rebuild_graph(graph, live);
}

}  // namespace memfit
