// The static memory planner: liveness over the graph's node order, in-place
// reuse where the op table allows it, and byte offsets in one arena from the
// better of two heap algorithms.
#pragma once

#include <vector>

#include "memory/memory_plan.h"

namespace memfit {

// The bytes to plan, as the backend lays values out (Backend::layout) and as
// its kernels ask for scratch space (Kernel::workspace_bytes).
struct PlanSizes {
  std::vector<size_t> value_bytes;      // one per value
  std::vector<size_t> workspace_bytes;  // one per node
};

struct PlanOptions {
  bool share = true;    // false: every value and workspace gets a slice of its own
  bool inplace = true;  // write outputs over dying inputs where the op table allows
  size_t budget = 0;    // the largest arena allowed; 0: no limit
};

// Plain sizes: every value's bytes in the plain layout, no workspaces.
PlanSizes plain_sizes(const Graph& graph);

// Plans `graph` as it is ordered. An arena larger than a non-zero budget is an
// error that states the smallest arena this plan reaches.
Result<MemoryPlan> plan_memory(const Graph& graph, const PlanSizes& sizes,
                               const PlanOptions& options = {});

// The independent checker (src/memory/plan_verifier.cpp, sharing no code with
// the planner): simulates the step over the arena and checks that every read
// finds the value written for it, that no write destroys a value still to be
// read, that slices fit their values and the arena, and that the arena is no
// larger than `budget` (0: no limit).
Status verify_plan(const Graph& graph, const PlanSizes& sizes, const MemoryPlan& plan,
                   size_t budget = 0);

}  // namespace memfit
