#include "passes/all_reduce.h"

#include <algorithm>
#include <string>

#include "core/check.h"
#include "ir/rebuild.h"
#include "ops/typed_graph.h"
#include "passes/grad_buckets.h"

namespace memfit {

Result<Graph> insert_all_reduce(Graph graph, int64_t ranks, size_t bucket_bytes,
                                AllReduceSummary* summary) {
  if (ranks < 1) return Status::error("data parallelism needs at least one rank");
  const size_t n = graph.num_nodes();
  std::vector<int32_t> bucket_of;
  const std::vector<GradBucket> buckets = gradient_buckets(graph, bucket_bytes, bucket_of);
  AllReduceSummary counted;
  std::vector<std::vector<NodeId>> starts_at(n + 1), waits_at(n + 1);
  std::vector<ValueId> sum_of(graph.num_values());  // r_i of each reduced g_i
  for (size_t b = 0; b < buckets.size(); ++b) {
    const GradBucket& bucket = buckets[b];
    MEMFIT_CHECK(bucket.first_read >= bucket.start);  // every value is read, by its update
    for (ValueId v : bucket.values) {
      if (graph.value(v).type.dtype != DType::f32) {
        return Status::error("gradient '" + graph.value(v).name + "' is not f32; only f32 "
                             "gradients are summed over ranks");
      }
    }
    const BucketAttrs attrs = bucket_attrs(graph, bucket.values, ranks, 0, false);
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
    counted.add(bucket);
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
