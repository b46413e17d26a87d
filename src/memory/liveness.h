// Liveness for the planner: the interval of every value over the graph's node
// order, the in-place decisions, and the buffers they make (a chain of values
// written in place over each other shares one buffer).
#pragma once

#include <vector>

#include "memory/memory_plan.h"
#include "memory/planner.h"

namespace memfit {

// Something that needs a slice: the values of an in-place chain, or a workspace.
struct PlanBuffer {
  size_t bytes = 0;  // aligned
  Interval live;
  bool persistent = false;  // a parameter or state: live for the whole step
  Pool pool = Pool::device;
};

// The pool of a value, decided by its producer's op (memory_plan.h).
Pool value_pool(const Graph& graph, ValueId value);

struct Liveness {
  std::vector<Interval> value_live;  // per value
  std::vector<ValueId> inplace_of;   // per value: the input whose slice it reuses
  std::vector<int32_t> value_buffer;      // per value: index into buffers
  std::vector<int32_t> workspace_buffer;  // per node: index into buffers, -1 if none
  std::vector<PlanBuffer> buffers;
};

Liveness analyze_liveness(const Graph& graph, const PlanSizes& sizes, const PlanOptions& options);

}  // namespace memfit
