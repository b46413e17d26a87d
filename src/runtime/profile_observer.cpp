#include "runtime/profile_observer.h"

#include "runtime/executor.h"

namespace memfit {

ProfileObserver::ProfileObserver(const Graph& graph, const StepTimeline& timeline,
                                 std::vector<double>& node_seconds)
    : timeline_(timeline), node_seconds_(node_seconds) {
  for (const Node& node : graph.nodes()) {
    copies_.push_back(node.op == OpKind::to_host || node.op == OpKind::to_device);
  }
}

// Each copy node's own slot: the copy thread alone writes it during a step.
void ProfileObserver::copy_done(size_t n, Clock::time_point, double seconds) {
  node_seconds_[n] += seconds;
}

Status ProfileObserver::end_step(StepTimes&) {
  for (size_t n = 0; n < node_seconds_.size(); ++n) {
    if (copies_[n]) continue;
    node_seconds_[n] += timeline_.nodes[n].end - timeline_.nodes[n].start;
  }
  return Status::ok();
}

}  // namespace memfit
