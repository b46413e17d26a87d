// Blocked layouts: the backend's channel-blocked layout (oneDNN's nChw8c or
// nChw16c, Layout::c8 or c16) for the values of convolution networks, and its
// blocked weights layout (OIhw8i8o or OIhw16i16o, Layout::oi8 or oi16) for
// convolution weights, their gradients and their optimizer state, with
// explicit reorder nodes where a value crosses between layouts, so that the
// planner and the verifier see every byte (padding included) and every copy.
//
// Input: a verified step graph (after autodiff and fusion, before recompute
// and swap, which keep each value's layout). Every value plain.
//
// Algorithm, one pass over the nodes in order (Backend::blocked_operands):
// 1. A seed node (convolution, batch norm, pooling and their gradients) gets
//    its `inputs` in the blocked layout, through a reorder node where one is
//    plain; its `either_inputs` stay as they are (a convolution reads a plain
//    image as it is, and its weights in their layout), and its `outputs`
//    become blocked.
// 2. A follow node (activations, their gradients, add of same-shape tensors,
//    the optimizer updates, a fill of zeros) whose inputs include a blocked
//    one gets them all in that one's layout, and its outputs are in it;
//    otherwise it stays plain.
// 3. Any other node reads a plain copy of every blocked input: one reorder
//    node per value and layout, shared by all readers that need it.
// 4. Graph outputs are replaced by plain copies made at the end of the step,
//    and next values of state not in their state's layout by copies in it.
// State (a persistent graph input) that no node has read yet takes the layout
// its first reader wants instead of a reorder: a convolution's weights the
// layout its kernel reads them in (BlockedOperands::weights, where that is
// oi8 or oi16), then momentum, Adam's moments and gradient accumulators that
// of the update or sum that first reads them beside a blocked gradient (a
// weight gradient's kernel writes it in the weights layout). The executor
// converts state between the plain layout and its own as it loads, stores and
// copies it, so checkpoints hold plain tensors whatever the ISA chose.
// Only f32 values of rank 4 or 5 are ever blocked. Channels that end in a
// partial block are padded with zeros when there are more than one block of
// them (LeNet's 20 and 50 to 24 and 56: its step runs in 12 ms so against
// 17 ms plain, where oneDNN 2.6 falls back to its gemm-based convolutions);
// fewer than a block would double the work or more. A seed or follow node
// with a volume among its blocked operands that may not be blocked (see
// PartialBlocks) stays plain (stage 3). Each reorder node is
// placed just before the first node that reads it (stage 4's at the end), so
// the plain or blocked copy lives no longer than it must.
//
// Guarantees: the same function as the input graph (a reorder is the
// identity on values); graph inputs other than state, and graph outputs, stay
// plain; the next value of state is in its state's layout; a node's operands
// are in layouts its backend kernel takes. A backend without a blocked layout
// gets the graph unchanged.
// Cost: O(nodes + edges), plus a rebuild of the graph, plus one query of
// oneDNN per convolution for its weights' format.
#pragma once

#include <cstddef>

#include "memfit/ir.h"
#include "runtime/kernel.h"

namespace memfit {

struct LayoutSummary {
  size_t blocked_values = 0;  // values the pass made channel-blocked (reorders' outputs included)
  size_t weight_values = 0;   // values in the weights layout: weights, their gradients and state
  Layout weights = Layout::plain;  // that layout (plain: none)
  size_t reorders = 0;        // reorder nodes inserted
};

// Which volumes whose channels end in a partial block may be blocked.
enum class PartialBlocks : uint8_t {
  keep_plain,            // none: only whole blocks
  pad_beyond_one_block,  // those with more channels than one block
  pad,                   // all (the tests run every kernel so)
};

struct LayoutOptions {
  PartialBlocks partial_blocks = PartialBlocks::pad_beyond_one_block;
  // false: convolution weights stay plain, and each convolution's kernel
  // reorders them in its workspace (the tests compare the two).
  bool blocked_weights = true;
};

Result<Graph> assign_layouts(const Graph& graph, const Backend& backend,
                             LayoutSummary* summary = nullptr, const LayoutOptions& options = {});

}  // namespace memfit
