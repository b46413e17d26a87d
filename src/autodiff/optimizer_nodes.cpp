// The optimizer's part of the training graph: update nodes per parameter, the
// optimizer state they read as graph inputs, and the updates that carry their
// outputs to the next step.
#include "autodiff/autodiff.h"

#include <cmath>

#include "core/check.h"
#include "ops/typed_graph.h"

namespace memfit {
namespace {

ValueId add_state(Graph& graph, ValueId param, const char* suffix) {
  const Value& p = graph.value(param);
  return graph.add_input(p.name + suffix, p.type, Role::optimizer_state);
}

Result<std::vector<ValueId>> add(Graph& graph, OpKind op, std::vector<ValueId> inputs, Attrs attrs,
                                 const std::string& name, Role role) {
  MEMFIT_ASSIGN_OR_RETURN(NodeId id,
                          add_node(graph, op, std::move(inputs), std::move(attrs), name, role));
  return graph.node(id).outputs;
}

Status append_update(Graph& graph, ValueId param, ValueId grad, const OptimizerConfig& c) {
  const std::string name = graph.value(param).name + ".update";
  if (c.kind == OptimizerConfig::Kind::sgd) {
    const bool momentum = c.momentum != 0.0f;
    std::vector<ValueId> inputs = {param, grad};
    if (momentum) inputs.push_back(add_state(graph, param, ".momentum"));
    MEMFIT_ASSIGN_OR_RETURN(auto out, add(graph, OpKind::sgd_update, inputs,
                                          SgdAttrs{c.lr, c.momentum, c.weight_decay}, name,
                                          Role::parameter));
    graph.add_update(param, out[0]);
    if (momentum) {
      graph.value(out[1]).role = Role::optimizer_state;
      graph.add_update(inputs[2], out[1]);
    }
    return Status::ok();
  }
  const ValueId m = add_state(graph, param, ".adam_m");
  const ValueId v = add_state(graph, param, ".adam_v");
  MEMFIT_ASSIGN_OR_RETURN(auto out, add(graph, OpKind::adamw_update, {param, grad, m, v},
                                        AdamWAttrs{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay},
                                        name, Role::parameter));
  graph.value(out[1]).role = Role::optimizer_state;
  graph.value(out[2]).role = Role::optimizer_state;
  graph.add_update(param, out[0]);
  graph.add_update(m, out[1]);
  graph.add_update(v, out[2]);
  return Status::ok();
}

}  // namespace

float default_learning_rate(OptimizerConfig::Kind kind) {
  return kind == OptimizerConfig::Kind::adamw ? 1e-3f : 0.05f;
}

Status append_optimizer(Graph& graph, const std::vector<ValueId>& params,
                        const std::vector<ValueId>& grads, const OptimizerConfig& config,
                        UpdateMode mode) {
  MEMFIT_CHECK(params.size() == grads.size());
  if (config.lr < 0.0f || std::isnan(config.lr)) {
    return Status::error("the learning rate must be positive (0: the optimizer's default)");
  }
  OptimizerConfig resolved = config;
  if (resolved.lr == 0.0f) resolved.lr = default_learning_rate(config.kind);
  for (size_t i = 0; i < params.size(); ++i) {
    ValueId grad = grads[i];
    if (mode != UpdateMode::apply) {
      // Accumulators are persistent gradient buffers, kept with the optimizer state.
      const ValueId acc = add_state(graph, params[i], ".grad_acc");
      const std::string name = graph.value(params[i]).name + ".accumulate";
      MEMFIT_ASSIGN_OR_RETURN(auto sum, add(graph, OpKind::add, {acc, grad}, NoAttrs{}, name,
                                            Role::gradient));
      if (mode == UpdateMode::accumulate) {
        graph.value(sum[0]).role = Role::optimizer_state;
        graph.add_update(acc, sum[0]);
        continue;
      }
      grad = sum[0];
      // Cleared in its own bytes (fill over it), after the sum has read it.
      MEMFIT_ASSIGN_OR_RETURN(auto zeros, add(graph, OpKind::fill, {acc},
                                              FillAttrs{0.0f, graph.value(acc).type.shape},
                                              name + ".reset", Role::optimizer_state));
      graph.add_update(acc, zeros[0]);
    }
    MEMFIT_RETURN_IF_ERROR(append_update(graph, params[i], grad, resolved));
  }
  return Status::ok();
}

}  // namespace memfit
