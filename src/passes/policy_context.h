// What the memory policies (recompute strategies, swap policies, auto) see
// of the rest of the system: a function that plans a graph as the executor
// would, the memory budget, the host link and the predicted node times. The
// step layer (src/step/compile_step.cpp) makes it from a backend; tests make
// it from any planner. Every policy reaches the planner through it and
// nothing else, so a planner that remembers what it planned serves them all.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "cost/cost_model.h"
#include "memfit/ir.h"
#include "memory/memory_plan.h"
#include "passes/recompute_strategy.h"

namespace memfit {

// A graph as the executor would run it: its nodes in the executor's order,
// each value's bytes in the backend's layout, and its memory plan.
struct PlannedGraph {
  Graph graph;
  std::vector<size_t> value_bytes;
  MemoryPlan plan;
  bool reordered = false;  // the memory-aware order was kept (src/runtime/backend_plan.h)
};

// Plans `graph` with the step's sharing, without allocating anything and
// without a budget check (the policies compare arenas themselves).
using PlanGraph = std::function<Result<PlannedGraph>(Graph graph)>;

struct PolicyContext {
  PlanGraph plan;
  size_t budget = 0;      // the largest arena allowed; 0: none
  double link_gbps = 0;   // the host link in GB/s; 0: predicted as 10 GB/s
  NodeSeconds seconds;    // compute-node times of the cost-driven choices; empty: roofline
  double milp_seconds = 30;  // --recompute milp: CBC's time limit, in all

  // `plan`'s arena of a graph.
  ArenaOf arena_of() const {
    return [plan = plan](const Graph& graph) -> Result<size_t> {
      MEMFIT_ASSIGN_OR_RETURN(PlannedGraph planned, plan(graph));
      return planned.plan.arena_bytes;
    };
  }
};

}  // namespace memfit
