// Random valid training-like graphs, for tests that must hold on every graph
// (the planner and its verifier). A graph is drawn from a seed, so a failing
// seed is a reproducible bug report: print_graph(random_graph(seed)).
#pragma once

#include <cstdint>

#include "memfit/ir.h"
#include "memory/planner.h"

namespace memfit::testing {

// A graph of 5 to 60 nodes that verify_graph accepts: a forward part of
// elementwise ops, linear layers, matmuls, reshapes, reductions, batch norm
// and losses over a few batch and feature sizes, with fan-out, long skip
// connections (binary ops on values from far back), in-place chains, broadcast
// operands, graph outputs and values never read; then gradients of the
// parameters and optimizer updates (SGD with and without momentum, AdamW,
// gradient accumulation), registered as graph updates. Some parameters are
// never updated (or never read), some are updated in the middle of the step and
// read after it, or their next value is; inputs and parameters may be graph
// outputs, and an output may be listed twice.
Graph random_graph(uint64_t seed);

// The sizes a backend might ask for: values of some types padded as a blocked
// layout would (the same padding for every value of a type, as a backend lays
// out by type), and a workspace for some nodes.
PlanSizes random_sizes(const Graph& graph, uint64_t seed);

}  // namespace memfit::testing
