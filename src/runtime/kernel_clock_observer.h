// The device's kernel clock (Executable::time_kernels), where the host's
// clock around a launch does not time its kernel (a GPU). Its marks go on the
// compute stream: mark 0 once the feeds are in, 1 + 2n and 2 + 2n around node
// n's kernel, 1 + 2N after the last node (N nodes). A swap_wait's first mark
// goes before its wait for the copy, so that the compute stream standing
// still is its time; any other node's waits come before its kernel's time.
// Once the step is over, the clock's spans replace the timeline's, and the
// outputs' copy counts from the kernels' end: the time of the kernels still
// running when the host had issued them all is theirs, not the copy's. So it
// goes before the timeline and the profile in the executor's list.
#pragma once

#include <memory>
#include <vector>

#include "memfit/ir.h"
#include "runtime/device.h"
#include "runtime/step_observer.h"

namespace memfit {

struct StepTimeline;

class KernelClockObserver final : public StepObserver {
 public:
  // `clock` has 2 + 2 * graph.num_nodes() marks; `timeline` is not owned.
  KernelClockObserver(const Graph& graph, std::unique_ptr<KernelClock> clock,
                      StepTimeline& timeline);

  void begin_nodes(const StepTimes& times) override;
  void before_node(size_t n) override;
  void before_kernel(size_t n) override;
  void after_kernel(size_t n, Status& failed) override;
  void end_nodes() override;
  Status end_step(StepTimes& times) override;

 private:
  std::vector<bool> swap_waits_;  // per node
  std::unique_ptr<KernelClock> clock_;
  StepTimeline& timeline_;
};

}  // namespace memfit
