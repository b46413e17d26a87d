// Heap algorithms: byte offsets for the planner's buffers (see heap.cpp).
#pragma once

#include <string>
#include <vector>

#include "memory/liveness.h"

namespace memfit {

struct Placement {
  std::vector<size_t> offsets;  // per buffer
  size_t arena_bytes = 0;
  std::string algorithm;
};

// Largest first, best fit (Pisarchyk and Lee 2020).
Placement place_greedy_by_size(const std::vector<PlanBuffer>& buffers);
// In order of definition, first fit.
Placement place_by_time(const std::vector<PlanBuffer>& buffers);
// Every buffer in a slice of its own, one after the other.
Placement place_without_sharing(const std::vector<PlanBuffer>& buffers);

}  // namespace memfit
