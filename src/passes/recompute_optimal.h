// The `optimal` recomputation strategy: dynamic programming over the forward
// graph seen as a chain of blocks (in the spirit of rotor, Beaumont et al.
// 2019), minimizing the predicted recomputation time under a byte budget.
//
// Input invariants: a verified step graph (the recompute pass's input,
// src/passes/recompute.h); a cost function that is >= 0 for every node.
//
// 1. Chain: the candidates c_0 .. c_{n-1} (checkpoint_candidates: values that
//    cut the forward graph) split the forward nodes into n + 1 blocks: block b
//    holds the forward nodes after the producer of c_{b-1} up to the producer
//    of c_b; block n (the tail) the nodes after c_{n-1}, up to the loss.
//    A block reads nothing made by earlier blocks but c_{b-1}, so its
//    recomputation depends on that one value alone.
// 2. Block costs, from the recompute pass's own rules: `saved` is the bytes of
//    the block's values that the backward pass reads (c_b excluded),
//    `output` the bytes of c_b; `seconds` the predicted time of the block's
//    nodes the pass clones when the block is recomputed with c_b dropped (the
//    nodes whose outputs the backward pass reads and, depth first, the nodes
//    inside the block that those need, and c_b's producer with its own
//    needs), `output_seconds` how much less when c_b is kept.
//    With mirror: the mirrored nodes are those the pass mirrors when nothing
//    is kept (mirrored_nodes), and candidates made by one are left out of
//    the chain, so keeping candidates and non-mirrored values changes no
//    node's mirroring. Mirrored values are never stored: they count in no
//    block's `saved`, and their per-reader clones cost the same in every
//    schedule (the DP ignores that constant; the trials' recompute seconds
//    include it). A recomputed block's `seconds` also counts the mirrored
//    nodes its clones read (cloned again, once, for the segment). So a
//    stored block keeps only the outputs of its expensive ops: a block
//    partly stored, its cheap ops recomputed from them.
// 3. Schedule family (single-level, what the rewrite pass can express: each
//    forward node but a mirrored one is cloned at most once): every block is
//    `stored` (all its values kept from the forward pass, the mirrored
//    ones aside: nothing else recomputed), `checkpointed`
//    (its inside recomputed, c_b kept) or `dropped` (its inside and c_b
//    recomputed). A dropped block is followed by a dropped or checkpointed
//    block (or is the tail): so the chain is a sequence of units, a stored
//    block or a segment (dropped .. dropped, then checkpointed or the tail),
//    recomputed at once when the backward pass reaches its last block. The
//    tail is stored or dropped. This is the single-level family (solve_chain);
//    rotor's multi-level schedules, where a segment places checkpoints of
//    its own, level under level, are recompute_rotor.h's (solve_levels).
// 4. Memory model: the bytes kept when the backward pass reaches a unit are
//    `prefix` = the kept bytes of all units before it (stored: saved +
//    output, checkpointed: output, dropped: none); the unit then holds its
//    own saved and output bytes (a segment: all its blocks' at once). The
//    predicted peak is the largest prefix + unit over the units. Parameters,
//    gradients, optimizer state and the backward pass's own temporaries are
//    the same for every schedule and left out: the real planner adds them.
// 5. DP (solve_chain): opt(b, m) = least recompute seconds of blocks b..n
//    with m memory units left above the prefix, over the first unit's
//    choices; exact over integer units. Byte sizes are rounded up to units
//    of budget / 1024, so a schedule the DP accepts fits its model's budget.
// 6. Search (apply_optimal): the planner's arena, not the model, is the
//    truth. The target is the memory budget, or without one the arena of
//    sqrt. The plain graph, sqrt's and Chen's greedy (the budget
//    strategy's B = 0) checkpoint sets are planned (with mirror: mirror
//    alone, sqrt+mirror's and greedy's sets over every candidate, mirrored
//    too, as apply_recompute makes them); then a bisection over
//    the DP's budget (12 rounds between 0 and the model peak of storing
//    everything) solves both DPs, the single-level one over the chain and
//    the multi-level one over the chain merged into at most kRotorBlocks
//    groups (recompute_rotor.h, stage 4), and rewrites and plans the
//    schedule of fewer predicted seconds (nested levels become the recompute
//    pass's levels). Of every plan whose
//    arena fits the target, the least predicted recomputation time wins
//    (then the smaller arena); if none fits, the budget strategy's search
//    runs too and the smaller arena of the two wins (which the caller's
//    budget check refuses, naming it, if it still does not fit).
// Guarantees: the result is a graph of the recompute pass, so it is as
// correct as that pass; its predicted recompute time is never more than
// sqrt's (with mirror, sqrt+mirror's) at a target that sqrt's arena meets
// (sqrt is one of the plans).
// Cost: the chain O(N + E); one single-level DP O(n^2 G) for n blocks and
// G = 1024 units, one multi-level DP O(k^3 G' / 6) for k <= 64 groups and
// G' = 256 units (the single-level one usually far less: a segment stops
// growing when it passes the budget); the search at most 16 rewrites and
// plans.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <vector>

#include "core/check.h"
#include "cost/cost_model.h"
#include "passes/recompute_strategy.h"

namespace memfit {

struct ChainBlock {
  double seconds = 0;         // recomputing the block with its output dropped
  double output_seconds = 0;  // of it, what keeping the output saves
  size_t output = 0;          // the output candidate's size (0 for the tail)
  size_t saved = 0;           // the block's other values the backward pass reads
  // Computing c_b alone from c_{b-1}: the block's nodes c_b depends on (a
  // walk of the recompute pass through the block to a later checkpoint;
  // multi-level schedules, recompute_rotor.h).
  double through_seconds = 0;
};

enum class BlockMode : uint8_t { stored, checkpointed, dropped };

struct ChainSchedule {
  std::vector<BlockMode> modes;  // one per block
  double seconds = 0;            // predicted recomputation time
  size_t peak = 0;               // predicted peak (step 4), in the blocks' units
};

// The schedule's predicted recompute seconds and peak, or nullopt when it is
// not in the family (a dropped block before a stored one, a checkpointed tail).
std::optional<ChainSchedule> evaluate_chain(const std::vector<ChainBlock>& blocks,
                                            const std::vector<BlockMode>& modes);

// The schedule of least predicted seconds whose peak is at most `memory`
// (ties: the smaller peak), or nullopt when none is. Sizes in any unit.
std::optional<ChainSchedule> solve_chain(const std::vector<ChainBlock>& blocks, size_t memory);

// The top level of the chain DPs (solve_chain, and solve_levels of
// recompute_rotor.h): opt(b, m) over the first unit's choices, a stored
// block or a segment b..j. `segment(b, j, m)` gives the least seconds of
// segment b..j within m units: infinity when it does not fit, nullopt when
// neither it nor a longer one from b does; for each (b, m) it is called for
// j = b, b + 1, ... in turn. The modes of the schedule of least seconds
// (ties: the first found) and its segments, in order, with the units each
// had; nullopt when none fits within `memory`.
struct ChainSegment {
  size_t first = 0, last = 0, memory = 0;
};
struct TopLevelSchedule {
  std::vector<BlockMode> modes;
  std::vector<ChainSegment> segments;
};
template <class SegmentSeconds>
std::optional<TopLevelSchedule> solve_top_level(const std::vector<ChainBlock>& blocks,
                                                size_t memory, SegmentSeconds&& segment) {
  const size_t n = blocks.size();
  if (n == 0) return std::nullopt;
  const size_t width = memory + 1;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // opt[b * width + m]: least seconds for blocks b.. with m units left above
  // the prefix; choice: -1 stored, else the last block j of the first segment.
  std::vector<double> opt((n + 1) * width, kInf);
  std::vector<int32_t> choice(n * width, -2);
  for (size_t m = 0; m <= memory; ++m) opt[n * width + m] = 0;
  for (size_t b = n; b-- > 0;) {
    for (size_t m = 0; m <= memory; ++m) {
      double best = kInf;
      int32_t pick = -2;
      const size_t stored = blocks[b].saved + blocks[b].output;
      if (stored <= m && opt[(b + 1) * width + m - stored] < best) {
        best = opt[(b + 1) * width + m - stored];
        pick = -1;
      }
      for (size_t j = b; j < n; ++j) {
        const std::optional<double> seconds = segment(b, j, m);
        if (!seconds) break;
        if (*seconds == kInf) continue;
        // A segment that fits holds c_j: m >= its output.
        const double total =
            j + 1 == n ? *seconds : *seconds + opt[(j + 1) * width + m - blocks[j].output];
        if (total < best) {
          best = total;
          pick = static_cast<int32_t>(j);
        }
      }
      opt[b * width + m] = best;
      choice[b * width + m] = pick;
    }
  }
  if (opt[memory] == kInf) return std::nullopt;
  TopLevelSchedule top{std::vector<BlockMode>(n, BlockMode::stored), {}};
  size_t m = memory;
  for (size_t b = 0; b < n;) {
    const int32_t pick = choice[b * width + m];
    MEMFIT_CHECK(pick != -2);
    if (pick == -1) {
      m -= blocks[b].saved + blocks[b].output;
      ++b;
      continue;
    }
    const auto j = static_cast<size_t>(pick);
    for (size_t k = b; k < j; ++k) top.modes[k] = BlockMode::dropped;
    top.modes[j] = j + 1 == n ? BlockMode::dropped : BlockMode::checkpointed;
    top.segments.push_back({b, j, m});
    if (j + 1 < n) m -= blocks[j].output;
    b = j + 1;
  }
  return top;
}

// The chain of a step graph (stages 1-2), sizes in bytes, and which forward
// values each block keeps when stored.
struct GraphChain {
  std::vector<Cut> candidates;
  std::vector<ChainBlock> blocks;                  // candidates.size() + 1
  std::vector<std::vector<ValueId>> block_values;  // the outputs of each block's dropped nodes
};
// With `mirror`, the costs follow the pass's mirror rule (stage 2).
GraphChain graph_chain(const Graph& graph, const NodeSeconds& seconds, bool mirror = false);

// The checkpoints (RecomputeOptions::keep) that realize `modes` on `chain`.
std::vector<ValueId> chain_keep(const GraphChain& chain, const std::vector<BlockMode>& modes);

// Stage 6.
Result<RecomputedGraph> apply_optimal(Graph graph, size_t memory_budget, const ArenaOf& arena_of,
                                      const NodeSeconds& seconds, bool mirror = false);

// Used by optimal and milp: a checkpoint set rewritten and planned.
struct PlannedTrial {
  RecomputedGraph result;
  size_t arena = 0;
  double recompute_seconds = 0;  // forward seconds added by the clones
};
class TrialSet {
 public:
  // With `mirror`, every rewrite mirrors too (RecomputeOptions::mirror).
  TrialSet(const Graph& graph, std::vector<Cut> candidates, const ArenaOf& arena_of,
           const NodeSeconds& seconds, bool mirror = false);
  // Rewrites with `keep` (plain: the graph as it is, or with mirror mirror
  // alone) and plans it, once per distinct set.
  Result<const PlannedTrial*> plan(std::vector<ValueId> keep, bool plain = false);
  // The same with nested levels (recompute_rotor.h).
  Result<const PlannedTrial*> plan(const NestedCheckpoints& nested);
  // The best plan for `target` (0: the smallest arena): see stage 6.
  Result<RecomputedGraph> best(size_t target);

 private:
  Result<const PlannedTrial*> plan_trial(NestedCheckpoints nested, bool plain);
  const Graph& graph_;
  std::vector<Cut> candidates_;
  const ArenaOf& arena_of_;
  const NodeSeconds& seconds_;
  bool mirror_ = false;
  double forward_seconds_ = 0;
  // Keyed by the sorted keep set, then each level's sorted set after an
  // invalid id; stable addresses.
  std::deque<std::pair<std::vector<ValueId>, PlannedTrial>> trials_;
};

}  // namespace memfit
