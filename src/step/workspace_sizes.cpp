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
    const Node& node = graph.node(id);
    std::string signature = node_signature(graph, node);
    auto found = bytes_.find(signature);
    if (found == bytes_.end()) {
      auto kernel = backend_for(graph, node, backend_, *reference_).make_kernel(graph, id);
      if (!kernel) return Status::error("node '" + node.name + "': " + kernel.message());
      found = bytes_.emplace(std::move(signature), kernel.value()->workspace_bytes()).first;
    }
    sizes.push_back(found->second);
  }
  return sizes;
}

}  // namespace memfit
