// The step's timeline (Executable::last_step) on the host's clock: each
// kernel's span around its launch (on a GPU, the launch's; the kernel clock
// observer replaces it with the kernel's), each copy's span on the copy
// stream, and the copies of the data in and out at the step's ends. Last in
// the executor's list: the innermost around a kernel, so that its clock
// times the launch alone, and it takes the times the kernel clock refined.
#pragma once

#include "memfit/ir.h"
#include "runtime/step_observer.h"

namespace memfit {

struct StepTimeline;

class TimelineObserver final : public StepObserver {
 public:
  // `timeline` (not owned) is written on every step.
  TimelineObserver(const Graph& graph, StepTimeline& timeline);

  void begin_step(const StepTimes& times) override;
  void begin_nodes(const StepTimes& times) override;
  void before_kernel(size_t n) override;
  void after_kernel(size_t n, Status& failed) override;
  void copy_done(size_t n, Clock::time_point start, double seconds) override;
  Status end_step(StepTimes& times) override;

 private:
  double since_start(Clock::time_point t) const {
    return std::chrono::duration<double>(t - start_).count();
  }

  size_t nodes_;
  StepTimeline& timeline_;
  Clock::time_point start_;     // the step's
  Clock::time_point launched_;  // the kernel's launch
};

}  // namespace memfit
