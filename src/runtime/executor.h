// The executor: runs a compiled training graph, one node after the other, in
// one arena of exactly the planned size. Every value and workspace lives at
// its planned offset; persistent values stay in the arena from one step to
// the next (loaded from a StateStore once, copied out on request).
//
// The arena, the host pool and every copy in or out of them come from the
// backend's Device (src/runtime/device.h): host memory for the cpu and
// reference backends, GPU memory for the cuda backend.
//
// Swapping: the host pool is a separate allocation of the plan's host bytes.
// Copy nodes (to_host, to_device) are issued, in schedule order, to the
// device's swap stream (on the host, a copy engine: src/runtime/copy_engine.h),
// which runs them in that order while the compute stream goes on. Events order the two: a node that reads
// the output of a copy waits for that copy first; swap_wait waits for the
// copy to_host that made its input 1, so the source's device range is reused
// only after that copy completed; a range freed at a copy node is poisoned on
// the copy stream, after the copy that reads it; the step ends when every
// copy has completed.
//
// Data parallelism: after the kernel of a comm node (all_reduce_start,
// reduce_scatter_start, all_gather_start, which pack a bucket), its
// collective on the bucket is issued to a second engine, the communication
// thread, which calls the step's Communicator in issue order; readers of the
// bucket (its wait node) wait for that event. The step ends when every collective has completed.
//
// The loop of a step issues that work alone. What watches or follows it
// hangs off it as observers (src/runtime/step_observer.h): the stream points
// that collectives wait for off the host, poison mode, the kernel clock, the
// timeline and the profile.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "memfit/dist.h"
#include "memory/planner.h"
#include "runtime/copy_engine.h"
#include "runtime/device.h"
#include "runtime/kernel.h"
#include "runtime/step_observer.h"

namespace memfit {

// Values that outlive a step (parameters, optimizer state, running
// statistics), by value name, as plain float data.
class StateStore {
 public:
  std::vector<float>& operator[](const std::string& name) { return tensors_[name]; }
  const std::vector<float>* find(const std::string& name) const;
  bool contains(const std::string& name) const { return tensors_.count(name) > 0; }
  const std::unordered_map<std::string, std::vector<float>>& tensors() const { return tensors_; }

 private:
  std::unordered_map<std::string, std::vector<float>> tensors_;
};

// Data for the input and label values of one step, by value name; each buffer
// holds exactly the value's bytes.
using Feeds = std::unordered_map<std::string, const void*>;

struct StepResult {
  std::unordered_map<std::string, std::vector<float>> outputs;  // the graph outputs
  // The highest arena byte any kernel or copy of this step was given: the
  // measured high-water mark, which equals the planned arena.
  size_t high_water_bytes = 0;
  // Seconds the compute stream waited for copies (swap-ins not yet back,
  // swap-outs not yet complete): the part of the copies that compute did not hide.
  double copy_wait_seconds = 0;
  // Seconds the collectives took on the communication thread (network pacing
  // included), and the part of them the compute stream waited for: the
  // communication the backward pass did not hide.
  double comm_seconds = 0;
  double comm_wait_seconds = 0;
  // The step's wall-clock seconds, and the part of them spent copying the
  // feeds into the arena at its start and, at its end, the outputs out and
  // the updates not written in place over their state.
  double seconds = 0;
  double io_seconds = 0;
};

// A stretch of a step, in seconds from the step's start.
struct Span {
  double start = 0;
  double end = 0;
};

// When each part of a step ran: every node (a copy node's span is its copy on
// the copy stream), the copies of the feeds into the arena at the start and
// of the outputs and the updates not made in place at the end.
struct StepTimeline {
  std::vector<Span> nodes;
  Span data_in, data_out;
  double seconds = 0;
};

// What every run of an executable so far added up to.
struct RunTotals {
  int64_t runs = 0;
  double seconds = 0;             // wall-clock seconds of the runs
  double io_seconds = 0;  // of which copying feeds in, outputs and updates out
  double copy_wait_seconds = 0;   // of which compute waited for the copy stream
  double comm_seconds = 0;        // collectives on the communication thread
  double comm_wait_seconds = 0;   // of which compute waited for
};

struct ExecOptions {
  bool share = true;     // plan buffer sharing and in-place reuse; false: a slice per value
  bool poison = false;   // fill every range with NaN when its value dies
  size_t budget = 0;     // the largest arena allowed; 0: no limit
  double link_gbps = 0;  // the copy engine's bandwidth in GB/s (1e9 bytes/s); 0: unlimited
  StateBand band = {};   // persistent inputs at fixed offsets (planner.h); empty: none
  // The ranks that all_reduce_start nodes sum over (not owned; must outlive
  // the executable); null: a graph with such nodes does not run.
  Communicator* comm = nullptr;
  double comm_gbps = 0;  // the network's bandwidth per rank in GB/s; 0: unlimited
  // Try the memory-aware order of the nodes (plan_on_backend); false: the
  // graph's order is kept, as the step pipeline's schedule pass chose it.
  bool schedule = true;
};

class Executable {
 public:
  // Creates every node's kernel once (with `backend` where it supports the
  // node, else with the reference backend), plans the memory with the bytes
  // of the backend's layouts and the kernels' workspaces, in the graph's order
  // and in a memory-aware order, keeping the smaller arena (plan_on_backend,
  // src/runtime/backend_plan.h), and allocates the arena and the host pool.
  // An arena over a non-zero budget is an error that states the smallest
  // arena reached. A backend whose device is not the host must have a kernel
  // for every node (the reference kernels run on the host).
  static Result<std::unique_ptr<Executable>> compile(Graph graph, const Backend& backend,
                                                     const ExecOptions& options = {});
  // Everything compile() does but allocating the arena: kernels, schedule and
  // plan, for reporting a plan without the memory it needs. run() needs
  // compile(), or prepare() and then allocate().
  static Result<std::unique_ptr<Executable>> prepare(Graph graph, const Backend& backend,
                                                     const ExecOptions& options = {});
  // The rest of compile() for a prepared executable: the arena, the host pool,
  // the swap stream and, with `poison`, poison mode. Once only. The arena
  // holds at least `min_bytes` (for allocate_on_arena_of's executables). An
  // error when the device cannot give the memory.
  Status allocate(bool poison = false, size_t min_bytes = 0);
  // The same on the arena of `other` (allocated, at least as large as this
  // plan's arena) instead of one of its own: two executables that run in
  // turn, such as the micro-batches that only accumulate and the one that
  // applies the update. Where both were planned with one StateBand, their
  // persistent inputs share its bytes: copy_state_from then copies nothing.
  Status allocate_on_arena_of(const Executable& other, bool poison = false);
  size_t arena_capacity() const { return arena_capacity_; }

  // State kept in the arena. Persistent inputs (parameters, optimizer state,
  // running statistics, accumulators) live to the end of every step, so their
  // slices are never given to another value: the arena holds the state from
  // one step to the next. load_state copies every persistent input of the
  // graph in from `state` (an error names any missing or mis-sized one);
  // store_state copies them out into `state` (after a step: the updated
  // values); copy_state_from copies those that `other` also has from its
  // arena, keeping its own value of the others once its state is loaded
  // (before, `other` must have them all).
  Status load_state(const StateStore& state);
  Status store_state(StateStore& state) const;
  Status copy_state_from(const Executable& other);
  bool state_loaded() const { return state_loaded_; }

  // Runs one step on the state in the arena (load_state first). At its end an
  // update whose new value was not written in place over its state is copied
  // over it inside the arena (state_copy_bytes() per step; 0 when every update
  // is in place).
  Result<StepResult> run(const Feeds& feeds, const StepContext& step);
  // The same for one-off use: load_state(state), run, store_state(state).
  Result<StepResult> run(StateStore& state, const Feeds& feeds, const StepContext& step);
  size_t state_copy_bytes() const;

  const Graph& graph() const { return graph_; }
  const MemoryPlan& plan() const { return plan_; }
  const PlanSizes& sizes() const { return sizes_; }
  // The backend that runs each node ("cpu" or "reference").
  const std::vector<std::string>& node_backends() const { return node_backends_; }
  // From the next run on, times each kernel by the device's kernel clock
  // where it has one (a GPU, whose launches return before their kernels
  // run). It costs two marks on the device's stream per node and step, so it
  // is off until asked for: the profile, the trace and measured costs ask.
  // Nothing changes on the host, whose clock around a call times its kernel.
  Status time_kernels();
  // Seconds spent in each node's kernel, summed over all runs so far: by the
  // device's kernel clock after time_kernels() where it has one, else by the
  // host's clock around the call (on a GPU without the clock: the launch's
  // time, not the kernel's); for a copy node, the seconds its copy took on
  // the copy stream.
  const std::vector<double>& node_seconds() const { return node_seconds_; }
  // When each part of the last step ran (no nodes before the first step).
  const StepTimeline& last_step() const { return last_step_; }
  const RunTotals& totals() const { return totals_; }
  // Sets node_seconds and totals back to zero.
  void reset_times();

 private:
  struct StepRun;  // one step's state in the loop

  std::byte* at(const Slice& slice) const {
    return (slice.pool == Pool::host ? host_.get() : arena_.get()) + slice.offset;
  }
  // at(slice), counting its end in the high-water mark where it is in the arena.
  std::byte* touch(const Slice& slice, size_t& high_water) const;
  // The persistent input `v`'s value in the arena, in the plain layout.
  Result<std::vector<float>> read_state(size_t v) const;
  // Writes `plain` (the plain layout) over persistent input `v` in the arena.
  Status write_state(size_t v, const std::vector<float>& plain) const;
  // run()'s stages: the communicator fits the step's buckets; the feeds go
  // into the arena (the state there counts as touched); node `n`'s work is
  // issued, its observers told; every copy and collective completes, and the
  // step's first error comes back; the outputs are copied out and the updates
  // not written in place over their state moved there.
  Status check_communicator() const;
  Status feed(const Feeds& feeds, size_t& high_water) const;
  void issue(size_t n, const StepContext& step, StepRun& run);
  Status drain(StepRun& run) const;
  Status copy_out(StepResult& result) const;
  // Issues the collective of comm node `n` (all_reduce_start,
  // reduce_scatter_start, all_gather_start) on its output `bucket`, after the
  // observers' before_collective; returns its event. Its seconds go to the
  // step's result, its error, if any, to the step's comm_status.
  int64_t start_collective(size_t n, void* bucket, StepRun& run);
  // allocate()'s work after the arena: events, the host pool, the swap
  // stream, the communication thread, and the observers that work on the
  // device's streams.
  Status set_up(bool poison);

  Graph graph_;
  ExecOptions options_;
  std::shared_ptr<const Device> device_;
  std::vector<std::unique_ptr<Kernel>> kernels_;
  std::vector<std::string> node_backends_;
  std::vector<double> node_seconds_;
  StepTimeline last_step_;
  RunTotals totals_;
  PlanSizes sizes_;
  MemoryPlan plan_;
  std::shared_ptr<std::byte> arena_;  // shared with allocate_on_arena_of's executable
  size_t arena_capacity_ = 0;
  std::shared_ptr<std::byte> host_;  // the host pool, apart from the arena
  // The observers of every step, in the order their hooks run
  // (step_observer.h): the stream points and poison mode, which work on the
  // device's streams after a node; the kernel clock, once time_kernels()
  // asked for it; last the timeline and the profile, which take the spans
  // the clock refines. Before copies_ and comms_, whose threads call them,
  // so that they outlive those threads.
  std::vector<std::unique_ptr<StepObserver>> observers_;
  std::unique_ptr<SwapStream> copies_;  // null when the graph has no copy node
  std::unique_ptr<CopyEngine> comms_;   // null when it has no all_reduce_start
  bool state_loaded_ = false;
  bool kernels_timed_ = false;  // the kernel clock is among the observers
  // Per node: the copy nodes and the communication nodes whose events it
  // waits for before it runs.
  std::vector<std::vector<int32_t>> waits_for_, comm_waits_for_;
};

}  // namespace memfit
