// The recompute strategies of `--recompute` behind one entry point: the
// strategies that minimize predicted time (optimal, milp) get their cost
// model here, the others (src/passes/recompute_strategy.h) need none.
#pragma once

#include <cstddef>

#include "cost/cost_model.h"
#include "memfit/techniques.h"
#include "passes/policy_context.h"
#include "passes/recompute_strategy.h"

namespace memfit {

// Cost-driven strategies need a cost model; the others ignore it.
struct RecomputeCost {
  NodeSeconds seconds;       // empty: roofline_cost()
  double milp_seconds = 30;  // milp: CBC's time limit, in all
};

// apply_recompute for every strategy, with `cost` for optimal
// (recompute_optimal.h) and milp (recompute_milp.h); `mirror` combines with
// every strategy.
Result<RecomputedGraph> apply_recompute_costed(Graph graph, Recompute strategy,
                                               size_t memory_budget, const ArenaOf& arena_of,
                                               const RecomputeCost& cost, bool mirror = false);

// The same with the budget, planner, node times and time limit of `context`.
Result<RecomputedGraph> recompute_step_graph(Graph graph, Recompute strategy,
                                             const PolicyContext& context, bool mirror = false);

}  // namespace memfit
