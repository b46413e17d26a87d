// Planning a training step for `memfit plan`: the step graph training builds,
// the bytes the backend would allocate for it, the memory plan, and the live
// bytes of every step of the schedule.
#include <algorithm>
#include <cctype>
#include <limits>

#include "train/plan_report.h"

#include "memory/planner.h"
#include "ir/phase.h"
#include "passes/step_time.h"
#include "step/step_budget.h"

namespace memfit {
namespace {

// The device slice bytes live at each step, as the planner counts them: a workspace
// at its node, and the values of an in-place chain (each written over the one
// before it, sharing its slice) once, from the first value's definition to
// the last read of any of them.
std::vector<size_t> live_bytes_per_step(const Graph& graph, const MemoryPlan& plan) {
  // The first value of each value's chain; inplace_of points back along it.
  std::vector<int32_t> chain(graph.num_values(), -1);
  std::vector<size_t> path;
  for (size_t v = 0; v < graph.num_values(); ++v) {
    size_t u = v;
    for (path.clear(); chain[u] < 0 && plan.inplace_of[u].valid(); u = plan.inplace_of[u].idx()) {
      path.push_back(u);
    }
    const int32_t first = chain[u] >= 0 ? chain[u] : static_cast<int32_t>(u);
    chain[u] = first;
    for (size_t p : path) chain[p] = first;
  }
  std::vector<Interval> chain_live(graph.num_values(), Interval{0, -1});  // by first value
  for (size_t v = 0; v < graph.num_values(); ++v) {
    const auto first = static_cast<size_t>(chain[v]);
    chain_live[first].def = plan.value_live[first].def;
    chain_live[first].last = std::max(chain_live[first].last, plan.value_live[v].last);
  }
  const auto steps = static_cast<int32_t>(graph.num_nodes());
  std::vector<int64_t> delta(graph.num_nodes() + 1, 0);  // change of the live bytes at each step
  for (size_t v = 0; v < graph.num_values(); ++v) {
    if (chain[v] != static_cast<int32_t>(v) || plan.value_slices[v].pool != Pool::device) continue;
    const int32_t first = std::max(chain_live[v].def, 0);
    const int32_t last = std::min(chain_live[v].last, steps - 1);
    if (first > last) continue;
    const auto bytes = static_cast<int64_t>(plan.value_slices[v].bytes);
    delta[static_cast<size_t>(first)] += bytes;
    delta[static_cast<size_t>(last) + 1] -= bytes;
  }
  std::vector<size_t> live(graph.num_nodes());
  int64_t now = 0;
  for (size_t n = 0; n < live.size(); ++n) {
    now += delta[n];
    live[n] = static_cast<size_t>(now) + plan.workspace_slices[n].bytes;
  }
  return live;
}

}  // namespace

Result<PlanReport> plan_training_step(const PlanRequest& request) {
  MEMFIT_ASSIGN_OR_RETURN(CompiledStep step,
                          compile_step(request.step, StepBuild{.dump_graphs = request.dump_graphs}));
  MEMFIT_RETURN_IF_ERROR(check_step_budget(step));
  return plan_report(step);
}

PlanReport plan_report(const CompiledStep& step) {
  const RecomputeSummary& summary = step.passes.recompute;
  const SwapSummary& swap = step.passes.swap;
  const AutoSummary& automatic = step.passes.automatic;
  const Graph& g = step.apply->graph();
  const MemoryPlan& plan = step.apply->plan();
  PlanReport report;
  report.backend = std::string(step.backend->name());
  report.isa = step.backend->isa();
  report.threads = step.backend->threads();
  if (step.passes.layouts.blocked_values > 0) report.layout = layout_name(step.backend->blocked_layout());
  report.blocked_values = step.passes.layouts.blocked_values;
  report.weight_values = step.passes.layouts.weight_values;
  report.weight_layout = layout_name(step.passes.layouts.weights);
  report.reorders = step.passes.layouts.reorders;
  report.techniques = step.techniques;
  report.arena_bytes = plan.arena_bytes;
  report.host_bytes = plan.host_bytes;
  report.lower_bound_bytes = plan.lower_bound_bytes;
  report.no_sharing_bytes = plan.no_sharing_bytes;
  report.by_role = plan.by_role;
  report.num_nodes = g.num_nodes();
  report.checkpoint_candidates = summary.candidates;
  report.checkpoints = summary.checkpoints;
  report.checkpoint_levels = summary.levels;
  report.recomputed_nodes = summary.recomputed_nodes;
  report.swap_candidates = swap.candidates;
  report.swapped_values = swap.swapped_values;
  report.swapped_bytes = swap.swapped_bytes;
  report.swap_waits_in_order = swap.waits_in_order;
  report.recomputed_values = automatic.recomputed_values;
  report.auto_choice = automatic.choice;
  report.swap_ins = swap.swap_ins;
  report.branch_swaps = swap.branch_swaps;
  report.trigger_fallbacks = swap.trigger_fallbacks;
  // Compute nodes take the cost model's seconds; copies take bytes over the
  // link on their own stream.
  // Sums over the ranks take their wire bytes over the network on a third.
  const CommPrediction predicted = predict_comm(
      g, predicted_node_seconds(g, step_machine(step.seconds, step.spec.link_gbps)),
      step.spec.comm_gbps * 1e9);
  report.predicted_step_seconds = predicted.step_seconds;
  report.ranks = step.spec.ranks;
  report.buckets = step.passes.all_reduce.buckets;
  report.reduced_bytes = step.passes.all_reduce.bytes;
  report.largest_bucket_bytes = step.passes.all_reduce.largest_bucket;
  report.predicted_comm_seconds = predicted.comm_seconds;
  report.predicted_exposed_comm_seconds = predicted.exposed_seconds;
  // Without clones the difference is only rounding (the schedule may sum in another order).
  report.predicted_recompute_seconds =
      summary.recomputed_nodes == 0
          ? 0.0
          : std::max(0.0, graph_seconds(g, step.seconds, true) - step.forward_seconds);
  report.peak_step = plan.peak_step;
  report.algorithm = plan.algorithm;
  const std::vector<size_t> live = live_bytes_per_step(g, plan);
  for (size_t n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.nodes()[n];
    report.timeline.push_back(
        TimelinePoint{static_cast<int32_t>(n), node.name, node_phase(g, node), live[n]});
  }
  return report;
}

}  // namespace memfit
