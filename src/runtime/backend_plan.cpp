#include "runtime/backend_plan.h"

#include <algorithm>
#include <cstdio>

#include "core/check.h"
#include "memory/schedule.h"
#include "ops/op_table.h"

namespace memfit {

bool has_copy_nodes(const Graph& graph) {
  return std::any_of(graph.nodes().begin(), graph.nodes().end(),
                     [](const Node& node) { return op_info(node.op).copy; });
}

bool has_comm_nodes(const Graph& graph) {
  return std::any_of(graph.nodes().begin(), graph.nodes().end(),
                     [](const Node& node) { return op_info(node.op).comm; });
}

namespace {

// Plans the memory-aware order of the nodes and keeps it if its arena is smaller.
void try_memory_aware_order(BackendPlan& planned, const PlanOptions& plan_options) {
  std::vector<NodeId> order = memory_aware_order(planned.graph, planned.sizes.value_bytes);
  bool same = true;
  for (size_t i = 0; i < order.size(); ++i) same = same && order[i].idx() == i;
  if (same) return;
  std::vector<ValueId> value_map;
  Graph reordered = reorder_nodes(planned.graph, order, &value_map);
  PlanSizes sizes;
  sizes.value_bytes.resize(planned.sizes.value_bytes.size());
  for (size_t v = 0; v < value_map.size(); ++v) {
    sizes.value_bytes[value_map[v].idx()] = planned.sizes.value_bytes[v];
  }
  for (NodeId id : order) sizes.workspace_bytes.push_back(planned.sizes.workspace_bytes[id.idx()]);
  auto plan = plan_memory(reordered, sizes, plan_options);
  if (!plan || plan->arena_bytes >= planned.plan.arena_bytes) return;
  planned.graph = std::move(reordered);
  planned.sizes = std::move(sizes);
  planned.plan = std::move(plan).value();
  planned.order = std::move(order);
}

}  // namespace

Result<NodeKernel> make_node_kernel(const Graph& graph, NodeId id, const Backend& backend,
                                    const Backend& reference) {
  const Backend& chosen = backend.supports(graph, graph.node(id)) ? backend : reference;
  auto kernel = chosen.make_kernel(graph, id);
  if (!kernel) return Status::error("node '" + graph.node(id).name + "': " + kernel.message());
  return NodeKernel{std::move(kernel).value(), chosen.name()};
}

Result<BackendPlan> plan_on_backend(Graph graph, const Backend& backend,
                                    std::vector<size_t> workspace_bytes, bool share,
                                    size_t budget, const StateBand& band, bool schedule) {
  MEMFIT_CHECK(workspace_bytes.size() == graph.num_nodes());
  BackendPlan planned;
  planned.sizes.workspace_bytes = std::move(workspace_bytes);
  // Values exchanged with the host are copied as plain data (inputs, outputs),
  // or converted by the executor as it loads and stores them (state).
  for (size_t v = 0; v < graph.num_values(); ++v) {
    const TensorLayout layout = backend.layout(graph, ValueId(static_cast<int32_t>(v)));
    planned.sizes.value_bytes.push_back(layout.bytes);
    const Value& value = graph.values()[v];
    if (!value.producer.valid() && !is_persistent(value.role) && layout.format != "plain") {
      return Status::error("graph input '" + value.name + "' must have the plain layout");
    }
  }
  planned.graph = std::move(graph);
  PlanOptions plan_options;
  plan_options.share = share;
  plan_options.band = band;
  MEMFIT_ASSIGN_OR_RETURN(planned.plan, plan_memory(planned.graph, planned.sizes, plan_options));
  // Copies and collectives start where the graph's order puts them: it is kept.
  if (schedule && share && !has_copy_nodes(planned.graph) && !has_comm_nodes(planned.graph)) {
    try_memory_aware_order(planned, plan_options);
  }
  if (budget > 0 && planned.plan.arena_bytes > budget) {
    plan_options.budget = budget;
    return plan_memory(planned.graph, planned.sizes, plan_options).status();
  }
#ifdef MEMFIT_VERIFY_PLANS
  const Status verified = verify_plan(planned.graph, planned.sizes, planned.plan, budget);
  if (!verified.is_ok()) std::fprintf(stderr, "memfit: invalid memory plan: %s\n", verified.message().c_str());
  MEMFIT_CHECK(verified.is_ok());
#endif
  return planned;
}

}  // namespace memfit
