// Swapping to host memory (Meng et al. 2017; TFLMS, Le et al. 2018) as a graph
// rewrite: a forward activation that the backward pass reads again is copied
// to the host pool after its last forward use, its device memory is released
// once the copy has completed, and it is copied back before its first
// backward use, early enough for the copy to hide behind compute.
//
// Input invariants: a verified step graph whose node order is the schedule
// (as Executable::prepare would run it: the executor keeps the order of a
// graph with copy nodes), phases as node_phase (src/ir/phase.h) tells
// them, no copy nodes yet; per value its bytes as the backend lays it out;
// per node its predicted seconds (src/passes/step_time.h).
//
// Positions: S is the first node that is not a forward node and reads an
// output of a forward node (the backward pass starts there). For a swapped value x, F is its last
// reader before S (its producer if none) and B its first reader at or after S. A boundary k is the
// point just before node k of the input order; T(k) the predicted compute seconds of nodes 0..k-1;
// c = bytes(x) / link the time of one copy.
//
// 1. Candidates: outputs of forward nodes before S, read at or after S, not
//    graph outputs nor update values, with bytes > 0.
// 2. Swap-out, in the order of F: to_host(x) at boundary F + 1 (Meng: after
//    the last forward use). Its copy starts at max(T(F + 1), the end of the
//    previous swap-out's copy): one copy stream, in issue order. swap_wait(x, h)
//    goes at the first boundary W in [F + 1, S] with T(W) >= the copy's
//    predicted end, or at S: x's device range is free from W on, before the
//    backward pass, and compute waits at W only if the copy is late.
//    With waits in order (SwapOptions::waits_in_order), W is at most the
//    next later swap-out's boundary: where the link is slower than compute
//    (a GPU), copies would otherwise queue past S and hold their values on
//    the device through the peak; in order, compute waits for each copy
//    instead, and its range is free from the next swap-out's boundary on
//    (where that swap-out is issued first, keeping the copy stream busy).
// 3. Swap-in: to_device(h) at boundary p, first p = B (just in time). The peak
//    P of the live device bytes is computed with every swap-in at B (values
//    live from their producer to their last reader, x until W and x' from p
//    to its last reader; workspaces not counted). Prefetch, value by value in
//    the order of B: p moves one node earlier while T(B) - T(p) < c (the copy
//    would not yet hide), p - 1 >= S (never during the forward pass) and the
//    live bytes at node p - 1 plus bytes(x) stay <= P. So a prefetch never
//    raises the peak of live bytes: it uses only room below the peak.
// 4. Rewrite: readers of x at or after S read x'; at each boundary the new
//    nodes go in the order to_host, swap_wait, to_device; values are renumbered
//    in definition order.
//
// Explicit placements (SwapOptions::placements, chosen by TFLMS in
// src/passes/swap_tflms.h) replace stages 1 and 3: the caller gives, per value
// x, the swap-out boundary O (after x's producer; readers before O keep
// reading x) and groups of the readers at or after O, each with the boundary
// p_g of its own to_device (p_g >= O, p_g <= each reader of the group). Such a
// swap may lie entirely inside the forward pass (a skip connection swapped
// between two forward readers). Stage 2 puts swap_wait at the first boundary
// W in [O, min p_g] whose predicted time reaches the copy's end (else at
// min p_g); stage 4 makes each group read its own copy x'_g. One host copy h
// serves every group: it lives until the last to_device reads it.
//
// Guarantees: a verified graph with the same inputs, outputs and updates, in
// which every node reads bit-identical data (copies move bytes unchanged);
// every to_host has its swap_wait, at or before every to_device of its copy;
// readers of x' follow its to_device.
// Predicted times ignore the copy stream's contention among swap-ins (the
// step-time simulation counts it).
// Cost: O(N + E) for N nodes and E node inputs, plus O(N) per swapped value
// for the prefetch, plus the rebuild; placements: O(readers) per value to check.
#pragma once

#include <cstddef>
#include <vector>

#include "memfit/ir.h"

namespace memfit {

struct SwapCandidate {
  ValueId value;
  int32_t last_forward_use = 0;    // F
  int32_t first_backward_use = 0;  // B
  double idle_seconds = 0;  // predicted compute seconds of the nodes strictly between F and B
  size_t bytes = 0;
  bool covers(int32_t step) const { return last_forward_use < step && step < first_backward_use; }
};

// S of the header: the first node of the backward pass (N when none).
int32_t swap_backward_start(const Graph& graph);

// Stage 1, in value order. `value_bytes` per value, `node_seconds` per node.
std::vector<SwapCandidate> swap_candidates(const Graph& graph,
                                           const std::vector<size_t>& value_bytes,
                                           const std::vector<double>& node_seconds);

// One to_device of a swapped value and the readers that read its copy.
struct SwapIn {
  int32_t at = 0;                // boundary (input order): the copy goes just before node `at`
  std::vector<int32_t> readers;  // nodes (input order) that read it, each at or after `at`
};

// A swap placed by the caller: to_host at boundary `swap_out` (after the
// producer), and swap-ins that together serve every reader at or after it,
// each reader exactly once.
struct SwapPlacement {
  ValueId value;
  int32_t swap_out = 0;
  std::vector<SwapIn> swap_ins;
};

struct SwapOptions {
  std::vector<ValueId> values;            // to swap: candidates of stage 1
  std::vector<SwapPlacement> placements;  // or these, as placed (not both)
  std::vector<size_t> value_bytes;        // per value of the input graph
  std::vector<double> node_seconds;       // per node of the input graph: predicted compute seconds
  double link_bytes_per_second = 1e10;
  // Stage 2's W at most the next later swap-out's boundary (time for memory).
  bool waits_in_order = false;
};

struct SwapStats {
  size_t swapped_values = 0;
  size_t swapped_bytes = 0;     // their bytes: what the host pool holds without sharing
  size_t prefetched_nodes = 0;  // nodes the swap-ins moved ahead of their consumers, summed
  size_t swap_ins = 0;          // to_device nodes
};

// Rewrites `graph` as above; true when it swapped a value. A value that is not
// a candidate, or a placement that breaks the rules above, is an error.
// `stats` may be null.
Result<bool> swap(Graph& graph, const SwapOptions& options, SwapStats* stats = nullptr);

}  // namespace memfit
