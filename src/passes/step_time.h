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
// holds the compute stream until its copy has completed.
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

// The step's predicted seconds: the two-stream simulation over `node_seconds`
// (one per node; those of copies are their copy times).
double predicted_step_seconds(const Graph& graph, const std::vector<double>& node_seconds);

}  // namespace memfit
