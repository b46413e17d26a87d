#include "passes/recompute_strategy.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <optional>
#include <set>
#include <unordered_set>
#include <utility>

#include "ir/phase.h"
#include "passes/recompute.h"
#include "passes/recompute_policy.h"

namespace memfit {

namespace {

std::vector<NodeId> forward_nodes(const Graph& graph) {
  std::vector<NodeId> nodes;
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    if (node_phase(graph, graph.nodes()[n]) == Phase::forward) {
      nodes.push_back(NodeId(static_cast<int32_t>(n)));
    }
  }
  return nodes;
}

}  // namespace

std::vector<Cut> checkpoint_candidates(const Graph& graph, size_t max_values) {
  const std::vector<NodeId> forward = forward_nodes(graph);
  // The position (among the forward nodes) of each value's last forward reader; -1: none.
  std::vector<int64_t> last_read(graph.num_values(), -1);
  for (size_t i = 0; i < forward.size(); ++i) {
    for (ValueId in : graph.node(forward[i]).inputs) last_read[in.idx()] = static_cast<int64_t>(i);
  }
  // Stages 1-2. `open`: the values made by forward nodes so far that a later
  // forward node reads, as (position of the producer, id): the first is the
  // oldest, so freshness is one comparison.
  std::set<std::pair<int64_t, int32_t>> open;
  std::vector<int64_t> made(graph.num_values(), -1);
  std::vector<Cut> found;
  int64_t last_boundary = -1;
  for (size_t i = 0; i < forward.size(); ++i) {
    const Node& node = graph.node(forward[i]);
    const auto here = static_cast<int64_t>(i);
    for (ValueId in : node.inputs) {
      if (made[in.idx()] >= 0 && last_read[in.idx()] == here)
        open.erase({made[in.idx()], in.index});
    }
    bool opened = false;
    for (ValueId out : node.outputs) {
      made[out.idx()] = here;
      if (last_read[out.idx()] <= here) continue;
      open.insert({here, out.index});
      opened = true;
    }
    if (!opened || open.size() > max_values || open.begin()->first <= last_boundary) continue;
    Cut cut{forward[i], {}};
    for (const auto& [position, id] : open) cut.values.push_back(ValueId(id));
    found.push_back(std::move(cut));
    last_boundary = here;
  }
  // Stage 3: runs of multi-value cuts between single-value ones; a run of one is left out.
  std::vector<Cut> candidates;
  for (size_t i = 0; i < found.size();) {
    size_t j = i + 1;
    if (found[i].values.size() > 1) {
      while (j < found.size() && found[j].values.size() > 1) ++j;
      if (j - i == 1) {
        i = j;
        continue;
      }
    }
    for (; i < j; ++i) candidates.push_back(std::move(found[i]));
  }
  return candidates;
}

std::vector<ValueId> cut_values(const std::vector<Cut>& cuts) {
  std::vector<ValueId> values;
  for (const Cut& cut : cuts) values.insert(values.end(), cut.values.begin(), cut.values.end());
  return values;
}

std::vector<ValueId> sqrt_checkpoints(const std::vector<Cut>& candidates) {
  const auto n = static_cast<double>(candidates.size());
  const auto k = static_cast<size_t>(std::ceil(std::sqrt(n)));
  std::vector<ValueId> kept;
  for (size_t i = k; i >= 1 && i <= candidates.size(); i += k) {
    kept.insert(kept.end(), candidates[i - 1].values.begin(), candidates[i - 1].values.end());
  }
  return kept;
}

GreedyCheckpoints greedy_checkpoints(const Graph& graph, const std::vector<Cut>& candidates,
                                     size_t segment_bytes) {
  // trigger[v]: the candidate whose last value is v; -1: none.
  std::vector<int32_t> trigger(graph.num_values(), -1);
  for (size_t c = 0; c < candidates.size(); ++c) {
    trigger[candidates[c].values.back().idx()] = static_cast<int32_t>(c);
  }
  GreedyCheckpoints plan;
  size_t segment = 0;
  for (NodeId id : forward_nodes(graph)) {
    for (ValueId out : graph.node(id).outputs) {
      segment += graph.value(out).bytes();
      const int32_t c = trigger[out.idx()];
      if (c < 0 || segment <= segment_bytes) continue;
      for (ValueId v : candidates[static_cast<size_t>(c)].values) {
        plan.checkpoints.push_back(v);
        plan.kept_bytes += graph.value(v).bytes();
      }
      plan.largest_segment = std::max(plan.largest_segment, segment);
      segment = 0;
    }
  }
  plan.largest_segment = std::max(plan.largest_segment, segment);
  return plan;
}

NestedCheckpoints recursive_checkpoints(const std::vector<Cut>& candidates) {
  NestedCheckpoints nested;
  // Pieces (lo, hi): candidates lo + 1 .. hi - 1 (1-based) are inside, at
  // `level`; 0 and n + 1 stand for the start and the end of the forward pass.
  struct Piece {
    size_t lo, hi, level;
  };
  // First in, first out: level by level, each in the forward order.
  std::deque<Piece> pieces{{0, candidates.size() + 1, 0}};
  while (!pieces.empty()) {
    const Piece p = pieces.front();
    pieces.pop_front();
    if (p.hi - p.lo < 2) continue;
    const size_t mid = (p.lo + p.hi) / 2;
    const std::vector<ValueId>& values = candidates[mid - 1].values;
    nested.segment_ends.push_back(values.back());
    if (p.level == 0) {
      nested.keep.insert(nested.keep.end(), values.begin(), values.end());
    } else {
      if (nested.levels.size() < p.level) nested.levels.resize(p.level);
      std::vector<ValueId>& level = nested.levels[p.level - 1];
      level.insert(level.end(), values.begin(), values.end());
    }
    pieces.push_back({p.lo, mid, p.level + 1});
    pieces.push_back({mid, p.hi, p.level + 1});
  }
  return nested;
}

size_t kept_cuts(const std::vector<Cut>& candidates, const RecomputeOptions& options) {
  std::unordered_set<uint32_t> kept;
  for (ValueId v : options.keep) kept.insert(v.idx());
  for (const std::vector<ValueId>& level : options.levels) {
    for (ValueId v : level) kept.insert(v.idx());
  }
  return static_cast<size_t>(std::count_if(candidates.begin(), candidates.end(), [&](const Cut& c) {
    return std::all_of(c.values.begin(), c.values.end(),
                       [&](ValueId v) { return kept.contains(v.idx()); });
  }));
}

namespace {

struct Trial {
  bool plain = false;  // the graph without recomputation
  std::vector<ValueId> checkpoints;
  RecomputedGraph result;
  size_t arena = 0;
};

Result<RecomputedGraph> rewrite(const Graph& graph, const std::vector<Cut>& candidates,
                                const RecomputeOptions& options) {
  RecomputedGraph out{
      graph, {candidates.size(), kept_cuts(candidates, options), 0, options.levels.size()}};
  RecomputeStats stats;
  MEMFIT_RETURN_IF_ERROR(recompute(out.graph, options, &stats).status());
  out.summary.recomputed_nodes = stats.recomputed_nodes;
  return out;
}

// The graph without recomputation; with mirror, only cheap ops recomputed.
Result<RecomputedGraph> plain_or_mirror(const Graph& graph, const std::vector<Cut>& candidates,
                                        bool mirror) {
  if (!mirror) return RecomputedGraph{graph, {candidates.size(), 0, 0, 0}};
  RecomputeOptions options;
  options.mirror = true;
  options.keep_others = true;
  return rewrite(graph, candidates, options);
}

RecomputeOptions checkpointed(std::vector<ValueId> keep, bool mirror) {
  RecomputeOptions options;
  options.keep = std::move(keep);
  options.mirror = mirror;
  return options;
}

// The budget strategy's search (see the header).
Result<RecomputedGraph> search_budget(Graph graph, const std::vector<Cut>& candidates,
                                      size_t memory_budget, const ArenaOf& arena_of, bool mirror) {
  std::vector<Trial> trials;
  auto evaluate = [&](const std::vector<ValueId>& checkpoints, bool plain) -> Status {
    for (const Trial& t : trials) {
      if (t.plain == plain && t.checkpoints == checkpoints) return Status::ok();
    }
    Trial trial;
    trial.plain = plain;
    if (plain) {
      MEMFIT_ASSIGN_OR_RETURN(trial.result, plain_or_mirror(graph, candidates, mirror));
    } else {
      MEMFIT_ASSIGN_OR_RETURN(trial.result,
                              rewrite(graph, candidates, checkpointed(checkpoints, mirror)));
      trial.checkpoints = checkpoints;
    }
    MEMFIT_ASSIGN_OR_RETURN(trial.arena, arena_of(trial.result.graph));
    trials.push_back(std::move(trial));
    return Status::ok();
  };
  MEMFIT_RETURN_IF_ERROR(evaluate({}, true));
  MEMFIT_RETURN_IF_ERROR(evaluate(sqrt_checkpoints(candidates), false));

  double threshold = 0;
  double smallest_segment = -1;
  for (int round = 0; round < 3; ++round) {
    const GreedyCheckpoints plan =
        greedy_checkpoints(graph, candidates, static_cast<size_t>(threshold));
    MEMFIT_RETURN_IF_ERROR(evaluate(plan.checkpoints, false));
    const auto largest = static_cast<double>(plan.largest_segment);
    if (smallest_segment < 0 || largest < smallest_segment) smallest_segment = largest;
    threshold = std::sqrt(static_cast<double>(plan.kept_bytes) * largest / 2);
  }
  constexpr int kSteps = 6;
  const double step = (threshold * std::sqrt(2.0) - smallest_segment) / kSteps;
  if (step > 0) {
    for (int k = 1; k <= kSteps; ++k) {
      const auto b = static_cast<size_t>(smallest_segment + k * step);
      MEMFIT_RETURN_IF_ERROR(evaluate(greedy_checkpoints(graph, candidates, b).checkpoints, false));
    }
  }

  auto better = [&](const Trial& a, const Trial& b) {
    const bool a_fits = memory_budget > 0 && a.arena <= memory_budget;
    const bool b_fits = memory_budget > 0 && b.arena <= memory_budget;
    const size_t a_nodes = a.result.summary.recomputed_nodes;
    const size_t b_nodes = b.result.summary.recomputed_nodes;
    if (a_fits != b_fits) return a_fits;
    if (a_fits && a_nodes != b_nodes) return a_nodes < b_nodes;
    if (a.arena != b.arena) return a.arena < b.arena;
    return a_nodes < b_nodes;
  };
  size_t best = 0;
  for (size_t t = 1; t < trials.size(); ++t) {
    if (better(trials[t], trials[best])) best = t;
  }
  return std::move(trials[best].result);
}

}  // namespace

Result<RecomputedGraph> apply_recompute(Graph graph, Recompute strategy, size_t memory_budget,
                                        const ArenaOf& arena_of, bool mirror) {
  if (strategy == Recompute::none && !mirror) return RecomputedGraph{std::move(graph), {}};
  // The cost-driven strategies, with the roofline cost model (src/passes/recompute_policy.h).
  if (strategy == Recompute::optimal || strategy == Recompute::milp)
    return apply_recompute_costed(std::move(graph), strategy, memory_budget, arena_of, {},
                                  mirror);
  const std::vector<Cut> candidates = checkpoint_candidates(graph);
  if (strategy == Recompute::none) return plain_or_mirror(graph, candidates, mirror);
  if (strategy == Recompute::sqrt)
    return rewrite(graph, candidates, checkpointed(sqrt_checkpoints(candidates), mirror));
  if (strategy == Recompute::recursive) {
    NestedCheckpoints nested = recursive_checkpoints(candidates);
    RecomputeOptions options = checkpointed(std::move(nested.keep), mirror);
    options.levels = std::move(nested.levels);
    options.segment_ends = std::move(nested.segment_ends);
    return rewrite(graph, candidates, options);
  }
  return search_budget(std::move(graph), candidates, memory_budget, arena_of, mirror);
}

}  // namespace memfit
