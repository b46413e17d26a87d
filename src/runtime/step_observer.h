// What the executor's loop tells the observers of a step, and when. The loop
// issues the work alone (kernels, copies on the copy stream, collectives on
// the communication thread); what watches or follows that work hangs off it
// as observers: the stream points that collectives wait for, poison mode, the
// kernel clock, the timeline and the profile (src/runtime/*_observer.h).
//
// Order: the hooks of the executor's list run in its order, but after_kernel
// and after_node run in reverse, so that each observer's before and after
// hooks bracket a node like parentheses: the last observer is the innermost,
// closest to the kernel (the timeline: the host's clock times the launch
// alone). Hooks run on the executor's thread unless said otherwise.
#pragma once

#include <chrono>
#include <cstddef>

#include "memfit/status.h"

namespace memfit {

// A step's times on the host's clock, in seconds from its start.
struct StepTimes {
  using Clock = std::chrono::steady_clock;
  Clock::time_point start;   // the step's start: the feeds are copied in first
  double nodes_start = 0;    // the feeds are in; the first node is issued
  double outputs_start = 0;  // the copies of the outputs out begin
  double end = 0;            // the step is over

  double since_start(Clock::time_point t) const {
    return std::chrono::duration<double>(t - start).count();
  }
};

class StepObserver {
 public:
  using Clock = StepTimes::Clock;
  virtual ~StepObserver() = default;

  // The step starts (times.start); the feeds are copied in next.
  virtual void begin_step(const StepTimes&) {}
  // The feeds are in the arena (times.nodes_start) and the device is idle:
  // their copies return when done. The first node is issued next.
  virtual void begin_nodes(const StepTimes&) {}
  // Node n is next, before it waits for the copies and the collectives whose
  // outputs it reads.
  virtual void before_node(size_t) {}
  // Around the launch of node n's kernel: every node's but a copy node's
  // (to_host, to_device), which is issued to the copy stream instead.
  // `failed`: the step's first error; an observer whose work on the device
  // fails sets it if it is still ok, and the step stops after this node.
  virtual void before_kernel(size_t) {}
  virtual void after_kernel(size_t, Status& /*failed*/) {}
  // On the copy stream's thread: copy node n's copy started at `start` and
  // took `seconds`.
  virtual void copy_done(size_t, Clock::time_point /*start*/, double /*seconds*/) {}
  // On the communication thread, untimed, before the collective of comm node
  // n reads its bucket: waits until it may. An error ends the step.
  virtual Status before_collective(size_t) { return Status::ok(); }
  // Node n's work is issued: its kernel, copy or collective. `failed` as for
  // after_kernel.
  virtual void after_node(size_t, Status& /*failed*/) {}
  // Every node is issued and every copy and collective has completed, without
  // an error (times.outputs_start); the outputs are copied out next.
  virtual void end_nodes() {}
  // The device has finished the step (times.end). An observer with a clock of
  // its own may move times.outputs_start, before those after it in the list
  // take the times; an error ends the step.
  virtual Status end_step(StepTimes&) { return Status::ok(); }
};

}  // namespace memfit
