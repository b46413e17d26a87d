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

// The work greedy by size does on these buffers (block scans), and the most
// the planner lets it do: dense overlaps make it quadratic.
double greedy_by_size_work(const std::vector<PlanBuffer>& buffers);
inline constexpr double kMaxGreedyWork = 5e7;

// Largest first, best fit (Pisarchyk and Lee 2020). Up to
// `linear_scan_buffers` buffers it finds the placed buffers that overlap one
// by scanning them all (B^2/2 cheap checks), above it through an index of
// steps; the offsets are the same either way.
inline constexpr size_t kLinearScanBuffers = 2048;
Placement place_greedy_by_size(const std::vector<PlanBuffer>& buffers,
                               size_t linear_scan_buffers = kLinearScanBuffers);
// A best-fit allocator simulated over the schedule: O(B log B).
Placement place_by_time(const std::vector<PlanBuffer>& buffers);
// Every buffer in a slice of its own, one after the other.
Placement place_without_sharing(const std::vector<PlanBuffer>& buffers);

}  // namespace memfit
