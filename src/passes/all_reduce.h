// Data parallelism as a graph rewrite (docs/design.md, Distributed; PyTorch's
// DistributedDataParallel, Li et al. 2020): every rank runs the same step on
// its own rows and computes its own loss; before the optimizer reads a
// gradient, the gradient is summed over the ranks. Gradients are grouped into
// buckets in the order the backward pass produces them, and each bucket's sum
// starts as soon as the bucket is complete, so that communication overlaps
// the rest of the backward pass.
//
// Input invariants: a verified step graph whose node order is the schedule
// (the executor keeps the order of a graph with communication nodes), its
// loss scaled by 1 / (ranks * accumulate) (so the sum is the gradient of the
// global mean), after every other rewrite (techniques, layouts: a gradient's
// bytes are final).
//
// 1. Buckets of the gradients the update nodes read (src/passes/grad_buckets.h).
// 2. Rewrite: all_reduce_start(g_1 .. g_k) -> b where the bucket closes;
//    all_reduce_wait(b) -> (r_1 .. r_k) just before the first node that reads
//    one of the g_i, which from then on reads r_i (laid out as g_i). Where
//    several land at one place, the starts go first, in bucket order.
//
// Guarantees: a verified graph with the same inputs, outputs and updates; every
// reader of a reduced value other than its start reads the sum; each bucket's
// start precedes its wait; with one rank the sums are the values themselves.
// Cost: O(N + E) for N nodes and E node inputs, plus the rebuild.
#pragma once

#include <cstddef>
#include <vector>

#include "memfit/ir.h"
#include "passes/grad_buckets.h"

namespace memfit {

// `graph` with its gradients summed over `ranks` ranks in buckets of at least
// `bucket_bytes` (the last one may be smaller); 0 gives each node that makes
// gradients (a weight's and a bias's, say) a bucket of its own.
Result<Graph> insert_all_reduce(Graph graph, int64_t ranks, size_t bucket_bytes,
                                AllReduceSummary* summary = nullptr);

}  // namespace memfit
