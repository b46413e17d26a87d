// Reverse mode: visit the forward nodes from last to first; for each node with
// a gradient flowing into one of its outputs and an input that needs one, sum
// the output's gradient contributions and call the op's gradient rule.
//
// 1. needs[v]: v is in `wrt` or computed from one by differentiable ops.
// 2. Seed: the loss's gradient is fill(loss_scale).
// 3. Reverse sweep: gradient contributions per value, summed with add nodes
//    as each part arrives when a value has several readers; the rule
//    appends the backward nodes.
// 4. Rules may compute gradients nobody needs (of the input images, say);
//    remove_dead_nodes deletes them once the optimizer consumed what is needed.
// Linear in the number of nodes and values.
#include "autodiff/autodiff.h"

#include "core/check.h"
#include "ops/grad_context.h"
#include "ops/op_table.h"
#include "ops/typed_graph.h"

namespace memfit {
namespace {

// Sums the contributions to one value's gradient. The name is a copy: adding
// nodes may move the graph's values, and with them a name read from one.
Result<ValueId> sum_contributions(Graph& graph, std::string value_name,
                                  const std::vector<ValueId>& parts) {
  ValueId total = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    MEMFIT_ASSIGN_OR_RETURN(NodeId id, add_node(graph, OpKind::add, {total, parts[i]}, NoAttrs{},
                                                value_name + ".grad_sum", Role::gradient));
    total = graph.node(id).outputs[0];
  }
  return total;
}

}  // namespace

Result<std::vector<ValueId>> append_gradients(Graph& graph, ValueId loss,
                                              const std::vector<ValueId>& wrt, float loss_scale) {
  if (graph.value(loss).type != TensorType{{}, DType::f32}) {
    return Status::error("the loss '" + graph.value(loss).name + "' must be an f32 scalar");
  }
  const size_t forward_nodes = graph.num_nodes();
  std::vector<bool> needs(graph.num_values(), false);
  for (ValueId v : wrt) needs[v.idx()] = true;
  for (size_t n = 0; n < forward_nodes; ++n) {
    const Node& node = graph.nodes()[n];
    if (!op_info(node.op).grad) continue;
    bool any = false;
    for (ValueId in : node.inputs) any = any || needs[in.idx()];
    for (ValueId out : node.outputs) needs[out.idx()] = needs[out.idx()] || any;
  }

  std::vector<std::vector<ValueId>> contributions(graph.num_values());
  MEMFIT_ASSIGN_OR_RETURN(NodeId seed, add_node(graph, OpKind::fill, {}, FillAttrs{loss_scale, {}},
                                                "loss_grad", Role::gradient));
  contributions[loss.idx()].push_back(graph.node(seed).outputs[0]);

  for (size_t n = forward_nodes; n-- > 0;) {
    const Node node = graph.nodes()[n];  // a copy: add_node may reallocate
    const OpInfo& info = op_info(node.op);
    bool input_needs = false;
    for (ValueId in : node.inputs) input_needs = input_needs || needs[in.idx()];
    bool has_grad = false;
    for (ValueId out : node.outputs) has_grad = has_grad || !contributions[out.idx()].empty();
    if (!input_needs || !has_grad) continue;
    if (!info.grad) {
      return Status::error("node '" + node.name + "' (" + std::string(op_name(node.op)) +
                           ") has no gradient rule but lies between the parameters and the loss");
    }
    GradContext ctx{graph, node, {}, std::vector<ValueId>(node.inputs.size())};
    for (ValueId out : node.outputs) {
      const auto& parts = contributions[out.idx()];
      ValueId grad;
      if (!parts.empty()) {
        MEMFIT_ASSIGN_OR_RETURN(grad, sum_contributions(graph, graph.value(out).name, parts));
      }
      ctx.output_grads.push_back(grad);
    }
    // At least one output has a gradient. Rules of multi-output ops handle
    // missing ones: split fills zeros, batch_norm differentiates output 0 only.
    auto status = info.grad(ctx);
    if (!status.is_ok())
      return Status::error("gradient of node '" + node.name + "': " + status.message());
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const ValueId in = node.inputs[i];
      if (!ctx.input_grads[i].valid() || !needs[in.idx()]) continue;
      auto& parts = contributions[in.idx()];
      parts.push_back(ctx.input_grads[i]);
      // A parameter read at every step of an unrolled network, or an
      // encoder's states read by every decoder step's attention, gets one
      // part per step: summed as they come (the same sums, in the same order,
      // as at the end), so the given order holds one partial sum, not every
      // part until the value's producer is reached (Meng et al. 2017 found
      // TensorFlow holding them so).
      if (parts.size() == 2) {
        MEMFIT_ASSIGN_OR_RETURN(ValueId total,
                                sum_contributions(graph, graph.value(in).name, parts));
        parts = {total};
      }
    }
  }

  std::vector<ValueId> grads;
  for (ValueId v : wrt) {
    const auto& parts = contributions[v.idx()];
    if (parts.empty()) {
      MEMFIT_ASSIGN_OR_RETURN(
          NodeId zeros,
          add_node(graph, OpKind::fill, {}, FillAttrs{0.0f, graph.value(v).type.shape},
                   graph.value(v).name + ".grad", Role::gradient));
      grads.push_back(graph.node(zeros).outputs[0]);
      continue;
    }
    MEMFIT_ASSIGN_OR_RETURN(ValueId g, sum_contributions(graph, graph.value(v).name, parts));
    grads.push_back(g);
  }
  return grads;
}

}  // namespace memfit
