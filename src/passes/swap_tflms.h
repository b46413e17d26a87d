// TFLMS (Le et al. 2018, IBM Large Model Support): which values to swap and
// where each swap-in starts, chosen by graph structure alone, as explicit
// placements for the swap pass (src/passes/swap.h), which does the rewrite.
//
// Input invariants: a verified step graph whose node order is the schedule,
// phases as node_phase tells them, no copy nodes yet; per value its bytes.
// Backward nodes carry autodiff's names: a gradient rule names every node it
// appends `<forward node>.grad.<op>` (src/ops/grad_context.cpp), which is the
// forward/backward correspondence chain_rule reads (as TFLMS reads
// TensorFlow's `gradients/<op>_grad/` scopes); nothing else is recorded.
//
// Positions are those of the input order; S is the first backward node
// (swap_backward_start). A forward node is a forward-phase node before S. A
// swap-in "triggered at node t" is a to_device at boundary t + 1, so its
// distance to its consumer c is c - t (1: just before c).
//
// 1. Candidates: outputs of forward nodes, not graph outputs nor update
//    values, bytes > 0, of two kinds:
//    a. backward: read at or after S; swapped out after F, the last forward
//       use (its producer when no forward node reads it).
//    b. branch (options.branches): among its forward uses u_0 (the producer)
//       < u_1 < ... (its forward readers), the first pair with
//       u_{i+1} - u_i > branch_threshold and u_{i+1} - u_i > lb (so a trigger
//       fits between them); swapped out after F = u_i. A value that is both
//       is a branch swap (F is earlier).
//    Candidates are ordered by producer position (then value id).
// 2. Triggers, per reader c after F, walking the distance d from lb to ub:
//    a valid trigger t = c - d satisfies t >= F + 1 (after the swap-out,
//    with a node between, so the device copy is really released) and, for a
//    backward reader, t >= S. direct_order takes the first valid d. For a
//    backward reader, chain_rule first takes the forward nodes exactly lb
//    hops downstream of x's producer along forward data edges, and among
//    their gradient nodes the latest valid one with d in [lb, ub] (by the
//    chain rule those run before c's own gradient work); none: direct_order,
//    counted as a fallback. Forward readers (branch swaps) always use
//    direct_order: they have no gradient node.
//    A candidate with a reader that gets no valid trigger is skipped whole.
// 3. n_tensors: the first n_tensors candidates of stage 1 that stage 2 did
//    not skip (all when -1).
// 4. Swap-ins: without fuse, one per reader at its own trigger (the device
//    copy dies after that reader). With fuse, readers in ascending order join
//    the current group while on the same side of S and within ub of the
//    group's trigger (its first reader's), so one copy serves them all.
//
// Guarantees: placements that satisfy the swap pass's rules (every reader
// after the swap-out served once, swap-ins after the swap-out); a trigger is
// always at least lb and at most ub before each reader it serves.
// Cost: O(N + E) for the correspondence and the readers (and the names'
// lengths), plus per candidate O(1) per reader for direct order; chain_rule
// adds the nodes and edges within lb hops of the producer, and a binary
// search per reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "memfit/techniques.h"
#include "passes/swap.h"

namespace memfit {

struct TflmsSwap {
  SwapPlacement placement;
  std::vector<int32_t> triggers;  // per swap-in: the node after which its to_device goes
  bool branch = false;            // swapped between two forward uses
};

struct TflmsChoice {
  std::vector<TflmsSwap> swaps;  // in producer order
  size_t candidates = 0;         // of stage 1
  size_t skipped = 0;            // candidates with a reader that has no valid trigger
  size_t fallbacks = 0;          // chain_rule: backward readers triggered by direct order
};

// Stages 1 to 4; `options` must pass check_tflms_options.
TflmsChoice tflms_placements(const Graph& graph, const std::vector<size_t>& value_bytes,
                             const TflmsOptions& options);

}  // namespace memfit
