// Multi-level schedules for the `optimal` strategy: rotor's persistent
// schedules (Beaumont et al. 2019) over the chain of blocks of
// recompute_optimal.h, which let a recomputed segment place checkpoints of
// its own, recomputed in turn, level under level, as the recompute pass's
// nested levels (RecomputeOptions::levels) express them.
//
// Input invariants: the chain of blocks of graph_chain (recompute_optimal.h,
// stages 1-2), with each block's `through_seconds`.
//
// 1. Family. The top level is the single-level family of recompute_optimal.h
//    (stored blocks, and segments: dropped blocks, then a checkpointed block
//    or the tail). A segment of blocks b..j, entered with c_{b-1} held (kept,
//    or a checkpoint's clone) and c_j held or absent (the tail), is either
//    - a leaf: recomputed at once, storing everything (as the single-level
//      family does): it holds need(b..j) = sum of saved + output, and costs
//      the sum of the blocks' seconds less output_seconds of j; or
//    - split at k, b <= k < j: c_k becomes a checkpoint of the segment's
//      level: the blocks b..k are run forward once, keeping only c_k
//      (through seconds of b..k); the right part k+1..j is done as a segment
//      of the same level (its own splits continue this level's spine) with
//      c_k held; then the left part b..k as a segment one level deeper.
//      Peak: max(output_k + peak(right), peak(left)).
//    In the recompute pass, a segment's spine checkpoints (level l) are made
//    by the walk that the first backward read in its rightmost leaf starts
//    from c_{b-1}, and stay valid while the backward pass is in the level
//    l - 1 segment; each left part is a level-l segment whose own spine is
//    level l + 1; the leaves' clones die when the backward pass leaves them.
// 2. Memory model: as recompute_optimal.h's stage 4, with a segment's need
//    replaced by the peak above; parameters, gradients and the backward
//    pass's temporaries are left to the planner.
// 3. DP (solve_levels): R(b, j, m), the least seconds of segment b..j within
//    m units, over leaf and every split, by increasing segment length; then
//    the top level as solve_chain with R for a segment's seconds and need.
//    Exact over integer units: it equals a search of every schedule of the
//    family (a test checks it on random chains).
// 4. Large chains (coarsen_chain): rotor's DP is cubic in the blocks, so a
//    chain of more than kRotorBlocks blocks is first merged into that many
//    groups of consecutive blocks (a group's inner candidates are never
//    checkpoints); optimal plans the better of the full chain's
//    single-level schedule and the merged chain's multi-level one.
// Cost: O(n^3 G / 6) for n blocks and G units, plus O(n^2 G) at the top.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "passes/recompute_optimal.h"

namespace memfit {

inline constexpr size_t kRotorBlocks = 64;

struct LevelSchedule {
  std::vector<BlockMode> modes;  // the top level, as ChainSchedule's
  // levels[b] >= 1: c_b is a checkpoint of that level inside a recomputed
  // segment (the block is dropped); 0: no such checkpoint.
  std::vector<int32_t> levels;
  double seconds = 0;  // predicted recomputation time
  size_t peak = 0;     // predicted peak, in the blocks' units
};

// The schedule's predicted seconds and peak, or nullopt when it is not in
// the family (stage 1): the top level as evaluate_chain's; a level on a
// stored, checkpointed or last block, or one that skips a level; a rightmost
// part with a deeper checkpoint in it.
std::optional<LevelSchedule> evaluate_levels(const std::vector<ChainBlock>& blocks,
                                             const std::vector<BlockMode>& modes,
                                             const std::vector<int32_t>& levels);

// The schedule of least predicted seconds whose peak is at most `memory`
// (ties: the smaller peak), or nullopt when none is.
std::optional<LevelSchedule> solve_levels(const std::vector<ChainBlock>& blocks, size_t memory);

// Stage 4: the chain merged into at most `groups` groups of consecutive
// blocks (about equal counts), and each group's last block.
struct CoarseChain {
  std::vector<ChainBlock> blocks;
  std::vector<size_t> last;  // by group: the index of its last block in the full chain
};
CoarseChain coarsen_chain(const std::vector<ChainBlock>& blocks, size_t groups);

// A schedule of the merged chain as one of the full chain: a group's mode
// applies to its blocks (checkpointed: its last block; the others dropped),
// its level to its last block.
LevelSchedule expand_schedule(const CoarseChain& coarse, const LevelSchedule& schedule);

// The checkpoints that realize `schedule` on `chain`: stored blocks' values
// and top-level checkpoints kept, nested checkpoints by level, and each
// checkpoint's last value as a segment end.
NestedCheckpoints levels_keep(const GraphChain& chain, const LevelSchedule& schedule);

}  // namespace memfit
