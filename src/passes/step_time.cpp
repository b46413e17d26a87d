#include "passes/step_time.h"

#include <algorithm>

#include "core/check.h"
#include "ops/op_table.h"

namespace memfit {

StepMachine step_machine(const NodeSeconds& compute, double link_gbps) {
  return StepMachine{compute ? compute : roofline_cost(), link_gbps > 0 ? link_gbps * 1e9 : 1e10};
}

std::vector<double> predicted_node_seconds(const Graph& graph, const StepMachine& machine) {
  std::vector<double> seconds;
  seconds.reserve(graph.num_nodes());
  for (const Node& node : graph.nodes()) {
    if (node.op == OpKind::to_host || node.op == OpKind::to_device) {
      seconds.push_back(op_cost(graph, node).bytes / machine.link_bytes_per_second);
    } else if (node.op == OpKind::swap_wait) {
      seconds.push_back(0);
    } else {
      seconds.push_back(machine.compute(graph, node));
    }
  }
  return seconds;
}

double predicted_step_seconds(const Graph& graph, const std::vector<double>& node_seconds) {
  MEMFIT_CHECK(node_seconds.size() == graph.num_nodes());
  double compute = 0;                              // when the compute stream is free
  double copy_free = 0;                            // when the copy stream is free
  std::vector<double> done(graph.num_nodes(), 0);  // when each copy completes
  auto copy_done = [&](ValueId v) {
    const NodeId producer = graph.value(v).producer;
    return producer.valid() && op_info(graph.node(producer).op).copy ? done[producer.idx()] : 0.0;
  };
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    const Node& node = graph.nodes()[n];
    if (node.op == OpKind::to_host || node.op == OpKind::to_device) {
      copy_free = std::max(compute, copy_free) + node_seconds[n];
      done[n] = copy_free;
    } else if (node.op == OpKind::swap_wait) {
      compute = std::max(compute, copy_done(node.inputs[1]));
    } else {
      for (ValueId in : node.inputs) compute = std::max(compute, copy_done(in));
      compute += node_seconds[n];
    }
  }
  return std::max(compute, copy_free);
}

}  // namespace memfit
