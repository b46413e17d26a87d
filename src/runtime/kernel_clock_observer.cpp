#include "runtime/kernel_clock_observer.h"

#include <algorithm>

#include "runtime/executor.h"

namespace memfit {

KernelClockObserver::KernelClockObserver(const Graph& graph, std::unique_ptr<KernelClock> clock,
                                         StepTimeline& timeline)
    : clock_(std::move(clock)), timeline_(timeline) {
  for (const Node& node : graph.nodes()) swap_waits_.push_back(node.op == OpKind::swap_wait);
}

// The device is idle: mark 0 passes now.
void KernelClockObserver::begin_nodes(const StepTimes&) { clock_->mark(0); }

void KernelClockObserver::before_node(size_t n) {
  if (swap_waits_[n]) clock_->mark(1 + 2 * n);
}

void KernelClockObserver::before_kernel(size_t n) {
  if (!swap_waits_[n]) clock_->mark(1 + 2 * n);
}

void KernelClockObserver::after_kernel(size_t n, Status&) { clock_->mark(2 + 2 * n); }

void KernelClockObserver::end_nodes() { clock_->mark(1 + 2 * swap_waits_.size()); }

Status KernelClockObserver::end_step(StepTimes& times) {
  MEMFIT_ASSIGN_OR_RETURN(const std::vector<double> marks, clock_->read());
  // Marks count from mark 0, when the first node was issued.
  const double kernels_start = times.nodes_start;
  const size_t nodes = swap_waits_.size();
  for (size_t n = 0; n < nodes; ++n) {
    const double begin = marks[1 + 2 * n], end = marks[2 + 2 * n];
    if (begin >= 0 && end >= 0)
      timeline_.nodes[n] = Span{kernels_start + begin, kernels_start + end};
  }
  const double kernels_end = marks[1 + 2 * nodes];
  if (kernels_end >= 0) {
    times.outputs_start = std::clamp(kernels_start + kernels_end, times.outputs_start, times.end);
  }
  return Status::ok();
}

}  // namespace memfit
