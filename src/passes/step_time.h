// Predicted time of a step, for the swap pass (prefetch distances) and for
// `memfit maxbatch`: a simple model, kept in this file so that it can later
// be replaced by the shared cost model (measured kernel times, device specs).
//
// A compute node takes max(flops / F, bytes / M) seconds (op_cost: its
// arithmetic and the bytes it reads and writes; F and M the machine's
// arithmetic rate and memory bandwidth), or its measured seconds where they
// are given. A copy (to_host, to_device) takes bytes / L on the copy stream, L
// the link bandwidth. The step is simulated on two streams as the executor
// runs it (src/runtime/executor.h): compute nodes one after the other, each
// after the copies whose outputs it reads; copies in issue order, each
// starting no earlier than its node's place on the compute stream; swap_wait
// holds the compute stream until its copy has completed.
#pragma once

#include <vector>

#include "memfit/ir.h"

namespace memfit {

struct StepMachine {
  double flops_per_second = 0;
  double memory_bytes_per_second = 0;
  double link_bytes_per_second = 0;
};

// The constants used for the CPU backend on a 2-core machine: 2e10 f32
// flop/s (oneDNN on 2 AVX2 cores, well below peak), 1e10 bytes/s of memory
// bandwidth, and a link of `link_gbps` GB/s (0: 1e10 bytes/s, memcpy speed).
StepMachine cpu_machine(double link_gbps);

// Seconds of each node on its own stream: compute nodes by the rule above,
// copies by bytes / L, swap_wait 0.
std::vector<double> predicted_node_seconds(const Graph& graph, const StepMachine& machine);

// The step's predicted seconds: the two-stream simulation over `node_seconds`
// (one per node; those of copies are their copy times).
double predicted_step_seconds(const Graph& graph, const std::vector<double>& node_seconds);

}  // namespace memfit
