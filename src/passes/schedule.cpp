// Memory-aware scheduling: a topological order of the nodes that keeps the
// live bytes low, for the planner to compare with the order autodiff built.
//
// Input: a verified graph and the bytes of its values.
// 1. Readers: for every value, how many of its readers have not run yet.
// 2. List scheduling: among the nodes whose inputs are all computed, run the
//    one that adds the fewest bytes: its outputs' bytes minus the bytes of the
//    inputs it is the last reader of (graph outputs and update values are
//    never freed). Ties go to the earlier node of the given order, so the
//    result stays close to it.
// 3. Rebuild: values are renumbered in the new definition order.
// Guarantees: a topological order; the same nodes, values, outputs and updates.
// Cost: O(N * R) for N nodes and at most R ready nodes at a time.
#include "passes/schedule.h"

#include <algorithm>
#include <limits>

#include "core/check.h"
#include "ir/rebuild.h"

namespace memfit {

std::vector<NodeId> memory_aware_order(const Graph& graph, const std::vector<size_t>& value_bytes) {
  const size_t n = graph.num_nodes();
  std::vector<int32_t> readers_left(graph.num_values(), 0);
  std::vector<std::vector<int32_t>> readers(graph.num_values());
  for (size_t i = 0; i < n; ++i) {
    for (ValueId in : graph.nodes()[i].inputs) {
      ++readers_left[in.idx()];
      readers[in.idx()].push_back(static_cast<int32_t>(i));
    }
  }
  std::vector<bool> kept(graph.num_values(), false);
  for (ValueId v : graph.outputs()) kept[v.idx()] = true;
  for (const StateUpdate& u : graph.updates()) kept[u.next.idx()] = true;
  for (size_t v = 0; v < graph.num_values(); ++v) {
    if (!graph.values()[v].producer.valid()) kept[v] = true;  // inputs and state stay anyway
  }

  // A node is ready when all its inputs' producers have run.
  std::vector<int32_t> missing(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (ValueId in : graph.nodes()[i].inputs) missing[i] += graph.value(in).producer.valid() ? 1 : 0;
  }
  std::vector<int32_t> ready;
  for (size_t i = 0; i < n; ++i) {
    if (missing[i] == 0) ready.push_back(static_cast<int32_t>(i));
  }

  // Each node's distinct inputs, with how often the node reads each.
  std::vector<std::vector<std::pair<ValueId, int32_t>>> reads(n);
  for (size_t i = 0; i < n; ++i) {
    for (ValueId in : graph.nodes()[i].inputs) {
      auto& list = reads[i];
      auto it = std::find_if(list.begin(), list.end(), [&](const auto& r) { return r.first == in; });
      if (it == list.end()) {
        list.emplace_back(in, 1);
      } else {
        ++it->second;
      }
    }
  }

  std::vector<NodeId> order;
  order.reserve(n);
  while (!ready.empty()) {
    size_t best = 0;
    int64_t best_delta = std::numeric_limits<int64_t>::max();
    for (size_t r = 0; r < ready.size(); ++r) {
      const auto candidate = static_cast<size_t>(ready[r]);
      int64_t delta = 0;
      for (ValueId out : graph.nodes()[candidate].outputs) delta += static_cast<int64_t>(value_bytes[out.idx()]);
      for (const auto& [in, mentions] : reads[candidate]) {
        if (!kept[in.idx()] && readers_left[in.idx()] == mentions) {
          delta -= static_cast<int64_t>(value_bytes[in.idx()]);
        }
      }
      if (delta < best_delta || (delta == best_delta && ready[r] < ready[best])) {
        best_delta = delta;
        best = r;
      }
    }
    const auto chosen = static_cast<size_t>(ready[best]);
    ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(best));
    order.push_back(NodeId(static_cast<int32_t>(chosen)));
    const Node& node = graph.nodes()[chosen];
    for (ValueId in : node.inputs) --readers_left[in.idx()];
    for (ValueId out : node.outputs) {
      for (int32_t reader : readers[out.idx()]) {
        if (--missing[static_cast<size_t>(reader)] == 0) ready.push_back(reader);
      }
    }
  }
  MEMFIT_CHECK(order.size() == n);
  return order;
}

Graph reorder_nodes(const Graph& graph, const std::vector<NodeId>& order,
                    std::vector<ValueId>* value_map) {
  MEMFIT_CHECK(order.size() == graph.num_nodes());
  return rebuild_graph(graph, order, value_map);
}

}  // namespace memfit
