// Each node's seconds summed over the steps (Executable::node_seconds, which
// profile_runs and the cost model read): a copy node's, its copy's on the copy
// stream; any other node's, its span on the timeline once the step is over
// (the kernel clock's where that observer refined it). After the timeline in
// the executor's list.
#pragma once

#include <vector>

#include "memfit/ir.h"
#include "runtime/step_observer.h"

namespace memfit {

struct StepTimeline;

class ProfileObserver final : public StepObserver {
 public:
  // `timeline` and `node_seconds` (one per node) are not owned.
  ProfileObserver(const Graph& graph, const StepTimeline& timeline,
                  std::vector<double>& node_seconds);

  void copy_done(size_t n, Clock::time_point start, double seconds) override;
  Status end_step(StepTimes& times) override;

 private:
  std::vector<bool> copies_;  // per node: a copy node, timed by the copy stream
  const StepTimeline& timeline_;
  std::vector<double>& node_seconds_;
};

}  // namespace memfit
