// Which forward values a step keeps for the backward pass: the strategies of
// Chen et al. 2016 behind `--recompute`, over the recompute pass (recompute.h).
//
// Candidates (Chen's split points, generalized to cuts): at a boundary in
// the forward nodes' order (after forward node i), the cut is the set of
// forward values made at or before i that a forward node after i reads; graph
// inputs (parameters, data, state) do not count, since they stay anyway. So
// the forward nodes after a cut depend on the earlier ones only through its
// values, and keeping a candidate means keeping all of them. A boundary is a
// candidate when
//  1. its cut has at most `max_values` values and node i made one of them;
//  2. it is fresh: every value of its cut was made after the boundary of the
//     candidate before it (so candidates are disjoint, and a residual block
//     is never cut in the middle by its input: the final add reads it again);
//  3. it has one value, or it is not the only multi-value candidate between
//     two consecutive single-value candidates (or the start or end of the
//     forward pass). A lone one splits a block that single-value cuts already
//     bound (a residual block whose projection shortcut runs first); where
//     single-value cuts are missing over a stretch (an unrolled recurrent
//     network, whose steps pass several states), the multi-value ones serve.
// With max_values = 1 these are exactly Chen's single values; a graph whose
// candidates all have one value (resnets, VGG) gets the same ones whatever
// max_values is. Found in one sweep: O((N + E) log N).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "memfit/ir.h"
#include "memfit/techniques.h"

namespace memfit {

struct Cut {
  NodeId after;                 // the forward node after which the cut is taken
  std::vector<ValueId> values;  // in the order they were made; the last made by `after`
};
inline constexpr size_t kMaxCutValues = 8;

// The candidates of a step graph (or a forward graph), in the forward order.
std::vector<Cut> checkpoint_candidates(const Graph& graph, size_t max_values = kMaxCutValues);

// The values of `cuts`, in order: what RecomputeOptions::keep takes.
std::vector<ValueId> cut_values(const std::vector<Cut>& cuts);

// Chen's Algorithm 1: with n candidates, every k-th one, k = ceil(sqrt(n)),
// so the forward pass splits into about sqrt(n) segments of about sqrt(n)
// candidates each; the values of the chosen cuts.
std::vector<ValueId> sqrt_checkpoints(const std::vector<Cut>& candidates);

// Chen's budgeted greedy plan (MXNet memonger's make_mirror_plan): walking the
// forward nodes in order, add up the bytes of their outputs; at a candidate
// (the last of its values that its boundary node makes), when the sum
// exceeds `segment_bytes`, keep it (all its values) and start a new segment.
struct GreedyCheckpoints {
  std::vector<ValueId> checkpoints;  // the values of the kept cuts
  size_t kept_bytes = 0;             // the checkpoints' bytes
  size_t largest_segment = 0;        // the most bytes summed in one segment
};
GreedyCheckpoints greedy_checkpoints(const Graph& graph, const std::vector<Cut>& candidates,
                                     size_t segment_bytes);

// Chen's recursion (section 4.4, with one checkpoint per split: memory
// log2(n)): the middle candidate is kept from the forward pass (level 0);
// each half is split again at its middle, one level deeper, until no
// candidate is left inside a piece. Candidate i of n (1-based) thus gets the
// level of its node in the balanced binary tree over 1 .. n; all the values
// of a cut share its level.
struct NestedCheckpoints {
  std::vector<ValueId> keep;                 // level 0
  std::vector<std::vector<ValueId>> levels;  // levels[k - 1]: level k
  std::vector<ValueId> segment_ends;         // each cut's last value (RecomputeOptions)
};
NestedCheckpoints recursive_checkpoints(const std::vector<Cut>& candidates);

// The arena a step graph would be planned in: the search of the budget
// strategy compares plans by it.
using ArenaOf = std::function<Result<size_t>(const Graph&)>;

// What a strategy did to a step graph.
struct RecomputeSummary {
  size_t candidates = 0;        // cuts of the forward graph (checkpoint_candidates)
  size_t checkpoints = 0;       // candidates whose values are all kept (at any level)
  size_t recomputed_nodes = 0;  // clones inserted
  size_t levels = 0;            // nested checkpoint levels below level 0 (recursive)
};

struct RecomputeOptions;
// The candidates whose every value `options` keeps, at level 0 or nested.
size_t kept_cuts(const std::vector<Cut>& candidates, const RecomputeOptions& options);

struct RecomputedGraph {
  Graph graph;
  RecomputeSummary summary;
};

// Applies `strategy` to a step graph (the recompute pass's input invariants).
//  none:   the graph as it is.
//  sqrt:   sqrt_checkpoints of the candidates.
//  budget: Chen's search over the segment budget B (as memonger's
//          search_plan): B = 0 (every candidate kept), then twice
//          B = sqrt(x * y / 2) for x the bytes kept and y the largest segment
//          of the last plan, then 6 values of B evenly from the smallest
//          largest segment seen to the last B times sqrt(2). Each distinct
//          plan, the sqrt plan and the graph without recomputation are
//          planned with `arena_of`, so budget never does worse than none or
//          sqrt. Without a memory budget the smallest arena wins; with one
//          (`memory_budget` > 0) the plan with the fewest recomputed nodes
//          whose arena fits, else the smallest arena (which the caller's
//          budget check then refuses, naming it). Ties go to fewer
//          recomputed nodes, then to the smaller arena.
//  recursive: recursive_checkpoints of the candidates, as nested levels.
//  optimal, milp: src/passes/recompute_optimal.h and recompute_milp.h, with
//          the roofline cost model (apply_recompute_costed takes another).
// With `mirror`, every rewrite also recomputes cheap ops (RecomputeOptions::
// mirror); none with mirror recomputes only those.
// Cost: none, sqrt and recursive O(N L + E + C) (recompute.h); budget at most
// 10 rewrites and 11 calls of arena_of.
Result<RecomputedGraph> apply_recompute(Graph graph, Recompute strategy, size_t memory_budget,
                                        const ArenaOf& arena_of, bool mirror = false);

}  // namespace memfit
