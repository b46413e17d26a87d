#include "passes/swap_tflms.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/check.h"
#include "ir/phase.h"

namespace memfit {
namespace {

struct Candidate {
  ValueId value;
  int32_t producer = 0;
  int32_t swap_after = 0;  // F
  bool branch = false;
};

// What every candidate's triggers are read from.
struct Context {
  const Graph& graph;
  const TflmsOptions& options;
  int32_t start = 0;                            // S
  std::vector<bool> forward;                    // per node: a forward node before S
  std::vector<std::vector<int32_t>> readers;    // per value: ascending, once each
  std::vector<std::vector<int32_t>> gradients;  // per forward node: its gradient nodes, ascending
};

// gradients[f]: nodes at or after S named `<name of f>.grad.<...>`.
std::vector<std::vector<int32_t>> gradient_nodes(const Graph& graph, int32_t start,
                                                 const std::vector<bool>& forward) {
  std::unordered_map<std::string, int32_t> forward_by_name;
  for (int32_t n = 0; n < start; ++n) {
    if (forward[static_cast<size_t>(n)]) forward_by_name.emplace(graph.nodes()[n].name, n);
  }
  std::vector<std::vector<int32_t>> result(graph.num_nodes());
  static constexpr std::string_view kGrad = ".grad.";
  for (auto n = static_cast<size_t>(start); n < graph.num_nodes(); ++n) {
    const std::string& name = graph.nodes()[n].name;
    for (size_t at = name.find(kGrad); at != std::string::npos; at = name.find(kGrad, at + 1)) {
      auto it = forward_by_name.find(name.substr(0, at));
      if (it == forward_by_name.end()) continue;
      result[static_cast<size_t>(it->second)].push_back(static_cast<int32_t>(n));
      break;
    }
  }
  return result;
}

// The gradient nodes, ascending, of the forward nodes exactly `hops` forward
// data edges downstream of `node` (each node counted at its shortest
// distance). Only the nodes reached are visited.
std::vector<int32_t> downstream_gradients(const Context& ctx, int32_t node, int64_t hops) {
  std::unordered_set<int32_t> seen = {node};
  std::vector<int32_t> frontier = {node};
  for (int64_t h = 0; h < hops && !frontier.empty(); ++h) {
    std::vector<int32_t> next;
    for (int32_t f : frontier) {
      for (ValueId out : ctx.graph.nodes()[f].outputs) {
        for (int32_t r : ctx.readers[out.idx()]) {
          if (ctx.forward[static_cast<size_t>(r)] && seen.insert(r).second) next.push_back(r);
        }
      }
    }
    frontier = std::move(next);
  }
  std::vector<int32_t> result;
  for (int32_t f : frontier) {
    const auto& g = ctx.gradients[static_cast<size_t>(f)];
    result.insert(result.end(), g.begin(), g.end());
  }
  std::sort(result.begin(), result.end());
  return result;
}

// Stage 2 for reader c of candidate x: the trigger node, or -1. `gradients`:
// chain_rule's gradient nodes of the ops lb hops downstream of x's producer.
// `fallback` is set when chain_rule found none and direct order did.
int32_t trigger_of(const Context& ctx, const Candidate& x, const std::vector<int32_t>& gradients,
                   int32_t c, bool* fallback) {
  const int64_t lb = ctx.options.lb, ub = ctx.options.ub;
  const bool backward = c >= ctx.start;
  const int32_t lowest = backward ? std::max(ctx.start, x.swap_after + 1) : x.swap_after + 1;
  const bool chain_rule = backward && ctx.options.trigger == TflmsTrigger::chain_rule;
  if (chain_rule) {
    // The latest gradient node at distance lb or more...
    auto it = std::upper_bound(gradients.begin(), gradients.end(), static_cast<int64_t>(c) - lb);
    if (it != gradients.begin()) {
      const int32_t g = *std::prev(it);
      // ...if it is valid and within ub.
      if (g >= lowest && c - g <= ub) return g;
    }
  }
  // Direct order: the distance walks from lb to ub; the first t = c - d that
  // is not below `lowest` is valid, and only d = lb can be the first.
  const int64_t t = static_cast<int64_t>(c) - lb;
  if (t < lowest) return -1;
  if (chain_rule) *fallback = true;
  return static_cast<int32_t>(t);
}

}  // namespace

TflmsChoice tflms_placements(const Graph& graph, const std::vector<size_t>& value_bytes,
                             const TflmsOptions& options) {
  MEMFIT_CHECK(value_bytes.size() == graph.num_values());
  MEMFIT_CHECK(options.lb >= 1 && options.ub >= options.lb);
  Context ctx{graph, options, swap_backward_start(graph), {}, {}, {}};
  ctx.forward.assign(graph.num_nodes(), false);
  for (int32_t n = 0; n < ctx.start; ++n) {
    ctx.forward[static_cast<size_t>(n)] = node_phase(graph, graph.nodes()[n]) == Phase::forward;
  }
  ctx.readers.resize(graph.num_values());
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    for (ValueId in : graph.nodes()[n].inputs) {
      auto& list = ctx.readers[in.idx()];
      if (list.empty() || list.back() != static_cast<int32_t>(n)) {
        list.push_back(static_cast<int32_t>(n));
      }
    }
  }
  if (options.trigger == TflmsTrigger::chain_rule) {
    ctx.gradients = gradient_nodes(graph, ctx.start, ctx.forward);
  }

  // Stage 1, in value order; producers are sorted below.
  std::vector<bool> kept(graph.num_values(), false);
  for (ValueId v : graph.outputs()) kept[v.idx()] = true;
  for (const StateUpdate& u : graph.updates()) kept[u.next.idx()] = true;
  std::vector<Candidate> candidates;
  for (size_t v = 0; v < graph.num_values(); ++v) {
    const Value& value = graph.values()[v];
    if (!value.producer.valid() || !ctx.forward[value.producer.idx()] || kept[v] ||
        value_bytes[v] == 0) {
      continue;
    }
    Candidate c{ValueId(static_cast<int32_t>(v)), value.producer.index, value.producer.index};
    std::vector<int32_t> uses = {value.producer.index};  // u_0 and the forward readers
    bool read_backward = false;
    for (int32_t r : ctx.readers[v]) {
      if (r < ctx.start) {
        uses.push_back(r);
      } else {
        read_backward = true;
      }
    }
    if (options.branches) {
      for (size_t i = 0; i + 1 < uses.size() && !c.branch; ++i) {
        const int64_t gap = uses[i + 1] - uses[i];
        if (gap > options.branch_threshold && gap > options.lb) {
          c.branch = true;
          c.swap_after = uses[i];
        }
      }
    }
    if (!c.branch && !read_backward) continue;
    if (!c.branch) c.swap_after = uses.back();
    candidates.push_back(c);
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.producer < b.producer || (a.producer == b.producer && a.value < b.value);
  });

  TflmsChoice choice;
  choice.candidates = candidates.size();
  for (const Candidate& x : candidates) {
    if (options.n_tensors >= 0 && choice.swaps.size() >= static_cast<size_t>(options.n_tensors)) {
      break;
    }
    // Stage 2.
    const auto& all = ctx.readers[x.value.idx()];
    const std::vector<int32_t> after(std::upper_bound(all.begin(), all.end(), x.swap_after),
                                     all.end());
    const std::vector<int32_t> gradients = options.trigger == TflmsTrigger::chain_rule
                                               ? downstream_gradients(ctx, x.producer, options.lb)
                                               : std::vector<int32_t>{};
    std::vector<int32_t> triggers;
    size_t fallbacks = 0;
    for (int32_t c : after) {
      bool fallback = false;
      const int32_t t = trigger_of(ctx, x, gradients, c, &fallback);
      if (t < 0) break;
      triggers.push_back(t);
      fallbacks += fallback ? 1 : 0;
    }
    if (after.empty() || triggers.size() != after.size()) {
      ++choice.skipped;
      continue;
    }
    choice.fallbacks += fallbacks;
    // Stage 4.
    TflmsSwap swap;
    swap.branch = x.branch;
    swap.placement.value = x.value;
    swap.placement.swap_out = x.swap_after + 1;
    for (size_t j = 0; j < after.size(); ++j) {
      const int32_t c = after[j];
      if (options.fuse && !swap.triggers.empty()) {
        SwapIn& group = swap.placement.swap_ins.back();
        const int32_t first = group.readers.front();
        const bool same_side = (first >= ctx.start) == (c >= ctx.start);
        if (same_side && c - swap.triggers.back() <= options.ub) {
          group.readers.push_back(c);
          continue;
        }
      }
      swap.placement.swap_ins.push_back(SwapIn{triggers[j] + 1, {c}});
      swap.triggers.push_back(triggers[j]);
    }
    choice.swaps.push_back(std::move(swap));
  }
  return choice;
}

}  // namespace memfit
