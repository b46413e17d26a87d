// Offset assignment: two heap algorithms over the buffers of the liveness
// analysis; the planner keeps the smaller arena.
//
// Input: buffers with aligned byte sizes and closed live intervals.
// 1. Persistent buffers (live for the whole step) are packed at the bottom of
//    the arena, in order: they overlap every other buffer in time anyway.
// 2. The others are placed one by one above them. For each, the buffers
//    already placed that are live at a common step are gathered in offset
//    order (from all placed buffers kept sorted by offset, or, for many
//    buffers, through a time index of blocks of kBlockSteps steps and a
//    sort), and the gaps between them searched:
//    - greedy by size (Pisarchyk and Lee 2020): largest buffer first, into the
//      smallest gap that holds it (best fit), else above the highest;
// 3. By time: a simulation of a best-fit allocator over the schedule, which
//    frees each buffer after its last use and merges free neighbours; this one
//    is O(B log B) and is the only one run when greedy by size would cost
//    more than kMaxGreedyWork (dense overlaps, as in very deep networks).
// Guarantees: buffers live at a common step get disjoint slices; offsets are
// multiples of the alignment when sizes are. Cost: O(B^2) up to
// kLinearScanBuffers buffers, else O(B (k log k + S/kBlockSteps)) for B buffers,
// k the number of placed buffers overlapping one in time, S steps.
#include "memory/heap.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>

namespace memfit {
namespace {

constexpr int32_t kBlockSteps = 32;

bool overlap(const Interval& a, const Interval& b) { return a.def <= b.last && b.def <= a.last; }

// Placed buffers by the blocks of steps in which they are live.
class TimeIndex {
 public:
  TimeIndex(const std::vector<PlanBuffer>& buffers) : buffers_(buffers), seen_(buffers.size(), 0) {
    int32_t last = 0;
    for (const PlanBuffer& b : buffers) last = std::max(last, b.live.last);
    blocks_.resize(static_cast<size_t>(block(last)) + 1);
  }

  void add(size_t buffer) {
    const Interval live = buffers_[buffer].live;
    for (int32_t b = block(live.def); b <= block(live.last); ++b) {
      blocks_[static_cast<size_t>(b)].push_back(static_cast<int32_t>(buffer));
    }
  }

  // The placed buffers live at a step where `buffer` is live, into `out`.
  void overlapping(size_t buffer, std::vector<int32_t>& out) {
    ++stamp_;
    out.clear();
    const Interval live = buffers_[buffer].live;
    for (int32_t b = block(live.def); b <= block(live.last); ++b) {
      for (int32_t other : blocks_[static_cast<size_t>(b)]) {
        const auto o = static_cast<size_t>(other);
        if (seen_[o] == stamp_) continue;
        seen_[o] = stamp_;
        if (overlap(live, buffers_[o].live)) out.push_back(other);
      }
    }
  }

  // Steps start at -1 (before the first node).
  static int32_t block(int32_t step) { return (step + 1) / kBlockSteps; }

 private:
  const std::vector<PlanBuffer>& buffers_;
  std::vector<std::vector<int32_t>> blocks_;
  std::vector<uint32_t> seen_;
  uint32_t stamp_ = 0;
};

// A placed buffer's byte range and live interval.
struct PlacedRange {
  size_t start = 0;
  size_t end = 0;
  Interval live;
};

// The lowest offset of the smallest gap at or above `base` that holds
// `bytes` between `ranges` (sorted by start), else the offset above them all.
// Ties in start may come in any order: a placed buffer is never empty, so the
// second of two equal starts never opens a gap.
size_t best_fit_offset(const std::vector<PlacedRange>& ranges, size_t base, size_t bytes) {
  size_t best_offset = std::numeric_limits<size_t>::max();
  size_t best_gap = std::numeric_limits<size_t>::max();
  size_t cursor = base;  // the lowest offset above everything placed so far in the scan
  for (const PlacedRange& r : ranges) {
    if (r.start >= cursor && r.start - cursor >= bytes) {
      const size_t gap = r.start - cursor;
      if (gap < best_gap) {
        best_gap = gap;
        best_offset = cursor;
      }
    }
    cursor = std::max(cursor, r.end);
  }
  return best_offset == std::numeric_limits<size_t>::max() ? cursor : best_offset;
}

// Up to `linear_scan_buffers` buffers, the placed buffers overlapping one are
// found by scanning all placed buffers, kept sorted by offset; above it,
// through the time index and a sort of those found. Both give the same offsets.
Placement place_best_fit(const std::vector<PlanBuffer>& buffers, const std::vector<size_t>& order,
                         size_t linear_scan_buffers, std::string name) {
  Placement placement;
  placement.algorithm = std::move(name);
  placement.offsets.assign(buffers.size(), 0);
  size_t base = 0;
  for (size_t b = 0; b < buffers.size(); ++b) {
    if (!buffers[b].persistent) continue;
    placement.offsets[b] = base;
    base += buffers[b].bytes;
  }
  placement.arena_bytes = base;
  const bool linear = order.size() <= linear_scan_buffers;
  std::optional<TimeIndex> index;
  if (!linear) index.emplace(buffers);
  std::vector<PlacedRange> by_offset;  // linear: every placed buffer, sorted by start
  std::vector<int32_t> found;
  std::vector<PlacedRange> overlapping;  // the placed buffers live with the one placed
  for (size_t b : order) {
    const PlanBuffer& buffer = buffers[b];
    overlapping.clear();
    if (linear) {
      for (const PlacedRange& r : by_offset) {
        if (overlap(buffer.live, r.live)) overlapping.push_back(r);
      }
    } else {
      index->overlapping(b, found);
      for (int32_t other : found) {
        const PlanBuffer& o = buffers[static_cast<size_t>(other)];
        const size_t start = placement.offsets[static_cast<size_t>(other)];
        overlapping.push_back({start, start + o.bytes, o.live});
      }
      std::sort(overlapping.begin(), overlapping.end(),
                [](const PlacedRange& x, const PlacedRange& y) { return x.start < y.start; });
    }
    const size_t offset = best_fit_offset(overlapping, base, buffer.bytes);
    placement.offsets[b] = offset;
    placement.arena_bytes = std::max(placement.arena_bytes, offset + buffer.bytes);
    if (linear) {
      const PlacedRange placed{offset, offset + buffer.bytes, buffer.live};
      auto at = std::upper_bound(by_offset.begin(), by_offset.end(), offset,
                                 [](size_t o, const PlacedRange& r) { return o < r.start; });
      by_offset.insert(at, placed);
    } else {
      index->add(b);
    }
  }
  return placement;
}

// A best-fit allocator over [0, top): free ranges by offset (to merge
// neighbours) and by size (to find the smallest that fits).
class FreeList {
 public:
  size_t take(size_t bytes) {
    auto fit = by_size_.lower_bound({bytes, 0});
    if (fit != by_size_.end()) {
      const auto [size, offset] = *fit;
      erase(offset, size);
      if (size > bytes) insert(offset + bytes, size - bytes);
      return offset;
    }
    // Nothing fits: grow the top, starting inside a free range that ends there.
    size_t offset = top_;
    if (!by_offset_.empty()) {
      const auto last = std::prev(by_offset_.end());
      if (last->first + last->second == top_) {
        offset = last->first;
        erase(last->first, last->second);
      }
    }
    top_ = offset + bytes;
    return offset;
  }

  void release(size_t offset, size_t bytes) {
    auto next = by_offset_.lower_bound(offset);
    if (next != by_offset_.end() && offset + bytes == next->first) {
      bytes += next->second;
      erase(next->first, next->second);
    }
    auto prev = by_offset_.lower_bound(offset);
    if (prev != by_offset_.begin()) {
      --prev;
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        bytes += prev->second;
        erase(prev->first, prev->second);
      }
    }
    insert(offset, bytes);
  }

  size_t top() const { return top_; }

 private:
  void insert(size_t offset, size_t bytes) {
    by_offset_.emplace(offset, bytes);
    by_size_.emplace(bytes, offset);
  }
  void erase(size_t offset, size_t bytes) {
    by_offset_.erase(offset);
    by_size_.erase({bytes, offset});
  }

  std::map<size_t, size_t> by_offset_;       // offset -> bytes
  std::set<std::pair<size_t, size_t>> by_size_;  // (bytes, offset)
  size_t top_ = 0;
};

std::vector<size_t> transient(const std::vector<PlanBuffer>& buffers) {
  std::vector<size_t> order;
  for (size_t b = 0; b < buffers.size(); ++b) {
    if (!buffers[b].persistent && buffers[b].bytes > 0) order.push_back(b);
  }
  return order;
}

}  // namespace

double greedy_by_size_work(const std::vector<PlanBuffer>& buffers) {
  // Each block of steps is scanned once for every buffer live in it.
  std::vector<double> members;
  for (const PlanBuffer& b : buffers) {
    if (b.persistent || b.bytes == 0) continue;
    const auto last = static_cast<size_t>(TimeIndex::block(b.live.last));
    if (members.size() <= last) members.resize(last + 1, 0);
    for (auto k = static_cast<size_t>(TimeIndex::block(b.live.def)); k <= last; ++k) members[k] += 1;
  }
  double work = 0;
  for (double m : members) work += m * m;
  return work;
}

Placement place_greedy_by_size(const std::vector<PlanBuffer>& buffers, size_t linear_scan_buffers) {
  std::vector<size_t> order = transient(buffers);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes) return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].live.def < buffers[b].live.def;
  });
  return place_best_fit(buffers, order, linear_scan_buffers, "greedy-by-size");
}

Placement place_by_time(const std::vector<PlanBuffer>& buffers) {
  Placement placement;
  placement.algorithm = "best-fit-by-time";
  placement.offsets.assign(buffers.size(), 0);
  // Allocations at each step, persistent first then largest first; frees one step after the last use.
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].live.def != buffers[b].live.def) return buffers[a].live.def < buffers[b].live.def;
    if (buffers[a].persistent != buffers[b].persistent) return buffers[a].persistent;
    return buffers[a].bytes > buffers[b].bytes;
  });
  std::vector<size_t> by_end(order);
  std::stable_sort(by_end.begin(), by_end.end(),
                   [&](size_t a, size_t b) { return buffers[a].live.last < buffers[b].live.last; });
  FreeList free_list;
  size_t next_free = 0;
  for (size_t b : order) {
    const PlanBuffer& buffer = buffers[b];
    if (buffer.bytes == 0) continue;
    // Release everything whose last use is before this buffer's definition.
    while (next_free < by_end.size() && buffers[by_end[next_free]].live.last < buffer.live.def) {
      const size_t done = by_end[next_free++];
      if (buffers[done].bytes > 0) free_list.release(placement.offsets[done], buffers[done].bytes);
    }
    placement.offsets[b] = free_list.take(buffer.bytes);
  }
  placement.arena_bytes = free_list.top();
  return placement;
}

Placement place_without_sharing(const std::vector<PlanBuffer>& buffers) {
  Placement placement;
  placement.algorithm = "no-sharing";
  placement.offsets.assign(buffers.size(), 0);
  for (size_t b = 0; b < buffers.size(); ++b) {
    placement.offsets[b] = placement.arena_bytes;
    placement.arena_bytes += buffers[b].bytes;
  }
  return placement;
}

}  // namespace memfit
