// The swap policies of `--swap` over the swap pass (src/passes/swap.h): which
// activations of a step graph go to the host pool.
#pragma once

#include <cstddef>

#include "memfit/techniques.h"
#include "passes/policy_context.h"

namespace memfit {

struct SwapSummary {
  size_t candidates = 0;      // forward activations the backward pass reads again
  size_t swapped_values = 0;  // of them, those swapped
  size_t swapped_bytes = 0;   // their bytes
  size_t prefetched_nodes = 0;
  size_t swap_ins = 0;           // to_device nodes
  size_t branch_swaps = 0;       // tflms: values swapped between two forward uses
  size_t trigger_fallbacks = 0;  // tflms chain_rule: swap-ins placed by direct order
  bool waits_in_order = false;   // SwapOptions::waits_in_order, to fit the budget
};

struct SwappedGraph {
  Graph graph;
  SwapSummary summary;
};

// `step` (a step graph, recomputed or not) after the swap policy. The graph is
// first put in the order the executor would run it (context.plan); node
// times are predicted by src/passes/step_time.h with context.seconds for
// compute nodes (empty: the roofline cost model) and a link of
// context.link_gbps.
//  refcount: the candidates whose idle span covers the peak step of that plan
//            and whose idle seconds are at least the copy out and back
//            (2 bytes / link).
//  budget:   the candidates by bytes x idle seconds, largest first; without a
//            memory budget (context.budget = 0) all of them, else the shortest
//            prefix of that list whose arena fits, found by bisection over its
//            length (the arena falls as more is swapped, though not strictly);
//            when none fits, the prefix with the smallest arena seen, which
//            the caller's budget check refuses, naming it. When every
//            candidate swapped does not fit, the swaps' waits go in order
//            (SwapOptions::waits_in_order: compute waits for the copies,
//            where the link is slower than compute) if that makes the arena
//            smaller, and the bisection runs so. (With timed waits the arena
//            need not fall as more is swapped, so a shorter timed prefix
//            might have fitted too; waits in order are taken only where
//            they make the arena smaller.)
//  tflms:    TFLMS's placements (src/passes/swap_tflms.h) with `tflms`'s knobs;
//            over a memory budget, its waits in order if that makes the arena
//            smaller (the caller's budget check applies).
// `tflms` other than the defaults with another policy is an error, as are
// knobs check_tflms_options refuses.
// Cost: one plan for refcount, up to three for tflms, about log2(candidates) + 3
// plans for budget.
Result<SwappedGraph> swap_step_graph(Graph step, Swap policy, const PolicyContext& context,
                                     const TflmsOptions& tflms = {});

// The predicted seconds of `graph` as the executor would run it (its order
// after context.plan), by src/passes/step_time.h with context.seconds for
// compute nodes (empty: roofline) and context's link.
Result<double> predict_step_seconds(const Graph& graph, const PolicyContext& context);

}  // namespace memfit
