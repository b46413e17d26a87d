#include "passes/recompute_policy.h"

#include "passes/recompute_milp.h"
#include "passes/recompute_optimal.h"

namespace memfit {

Result<RecomputedGraph> apply_recompute_costed(Graph graph, Recompute strategy,
                                               size_t memory_budget, const ArenaOf& arena_of,
                                               const RecomputeCost& cost, bool mirror) {
  const NodeSeconds seconds = cost.seconds ? cost.seconds : roofline_cost();
  switch (strategy) {
    case Recompute::optimal:
      return apply_optimal(std::move(graph), memory_budget, arena_of, seconds, mirror);
    case Recompute::milp:
      return apply_milp(std::move(graph), memory_budget, arena_of, seconds, cost.milp_seconds,
                        mirror);
    default:
      return apply_recompute(std::move(graph), strategy, memory_budget, arena_of, mirror);
  }
}

Result<RecomputedGraph> recompute_step_graph(Graph graph, Recompute strategy,
                                             const PolicyContext& context, bool mirror) {
  return apply_recompute_costed(std::move(graph), strategy, context.budget, context.arena_of(),
                                RecomputeCost{context.seconds, context.milp_seconds}, mirror);
}

}  // namespace memfit
