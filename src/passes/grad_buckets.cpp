#include "passes/grad_buckets.h"

#include <algorithm>

namespace memfit {

void AllReduceSummary::add(const GradBucket& bucket) {
  ++buckets;
  gradients += bucket.values.size();
  bytes += bucket.bytes;
  largest_bucket = std::max(largest_bucket, bucket.bytes);
}

bool is_update_op(OpKind op) { return op == OpKind::sgd_update || op == OpKind::adamw_update; }

std::vector<GradBucket> gradient_buckets(const Graph& graph, size_t bucket_bytes,
                                 std::vector<int32_t>& bucket_of) {
  const auto n = static_cast<int32_t>(graph.num_nodes());
  std::vector<bool> reduced(graph.num_values(), false);
  for (const Node& node : graph.nodes()) {
    if (is_update_op(node.op)) reduced[node.inputs[1].idx()] = true;
  }
  bucket_of.assign(graph.num_values(), -1);
  std::vector<GradBucket> buckets;
  GradBucket open;
  const auto close = [&](int32_t at) {
    if (open.values.empty()) return;
    open.start = at;
    for (ValueId v : open.values) bucket_of[v.idx()] = static_cast<int32_t>(buckets.size());
    buckets.push_back(std::move(open));
    open = GradBucket{};
  };
  std::vector<bool> in_open(graph.num_values(), false);
  for (int32_t k = 0; k < n; ++k) {
    const Node& node = graph.nodes()[static_cast<size_t>(k)];
    const bool reads_open = std::any_of(node.inputs.begin(), node.inputs.end(),
                                        [&](ValueId v) { return in_open[v.idx()]; });
    if (reads_open) {
      for (ValueId v : open.values) in_open[v.idx()] = false;
      close(k);
    }
    for (ValueId out : node.outputs) {
      if (!reduced[out.idx()]) continue;
      open.values.push_back(out);
      open.bytes += graph.value(out).bytes();
      in_open[out.idx()] = true;
    }
    if (!open.values.empty() && open.bytes >= bucket_bytes) {
      for (ValueId v : open.values) in_open[v.idx()] = false;
      close(k + 1);
    }
  }
  close(n);
  for (int32_t k = 0; k < n; ++k) {
    for (ValueId in : graph.nodes()[static_cast<size_t>(k)].inputs) {
      const int32_t b = bucket_of[in.idx()];
      if (b >= 0 && buckets[static_cast<size_t>(b)].first_read < 0) {
        buckets[static_cast<size_t>(b)].first_read = k;
      }
    }
  }
  return buckets;
}

BucketAttrs bucket_attrs(const Graph& graph, const std::vector<ValueId>& values, int64_t ranks,
                         int64_t rank, bool sharded) {
  BucketAttrs a;
  a.ranks = ranks;
  a.rank = rank;
  a.offsets.push_back(0);
  for (ValueId v : values) {
    const Value& value = graph.value(v);
    a.dims.insert(a.dims.end(), value.type.shape.begin(), value.type.shape.end());
    a.ndims.push_back(static_cast<int64_t>(value.type.shape.size()));
    a.offsets.push_back(a.offsets.back() + static_cast<int64_t>(value.bytes() / sizeof(float)));
  }
  a.size = sharded ? (a.offsets.back() + ranks - 1) / ranks * ranks : a.offsets.back();
  return a;
}

}  // namespace memfit
