// The static memory planner: liveness over the graph's node order, in-place
// reuse where the op table allows it, and byte offsets in one arena from the
// better of two heap algorithms.
#pragma once

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memory/memory_plan.h"

namespace memfit {

// The bytes to plan, as the backend lays values out (Backend::layout) and as
// its kernels ask for scratch space (Kernel::workspace_bytes).
struct PlanSizes {
  std::vector<size_t> value_bytes;      // one per value
  std::vector<size_t> workspace_bytes;  // one per node
};

// Fixed offsets for persistent inputs at the bottom of the arena, [0, bytes):
// two executables that run in turn on one arena (the micro-batches that only
// accumulate and the one that applies the update) keep their parameters,
// optimizer state and accumulators in the same bytes, so neither copies them.
// A graph need not have every value named; its other values are planned
// above the band.
struct StateBand {
  std::unordered_map<std::string, size_t> offsets;  // persistent input name -> offset
  size_t bytes = 0;
};

// The band of `states` (name, bytes) in that order, each slot 64-byte aligned.
StateBand make_state_band(const std::vector<std::pair<std::string, size_t>>& states);

struct PlanOptions {
  bool share = true;    // false: every value and workspace gets a slice of its own
  bool inplace = true;  // write outputs over dying inputs where the op table allows
  size_t budget = 0;    // the largest arena allowed; 0: no limit
  StateBand band = {};  // empty: persistent inputs are placed as any other value
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
