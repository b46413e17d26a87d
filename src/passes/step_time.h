// Predicted time of a step, for the swap pass (prefetch distances), the swap
// and auto policies, `memfit plan` and `memfit maxbatch`.
//
// A compute node takes the seconds of the shared cost model
// (src/cost/cost_model.h: the roofline of MachineSpec, or kernel times
// measured on the backend). A copy (to_host, to_device) takes bytes / L on the copy stream, L
// the link bandwidth. The step is simulated on two streams as the executor
// runs it (src/runtime/executor.h): compute nodes one after the other, each
// after the copies whose outputs it reads; copies in issue order, each
// starting no earlier than its node's place on the compute stream; swap_wait
// holds the compute stream until its copy has completed. Data parallelism adds
// a third stream, the network: a comm node packs its bucket on the compute
// stream, then its collective takes comm_wire_bytes / C on the
// network stream (C the network's bandwidth per rank), in issue order;
// readers of the bucket wait for the sum.
#pragma once

#include <vector>

#include "cost/cost_model.h"
#include "memfit/ir.h"

namespace memfit {

struct StepMachine {
  NodeSeconds compute;  // seconds of a compute node
  double link_bytes_per_second = 0;
};

// Compute nodes by `compute` (empty: roofline_cost() of the default
// MachineSpec), and a link of `link_gbps` GB/s (0: 1e10 bytes/s, memcpy
// speed on this machine).
StepMachine step_machine(const NodeSeconds& compute, double link_gbps);

// Seconds of each node on its own stream: compute nodes by the cost model,
// copies by bytes / L, swap_wait 0.
std::vector<double> predicted_node_seconds(const Graph& graph, const StepMachine& machine);

// The step's predicted seconds: the simulation over `node_seconds` (one per
// node; those of copies are their copy times), with a network of
// `comm_bytes_per_second` (0: 1e10).
double predicted_step_seconds(const Graph& graph, const std::vector<double>& node_seconds,
                              double comm_bytes_per_second = 0);

// The network's part of a predicted step.
struct CommPrediction {
  double step_seconds = 0;
  double comm_seconds = 0;     // the sums on the network stream
  double exposed_seconds = 0;  // of which the compute stream waits for
};
CommPrediction predict_comm(const Graph& graph, const std::vector<double>& node_seconds,
                            double comm_bytes_per_second);

}  // namespace memfit
