// The pass of fuse_forward_ops.h: one walk over the nodes in order; a
// follower (relu, add) whose operand's producer qualifies takes the
// producer's inputs and becomes the fused op, and the producer is dropped.
// The fused node sits where the follower was: the producer's inputs are
// defined before the producer, hence before the follower, and r before the
// follower.
#include "passes/fuse_forward_ops.h"

#include <vector>

#include "ir/rebuild.h"

namespace memfit {
namespace {

bool plain_product(const Node& p, OpKind op) {
  return p.op == op && p.inputs.size() <= 3;
}

}  // namespace

Graph fuse_forward_ops(const Graph& graph, FusedOps* fused, std::vector<ValueId>* value_map) {
  if (value_map) value_map->clear();
  std::vector<int32_t> readers(graph.num_values(), 0);
  for (const Node& node : graph.nodes()) {
    for (ValueId in : node.inputs) ++readers[in.idx()];
  }
  for (ValueId v : graph.outputs()) ++readers[v.idx()];
  for (const StateUpdate& u : graph.updates()) ++readers[u.next.idx()];
  // The producer of v when v has no other reader, else null.
  auto sole_producer = [&](ValueId v) -> const Node* {
    const NodeId p = graph.value(v).producer;
    if (!p.valid() || readers[v.idx()] != 1) return nullptr;
    return &graph.node(p);
  };

  Graph out = graph;
  std::vector<bool> dropped(graph.num_nodes(), false);
  FusedOps count;
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    const Node& follower = graph.nodes()[n];
    Node& node = out.node(NodeId(static_cast<int32_t>(n)));
    if (follower.op == OpKind::relu) {
      const Node* p = sole_producer(follower.inputs[0]);
      if (p == nullptr) continue;
      const bool conv = plain_product(*p, OpKind::conv2d);
      const bool linear = plain_product(*p, OpKind::linear);
      if (!conv && !linear) continue;
      node.op = conv ? OpKind::conv2d_relu : OpKind::linear_relu;
      node.attrs = p->attrs;
      node.inputs = p->inputs;
      dropped[graph.value(follower.inputs[0]).producer.idx()] = true;
      ++(conv ? count.conv_relu : count.linear_relu);
    } else if (follower.op == OpKind::add && follower.inputs.size() == 2 &&
               follower.inputs[0] != follower.inputs[1]) {
      const TensorType& y = graph.value(follower.outputs[0]).type;
      for (size_t k : {size_t{0}, size_t{1}}) {
        const ValueId z = follower.inputs[k], r = follower.inputs[1 - k];
        const Node* p = sole_producer(z);
        if (p == nullptr || !plain_product(*p, OpKind::conv2d)) continue;
        if (graph.value(z).type != y || graph.value(r).type != y) continue;
        node.op = OpKind::conv2d_add;
        node.attrs = p->attrs;
        node.inputs = {p->inputs[0], p->inputs[1], r};
        if (p->inputs.size() == 3) node.inputs.push_back(p->inputs[2]);
        dropped[graph.value(z).producer.idx()] = true;
        ++count.conv_add;
        break;
      }
    }
  }
  if (fused) *fused = count;
  if (count.total() == 0) return out;
  std::vector<NodeId> kept;
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    if (!dropped[n]) kept.push_back(NodeId(static_cast<int32_t>(n)));
  }
  return rebuild_graph(out, kept, value_map);
}

}  // namespace memfit
