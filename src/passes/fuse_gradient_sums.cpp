// The pass of fuse_gradient_sums.h.
//
// An add node y = add(x0, x1) fuses with the producer p of one operand
// (x1 first: autodiff adds each new part to the running total, add(total,
// part)) when p is a matmul of two inputs, a slice_grad of one or an
// embedding_grad of two, that operand has no reader but the add and is no
// graph output, and both operands have y's type. The add becomes p with the
// other operand appended to its inputs (matmul's c, slice_grad's and
// embedding_grad's acc) and p's attributes, and p is dropped. The fused node sits where the add was: p's inputs are defined
// before p, hence before the add, and the other operand before the add.
#include "passes/fuse_gradient_sums.h"

#include <vector>

#include "ir/rebuild.h"

namespace memfit {

Graph fuse_gradient_sums(const Graph& graph, size_t* fused) {
  std::vector<int32_t> readers(graph.num_values(), 0);
  for (const Node& node : graph.nodes()) {
    for (ValueId in : node.inputs) ++readers[in.idx()];
  }
  for (ValueId v : graph.outputs()) ++readers[v.idx()];
  for (const StateUpdate& u : graph.updates()) ++readers[u.next.idx()];

  Graph out = graph;
  std::vector<bool> dropped(graph.num_nodes(), false);
  size_t count = 0;
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    const Node& add = graph.nodes()[n];
    if (add.op != OpKind::add || add.inputs.size() != 2 || add.inputs[0] == add.inputs[1]) continue;
    const TensorType& type = graph.value(add.outputs[0]).type;
    if (graph.value(add.inputs[0]).type != type || graph.value(add.inputs[1]).type != type) continue;
    for (size_t k : {size_t{1}, size_t{0}}) {
      const ValueId part = add.inputs[k];
      const NodeId p = graph.value(part).producer;
      if (!p.valid() || dropped[p.idx()] || readers[part.idx()] != 1) continue;
      const Node& product = graph.node(p);
      const bool matmul = product.op == OpKind::matmul && product.inputs.size() == 2;
      const bool slice_grad = product.op == OpKind::slice_grad && product.inputs.size() == 1;
      const bool embedding_grad = product.op == OpKind::embedding_grad && product.inputs.size() == 2;
      if (!matmul && !slice_grad && !embedding_grad) continue;
      Node& node = out.node(NodeId(static_cast<int32_t>(n)));
      node.op = product.op;
      node.attrs = product.attrs;
      node.inputs = product.inputs;
      node.inputs.push_back(add.inputs[1 - k]);
      dropped[p.idx()] = true;
      ++count;
      break;
    }
  }
  if (fused) *fused = count;
  if (count == 0) return out;
  std::vector<NodeId> kept;
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    if (!dropped[n]) kept.push_back(NodeId(static_cast<int32_t>(n)));
  }
  return rebuild_graph(out, kept);
}

}  // namespace memfit
