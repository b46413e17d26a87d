#include "passes/swap_policy.h"

#include <algorithm>

#include "passes/step_time.h"
#include "passes/swap.h"
#include "passes/swap_tflms.h"

namespace memfit {

Status check_tflms_options(const TflmsOptions& options) {
  if (options.n_tensors < -1) {
    return Status::error("--swap-n-tensors must be -1 (all) or a count of at least 0, not " +
                         std::to_string(options.n_tensors));
  }
  if (options.lb < 1) {
    return Status::error(
        "--swap-lb must be at least 1 (a swap-in starts before its consumer), not " +
        std::to_string(options.lb));
  }
  if (options.ub < options.lb) {
    return Status::error("--swap-ub (" + std::to_string(options.ub) +
                         ") must be at least --swap-lb (" + std::to_string(options.lb) + ")");
  }
  if (options.branch_threshold < 0) {
    return Status::error("--swap-branch-threshold must be at least 0 (0: any distance), not " +
                         std::to_string(options.branch_threshold));
  }
  return Status::ok();
}

std::string tflms_options_text(const TflmsOptions& o) {
  std::string text = "n_tensors " + std::to_string(o.n_tensors) + ", lb " + std::to_string(o.lb) +
                     ", ub " + std::to_string(o.ub) + ", " +
                     std::string(name_of(o.trigger)) + ", fuse " +
                     (o.fuse ? "on" : "off") + ", branches ";
  if (!o.branches) return text + "off";
  return text + "on (threshold " + std::to_string(o.branch_threshold) + ")";
}

namespace {

// What the swap pass reported, into the policy's summary.
void add_swap_stats(const SwapStats& stats, SwapSummary& summary) {
  summary.swapped_values = stats.swapped_values;
  summary.swapped_bytes = stats.swapped_bytes;
  summary.prefetched_nodes = stats.prefetched_nodes;
  summary.swap_ins = stats.swap_ins;
}

}  // namespace

Result<double> predict_step_seconds(const Graph& graph, const PolicyContext& context) {
  MEMFIT_ASSIGN_OR_RETURN(PlannedGraph planned, context.plan(graph));
  const Graph& g = planned.graph;
  return predicted_step_seconds(
      g, predicted_node_seconds(g, step_machine(context.seconds, context.link_gbps)));
}

Result<SwappedGraph> swap_step_graph(Graph step, Swap policy, const PolicyContext& context,
                                     const TflmsOptions& tflms) {
  SwappedGraph result;
  if (policy != Swap::tflms && !(tflms == TflmsOptions{})) {
    return Status::error(
        "the TFLMS options (--swap-n-tensors, --swap-lb, --swap-ub, --swap-trigger, --swap-fuse, "
        "--swap-branches, --swap-branch-threshold) apply only to --swap tflms; add it or drop "
        "them");
  }
  MEMFIT_RETURN_IF_ERROR(check_tflms_options(tflms));
  if (policy == Swap::none) {
    result.graph = std::move(step);
    return result;
  }
  MEMFIT_ASSIGN_OR_RETURN(PlannedGraph prepared, context.plan(std::move(step)));
  const Graph& ordered = prepared.graph;
  const StepMachine machine = step_machine(context.seconds, context.link_gbps);
  SwapOptions options;
  options.value_bytes = prepared.value_bytes;
  options.node_seconds = predicted_node_seconds(ordered, machine);
  options.link_bytes_per_second = machine.link_bytes_per_second;
  std::vector<SwapCandidate> candidates =
      swap_candidates(ordered, options.value_bytes, options.node_seconds);
  result.summary.candidates = candidates.size();

  bool in_order = false;  // the budget policy's waits (SwapOptions::waits_in_order)
  auto swapped_with = [&](size_t count, SwapStats* stats) -> Result<Graph> {
    SwapOptions chosen = options;
    chosen.waits_in_order = in_order;
    for (size_t i = 0; i < count; ++i) chosen.values.push_back(candidates[i].value);
    Graph graph = ordered;
    MEMFIT_RETURN_IF_ERROR(swap(graph, chosen, stats).status());
    return graph;
  };
  size_t count = 0;
  if (policy == Swap::tflms) {
    const TflmsChoice choice = tflms_placements(ordered, options.value_bytes, tflms);
    SwapOptions placed = options;
    for (const TflmsSwap& s : choice.swaps) {
      placed.placements.push_back(s.placement);
      result.summary.branch_swaps += s.branch ? 1 : 0;
    }
    result.summary.candidates = choice.candidates;
    result.summary.trigger_fallbacks = choice.fallbacks;
    SwapStats stats;
    result.graph = ordered;
    MEMFIT_RETURN_IF_ERROR(swap(result.graph, placed, &stats).status());
    if (context.budget > 0) {
      // Over the budget with the copies timed, compute may wait for them
      // instead (where the link is slower than compute).
      MEMFIT_ASSIGN_OR_RETURN(PlannedGraph timed, context.plan(result.graph));
      if (timed.plan.arena_bytes > context.budget) {
        placed.waits_in_order = true;
        Graph in_order = ordered;
        SwapStats in_order_stats;
        MEMFIT_RETURN_IF_ERROR(swap(in_order, placed, &in_order_stats).status());
        MEMFIT_ASSIGN_OR_RETURN(PlannedGraph waited, context.plan(in_order));
        if (waited.plan.arena_bytes < timed.plan.arena_bytes) {
          result.graph = std::move(in_order);
          stats = in_order_stats;
          result.summary.waits_in_order = true;
        }
      }
    }
    add_swap_stats(stats, result.summary);
    return result;
  }
  if (policy == Swap::refcount) {
    const int32_t peak = prepared.plan.peak_step;
    std::erase_if(candidates, [&](const SwapCandidate& c) {
      const double round_trip = 2.0 * static_cast<double>(c.bytes) / machine.link_bytes_per_second;
      return !c.covers(peak) || c.idle_seconds < round_trip;
    });
    count = candidates.size();
  } else {
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const SwapCandidate& a, const SwapCandidate& b) {
                       return static_cast<double>(a.bytes) * a.idle_seconds >
                              static_cast<double>(b.bytes) * b.idle_seconds;
                     });
    count = candidates.size();
    const size_t budget = context.budget;
    if (budget > 0 && prepared.plan.arena_bytes <= budget) {
      count = 0;
    } else if (budget > 0) {
      auto arena_of = [&](size_t k) -> Result<size_t> {
        MEMFIT_ASSIGN_OR_RETURN(Graph graph, swapped_with(k, nullptr));
        MEMFIT_ASSIGN_OR_RETURN(PlannedGraph planned, context.plan(std::move(graph)));
        return planned.plan.arena_bytes;
      };
      // Bisection for the shortest fitting prefix; `best` keeps the smallest arena seen.
      MEMFIT_ASSIGN_OR_RETURN(size_t best_arena, arena_of(count));
      if (best_arena > budget) {
        // Every candidate, timed, does not fit: compute waits for the copies.
        in_order = true;
        MEMFIT_ASSIGN_OR_RETURN(const size_t waited, arena_of(count));
        in_order = waited < best_arena;
        best_arena = std::min(best_arena, waited);
      }
      size_t best = count;
      if (best_arena <= budget) {
        size_t low = 1, high = count;  // arena_of(high) fits
        while (low < high) {
          const size_t mid = low + (high - low) / 2;
          MEMFIT_ASSIGN_OR_RETURN(size_t arena, arena_of(mid));
          if (arena <= budget) {
            high = mid;
          } else {
            low = mid + 1;
          }
        }
        best = high;
      }
      count = best;
    }
  }
  SwapStats stats;
  MEMFIT_ASSIGN_OR_RETURN(result.graph, swapped_with(count, &stats));
  result.summary.waits_in_order = in_order;
  add_swap_stats(stats, result.summary);
  return result;
}

}  // namespace memfit
