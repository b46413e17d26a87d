// Memory-aware scheduling: a topological order of the nodes that keeps the
// live bytes low, for the planner to compare with the order autodiff built.
//
// Input: a verified graph and the bytes of its values.
// 1. Readers: for every value, how many of its readers have not run yet.
// 2. List scheduling: among the nodes whose inputs are all computed, run the
//    one that adds the fewest bytes: its outputs' bytes minus the bytes of the
//    inputs it is the last reader of (graph outputs and update values are
//    never freed). Ties go to the earlier node of the given order, so the
//    result stays close to it. A node that writes a state's next value waits
//    for every other reader of that state, so that the update can be written
//    in place and the state stays in the arena from step to step.
// 3. Rebuild: values are renumbered in the new definition order.
// Guarantees: a topological order; the same nodes, values, outputs and updates.
//    A heap holds the ready nodes by (delta, node); a node's delta only falls
//    (when it becomes the last reader of an input), and it is then pushed
//    again, so the choice is that of scanning every ready node.
// Cost: O((N + E) log N + the readers of every value once) for N nodes and E
// node inputs.
#include "memory/schedule.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

#include "core/check.h"
#include "ir/rebuild.h"

namespace memfit {

namespace {

// List scheduling (stages 1 and 2); with `updates_last`, an empty order when
// the update rule leaves none.
std::vector<NodeId> list_schedule(const Graph& graph, const std::vector<size_t>& value_bytes,
                                  bool updates_last) {
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

  // A node is ready when all its inputs' producers have run, and a node that
  // writes a state's next value when every other reader of the state has run
  // (then the update can be written in place and the state stays in its
  // bytes; the rule is dropped if it would leave no order).
  std::vector<int32_t> missing(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (ValueId in : graph.nodes()[i].inputs) missing[i] += graph.value(in).producer.valid() ? 1 : 0;
  }
  std::vector<std::vector<int32_t>> updaters_after(n);  // reader -> updaters waiting for it
  if (updates_last) {
    for (const StateUpdate& u : graph.updates()) {
      const NodeId updater = graph.value(u.next).producer;
      if (!updater.valid()) continue;
      for (int32_t reader : readers[u.state.idx()]) {
        if (reader == updater.index) continue;
        updaters_after[static_cast<size_t>(reader)].push_back(updater.index);
        ++missing[updater.idx()];
      }
    }
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

  // Stage 2 with a heap of (delta, node): a ready node's delta only falls,
  // when another reader of one of its inputs runs and leaves it the last
  // reader; then it is pushed again, and entries whose delta is no longer the
  // node's are skipped. The choice is the scan's: least delta, then earliest.
  std::vector<int32_t> distinct_left(graph.num_values(), 0);  // unrun distinct readers
  for (size_t i = 0; i < n; ++i) {
    for (const auto& [in, mentions] : reads[i]) ++distinct_left[in.idx()];
  }
  std::vector<bool> done(n, false);
  auto delta_of = [&](size_t node) {
    int64_t delta = 0;
    for (ValueId out : graph.nodes()[node].outputs) delta += static_cast<int64_t>(value_bytes[out.idx()]);
    for (const auto& [in, mentions] : reads[node]) {
      if (!kept[in.idx()] && readers_left[in.idx()] == mentions) {
        delta -= static_cast<int64_t>(value_bytes[in.idx()]);
      }
    }
    return delta;
  };
  std::vector<int64_t> delta(n, 0);
  using Entry = std::pair<int64_t, int32_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  std::vector<bool> is_ready(n, false);
  auto push = [&](size_t node) {
    delta[node] = delta_of(node);
    heap.emplace(delta[node], static_cast<int32_t>(node));
  };
  for (int32_t r : ready) {
    is_ready[static_cast<size_t>(r)] = true;
    push(static_cast<size_t>(r));
  }

  std::vector<NodeId> order;
  order.reserve(n);
  while (!heap.empty()) {
    const auto [d, id] = heap.top();
    heap.pop();
    const auto chosen = static_cast<size_t>(id);
    if (done[chosen] || d != delta[chosen]) continue;
    done[chosen] = true;
    order.push_back(NodeId(id));
    const Node& node = graph.nodes()[chosen];
    for (ValueId in : node.inputs) --readers_left[in.idx()];
    for (const auto& [in, mentions] : reads[chosen]) {
      // One distinct reader left: it may now be the last reader of `in`.
      if (--distinct_left[in.idx()] != 1 || kept[in.idx()]) continue;
      for (int32_t reader : readers[in.idx()]) {
        const auto r = static_cast<size_t>(reader);
        if (done[r]) continue;
        if (is_ready[r]) push(r);
        break;
      }
    }
    auto one_less_missing = [&](int32_t waiting) {
      const auto r = static_cast<size_t>(waiting);
      if (--missing[r] == 0) {
        is_ready[r] = true;
        push(r);
      }
    };
    for (ValueId out : node.outputs) {
      for (int32_t reader : readers[out.idx()]) one_less_missing(reader);
    }
    for (int32_t updater : updaters_after[chosen]) one_less_missing(updater);
  }
  if (order.size() < n) {
    MEMFIT_CHECK(updates_last);  // without the update rule every graph has an order
    return {};
  }
  return order;
}

}  // namespace

std::vector<NodeId> memory_aware_order(const Graph& graph, const std::vector<size_t>& value_bytes) {
  std::vector<NodeId> order = list_schedule(graph, value_bytes, true);
  return order.empty() ? list_schedule(graph, value_bytes, false) : order;
}

Graph reorder_nodes(const Graph& graph, const std::vector<NodeId>& order,
                    std::vector<ValueId>* value_map) {
  MEMFIT_CHECK(order.size() == graph.num_nodes());
  return rebuild_graph(graph, order, value_map);
}

}  // namespace memfit
