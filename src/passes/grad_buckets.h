// The gradient buckets of data parallelism, shared by the all-reduce pass
// (src/passes/all_reduce.h) and the ZeRO pass (src/passes/zero_shard.h).
//
// Reduced values are the gradient inputs of the update nodes (sgd_update,
// adamw_update). Walking the nodes in order, a reduced value joins the open
// bucket when its producer runs; the bucket closes after that node once it
// holds at least `bucket_bytes`, or before a node that reads one of its
// values, or at the end of the graph.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "memfit/ir.h"

namespace memfit {

struct GradBucket {
  std::vector<ValueId> values;  // in the order their producers run
  size_t bytes = 0;             // as laid out
  int32_t start = 0;            // the boundary where it is complete (before node `start`)
  int32_t first_read = -1;      // the first node that reads one of its values
};

// What a pass made of the buckets.
struct AllReduceSummary {
  size_t buckets = 0;
  size_t gradients = 0;       // reduced values
  size_t bytes = 0;           // their bytes, as laid out
  size_t largest_bucket = 0;  // bytes
  void add(const GradBucket& bucket);
};

// The buckets of `graph` in the order they close; bucket_of receives, per
// value, its bucket (-1 for values in none).
std::vector<GradBucket> gradient_buckets(const Graph& graph, size_t bucket_bytes,
                                         std::vector<int32_t>& bucket_of);

// The attributes of a bucket of `values` over `ranks` ranks: their shapes and
// offsets (each value's bytes as laid out); sharded, the size rounded up to a
// multiple of ranks and `rank`'s block.
BucketAttrs bucket_attrs(const Graph& graph, const std::vector<ValueId>& values, int64_t ranks,
                         int64_t rank, bool sharded);

bool is_update_op(OpKind op);

}  // namespace memfit
