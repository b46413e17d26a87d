#include "runtime/timeline_observer.h"

#include "runtime/executor.h"

namespace memfit {

TimelineObserver::TimelineObserver(const Graph& graph, StepTimeline& timeline)
    : nodes_(graph.num_nodes()), timeline_(timeline) {}

void TimelineObserver::begin_step(const StepTimes& times) {
  start_ = times.start;
  timeline_.nodes.assign(nodes_, Span{});
}

void TimelineObserver::begin_nodes(const StepTimes& times) {
  timeline_.data_in = Span{0, times.nodes_start};
}

void TimelineObserver::before_kernel(size_t) { launched_ = Clock::now(); }

void TimelineObserver::after_kernel(size_t n, Status&) {
  const Clock::time_point returned = Clock::now();
  timeline_.nodes[n] = Span{since_start(launched_), since_start(returned)};
}

// Each copy node's own slot: the copy thread alone writes it during a step.
void TimelineObserver::copy_done(size_t n, Clock::time_point start, double seconds) {
  Span& span = timeline_.nodes[n];
  span.start = since_start(start);
  span.end = span.start + seconds;
}

Status TimelineObserver::end_step(StepTimes& times) {
  timeline_.data_out = Span{times.outputs_start, times.end};
  timeline_.seconds = times.end;
  return Status::ok();
}

}  // namespace memfit
