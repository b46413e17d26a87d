// A graph as the executor orders and plans it on a backend, apart from its
// kernels: Executable::prepare runs it with the workspaces of the kernels it
// keeps; the planning policies run it with workspaces known from earlier
// kernels of the same nodes (src/step/workspace_sizes.h), creating none.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "memory/planner.h"
#include "runtime/kernel.h"

namespace memfit {

struct BackendPlan {
  Graph graph;  // in the order planned
  PlanSizes sizes;  // the backend's value bytes and the workspaces, in that order
  MemoryPlan plan;
  // Position -> node of the graph given, when the memory-aware order was
  // kept; empty when the graph keeps its own order.
  std::vector<NodeId> order;
};

// Whether `graph` has copy nodes (to_host, to_device: the swap pass's).
bool has_copy_nodes(const Graph& graph);
// Whether `graph` has communication nodes (all_reduce_start: the all-reduce
// pass's, whose places in the order are when each bucket's sum starts).
bool has_comm_nodes(const Graph& graph);

// The kernel of node `id` and the name of the backend that made it: `backend`
// where it supports the node, else `reference`; an error names the node.
struct NodeKernel {
  std::unique_ptr<Kernel> kernel;
  std::string_view backend;
};
Result<NodeKernel> make_node_kernel(const Graph& graph, NodeId id, const Backend& backend,
                                    const Backend& reference);

// Plans `graph` with each node's `workspace_bytes` (in the graph's order) and
// the bytes of the backend's layouts: in the graph's order and, with
// `schedule` and sharing and no copy or communication nodes (the swap pass
// placed those by time), in a memory-aware order (src/memory/schedule.cpp),
// keeping the smaller arena (the step pipeline's schedule pass). Graph inputs
// other than state must have the plain layout. An arena over a non-zero
// `budget` is an error that states the smallest arena reached. The values `band` names take its
// slots at the bottom of the arena (planner.h). Debug builds, and builds
// with MEMFIT_VERIFY_PLANS, check the plan with the independent verifier.
Result<BackendPlan> plan_on_backend(Graph graph, const Backend& backend,
                                    std::vector<size_t> workspace_bytes, bool share,
                                    size_t budget, const StateBand& band = {},
                                    bool schedule = true);

}  // namespace memfit
