#include "ir/phase.h"

namespace memfit {

std::string_view phase_name(Phase phase) {
  switch (phase) {
    case Phase::forward:
      return "forward";
    case Phase::backward:
      return "backward";
    case Phase::update:
      return "update";
  }
  return "?";
}

// The optimizer's nodes write parameters or optimizer state, or read
// optimizer state (the sum of the accumulated and this micro-batch's
// gradients, which feeds the update); autodiff gives every other node it
// appends gradient outputs; what remains are the model's own nodes, which
// write activations (batch norm's running statistics among them).
Phase node_phase(const Graph& graph, const Node& node) {
  if (node.op == OpKind::sgd_update || node.op == OpKind::adamw_update) return Phase::update;
  for (ValueId in : node.inputs) {
    if (graph.value(in).role == Role::optimizer_state) return Phase::update;
  }
  bool gradient = false;
  for (ValueId out : node.outputs) {
    const Role role = graph.value(out).role;
    if (role == Role::parameter || role == Role::optimizer_state) return Phase::update;
    gradient = gradient || role == Role::gradient;
  }
  return gradient ? Phase::backward : Phase::forward;
}

}  // namespace memfit
