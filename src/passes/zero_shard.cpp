#include "passes/zero_shard.h"

#include <algorithm>
#include <set>

#include "core/check.h"
#include "ir/rebuild.h"
#include "ops/typed_graph.h"
#include "passes/grad_buckets.h"

namespace memfit {
namespace {

// Where each kind of new node goes: before node k, in this order.
struct Places {
  explicit Places(size_t n) : starts(n + 1), gathers(n + 1), waits(n + 1), updates(n + 1) {}
  std::vector<std::vector<NodeId>> starts, gathers, waits, updates;
};

// Whether two update nodes apply one optimizer with one set of settings.
bool same_optimizer(const Node& a, const Node& b) {
  if (a.op != b.op || a.inputs.size() != b.inputs.size()) return false;
  if (a.op == OpKind::sgd_update) {
    const auto& x = std::get<SgdAttrs>(a.attrs);
    const auto& y = std::get<SgdAttrs>(b.attrs);
    return x.lr == y.lr && x.momentum == y.momentum && x.weight_decay == y.weight_decay;
  }
  const auto& x = std::get<AdamWAttrs>(a.attrs);
  const auto& y = std::get<AdamWAttrs>(b.attrs);
  return x.lr == y.lr && x.beta1 == y.beta1 && x.beta2 == y.beta2 && x.eps == y.eps &&
         x.weight_decay == y.weight_decay;
}

}  // namespace

Result<Graph> shard_step(Graph graph, const ShardOptions& o, ShardSummary* summary) {
  if (o.ranks < 1 || o.rank < 0 || o.rank >= o.ranks) {
    return Status::error("sharding needs at least one rank, and a rank among them");
  }
  const size_t n = graph.num_nodes();
  std::vector<int32_t> bucket_of;
  const std::vector<GradBucket> buckets = gradient_buckets(graph, o.bucket_bytes, bucket_of);
  // The update node of each reduced gradient; one optimizer for all.
  std::vector<int32_t> update_of(graph.num_values(), -1);
  const Node* first_update = nullptr;
  for (size_t k = 0; k < n; ++k) {
    const Node& node = graph.nodes()[k];
    if (!is_update_op(node.op)) continue;
    update_of[node.inputs[1].idx()] = static_cast<int32_t>(k);
    if (!first_update) first_update = &node;
    if (!same_optimizer(node, *first_update)) {
      return Status::error("sharding needs one optimizer for every parameter; '" + node.name +
                           "' differs from '" + first_update->name + "'");
    }
  }
  if (buckets.empty()) return graph;
  const Node updater = *first_update;  // a copy: adding nodes moves the graph's nodes
  // The kinds of state: the per-parameter states' names after their parameter's.
  std::vector<std::string> suffixes;
  for (size_t i = 2; i < updater.inputs.size(); ++i) {
    const std::string& param = graph.value(updater.inputs[0]).name;
    const std::string& state = graph.value(updater.inputs[i]).name;
    MEMFIT_CHECK(state.rfind(param, 0) == 0);
    suffixes.push_back(state.substr(param.size()));
  }

  ShardSummary counted;
  Places at(n);
  std::set<int32_t> dropped;  // the original update nodes
  std::vector<StateUpdate> updates;
  std::vector<ValueId> next_param(graph.num_values());  // p'_i of each p_i
  // Each bucket's first update, in the order the buckets close.
  std::vector<int32_t> first_update_at;
  for (const GradBucket& b : buckets) first_update_at.push_back(b.first_read);
  for (size_t j = 0; j < buckets.size(); ++j) {
    const GradBucket& bucket = buckets[j];
    std::vector<ValueId> params;
    for (ValueId g : bucket.values) {
      const int32_t u = update_of[g.idx()];
      MEMFIT_CHECK(u >= 0 && u >= bucket.first_read);
      dropped.insert(u);
      params.push_back(graph.nodes()[static_cast<size_t>(u)].inputs[0]);
    }
    const BucketAttrs attrs = bucket_attrs(graph, bucket.values, o.ranks, o.rank, true);
    const std::string name = "bucket" + std::to_string(j);
    MEMFIT_ASSIGN_OR_RETURN(NodeId rs, add_node(graph, OpKind::reduce_scatter_start, bucket.values,
                                                attrs, name + ".reduce_scatter", Role::gradient));
    MEMFIT_ASSIGN_OR_RETURN(NodeId rs_wait,
                            add_node(graph, OpKind::reduce_scatter_wait, {graph.node(rs).outputs[0]},
                                     attrs, name + ".reduce_scatter_wait", Role::gradient));
    MEMFIT_ASSIGN_OR_RETURN(NodeId pack, add_node(graph, OpKind::shard_pack, params, attrs,
                                                  name + ".shard", Role::parameter));
    std::vector<ValueId> inputs = {graph.node(pack).outputs[0], graph.node(rs_wait).outputs[0]};
    for (const std::string& suffix : suffixes) {
      const ValueId state = graph.add_input("zero." + name + suffix,
                                            TensorType{{attrs.block()}, DType::f32},
                                            Role::optimizer_state);
      inputs.push_back(state);
      ShardedState sharded{graph.value(state).name, suffix, attrs, {}, {}};
      for (ValueId p : params) {
        sharded.parameters.push_back(graph.value(p).name);
        sharded.layouts.push_back(graph.value(p).layout);
      }
      counted.states.push_back(std::move(sharded));
    }
    MEMFIT_ASSIGN_OR_RETURN(NodeId update, add_node(graph, updater.op, inputs, updater.attrs,
                                                    name + ".update", Role::parameter));
    const std::vector<ValueId> outs = graph.node(update).outputs;
    for (size_t s = 1; s < outs.size(); ++s) {
      graph.value(outs[s]).role = Role::optimizer_state;
      updates.push_back(StateUpdate{inputs[s + 1], outs[s]});
    }
    MEMFIT_ASSIGN_OR_RETURN(NodeId gather, add_node(graph, OpKind::all_gather_start, {outs[0]},
                                                    attrs, name + ".all_gather", Role::parameter));
    std::vector<ValueId> unpacked = {graph.node(gather).outputs[0]};
    unpacked.insert(unpacked.end(), params.begin(), params.end());
    MEMFIT_ASSIGN_OR_RETURN(NodeId gather_wait,
                            add_node(graph, OpKind::all_gather_wait, unpacked, attrs,
                                     name + ".all_gather_wait", Role::parameter));
    for (size_t i = 0; i < params.size(); ++i) {
      const ValueId next = graph.node(gather_wait).outputs[i];
      graph.value(next).layout = graph.value(params[i]).layout;
      next_param[params[i].idx()] = next;
    }
    // Places (stages 1 to 3).
    const auto here = static_cast<size_t>(bucket.first_read);
    at.starts[static_cast<size_t>(bucket.start)].push_back(rs);
    size_t wait_at = here;
    if (o.gradients && j + 1 < buckets.size()) {
      wait_at = std::min(here, static_cast<size_t>(buckets[j + 1].start));
    }
    at.waits[wait_at].push_back(rs_wait);
    at.updates[here].insert(at.updates[here].end(), {pack, update, gather});
    // The all-gather completes by the next bucket's update in the order.
    size_t gather_at = n;
    for (int32_t u : first_update_at) {
      if (u > bucket.first_read) gather_at = std::min(gather_at, static_cast<size_t>(u));
    }
    at.gathers[gather_at].push_back(gather_wait);
    counted.buckets.add(bucket);
  }
  // Parameters are replaced by their gathered values; the dropped updates'
  // per-parameter state is gone with them.
  for (const StateUpdate& u : graph.updates()) {
    const NodeId producer = graph.value(u.next).producer;
    if (producer.valid() && dropped.count(producer.index) > 0) {
      if (next_param[u.state.idx()].valid()) updates.push_back({u.state, next_param[u.state.idx()]});
      continue;
    }
    updates.push_back(u);
  }
  graph.set_updates(std::move(updates));
  std::vector<NodeId> order;
  for (size_t k = 0; k <= n; ++k) {
    for (const auto* list : {&at.starts[k], &at.gathers[k], &at.waits[k], &at.updates[k]}) {
      order.insert(order.end(), list->begin(), list->end());
    }
    if (k < n && dropped.count(static_cast<int32_t>(k)) == 0) {
      order.push_back(NodeId(static_cast<int32_t>(k)));
    }
  }
  Graph rebuilt = rebuild_graph(graph, order, nullptr, true);
  MEMFIT_RETURN_IF_ERROR(verify_graph(rebuilt));
  if (summary) *summary = std::move(counted);
  return rebuilt;
}

}  // namespace memfit
