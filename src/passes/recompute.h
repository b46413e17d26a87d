// Recomputation (gradient checkpointing, Chen et al. 2016) as a graph rewrite:
// forward activations that are not kept are computed again, by clones of
// their forward nodes placed inside the backward pass, instead of being held
// from the forward pass until the backward pass reads them.
//
// Input invariants: a verified step graph (forward, backward and optimizer
// nodes in one graph, as build_step_graph makes it), nodes in topological
// order, phases as node_phase (src/passes/phase.h) tells them.
//
// 1. Phases: every node is forward or not (backward, update). A forward value
//    is an output of a forward node.
// 2. Kept values: graph inputs, outputs of non-forward nodes, the requested
//    checkpoints, graph outputs, the next values of state updates, and every
//    output of a forward node that the forward pass itself does not need
//    (none of its outputs is read by a forward node, is a graph output or an
//    update): recomputing such a node would only move it. Every other forward
//    value is dropped.
// 3. Rewrite, node by node in the given order: a forward node stays where it
//    is; before a non-forward node that reads a dropped value, the clones that
//    value needs are inserted (its producer's clone, after the clones of the
//    producer's dropped inputs, depth first from the kept values), unless an
//    earlier consumer made them already, and the node reads the clone. With
//    checkpoints on values that cut the forward graph, a dropped value needs
//    only the forward nodes after the nearest checkpoint before it, so the
//    clones of one segment are made just before the segment's first backward
//    consumer, segment by segment in backward order, and only one segment's
//    recomputed activations are live at a time.
// 4. Rebuild: values are renumbered in definition order.
//
// Clones keep their op and attrs: dropout's key draws the same mask, and the
// kernels are deterministic, so a clone's outputs equal the original's bit for
// bit (batch norm's clone sees the same batch and gives the same batch
// statistics). The updates keep naming the originals' outputs, so a cloned
// batch norm computes running statistics that nothing reads: the state is
// updated once per step.
//
// Guarantees: a verified graph with the same inputs, outputs, updates and
// originals (in their order); every forward node is cloned at most once;
// every clone runs after its inputs and before its first consumer; no
// non-forward node reads a dropped value.
// The executor may run the nodes in a memory-aware order instead
// (src/passes/schedule.cpp), which can move clones away from their consumers;
// it keeps that order only when its arena is smaller, so the placement made
// here is never traded for a larger arena.
// Cost: O(N + E) for N nodes and E node inputs, plus the rebuild.
#pragma once

#include <cstddef>
#include <vector>

#include "memfit/ir.h"

namespace memfit {

struct RecomputeOptions {
  // Forward values to keep for the backward pass (checkpoints); every other
  // forward value the backward pass reads is recomputed.
  std::vector<ValueId> keep;
};

struct RecomputeStats {
  size_t dropped_values = 0;    // forward values the backward pass now reads from clones
  size_t recomputed_nodes = 0;  // clones inserted
};

// Rewrites `graph` as above; true when it inserted clones. A value of `keep`
// that is not an output of a forward node is an error. `stats` may be null.
Result<bool> recompute(Graph& graph, const RecomputeOptions& options,
                       RecomputeStats* stats = nullptr);

}  // namespace memfit
