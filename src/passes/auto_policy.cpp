#include "passes/auto_policy.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <unordered_set>

#include "ir/phase.h"
#include "passes/recompute.h"
#include "passes/recompute_optimal.h"
#include "passes/recompute_policy.h"
#include "passes/step_time.h"
#include "passes/swap.h"

namespace memfit {
namespace {

enum class Technique : uint8_t { recompute, swap };

struct Ranked {
  SwapCandidate candidate;
  Technique technique = Technique::swap;
};

// A plan that was tried: its graph in the executor's order, arena and time.
struct Trial {
  Graph graph;
  AutoSummary summary;
};

class AutoSearch {
 public:
  explicit AutoSearch(const PolicyContext& context)
      : context_(context), machine_(step_machine(context.seconds, context.link_gbps)) {}

  // `graph` planned in the executor's order, with its arena and predicted time.
  Result<Trial> finish(Graph graph, AutoSummary summary) const {
    MEMFIT_ASSIGN_OR_RETURN(PlannedGraph prepared, context_.plan(std::move(graph)));
    Trial trial{std::move(prepared.graph), std::move(summary)};
    trial.summary.arena_bytes = prepared.plan.arena_bytes;
    trial.summary.predicted_step_seconds = predicted_step_seconds(
        trial.graph, predicted_node_seconds(trial.graph, machine_));
    return trial;
  }

  bool fits(const Trial& trial) const { return trial.summary.arena_bytes <= context_.budget; }

  // Stage 2: the ranking of `ordered`'s candidates with their techniques.
  std::vector<Ranked> rank(const Graph& ordered, const std::vector<size_t>& value_bytes,
                           double link_share) const {
    const std::vector<double> node_seconds = predicted_node_seconds(ordered, machine_);
    std::vector<Ranked> ranked;
    for (const SwapCandidate& c : swap_candidates(ordered, value_bytes, node_seconds)) {
      ranked.push_back(Ranked{c, Technique::swap});
    }
    // The forward pass's compute seconds: the swap-outs' copies must fit in
    // it to free their memory before the backward pass.
    size_t backward_start = ordered.num_nodes();
    for (const Ranked& r : ranked) {
      backward_start = std::min(backward_start, static_cast<size_t>(r.candidate.first_backward_use));
    }
    double forward = 0;
    for (size_t n = 0; n < backward_start; ++n) forward += node_seconds[n];
    const auto round_trip = [&](const SwapCandidate& c) {
      return 2.0 * static_cast<double>(c.bytes) / machine_.link_bytes_per_second;
    };
    // Only forward nodes are cloned (the backward pass's own values, such as
    // the loss gradient's fill, can only be swapped).
    const auto recompute_cost = [&](const SwapCandidate& c) {
      const Node& producer = ordered.node(ordered.value(c.value).producer);
      return node_phase(ordered, producer) == Phase::forward
                 ? node_seconds[ordered.value(c.value).producer.idx()]
                 : std::numeric_limits<double>::infinity();
    };
    const auto base_cost = [&](const SwapCandidate& c) {
      return std::min(std::max(0.0, round_trip(c) - c.idle_seconds), recompute_cost(c));
    };
    std::stable_sort(ranked.begin(), ranked.end(), [&](const Ranked& a, const Ranked& b) {
      const double ca = base_cost(a.candidate) / static_cast<double>(a.candidate.bytes);
      const double cb = base_cost(b.candidate) / static_cast<double>(b.candidate.bytes);
      return ca < cb || (ca == cb && a.candidate.bytes > b.candidate.bytes);
    });
    double link_used = 0;  // copy-out seconds of the swaps chosen so far
    for (Ranked& r : ranked) {
      const double trip = round_trip(r.candidate);
      const double swap_cost = link_used + trip / 2 <= link_share * forward
                                   ? std::max(0.0, trip - r.candidate.idle_seconds)
                                   : trip;
      if (swap_cost <= recompute_cost(r.candidate)) {
        r.technique = Technique::swap;
        link_used += trip / 2;
      } else {
        r.technique = Technique::recompute;
      }
    }
    return ranked;
  }

  // Stage 3: the first `count` of `ranked` evicted from `ordered`.
  Result<Trial> per_tensor(const Graph& ordered, const std::vector<Ranked>& ranked,
                           size_t count) const {
    AutoSummary summary;
    summary.choice = kPerTensorChoice;
    summary.candidates = ranked.size();
    std::unordered_set<int32_t> dropped;
    std::unordered_set<std::string> to_swap;
    for (size_t i = 0; i < count; ++i) {
      if (ranked[i].technique == Technique::recompute) {
        dropped.insert(ranked[i].candidate.value.index);
      } else {
        to_swap.insert(ordered.value(ranked[i].candidate.value).name);
      }
    }
    Graph graph = ordered;
    if (!dropped.empty()) {
      RecomputeOptions options;
      for (const Ranked& r : ranked) {
        const Node& producer = graph.node(graph.value(r.candidate.value).producer);
        if (!dropped.contains(r.candidate.value.index) &&
            node_phase(graph, producer) == Phase::forward) {
          options.keep.push_back(r.candidate.value);
        }
      }
      RecomputeStats stats;
      MEMFIT_RETURN_IF_ERROR(recompute(graph, options, &stats).status());
      summary.recomputed_values = dropped.size();
      summary.recompute.candidates = ranked.size();
      summary.recompute.checkpoints = options.keep.size();
      summary.recompute.recomputed_nodes = stats.recomputed_nodes;
    }
    if (!to_swap.empty()) {
      MEMFIT_ASSIGN_OR_RETURN(PlannedGraph prepared, context_.plan(std::move(graph)));
      graph = std::move(prepared.graph);
      SwapOptions options;
      options.value_bytes = std::move(prepared.value_bytes);
      options.node_seconds = predicted_node_seconds(graph, machine_);
      options.link_bytes_per_second = machine_.link_bytes_per_second;
      for (const SwapCandidate& c :
           swap_candidates(graph, options.value_bytes, options.node_seconds)) {
        if (to_swap.contains(graph.value(c.value).name)) options.values.push_back(c.value);
      }
      SwapStats stats;
      MEMFIT_RETURN_IF_ERROR(swap(graph, options, &stats).status());
      summary.swap.candidates = ranked.size();
      summary.swap.swapped_values = stats.swapped_values;
      summary.swap.swapped_bytes = stats.swapped_bytes;
      summary.swap.prefetched_nodes = stats.prefetched_nodes;
    }
    return finish(std::move(graph), std::move(summary));
  }

  const PolicyContext& context() const { return context_; }

 private:
  const PolicyContext& context_;
  StepMachine machine_;
};

// The better of two trials: one that fits over one that does not; then the
// least predicted time (fitting) or the smaller arena (not fitting).
bool better(const AutoSearch& search, const Trial& a, const Trial& b) {
  const bool fa = search.fits(a), fb = search.fits(b);
  if (fa != fb) return fa;
  if (fa && a.summary.predicted_step_seconds != b.summary.predicted_step_seconds) {
    return a.summary.predicted_step_seconds < b.summary.predicted_step_seconds;
  }
  return a.summary.arena_bytes < b.summary.arena_bytes;
}

}  // namespace

Result<AutoGraph> auto_step_graph(Graph step, const PolicyContext& context) {
  const AutoSearch search(context);
  // Stage 1.
  MEMFIT_ASSIGN_OR_RETURN(PlannedGraph prepared, context.plan(step));
  if (context.budget == 0 || prepared.plan.arena_bytes <= context.budget) {
    AutoSummary summary;
    summary.choice = "keep";
    summary.arena_bytes = prepared.plan.arena_bytes;
    return AutoGraph{std::move(step), std::move(summary)};
  }
  const Graph& ordered = prepared.graph;

  // Stages 2 and 3, for each share of the forward pass's link time.
  std::optional<Trial> best;
  size_t candidates = 0;
  for (const double link_share : {1.0, 0.5, 0.25, 0.0}) {
    const std::vector<Ranked> ranked =
        search.rank(ordered, prepared.value_bytes, link_share);
    candidates = ranked.size();
    MEMFIT_ASSIGN_OR_RETURN(Trial all, search.per_tensor(ordered, ranked, ranked.size()));
    if (search.fits(all)) {
      size_t low = 1, high = ranked.size();  // per_tensor(high) fits
      while (low < high) {
        const size_t mid = low + (high - low) / 2;
        MEMFIT_ASSIGN_OR_RETURN(Trial trial, search.per_tensor(ordered, ranked, mid));
        if (search.fits(trial)) {
          high = mid;
          all = std::move(trial);
        } else {
          low = mid + 1;
        }
      }
    }
    if (!best || better(search, all, *best)) best = std::move(all);
  }

  // Stage 4.
  const ArenaOf arena_of = context.arena_of();
  for (const Recompute strategy : {Recompute::budget, Recompute::optimal}) {
    for (const bool mirror : {false, true}) {
      MEMFIT_ASSIGN_OR_RETURN(RecomputedGraph recomputed,
                              apply_recompute_costed(step, strategy, context.budget, arena_of,
                                                     RecomputeCost{context.seconds, 0}, mirror));
      AutoSummary summary;
      summary.choice = std::string(strategy == Recompute::budget ? "recompute" : "optimal") +
                       (mirror ? "+mirror" : "");
      summary.recompute = recomputed.summary;
      MEMFIT_ASSIGN_OR_RETURN(Trial trial,
                              search.finish(std::move(recomputed.graph), std::move(summary)));
      if (better(search, trial, *best)) best = std::move(trial);
    }
  }
  for (const bool mirror : {false, true}) {
    RecomputedGraph mirrored{step, {}};
    if (mirror) {
      MEMFIT_ASSIGN_OR_RETURN(mirrored, apply_recompute_costed(step, Recompute::none, 0, arena_of,
                                                               RecomputeCost{context.seconds, 0}, true));
    }
    MEMFIT_ASSIGN_OR_RETURN(SwappedGraph swapped,
                            swap_step_graph(std::move(mirrored.graph), Swap::budget, context));
    AutoSummary summary;
    summary.choice = mirror ? "mirror+swap" : "swap";
    summary.recompute = mirrored.summary;
    summary.swap = swapped.summary;
    MEMFIT_ASSIGN_OR_RETURN(Trial trial,
                            search.finish(std::move(swapped.graph), std::move(summary)));
    if (better(search, trial, *best)) best = std::move(trial);
  }
  best->summary.candidates = candidates;
  return AutoGraph{std::move(best->graph), std::move(best->summary)};
}

std::string auto_recomputed_text(std::string_view choice, size_t values, size_t nodes) {
  const std::string in_nodes = std::to_string(nodes) + (nodes == 1 ? " node" : " nodes");
  if (choice != kPerTensorChoice) return in_nodes;
  return std::to_string(values) + (values == 1 ? " value in " : " values in ") + in_nodes;
}

}  // namespace memfit
