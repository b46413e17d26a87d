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

CommPrediction predict_comm(const Graph& graph, const std::vector<double>& node_seconds,
                            double comm_bytes_per_second) {
  MEMFIT_CHECK(node_seconds.size() == graph.num_nodes());
  const double network = comm_bytes_per_second > 0 ? comm_bytes_per_second : 1e10;
  CommPrediction p;
  double compute = 0;                              // when the compute stream is free
  double copy_free = 0;                            // when the copy stream is free
  double comm_free = 0;                            // when the network stream is free
  std::vector<double> done(graph.num_nodes(), 0);  // when each copy or sum completes
  auto stream_done = [&](ValueId v) {
    const NodeId producer = graph.value(v).producer;
    if (!producer.valid()) return 0.0;
    const OpInfo& info = op_info(graph.node(producer).op);
    return info.copy || info.comm ? done[producer.idx()] : 0.0;
  };
  auto wait_for = [&](double when) {
    if (when > compute) p.exposed_seconds += when - compute;
    compute = std::max(compute, when);
  };
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    const Node& node = graph.nodes()[n];
    if (node.op == OpKind::to_host || node.op == OpKind::to_device) {
      copy_free = std::max(compute, copy_free) + node_seconds[n];
      done[n] = copy_free;
    } else if (node.op == OpKind::swap_wait) {
      compute = std::max(compute, stream_done(node.inputs[1]));
    } else {
      for (ValueId in : node.inputs) {
        const NodeId producer = graph.value(in).producer;
        const bool summed = producer.valid() && op_info(graph.node(producer).op).comm;
        if (summed) {
          wait_for(stream_done(in));
        } else {
          compute = std::max(compute, stream_done(in));
        }
      }
      compute += node_seconds[n];
      if (op_info(node.op).comm) {
        const double seconds =
            comm_wire_bytes(node.op, std::get<BucketAttrs>(node.attrs)) / network;
        comm_free = std::max(compute, comm_free) + seconds;
        done[n] = comm_free;
        p.comm_seconds += seconds;
      }
    }
  }
  p.step_seconds = std::max({compute, copy_free, comm_free});
  return p;
}

double predicted_step_seconds(const Graph& graph, const std::vector<double>& node_seconds,
                              double comm_bytes_per_second) {
  return predict_comm(graph, node_seconds, comm_bytes_per_second).step_seconds;
}

}  // namespace memfit
