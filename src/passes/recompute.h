// Recomputation (gradient checkpointing, Chen et al. 2016) as a graph rewrite:
// forward activations that are not kept are computed again, by clones of
// their forward nodes placed inside the backward pass, instead of being held
// from the forward pass until the backward pass reads them.
//
// Input invariants: a verified step graph (forward, backward and optimizer
// nodes in one graph, as build_step_graph makes it), nodes in topological
// order, phases as node_phase (src/ir/phase.h) tells them.
//
// 1. Phases: every node is forward or not (backward, update). A forward value
//    is an output of a forward node.
// 2. Kept values: graph inputs, outputs of non-forward nodes, the requested
//    checkpoints of level 0 (`keep`), graph outputs, the next values of state
//    updates, batch norm's batch statistics (always_kept, src/ops/op_table.h),
//    and every output of a forward node that the forward pass itself does not
//    need (none of its outputs is read by a forward node, is a graph output or
//    an update): recomputing such a node would only move it. Every other
//    forward value is dropped; with `keep_others`, only the outputs of
//    mirrored nodes are (mirror alone).
//    Levels: a forward node that makes a checkpoint of level k >= 1
//    (`levels[k - 1]`) has level k; a mirrored node (its op
//    cheap_to_recompute, makes no checkpoint, its outputs read by at most one
//    forward node, and each of its inputs a graph input, read by a non-forward
//    node, or made by a mirrored node, through a chain of at most 4 mirrored
//    nodes) has level L + 2, for L = levels.size(); every other forward node
//    has level L + 1.
//    The level-l segment of a forward node is the number of checkpoints of
//    level <= l (of those in `segment_ends`, when it is set) made at or
//    before it in the forward order.
// 3. Rewrite, node by node in the given order: a forward node stays where it
//    is; before a non-forward node that reads a dropped value, the clones that
//    value needs are inserted (its producer's clone and the clones of the
//    producer's dropped inputs without a valid clone, found depth first from
//    the kept values and the valid clones, inserted in their forward order,
//    so that each is made just before its first reader among them, as the
//    forward pass ran them), and the node reads the clone. A clone stays valid (later
//    readers reuse it) until it is invalidated:
//    - a clone of level k in 2 .. L + 1 when the backward pass reads a
//      dropped value in another level-(k - 1) segment than the last one
//      read (the context): Chen's recursion, where a segment is recomputed
//      from its level-(k - 1) start, keeping only its level-k checkpoints,
//      and each of its sub-segments again from them, one at a time. Such a
//      clone is valid only while the context is in its own level-(k - 1)
//      segment: the clones a walk makes in other segments (a chain
//      recomputed from an earlier checkpoint) serve that walk alone, so a
//      walk over one of several chains (an unrolled LSTM's layers) does not
//      keep that chain's values alive for the walks of the others;
//    - a mirrored clone at the next non-forward node: each backward reader
//      recomputes the cheap op (and the mirrored values it reads) just
//      before it;
//    - a clone of level 1 never.
//    With checkpoints on values that cut the forward graph, a dropped value
//    needs only the forward nodes after the nearest valid checkpoint before
//    it, so the clones of one segment are made just before the segment's
//    first backward consumer, segment by segment in backward order, and only
//    one segment's recomputed activations (per level) are live at a time.
// 4. Rebuild: values are renumbered in definition order.
//
// Clones keep their op and attrs (but batch norm's, recompute_form in
// src/ops/op_table.h): dropout's key draws the same mask, and the kernels are
// deterministic, so a clone's outputs equal the original's bit for bit. A
// batch norm's clone normalizes the same batch with the batch statistics the
// original saved, and updates no running statistics: the updates keep naming
// the originals' outputs, so the state moves once per step.
//
// Guarantees: a verified graph with the same inputs, outputs, updates and
// originals (in their order); without levels and mirror every forward node is
// cloned at most once; every clone runs after its inputs and before its first
// consumer; no non-forward node reads a dropped value.
// The executor may run the nodes in a memory-aware order instead
// (src/memory/schedule.cpp), which can move clones away from their consumers;
// it keeps that order only when its arena is smaller, so the placement made
// here is never traded for a larger arena.
// Cost: O(N L + E + C) for N nodes, E node inputs, L levels and C clones
// (C <= N without levels and mirror; about N L for a chain split in halves
// L times), plus the rebuild.
#pragma once

#include <cstddef>
#include <vector>

#include "memfit/ir.h"

namespace memfit {

struct RecomputeOptions {
  // Forward values to keep for the backward pass (checkpoints); every other
  // forward value the backward pass reads is recomputed.
  std::vector<ValueId> keep;
  // Nested checkpoints: levels[k - 1] holds those of level k >= 1. They are
  // not kept from the forward pass: they are recomputed, and their clones are
  // kept while the backward pass works in the level-(k - 1) segment that
  // holds them (step 3 of the header).
  std::vector<std::vector<ValueId>> levels;
  // Checkpoints (of `keep` or `levels`) that end a segment (stage 2's
  // count). Empty: every checkpoint does. A cut of several values
  // (checkpoint_candidates) is made by several nodes; only its last value
  // ends a segment, so the cut's other values do not split one.
  std::vector<ValueId> segment_ends;
  // Mirror (MXNet's): the outputs of cheap ops (cheap_to_recompute) that make
  // no checkpoint, are read by at most one forward node and read only values
  // that the backward pass reads anyway (or mirrored ones, at most 4 in a
  // chain, or graph inputs) are recomputed for each backward node that reads
  // them rather than stored.
  bool mirror = false;
  // Keep every forward value but the mirrored ones (mirror without a strategy).
  bool keep_others = false;
};

struct RecomputeStats {
  size_t dropped_values = 0;    // forward values the backward pass now reads from clones
  size_t recomputed_nodes = 0;  // clones inserted
  size_t most_clones = 0;       // the most clones of one forward node
};

// The forward nodes `options` mirrors (stage 2's rule), by node id: the
// cost-driven strategies predict mirror's clones from them. Errors as recompute's.
Result<std::vector<bool>> mirrored_nodes(const Graph& graph, const RecomputeOptions& options);

// Rewrites `graph` as above; true when it inserted clones. A value of `keep`
// or a level that is not an output of a forward node, or a value listed twice,
// is an error. `stats` may be null.
Result<bool> recompute(Graph& graph, const RecomputeOptions& options,
                       RecomputeStats* stats = nullptr);

}  // namespace memfit
