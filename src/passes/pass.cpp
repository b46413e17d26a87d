#include "passes/pass.h"

#include <utility>

#include "ops/typed_graph.h"

namespace memfit {

PassPipeline& PassPipeline::add(std::unique_ptr<Pass> pass) {
  passes_.push_back(std::move(pass));
  return *this;
}

Result<bool> PassPipeline::run(Graph& graph, PassContext& context) const {
  bool changed = false;
  for (const auto& pass : passes_) {
    MEMFIT_ASSIGN_OR_RETURN(const bool changed_now, pass->run(graph, context));
    if (!changed_now) continue;
    changed = true;
#ifdef MEMFIT_VERIFY_PLANS
    const Status verified = verify_graph(graph);
    if (!verified.is_ok()) {
      return Status::error("the graph after the " + std::string(pass->name()) +
                           " pass is invalid: " + verified.message());
    }
#endif
    if (context.after_pass) MEMFIT_RETURN_IF_ERROR(context.after_pass(pass->name(), graph));
  }
  return changed;
}

std::vector<std::string_view> PassPipeline::names() const {
  std::vector<std::string_view> names;
  for (const auto& pass : passes_) names.push_back(pass->name());
  return names;
}

}  // namespace memfit
