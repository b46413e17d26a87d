// The pass of fuse_forward_ops.h: one walk over the nodes in order. A relu
// whose operand's producer qualifies is dropped and the producer becomes the
// fused op, writing the relu's output where it wrote the operand (so a batch
// norm's other outputs stay where they were). An add whose operand's producer
// is a convolution becomes conv2d_add, taking the convolution's inputs, and
// the convolution is dropped: the fused node sits where the add was, since
// the convolution's inputs are defined before it, and r before the add.
#include "passes/fuse_forward_ops.h"

#include <variant>
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
      const NodeId p_id = graph.value(follower.inputs[0]).producer;
      const bool conv = plain_product(*p, OpKind::conv2d);
      const bool linear = plain_product(*p, OpKind::linear);
      const bool norm = (p->op == OpKind::batch_norm || p->op == OpKind::batch_norm_inference) &&
                        !std::get<BatchNormAttrs>(p->attrs).relu;
      if (!conv && !linear && !norm) continue;
      Node& fused_node = out.node(p_id);
      if (norm) {
        std::get<BatchNormAttrs>(fused_node.attrs).relu = true;
        ++count.norm_relu;
      } else {
        fused_node.op = conv ? OpKind::conv2d_relu : OpKind::linear_relu;
        ++(conv ? count.conv_relu : count.linear_relu);
      }
      fused_node.outputs[0] = follower.outputs[0];
      dropped[n] = true;
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
