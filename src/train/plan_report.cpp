// Planning a training step for `memfit plan`: the step graph training builds,
// the bytes the backend would allocate for it, the memory plan, and the live
// bytes of every step of the schedule.
#include <algorithm>
#include <cctype>
#include <limits>

#include "ir/phase.h"
#include "memfit/plan.h"
#include "memory/planner.h"
#include "ops/op_table.h"
#include "passes/step_time.h"
#include "train/auto_step.h"
#include "train/swap_step.h"
#include "train/training_program.h"

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

// A step graph in the order it runs, its sizes and its plan.
BytesByRole public_roles(const RoleBytes& roles) {
  return BytesByRole{roles.parameters, roles.gradients, roles.optimizer_state, roles.activations,
                     roles.workspace};
}

// The step graph of `request`, after its recompute strategy, with the
// executor's own sizes, schedule and plan (no arena allocated, no budget
// check: the caller compares).
struct PlannedStep {
  RecomputeSummary summary;
  SwapSummary swap;
  AutoSummary auto_summary;       // --policy auto
  NodeSeconds seconds;            // the request's cost model
  double forward_seconds = 0;     // of the step before recomputation
  std::unique_ptr<Executable> prepared;
};

Result<PlannedStep> plan_step(const PlanRequest& request, const Backend& backend) {
  // The micro-batch that applies the update, as TrainingProgram::create builds it.
  const UpdateMode mode =
      request.accumulate == 1 ? UpdateMode::apply : UpdateMode::accumulate_and_apply;
  MEMFIT_ASSIGN_OR_RETURN(Graph graph, build_step_graph(request.model, request.accumulate,
                                                        request.optimizer, mode, nullptr));
  PlannedStep planned;
  planned.seconds = step_cost(graph, backend, request.cost);
  planned.forward_seconds = graph_seconds(graph, planned.seconds, true);
  // The budget strategy searches for the least recomputation under the budget.
  const ExecOptions exec{request.share, false, request.budget, request.link_gbps};
  const StepTechniques techniques{request.recompute,    request.mirror, request.cost,
                                  request.milp_seconds, request.swap,   request.auto_policy,
                                  request.tflms};
  MEMFIT_ASSIGN_OR_RETURN(RewrittenStep rewritten, rewrite_step_graph(std::move(graph), backend,
                                                                      exec, techniques,
                                                                      planned.seconds));
  planned.summary = rewritten.recompute;
  planned.swap = rewritten.swap;
  planned.auto_summary = std::move(rewritten.automatic);
  // The executor's own sizes, schedule and plan, without allocating the
  // arena; the caller compares it with the budget.
  MEMFIT_ASSIGN_OR_RETURN(
      planned.prepared,
      Executable::prepare(std::move(rewritten.graph), backend,
                          ExecOptions{request.share, false, 0, request.link_gbps}));
  return planned;
}

std::string strategy_flags(Recompute recompute, bool mirror, Swap swap) {
  return "--recompute " + std::string(recompute_name(recompute)) + (mirror ? " --mirror" : "") +
         (swap != Swap::none ? " --swap " + std::string(swap_name(swap)) : "");
}

std::string request_flags(const PlanRequest& request) {
  return request.auto_policy ? "--policy auto"
                             : strategy_flags(request.recompute, request.mirror, request.swap);
}

// The error for a plan of `arena` bytes over request.budget: every recompute
// strategy, with and without mirror, is planned (with the request's swap
// policy; under --policy auto, without swapping and with the budget swap
// policy), and the smallest arena any reaches is named (the smallest budget
// that can be met), with the flags that reach it.
Status over_budget(const PlanRequest& request, size_t arena, const Backend& backend) {
  const auto bytes = [](size_t b) { return human_bytes(b) + " (" + std::to_string(b) + " bytes)"; };
  size_t best = arena;
  std::string best_flags = request_flags(request);
  const std::vector<Swap> swaps =
      request.auto_policy ? std::vector<Swap>{Swap::none, Swap::budget} : std::vector{request.swap};
  // milp is left out of the search: it may take its whole time limit.
  for (const Swap swap : swaps) {
    for (const Recompute recompute : {Recompute::none, Recompute::sqrt, Recompute::budget,
                                      Recompute::recursive, Recompute::optimal}) {
      for (bool mirror : {false, true}) {
        if (!request.auto_policy && recompute == request.recompute && mirror == request.mirror) {
          continue;
        }
        PlanRequest other = request;
        other.auto_policy = false;
        other.recompute = recompute;
        other.mirror = mirror;
        other.swap = swap;
        auto planned = plan_step(other, backend);
        if (!planned) continue;
        const size_t other_arena = planned->prepared->plan().arena_bytes;
        if (other_arena < best) {
          best = other_arena;
          best_flags = strategy_flags(recompute, mirror, swap);
        }
      }
    }
  }
  std::string message = "the plan needs " + bytes(arena) + " with " + request_flags(request) +
                        ", over the budget of " + bytes(request.budget) +
                        "; the smallest arena this plan reaches is " + std::to_string(arena) +
                        " bytes; ";
  if (best <= request.budget) return Status::error(message + best_flags + " fits in " + bytes(best));
  return Status::error(message + "no strategy fits: the smallest arena any reaches is " +
                       bytes(best) + ", with " + best_flags + "; give a --budget of at least " +
                       std::to_string(best) + " bytes, or a smaller --batch");
}

}  // namespace

Result<PlanReport> plan_training_step(const PlanRequest& request) {
  if (request.model.batch < 1) return Status::error("the batch must be at least 1");
  if (request.accumulate < 1) return Status::error("--accumulate must be at least 1");
  const auto backend = make_backend(request.backend, request.threads);
  if (!backend) {
    return Status::error("unknown backend '" + request.backend + "'; use cpu or reference");
  }
  MEMFIT_ASSIGN_OR_RETURN(PlannedStep planned, plan_step(request, *backend));
  const RecomputeSummary& summary = planned.summary;
  const Graph& g = planned.prepared->graph();
  const MemoryPlan& plan = planned.prepared->plan();
  if (request.budget > 0 && plan.arena_bytes > request.budget) {
    return over_budget(request, plan.arena_bytes, *backend);
  }

  PlanReport report;
  report.arena_bytes = plan.arena_bytes;
  report.host_bytes = plan.host_bytes;
  report.lower_bound_bytes = plan.lower_bound_bytes;
  report.no_sharing_bytes = plan.no_sharing_bytes;
  report.by_role = public_roles(plan.by_role);
  report.num_nodes = g.num_nodes();
  report.checkpoint_candidates = summary.candidates;
  report.checkpoints = summary.checkpoints;
  report.checkpoint_levels = summary.levels;
  report.recomputed_nodes = summary.recomputed_nodes;
  report.swap_candidates = planned.swap.candidates;
  report.swapped_values = planned.swap.swapped_values;
  report.swapped_bytes = planned.swap.swapped_bytes;
  report.recomputed_values = planned.auto_summary.recomputed_values;
  report.auto_choice = planned.auto_summary.choice;
  report.swap_ins = planned.swap.swap_ins;
  report.branch_swaps = planned.swap.branch_swaps;
  report.trigger_fallbacks = planned.swap.trigger_fallbacks;
  // Compute nodes take the cost model's seconds; copies take bytes over the
  // link on their own stream.
  report.predicted_step_seconds = predicted_step_seconds(
      g, predicted_node_seconds(g, step_machine(planned.seconds, request.link_gbps)));
  // Without clones the difference is only rounding (the schedule may sum in another order).
  report.predicted_recompute_seconds =
      summary.recomputed_nodes == 0
          ? 0.0
          : std::max(0.0, graph_seconds(g, planned.seconds, true) - planned.forward_seconds);
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

Result<size_t> parse_bytes(std::string_view text) {
  const std::string quoted = "'" + std::string(text) + "'";
  const std::string example = "a number of bytes, such as 4096, 512MiB or 1.5GB";
  if (text.empty()) return Status::error("the byte count is empty; give " + example);
  if (text.front() == '-') return Status::error(quoted + " is negative; give " + example);
  auto is_digit = [&](size_t i) {
    return i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]));
  };
  // Digits are collected exactly; 128 bits hold any size_t times any unit.
  using Wide = unsigned __int128;
  const Wide too_large = Wide(std::numeric_limits<size_t>::max()) + 1;
  size_t i = 0;
  Wide whole = 0;
  for (; is_digit(i); ++i) whole = std::min(whole * 10 + Wide(text[i] - '0'), too_large);
  if (i == 0) return Status::error(quoted + " is not a number; give " + example);
  // Fraction digits past the 18th weigh less than 1e-18 of a unit: less than a byte.
  Wide fraction = 0, fraction_scale = 1;
  if (i < text.size() && text[i] == '.') {
    if (!is_digit(++i)) return Status::error(quoted + " has no digits after the point");
    for (int kept = 0; is_digit(i); ++i, ++kept) {
      if (kept < 18) {
        fraction = fraction * 10 + Wide(text[i] - '0');
        fraction_scale *= 10;
      }
    }
  }
  while (i < text.size() && text[i] == ' ') ++i;
  const std::string_view unit = text.substr(i);
  struct Unit {
    std::string_view name;
    size_t bytes;
  };
  constexpr Unit kUnits[] = {{"", 1},
                             {"B", 1},
                             {"KB", 1000},
                             {"MB", 1'000'000},
                             {"GB", 1'000'000'000},
                             {"KiB", size_t{1} << 10},
                             {"MiB", size_t{1} << 20},
                             {"GiB", size_t{1} << 30}};
  const auto* found = std::find_if(std::begin(kUnits), std::end(kUnits),
                                   [&](const Unit& u) { return u.name == unit; });
  if (found == std::end(kUnits)) {
    return Status::error(quoted + " has an unknown unit '" + std::string(unit) +
                         "'; use B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024)");
  }
  const Wide bytes = whole * found->bytes + fraction * found->bytes / fraction_scale;
  if (bytes >= too_large) {
    return Status::error(quoted + " is more bytes than this machine can address");
  }
  return static_cast<size_t>(bytes);
}

}  // namespace memfit
