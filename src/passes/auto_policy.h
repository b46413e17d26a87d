// `--policy auto`: for every forward activation that the backward pass reads
// again, keep it, recompute it or swap it to host memory, so that the step
// fits the memory budget at the least predicted step time.
//
// Input invariants: a step graph as build_step_graph makes it (the recompute
// pass's input, src/passes/recompute.h), not yet recomputed or swapped; a
// policy context (src/passes/policy_context.h): the planner, the budget, the
// link and the node times of compute nodes (src/cost/cost_model.h).
//
// 1. Plan the step as it is. Without a budget, or when it fits, every
//    activation is kept: nothing is added, so no plan is faster.
// 2. Candidates: the swap pass's (src/passes/swap.h, stage 1) on the planned
//    order: forward values read again at or after the start of the backward
//    pass, with their last forward use F, first backward use B and the
//    predicted idle seconds between them. Evicting one from F to B costs:
//    - swap: c = bytes / link each way; the part of the round trip 2c that
//      the idle seconds cannot hide, max(0, 2c - idle);
//    - recompute: the predicted seconds of its producer, cloned from its
//      inputs just before B (forward values only: a backward node's output,
//      such as the loss gradient's fill, can only be swapped).
//    Candidates are ranked by the cheaper cost per byte (ties: more bytes
//    first). Walking the ranking, each takes its cheaper technique, where a
//    swap costs its whole round trip once the swap-outs chosen before it
//    fill the link for a share s of the forward pass's compute time (one
//    copy stream: a swap-out that cannot complete in the forward pass frees
//    nothing before the backward pass; the queue of copies also delays the
//    release of every later one, so the ranking is made for s = 1, 1/2, 1/4
//    and 0, the last recomputing every forward value it can).
// 3. Per-tensor plan for a prefix of the ranking: its recompute values are
//    dropped by the recompute pass (every other candidate kept), the result
//    planned, and its swap values (those still candidates of the new order)
//    swapped by the swap pass, with its prefetch. The shortest prefix whose
//    arena fits is found by bisection over the prefix length (the arena
//    falls as the prefix grows, though not strictly), for each ranking.
// 4. Whole-family plans beside it: recompute alone (the budget strategy:
//    Chen's greedy segments, the least recomputation that fits; and the
//    optimal strategy: the least predicted recompute time that fits), each
//    with and without mirror, and swap alone (the budget policy), after
//    mirror or not. Of the plans that fit, the least predicted
//    step time wins (the two-stream simulation of src/passes/step_time.h,
//    ties: the smaller arena); when none fits, the smallest arena, which the
//    caller's budget check refuses, naming it.
//
// Guarantees: the result is a graph of the recompute and swap passes, so it
// computes what the step computes, bit for bit; it fits whenever one of the
// plans of stage 4 fits, and its predicted time is then no more than theirs.
// Cost: 4 (log2(candidates) + 1) per-tensor trials at most (each one
// rewrite and two plans), plus four recompute strategies' and two budget policies' searches.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "passes/policy_context.h"
#include "passes/recompute_strategy.h"
#include "passes/swap_policy.h"

namespace memfit {

// The choice of the per-tensor plan, which counts its recomputation in
// values (recomputed_values); the whole-family plans count it in nodes.
inline constexpr std::string_view kPerTensorChoice = "per-tensor";
// What auto's plan `choice` recomputed, as every report says it: "12 values
// in 30 nodes" (the per-tensor plan) or "30 nodes" (a whole-family plan).
std::string auto_recomputed_text(std::string_view choice, size_t values, size_t nodes);

struct AutoSummary {
  std::string choice;  // the plan that won: keep, per-tensor, recompute, recompute+mirror,
                       // optimal, optimal+mirror, swap or mirror+swap
  size_t candidates = 0;         // activations the backward pass reads again
  size_t recomputed_values = 0;  // of them, recomputed (per-tensor plan)
  RecomputeSummary recompute;    // what the recompute pass did
  SwapSummary swap;              // what the swap pass did
  size_t arena_bytes = 0;        // the winner's planned arena
  double predicted_step_seconds = 0;
};

struct AutoGraph {
  Graph graph;
  AutoSummary summary;
};

Result<AutoGraph> auto_step_graph(Graph step, const PolicyContext& context);

}  // namespace memfit
