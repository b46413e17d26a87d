#include "step/workspace_sizes.h"

#include "cost/cost_model.h"
#include "runtime/backend_plan.h"

namespace memfit {

WorkspaceSizes::WorkspaceSizes(const Backend& backend)
    : backend_(backend), reference_(make_reference_backend()) {}

Result<std::vector<size_t>> WorkspaceSizes::of(const Graph& graph) {
  std::vector<size_t> sizes;
  sizes.reserve(graph.num_nodes());
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    const NodeId id(static_cast<int32_t>(n));
    std::string signature = node_signature(graph, graph.node(id));
    auto found = bytes_.find(signature);
    if (found == bytes_.end()) {
      MEMFIT_ASSIGN_OR_RETURN(NodeKernel made, make_node_kernel(graph, id, backend_, *reference_));
      found = bytes_.emplace(std::move(signature), made.kernel->workspace_bytes()).first;
    }
    sizes.push_back(found->second);
  }
  return sizes;
}

}  // namespace memfit
