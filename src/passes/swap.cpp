#include "passes/swap.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "core/check.h"
#include "ir/phase.h"
#include "ir/rebuild.h"
#include "ops/typed_graph.h"

namespace memfit {
namespace {

// S: the first node that is not a forward node and reads an output of a
// forward node (a schedule may run a node without inputs, such as the fill of
// the loss gradient, first); N when there is none.
int32_t backward_start(const Graph& graph) {
  std::vector<bool> forward(graph.num_nodes());
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    const Node& node = graph.nodes()[n];
    forward[n] = node_phase(graph, node) == Phase::forward;
    if (forward[n]) continue;
    for (ValueId in : node.inputs) {
      const NodeId producer = graph.value(in).producer;
      if (producer.valid() && forward[producer.idx()]) return static_cast<int32_t>(n);
    }
  }
  return static_cast<int32_t>(graph.num_nodes());
}

// T(k) for k in [0, N]: the predicted seconds of nodes 0..k-1.
std::vector<double> prefix_seconds(const std::vector<double>& node_seconds) {
  std::vector<double> t(node_seconds.size() + 1, 0);
  for (size_t n = 0; n < node_seconds.size(); ++n) t[n + 1] = t[n] + node_seconds[n];
  return t;
}

// A swapped value and its decided positions (boundaries of the input order).
// Explicit placements fill only c.value, c.bytes and c.last_forward_use (O - 1).
struct Plan {
  SwapCandidate c;
  int32_t last_use = 0;    // its last reader
  int32_t wait = 0;        // W
  int32_t swap_in = 0;     // p (stage 3)
  int32_t swap_out = 0;    // O: F + 1
  int32_t wait_limit = 0;  // the latest boundary W may take: S, or the first swap-in
  std::vector<SwapIn> ins;
};

// Checks `placement` against the rules of the header: a value that some node
// produces, not kept to the end, swapped out after its producer, every reader
// at or after the swap-out served by exactly one swap-in at or before it.
Status check_placement(const Graph& graph, const SwapPlacement& placement,
                       const std::vector<bool>& kept,
                       const std::vector<std::vector<int32_t>>& readers) {
  const ValueId x = placement.value;
  if (!x.valid() || x.idx() >= graph.num_values()) {
    return Status::error("a value to swap is not a value of the graph");
  }
  const Value& value = graph.value(x);
  const std::string what = "swap placement of '" + value.name + "': ";
  if (!value.producer.valid() || kept[x.idx()]) {
    return Status::error(what +
                         "only a value a node produces and no output or update can be swapped");
  }
  if (placement.swap_out <= value.producer.index ||
      placement.swap_out > static_cast<int32_t>(graph.num_nodes())) {
    return Status::error(what + "the swap-out must follow the producer");
  }
  if (placement.swap_ins.empty()) return Status::error(what + "no swap-in");
  size_t served = 0;
  for (const SwapIn& in : placement.swap_ins) {
    if (in.readers.empty() || in.at < placement.swap_out) {
      return Status::error(what + "a swap-in must serve a reader and follow the swap-out");
    }
    for (int32_t r : in.readers) {
      if (r < in.at || !std::binary_search(readers[x.idx()].begin(), readers[x.idx()].end(), r)) {
        return Status::error(what + "node " + std::to_string(r) +
                             " does not read it at or after its swap-in");
      }
    }
    served += in.readers.size();
  }
  const auto& all = readers[x.idx()];
  const auto after =
      static_cast<size_t>(all.end() - std::lower_bound(all.begin(), all.end(), placement.swap_out));
  std::vector<int32_t> listed;
  for (const SwapIn& in : placement.swap_ins)
    listed.insert(listed.end(), in.readers.begin(), in.readers.end());
  std::sort(listed.begin(), listed.end());
  if (served != after || std::adjacent_find(listed.begin(), listed.end()) != listed.end()) {
    return Status::error(what + "every reader after the swap-out needs exactly one swap-in");
  }
  return Status::ok();
}

}  // namespace

int32_t swap_backward_start(const Graph& graph) { return backward_start(graph); }

std::vector<SwapCandidate> swap_candidates(const Graph& graph,
                                           const std::vector<size_t>& value_bytes,
                                           const std::vector<double>& node_seconds) {
  MEMFIT_CHECK(value_bytes.size() == graph.num_values());
  MEMFIT_CHECK(node_seconds.size() == graph.num_nodes());
  const int32_t start = backward_start(graph);
  const std::vector<double> t = prefix_seconds(node_seconds);
  std::vector<bool> kept(graph.num_values(), false);
  for (ValueId v : graph.outputs()) kept[v.idx()] = true;
  for (const StateUpdate& u : graph.updates()) kept[u.next.idx()] = true;
  std::vector<int32_t> last_forward(graph.num_values(), -1), first_backward(graph.num_values(), -1);
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    const auto pos = static_cast<int32_t>(n);
    for (ValueId in : graph.nodes()[n].inputs) {
      if (pos < start) {
        last_forward[in.idx()] = pos;
      } else if (first_backward[in.idx()] < 0) {
        first_backward[in.idx()] = pos;
      }
    }
  }
  std::vector<SwapCandidate> result;
  for (size_t v = 0; v < graph.num_values(); ++v) {
    const Value& value = graph.values()[v];
    if (!value.producer.valid() || value.producer.index >= start || kept[v] ||
        first_backward[v] < 0 || value_bytes[v] == 0) {
      continue;
    }
    SwapCandidate c;
    c.value = ValueId(static_cast<int32_t>(v));
    c.last_forward_use = std::max(last_forward[v], value.producer.index);
    c.first_backward_use = first_backward[v];
    c.idle_seconds = t[static_cast<size_t>(c.first_backward_use)] -
                     t[static_cast<size_t>(c.last_forward_use) + 1];
    c.bytes = value_bytes[v];
    result.push_back(c);
  }
  return result;
}

Result<bool> swap(Graph& graph, const SwapOptions& options, SwapStats* stats) {
  const size_t num_nodes = graph.num_nodes();
  const auto n_steps = static_cast<int32_t>(num_nodes);
  if (options.value_bytes.size() != graph.num_values() ||
      options.node_seconds.size() != num_nodes) {
    return Status::error(
        "the swap pass needs the bytes of every value and the seconds of every node");
  }
  if (options.link_bytes_per_second <= 0)
    return Status::error("the link bandwidth must be positive");
  if (!options.values.empty() && !options.placements.empty()) {
    return Status::error("the swap pass takes values or placements, not both");
  }
  SwapStats counted;
  if (stats) *stats = counted;
  if (options.values.empty() && options.placements.empty()) return false;

  // Stage 1.
  std::unordered_map<int32_t, SwapCandidate> candidate_of;
  for (const SwapCandidate& c : swap_candidates(graph, options.value_bytes, options.node_seconds)) {
    candidate_of[c.value.index] = c;
  }
  const int32_t start = backward_start(graph);
  const std::vector<double> t = prefix_seconds(options.node_seconds);
  std::vector<int32_t> last_use(graph.num_values(), -1);
  for (size_t n = 0; n < num_nodes; ++n) {
    for (ValueId in : graph.nodes()[n].inputs) last_use[in.idx()] = static_cast<int32_t>(n);
  }
  std::vector<Plan> plans;
  std::vector<bool> swapped(graph.num_values(), false);
  std::vector<bool> kept_to_end(graph.num_values(), false);
  for (ValueId v : graph.outputs()) kept_to_end[v.idx()] = true;
  for (const StateUpdate& u : graph.updates()) kept_to_end[u.next.idx()] = true;
  std::vector<std::vector<int32_t>> readers(graph.num_values());  // ascending, once each
  for (size_t n = 0; n < num_nodes; ++n) {
    for (ValueId in : graph.nodes()[n].inputs) {
      auto& list = readers[in.idx()];
      if (list.empty() || list.back() != static_cast<int32_t>(n)) {
        list.push_back(static_cast<int32_t>(n));
      }
    }
  }
  for (const SwapPlacement& placement : options.placements) {
    MEMFIT_RETURN_IF_ERROR(check_placement(graph, placement, kept_to_end, readers));
    const ValueId x = placement.value;
    if (swapped[x.idx()])
      return Status::error("value '" + graph.value(x).name + "' is placed twice");
    swapped[x.idx()] = true;
    Plan p;
    p.c.value = x;
    p.c.bytes = options.value_bytes[x.idx()];
    p.c.last_forward_use = placement.swap_out - 1;
    p.last_use = last_use[x.idx()];
    p.swap_out = placement.swap_out;
    p.ins = placement.swap_ins;
    p.wait_limit = n_steps;
    for (const SwapIn& in : p.ins) p.wait_limit = std::min(p.wait_limit, in.at);
    plans.push_back(std::move(p));
  }
  for (ValueId v : options.values) {
    auto it = v.valid() ? candidate_of.find(v.index) : candidate_of.end();
    if (it == candidate_of.end()) {
      return Status::error(v.valid() && v.idx() < graph.num_values()
                               ? "value '" + graph.value(v).name +
                                     "' cannot be swapped: it is not a forward activation that "
                                     "the backward pass reads again"
                               : "a value to swap is not a value of the graph");
    }
    if (swapped[v.idx()]) continue;
    swapped[v.idx()] = true;
    Plan p;
    p.c = it->second;
    p.last_use = last_use[v.idx()];
    p.swap_in = it->second.first_backward_use;
    p.swap_out = it->second.last_forward_use + 1;
    p.wait_limit = start;
    plans.push_back(std::move(p));
  }
  auto copy_seconds = [&](const Plan& p) {
    return static_cast<double>(p.c.bytes) / options.link_bytes_per_second;
  };

  // Stage 2: one copy stream, swap-outs issued in the order of F.
  std::sort(plans.begin(), plans.end(), [](const Plan& a, const Plan& b) {
    return a.c.last_forward_use < b.c.last_forward_use ||
           (a.c.last_forward_use == b.c.last_forward_use && a.c.value < b.c.value);
  });
  double stream_free = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    Plan& p = plans[i];
    const int32_t issue = p.swap_out;
    const double end = std::max(t[static_cast<size_t>(issue)], stream_free) + copy_seconds(p);
    stream_free = end;
    int32_t limit = p.wait_limit;
    if (options.waits_in_order) {
      for (size_t j = i + 1; j < plans.size(); ++j) {
        if (plans[j].swap_out > issue) {
          limit = std::min(limit, plans[j].swap_out);
          break;
        }
      }
    }
    p.wait = limit;
    for (int32_t k = issue; k <= limit; ++k) {
      if (t[static_cast<size_t>(k)] >= end) {
        p.wait = k;
        break;
      }
    }
  }

  // Stage 3 (values only): live device bytes per node with every swap-in just in time.
  if (options.placements.empty()) {
    std::vector<int64_t> delta(num_nodes + 1, 0);
    auto add_live = [&](int32_t first, int32_t last, size_t bytes) {
      first = std::max(first, 0);
      last = std::min(last, n_steps - 1);
      if (first > last) return;
      delta[static_cast<size_t>(first)] += static_cast<int64_t>(bytes);
      delta[static_cast<size_t>(last) + 1] -= static_cast<int64_t>(bytes);
    };
    for (size_t v = 0; v < graph.num_values(); ++v) {
      if (swapped[v]) continue;
      const Value& value = graph.values()[v];
      const int32_t def = value.producer.valid() ? value.producer.index : 0;
      const bool to_end = kept_to_end[v] || (!value.producer.valid() && is_persistent(value.role));
      add_live(def, to_end ? n_steps - 1 : std::max(def, last_use[v]), options.value_bytes[v]);
    }
    for (const Plan& p : plans) {
      const Value& value = graph.value(p.c.value);
      add_live(value.producer.index, p.wait - 1, p.c.bytes);
      add_live(p.swap_in, p.last_use, p.c.bytes);
    }
    std::vector<int64_t> live(num_nodes, 0);
    int64_t now = 0, peak = 0;
    for (size_t n = 0; n < num_nodes; ++n) {
      now += delta[n];
      live[n] = now;
      peak = std::max(peak, now);
    }
    std::sort(plans.begin(), plans.end(), [](const Plan& a, const Plan& b) {
      return a.c.first_backward_use < b.c.first_backward_use ||
             (a.c.first_backward_use == b.c.first_backward_use && a.c.value < b.c.value);
    });
    for (Plan& p : plans) {
      const auto bytes = static_cast<int64_t>(p.c.bytes);
      const double use = t[static_cast<size_t>(p.c.first_backward_use)];
      while (use - t[static_cast<size_t>(p.swap_in)] < copy_seconds(p) && p.swap_in - 1 >= start &&
             live[static_cast<size_t>(p.swap_in - 1)] + bytes <= peak) {
        --p.swap_in;
        live[static_cast<size_t>(p.swap_in)] += bytes;
        ++counted.prefetched_nodes;
      }
      const auto& all = readers[p.c.value.idx()];
      p.ins = {SwapIn{p.swap_in, std::vector<int32_t>(
                                     std::lower_bound(all.begin(), all.end(), start), all.end())}};
    }
  } else {
    for (const Plan& p : plans) {
      for (const SwapIn& in : p.ins) {
        counted.prefetched_nodes +=
            static_cast<size_t>(*std::min_element(in.readers.begin(), in.readers.end()) - in.at);
      }
    }
  }

  // Stage 4: new nodes are appended (out of order for now) and placed by `order`.
  std::vector<std::vector<NodeId>> outs_at(num_nodes + 1), waits_at(num_nodes + 1),
      ins_at(num_nodes + 1);
  // replace[k]: (x, x'_g) for node k, a reader of group g.
  std::vector<std::vector<std::pair<ValueId, ValueId>>> replace(num_nodes);
  for (const Plan& p : plans) {
    const ValueId x = p.c.value;
    const Value value = graph.value(x);  // a copy: adding nodes moves the graph's values
    MEMFIT_ASSIGN_OR_RETURN(NodeId out, add_node(graph, OpKind::to_host, {x}, NoAttrs{},
                                                 value.name + ".to_host", value.role));
    const ValueId h = graph.node(out).outputs[0];
    graph.value(h).layout = value.layout;  // the copies move x's bytes as they are
    MEMFIT_ASSIGN_OR_RETURN(NodeId wait, add_node(graph, OpKind::swap_wait, {x, h}, NoAttrs{},
                                                  value.name + ".swap_wait", value.role));
    for (const SwapIn& group : p.ins) {
      MEMFIT_ASSIGN_OR_RETURN(NodeId in, add_node(graph, OpKind::to_device, {h}, NoAttrs{},
                                                  value.name + ".to_device", value.role));
      const ValueId back = graph.node(in).outputs[0];
      graph.value(back).layout = value.layout;
      for (int32_t r : group.readers) replace[static_cast<size_t>(r)].emplace_back(x, back);
      ins_at[static_cast<size_t>(group.at)].push_back(in);
      ++counted.swap_ins;
    }
    outs_at[static_cast<size_t>(p.swap_out)].push_back(out);
    waits_at[static_cast<size_t>(p.wait)].push_back(wait);
    ++counted.swapped_values;
    counted.swapped_bytes += p.c.bytes;
  }
  std::vector<NodeId> order;
  order.reserve(graph.num_nodes());
  for (size_t k = 0; k <= num_nodes; ++k) {
    for (const auto* list : {&outs_at[k], &waits_at[k], &ins_at[k]}) {
      order.insert(order.end(), list->begin(), list->end());
    }
    if (k == num_nodes) break;
    Node& node = graph.node(NodeId(static_cast<int32_t>(k)));
    for (const auto& [x, back] : replace[k]) {
      for (ValueId& in : node.inputs) {
        if (in == x) in = back;
      }
    }
    order.push_back(NodeId(static_cast<int32_t>(k)));
  }
  graph = rebuild_graph(graph, order);
  if (stats) *stats = counted;
  return true;
}

}  // namespace memfit
