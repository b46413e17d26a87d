#include "passes/all_reduce.h"

#include <algorithm>
#include <string>

#include "core/check.h"
#include "ir/rebuild.h"
#include "ops/typed_graph.h"

namespace memfit {
namespace {

struct Bucket {
  std::vector<ValueId> values;  // in the order their producers run
  size_t bytes = 0;
  int32_t start = 0;        // the boundary of its all_reduce_start (before node `start`)
  int32_t first_read = -1;  // the boundary of its all_reduce_wait
};

bool is_update(OpKind op) { return op == OpKind::sgd_update || op == OpKind::adamw_update; }

// Stages 1 and 2: the buckets of `graph`'s reduced values, and per value its bucket.
std::vector<Bucket> make_buckets(const Graph& graph, size_t bucket_bytes,
                                 std::vector<int32_t>& bucket_of) {
  const auto n = static_cast<int32_t>(graph.num_nodes());
  std::vector<bool> reduced(graph.num_values(), false);
  for (const Node& node : graph.nodes()) {
    if (is_update(node.op)) reduced[node.inputs[1].idx()] = true;
  }
  bucket_of.assign(graph.num_values(), -1);
  std::vector<Bucket> buckets;
  Bucket open;
  const auto close = [&](int32_t at) {
    if (open.values.empty()) return;
    open.start = at;
    for (ValueId v : open.values) bucket_of[v.idx()] = static_cast<int32_t>(buckets.size());
    buckets.push_back(std::move(open));
    open = Bucket{};
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

BucketAttrs bucket_attrs(const Graph& graph, const Bucket& bucket, int64_t ranks) {
  BucketAttrs a;
  a.ranks = ranks;
  a.offsets.push_back(0);
  for (ValueId v : bucket.values) {
    const Value& value = graph.value(v);
    a.dims.insert(a.dims.end(), value.type.shape.begin(), value.type.shape.end());
    a.ndims.push_back(static_cast<int64_t>(value.type.shape.size()));
    a.offsets.push_back(a.offsets.back() + static_cast<int64_t>(value.bytes() / sizeof(float)));
  }
  return a;
}

}  // namespace

Result<Graph> insert_all_reduce(Graph graph, int64_t ranks, size_t bucket_bytes,
                                AllReduceSummary* summary) {
  if (ranks < 1) return Status::error("data parallelism needs at least one rank");
  const size_t n = graph.num_nodes();
  std::vector<int32_t> bucket_of;
  const std::vector<Bucket> buckets = make_buckets(graph, bucket_bytes, bucket_of);
  AllReduceSummary counted;
  std::vector<std::vector<NodeId>> starts_at(n + 1), waits_at(n + 1);
  std::vector<ValueId> sum_of(graph.num_values());  // r_i of each reduced g_i
  for (size_t b = 0; b < buckets.size(); ++b) {
    const Bucket& bucket = buckets[b];
    MEMFIT_CHECK(bucket.first_read >= bucket.start);  // every value is read, by its update
    for (ValueId v : bucket.values) {
      if (graph.value(v).type.dtype != DType::f32) {
        return Status::error("gradient '" + graph.value(v).name + "' is not f32; only f32 "
                             "gradients are summed over ranks");
      }
    }
    const BucketAttrs attrs = bucket_attrs(graph, bucket, ranks);
    const std::string name = "bucket" + std::to_string(b);
    MEMFIT_ASSIGN_OR_RETURN(NodeId start, add_node(graph, OpKind::all_reduce_start, bucket.values,
                                                   attrs, name + ".all_reduce", Role::gradient));
    const ValueId packed = graph.node(start).outputs[0];
    MEMFIT_ASSIGN_OR_RETURN(NodeId wait, add_node(graph, OpKind::all_reduce_wait, {packed}, attrs,
                                                  name + ".wait", Role::gradient));
    const std::vector<ValueId> sums = graph.node(wait).outputs;
    for (size_t i = 0; i < sums.size(); ++i) {
      graph.value(sums[i]).layout = graph.value(bucket.values[i]).layout;
      sum_of[bucket.values[i].idx()] = sums[i];
    }
    starts_at[static_cast<size_t>(bucket.start)].push_back(start);
    waits_at[static_cast<size_t>(bucket.first_read)].push_back(wait);
    ++counted.buckets;
    counted.gradients += bucket.values.size();
    counted.bytes += bucket.bytes;
    counted.largest_bucket = std::max(counted.largest_bucket, bucket.bytes);
  }
  std::vector<NodeId> order;
  order.reserve(graph.num_nodes());
  for (size_t k = 0; k <= n; ++k) {
    order.insert(order.end(), starts_at[k].begin(), starts_at[k].end());
    order.insert(order.end(), waits_at[k].begin(), waits_at[k].end());
    if (k == n) break;
    Node& node = graph.node(NodeId(static_cast<int32_t>(k)));
    for (ValueId& in : node.inputs) {
      if (bucket_of[in.idx()] >= 0) in = sum_of[in.idx()];
    }
    order.push_back(NodeId(static_cast<int32_t>(k)));
  }
  Graph rebuilt = rebuild_graph(graph, order);
  MEMFIT_RETURN_IF_ERROR(verify_graph(rebuilt));
  if (summary) *summary = counted;
  return rebuilt;
}

}  // namespace memfit
