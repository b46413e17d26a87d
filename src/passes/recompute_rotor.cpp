#include "passes/recompute_rotor.h"

#include <algorithm>
#include <limits>

#include "core/check.h"

namespace memfit {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Part {
  double seconds = 0;
  size_t peak = 0;
};

// A leaf b..j: every value held at once; c_j held unless j is the last block.
Part leaf(const std::vector<ChainBlock>& blocks, size_t b, size_t j) {
  Part part;
  for (size_t k = b; k <= j; ++k) {
    part.peak += blocks[k].saved + blocks[k].output;
    part.seconds += blocks[k].seconds;
  }
  if (j + 1 < blocks.size()) part.seconds -= blocks[j].output_seconds;
  return part;
}

// Stage 1 for segment b..j whose spine is `level`.
std::optional<Part> evaluate_segment(const std::vector<ChainBlock>& blocks,
                                     const std::vector<int32_t>& levels, size_t b, size_t j,
                                     int32_t level) {
  std::vector<size_t> spine;
  for (size_t k = b; k < j; ++k) {
    if (levels[k] == level) {
      spine.push_back(k);
    } else if (levels[k] != 0 && levels[k] < level) {
      return std::nullopt;
    }
  }
  const size_t rightmost = spine.empty() ? b : spine.back() + 1;
  for (size_t k = rightmost; k < j; ++k) {
    if (levels[k] != 0) return std::nullopt;  // a deeper checkpoint without a spine above it
  }
  Part part;
  size_t prefix = 0, start = b;
  for (size_t k : spine) {
    for (size_t t = start; t <= k; ++t) part.seconds += blocks[t].through_seconds;
    const auto left = evaluate_segment(blocks, levels, start, k, level + 1);
    if (!left) return std::nullopt;
    part.seconds += left->seconds;
    part.peak = std::max(part.peak, prefix + left->peak);
    prefix += blocks[k].output;
    start = k + 1;
  }
  const Part last = leaf(blocks, rightmost, j);
  part.seconds += last.seconds;
  part.peak = std::max(part.peak, prefix + last.peak);
  return part;
}

}  // namespace

std::optional<LevelSchedule> evaluate_levels(const std::vector<ChainBlock>& blocks,
                                             const std::vector<BlockMode>& modes,
                                             const std::vector<int32_t>& levels) {
  const size_t n = blocks.size();
  if (levels.size() != n || !evaluate_chain(blocks, modes)) return std::nullopt;
  LevelSchedule schedule{modes, levels, 0, 0};
  size_t prefix = 0;
  for (size_t b = 0; b < n;) {
    if (modes[b] == BlockMode::stored) {
      if (levels[b] != 0) return std::nullopt;
      prefix += blocks[b].saved + blocks[b].output;
      schedule.peak = std::max(schedule.peak, prefix);
      ++b;
      continue;
    }
    size_t j = b;
    while (modes[j] == BlockMode::dropped && j + 1 < n) ++j;
    if (levels[j] != 0) return std::nullopt;
    const auto segment = evaluate_segment(blocks, levels, b, j, 1);
    if (!segment) return std::nullopt;
    schedule.seconds += segment->seconds;
    schedule.peak = std::max(schedule.peak, prefix + segment->peak);
    if (modes[j] == BlockMode::checkpointed) prefix += blocks[j].output;
    b = j + 1;
  }
  return schedule;
}

std::optional<LevelSchedule> solve_levels(const std::vector<ChainBlock>& blocks, size_t memory) {
  const size_t n = blocks.size();
  if (n == 0) return std::nullopt;
  const size_t width = memory + 1;
  // r[(b * n + j) * width + m]: the least seconds of segment b..j within m
  // units; split[...]: -1 a leaf, k a split at c_k, -2 infeasible.
  std::vector<double> r(n * n * width, kInf);
  std::vector<int32_t> split(n * n * width, -2);
  auto at = [&](size_t b, size_t j, size_t m) { return (b * n + j) * width + m; };
  std::vector<double> through(n + 1, 0);  // prefix sums of through_seconds
  for (size_t k = 0; k < n; ++k) through[k + 1] = through[k] + blocks[k].through_seconds;
  for (size_t length = 1; length <= n; ++length) {
    for (size_t b = 0; b + length <= n; ++b) {
      const size_t j = b + length - 1;
      const Part whole = leaf(blocks, b, j);
      for (size_t m = 0; m <= memory; ++m) {
        double best = kInf;
        int32_t pick = -2;
        if (whole.peak <= m) {
          best = whole.seconds;
          pick = -1;
        }
        for (size_t k = b; k < j; ++k) {
          const size_t out = blocks[k].output;
          if (out > m) continue;
          const double total =
              through[k + 1] - through[b] + r[at(k + 1, j, m - out)] + r[at(b, k, m)];
          if (total < best) {
            best = total;
            pick = static_cast<int32_t>(k);
          }
        }
        r[at(b, j, m)] = best;
        split[at(b, j, m)] = pick;
      }
    }
  }
  // The top level, with r for a segment.
  const auto top = solve_top_level(
      blocks, memory,
      [&](size_t b, size_t j, size_t m) -> std::optional<double> { return r[at(b, j, m)]; });
  if (!top) return std::nullopt;
  std::vector<int32_t> levels(n, 0);
  // Segments to unfold: (b, j, m, level).
  struct Pending {
    size_t b, j, m;
    int32_t level;
  };
  std::vector<Pending> pending;
  for (const ChainSegment& s : top->segments) pending.push_back({s.first, s.last, s.memory, 1});
  while (!pending.empty()) {
    const Pending p = pending.back();
    pending.pop_back();
    const int32_t k = split[at(p.b, p.j, p.m)];
    MEMFIT_CHECK(k != -2);
    if (k == -1) continue;
    const auto c = static_cast<size_t>(k);
    levels[c] = p.level;
    pending.push_back({c + 1, p.j, p.m - blocks[c].output, p.level});
    pending.push_back({p.b, c, p.m, p.level + 1});
  }
  auto schedule = evaluate_levels(blocks, top->modes, levels);
  MEMFIT_CHECK(schedule && schedule->peak <= memory);
  return schedule;
}

CoarseChain coarsen_chain(const std::vector<ChainBlock>& blocks, size_t groups) {
  CoarseChain coarse;
  const size_t n = blocks.size();
  groups = std::max<size_t>(1, std::min(groups, n));
  for (size_t g = 0; g < groups; ++g) {
    const size_t first = g * n / groups, last = (g + 1) * n / groups - 1;
    ChainBlock merged;
    for (size_t k = first; k <= last; ++k) {
      merged.seconds += blocks[k].seconds;
      merged.through_seconds += blocks[k].through_seconds;
      merged.saved += blocks[k].saved + (k < last ? blocks[k].output : 0);
    }
    merged.output = blocks[last].output;
    merged.output_seconds = blocks[last].output_seconds;
    coarse.blocks.push_back(merged);
    coarse.last.push_back(last);
  }
  return coarse;
}

LevelSchedule expand_schedule(const CoarseChain& coarse, const LevelSchedule& schedule) {
  LevelSchedule full;
  full.seconds = schedule.seconds;
  full.peak = schedule.peak;
  for (size_t g = 0; g < coarse.blocks.size(); ++g) {
    const size_t first = g == 0 ? 0 : coarse.last[g - 1] + 1;
    const BlockMode mode = schedule.modes[g];
    for (size_t k = first; k <= coarse.last[g]; ++k) {
      full.modes.push_back(mode == BlockMode::checkpointed ? BlockMode::dropped : mode);
      full.levels.push_back(0);
    }
    full.modes.back() = mode;
    full.levels.back() = schedule.levels[g];
  }
  return full;
}

NestedCheckpoints levels_keep(const GraphChain& chain, const LevelSchedule& schedule) {
  NestedCheckpoints nested;
  for (size_t b = 0; b < schedule.modes.size(); ++b) {
    if (schedule.modes[b] == BlockMode::stored) {
      nested.keep.insert(nested.keep.end(), chain.block_values[b].begin(),
                         chain.block_values[b].end());
      continue;
    }
    const int32_t level = schedule.levels[b];
    if (b >= chain.candidates.size() ||
        (schedule.modes[b] != BlockMode::checkpointed && level == 0)) {
      continue;
    }
    const std::vector<ValueId>& values = chain.candidates[b].values;
    nested.segment_ends.push_back(values.back());
    if (level == 0) {
      nested.keep.insert(nested.keep.end(), values.begin(), values.end());
      continue;
    }
    if (nested.levels.size() < static_cast<size_t>(level)) nested.levels.resize(level);
    std::vector<ValueId>& at = nested.levels[static_cast<size_t>(level - 1)];
    at.insert(at.end(), values.begin(), values.end());
  }
  return nested;
}

}  // namespace memfit
