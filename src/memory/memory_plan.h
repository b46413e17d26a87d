// The memory plan of a training step: for every value and every node's
// workspace, a slice (pool, offset, bytes) of the device arena or of the host
// pool, valid over the schedule, which is the graph's node order. The pool of
// a value is decided by its producer's op: outputs of to_host (swapped-out
// copies, src/ops/ops_swap.cpp) live in the host pool, everything else
// (workspaces included) in the device arena. The two pools are planned alike
// and separately: offsets are relative to the slice's pool.
//
// Time: node i of the graph runs at step i (0 <= i < N). A value is live over
// the closed interval [def, last]: def is its producer's step, or -1 for graph
// inputs (written before the first node: data is copied in, state is already
// there); last is the step of its last reader, or N for graph outputs, update
// values and persistent inputs (parameters, optimizer state, state), which
// must hold their value until the step ends. A workspace is live at its node
// only: [i, i]. Two slices live at a common step never overlap, except a value
// written in place over an input of its producer (an in-place pair of the op
// table) whose last reader is that producer: the two then have the same slice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "memfit/ir.h"

namespace memfit {

// Every slice starts at a multiple of this and its size is rounded up to it.
inline constexpr size_t kArenaAlignment = 64;

inline size_t align_up(size_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

enum class Pool : uint8_t { device, host };

struct Slice {
  size_t offset = 0;
  size_t bytes = 0;  // a multiple of kArenaAlignment; 0 for an empty workspace
  Pool pool = Pool::device;
  size_t end() const { return offset + bytes; }
};

struct Interval {
  int32_t def = 0;   // -1: before the first node
  int32_t last = 0;  // N: after the last node
};

struct MemoryPlan {
  std::vector<Slice> value_slices;      // one per value of the graph
  std::vector<Interval> value_live;     // one per value
  std::vector<Slice> workspace_slices;  // one per node
  // For each value, the input of its producer whose slice it reuses in place, or invalid.
  std::vector<ValueId> inplace_of;

  size_t arena_bytes = 0;        // the device arena: the largest device slice end
  size_t host_bytes = 0;         // the host pool: the largest host slice end
  size_t lower_bound_bytes = 0;  // the largest sum of live device slice bytes at any step
  size_t no_sharing_bytes = 0;   // every device value and workspace in a slice of its own
  int32_t peak_step = -1;        // the step where lower_bound_bytes is reached
  BytesByRole by_role;           // the live bytes at peak_step, by role
  std::string algorithm;         // the heap algorithm whose placement won
};

}  // namespace memfit
