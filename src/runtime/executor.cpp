#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <iterator>

#include "core/check.h"
#include "ops/op_table.h"
#include "runtime/backend_plan.h"
#include "runtime/kernel_clock_observer.h"
#include "runtime/poison_observer.h"
#include "runtime/profile_observer.h"
#include "runtime/stream_point_observer.h"
#include "runtime/timeline_observer.h"

namespace memfit {

const std::vector<float>* StateStore::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

namespace {

bool is_swap_copy(OpKind op) { return op == OpKind::to_host || op == OpKind::to_device; }

void add_run(RunTotals& totals, const StepResult& result) {
  ++totals.runs;
  totals.seconds += result.seconds;
  totals.io_seconds += result.io_seconds;
  totals.copy_wait_seconds += result.copy_wait_seconds;
  totals.comm_seconds += result.comm_seconds;
  totals.comm_wait_seconds += result.comm_wait_seconds;
}

}  // namespace

struct Executable::StepRun {
  StepResult result;
  StepTimes times;
  size_t high_water = 0;        // the highest arena byte given to a kernel or copy so far
  std::vector<int64_t> events;  // the task of each copy or comm node
  // The first collective's error, written on the communication thread; and
  // a device's error, which the streams drain before it returns.
  Status comm_status, failed;
  std::vector<void*> inputs, outputs;  // the node's buffers, reused from node to node
};

std::byte* Executable::touch(const Slice& slice, size_t& high_water) const {
  if (slice.pool == Pool::device) high_water = std::max(high_water, slice.end());
  return at(slice);
}

Result<std::unique_ptr<Executable>> Executable::prepare(Graph graph, const Backend& backend,
                                                        const ExecOptions& options) {
  auto exe = std::unique_ptr<Executable>(new Executable());
  exe->options_ = options;
  exe->device_ = backend.device();
  const bool on_host = exe->device_ == host_device();
  const auto reference = make_reference_backend();
  std::vector<size_t> workspace_bytes;
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    const NodeId id(static_cast<int32_t>(n));
    // Off the host, the reference kernels are not asked: they could not run there.
    if (!on_host && !backend.supports(graph, graph.node(id))) {
      return Status::error("the " + std::string(backend.name()) + " backend has no kernel for " +
                           std::string(op_name(graph.node(id).op)) + " (node '" +
                           graph.node(id).name + "'), and the reference kernels run on the host");
    }
    MEMFIT_ASSIGN_OR_RETURN(NodeKernel made, make_node_kernel(graph, id, backend, *reference));
    workspace_bytes.push_back(made.kernel->workspace_bytes());
    exe->kernels_.push_back(std::move(made.kernel));
    exe->node_backends_.emplace_back(made.backend);
  }
  MEMFIT_ASSIGN_OR_RETURN(BackendPlan planned,
                          plan_on_backend(std::move(graph), backend, std::move(workspace_bytes),
                                          options.share, options.budget, options.band,
                                          options.schedule));
  // Kernels depend on their node alone, not on its position: they follow it.
  if (!planned.order.empty()) {
    std::vector<std::unique_ptr<Kernel>> kernels;
    std::vector<std::string> backends;
    for (NodeId id : planned.order) {
      kernels.push_back(std::move(exe->kernels_[id.idx()]));
      backends.push_back(exe->node_backends_[id.idx()]);
    }
    exe->kernels_ = std::move(kernels);
    exe->node_backends_ = std::move(backends);
  }
  exe->graph_ = std::move(planned.graph);
  exe->sizes_ = std::move(planned.sizes);
  exe->plan_ = std::move(planned.plan);
  exe->node_seconds_.assign(exe->graph_.num_nodes(), 0.0);
  exe->observers_.push_back(std::make_unique<TimelineObserver>(exe->graph_, exe->last_step_));
  exe->observers_.push_back(
      std::make_unique<ProfileObserver>(exe->graph_, exe->last_step_, exe->node_seconds_));
  return exe;
}

Result<std::unique_ptr<Executable>> Executable::compile(Graph graph, const Backend& backend,
                                                        const ExecOptions& options) {
  MEMFIT_ASSIGN_OR_RETURN(auto exe, prepare(std::move(graph), backend, options));
  MEMFIT_RETURN_IF_ERROR(exe->allocate(options.poison));
  return exe;
}

Status Executable::allocate(bool poison, size_t min_bytes) {
  MEMFIT_CHECK(arena_ == nullptr);
  const size_t capacity = std::max(plan_.arena_bytes, min_bytes);
  MEMFIT_ASSIGN_OR_RETURN(arena_, device_->allocate(capacity));
  arena_capacity_ = capacity;
  return set_up(poison);
}

Status Executable::allocate_on_arena_of(const Executable& other, bool poison) {
  MEMFIT_CHECK(arena_ == nullptr && other.arena_ != nullptr);
  MEMFIT_CHECK(other.arena_capacity_ >= plan_.arena_bytes && other.device_ == device_);
  arena_ = other.arena_;
  arena_capacity_ = other.arena_capacity_;
  return set_up(poison);
}

Status Executable::set_up(bool poison) {
  const MemoryPlan& plan = plan_;
  const Graph& scheduled = graph_;

  // Events: a compute node waits for the copies whose outputs it reads;
  // swap_wait waits for the to_host that made its input 1. Copy nodes reading
  // copy outputs need no event: the copy stream runs in issue order. Any node
  // that reads a comm node's bucket waits for its collective.
  waits_for_.resize(scheduled.num_nodes());
  comm_waits_for_.resize(scheduled.num_nodes());
  for (size_t n = 0; n < scheduled.num_nodes(); ++n) {
    const Node& node = scheduled.nodes()[n];
    for (ValueId v : node.inputs) {
      const NodeId producer = scheduled.value(v).producer;
      if (producer.valid() && op_info(scheduled.node(producer).op).comm) {
        comm_waits_for_[n].push_back(producer.index);
      }
    }
    std::vector<ValueId> awaited;
    if (node.op == OpKind::swap_wait) {
      awaited.push_back(node.inputs[1]);
    } else if (!op_info(node.op).copy) {
      awaited = node.inputs;
    }
    for (ValueId v : awaited) {
      const NodeId producer = scheduled.value(v).producer;
      if (producer.valid() && op_info(scheduled.node(producer).op).copy) {
        waits_for_[n].push_back(producer.index);
      }
    }
  }

  MEMFIT_ASSIGN_OR_RETURN(host_, device_->allocate_host(plan.host_bytes));
  if (has_copy_nodes(scheduled)) {
    MEMFIT_ASSIGN_OR_RETURN(copies_, device_->swap_stream(options_.link_gbps * 1e9));
  }
  // First in the list: their work on the device's streams after a node
  // comes after the kernel clock's mark.
  std::vector<std::unique_ptr<StepObserver>> first;
  if (has_comm_nodes(scheduled)) {
    comms_ = std::make_unique<CopyEngine>(options_.comm_gbps * 1e9);
    if (device_ != host_device()) {
      MEMFIT_ASSIGN_OR_RETURN(auto points, StreamPointObserver::make(scheduled, *device_));
      first.push_back(std::move(points));
    }
  }
  if (poison) {
    // On another executable's arena, the state band is theirs too: left as it is.
    const bool shared = arena_.use_count() > 1;
    const size_t from = shared ? std::min(options_.band.bytes, plan.arena_bytes) : 0;
    MEMFIT_ASSIGN_OR_RETURN(
        auto poisoner, PoisonObserver::make(scheduled, plan, *device_, arena_.get(), host_.get(),
                                            copies_.get(), from));
    first.push_back(std::move(poisoner));
  }
  observers_.insert(observers_.begin(), std::make_move_iterator(first.begin()),
                    std::make_move_iterator(first.end()));
  return Status::ok();
}

Status Executable::time_kernels() {
  if (kernels_timed_) return Status::ok();
  // Marks: the kernels' start, one before and one after each node, and the
  // kernels' end.
  MEMFIT_ASSIGN_OR_RETURN(std::unique_ptr<KernelClock> clock,
                          device_->kernel_clock(2 + 2 * graph_.num_nodes()));
  if (!clock) return Status::ok();
  // Before the timeline and the profile, the last two: they take its spans.
  observers_.insert(observers_.end() - 2,
                    std::make_unique<KernelClockObserver>(graph_, std::move(clock), last_step_));
  kernels_timed_ = true;
  return Status::ok();
}

void Executable::reset_times() {
  std::fill(node_seconds_.begin(), node_seconds_.end(), 0.0);
  totals_ = RunTotals{};
}

Result<std::vector<float>> Executable::read_state(size_t v) const {
  const Value& value = graph_.values()[v];
  std::vector<float> laid_out(value.bytes() / sizeof(float));
  MEMFIT_RETURN_IF_ERROR(
      device_->to_host(laid_out.data(), at(plan_.value_slices[v]), value.bytes()));
  if (value.layout == Layout::plain) return laid_out;
  std::vector<float> plain(static_cast<size_t>(value.elements()));
  unpack_layout(laid_out.data(), value.type.shape, value.layout, plain.data());
  return plain;
}

Status Executable::write_state(size_t v, const std::vector<float>& plain) const {
  const Value& value = graph_.values()[v];
  void* to = at(plan_.value_slices[v]);
  if (value.layout == Layout::plain) return device_->to_device(to, plain.data(), value.bytes());
  std::vector<float> laid_out(value.bytes() / sizeof(float));
  pack_layout(plain.data(), value.type.shape, value.layout, laid_out.data());
  return device_->to_device(to, laid_out.data(), value.bytes());
}

Status Executable::load_state(const StateStore& state) {
  for (size_t v = 0; v < graph_.num_values(); ++v) {
    const Value& value = graph_.values()[v];
    if (value.producer.valid() || !is_persistent(value.role)) continue;
    const std::vector<float>* tensor = state.find(value.name);
    if (!tensor || tensor->size() != static_cast<size_t>(value.elements())) {
      return Status::error("state '" + value.name + "' is missing or has the wrong size");
    }
    MEMFIT_RETURN_IF_ERROR(write_state(v, *tensor));
  }
  state_loaded_ = true;
  return Status::ok();
}

Status Executable::store_state(StateStore& state) const {
  MEMFIT_CHECK(state_loaded_);
  for (size_t v = 0; v < graph_.num_values(); ++v) {
    const Value& value = graph_.values()[v];
    if (value.producer.valid() || !is_persistent(value.role)) continue;
    MEMFIT_ASSIGN_OR_RETURN(state[value.name], read_state(v));
  }
  return Status::ok();
}

Status Executable::copy_state_from(const Executable& other) {
  MEMFIT_CHECK(other.state_loaded_);
  std::unordered_map<std::string, size_t> theirs;
  for (size_t v = 0; v < other.graph_.num_values(); ++v) {
    const Value& value = other.graph_.values()[v];
    if (!value.producer.valid() && is_persistent(value.role)) theirs[value.name] = v;
  }
  for (size_t v = 0; v < graph_.num_values(); ++v) {
    const Value& value = graph_.values()[v];
    if (value.producer.valid() || !is_persistent(value.role)) continue;
    auto it = theirs.find(value.name);
    if (it == theirs.end()) {
      if (state_loaded_) continue;  // only this executable has it: its own value stands
      return Status::error("state '" + value.name + "' is not in the executable it is copied from");
    }
    const Value& source = other.graph_.values()[it->second];
    if (source.type != value.type) {
      return Status::error("state '" + value.name +
                           "' has another type in the executable it is copied from");
    }
    std::byte* to = at(plan_.value_slices[v]);
    const std::byte* from = other.at(other.plan_.value_slices[it->second]);
    if (source.layout == value.layout) {
      // Nothing to copy on a shared band: the same bytes.
      MEMFIT_RETURN_IF_ERROR(device_->within(to, from, value.bytes()));
      continue;
    }
    // Laid out otherwise (a graph whose convolutions chose other weight
    // formats): through the plain layout.
    MEMFIT_CHECK(to != from);
    MEMFIT_ASSIGN_OR_RETURN(std::vector<float> plain, other.read_state(it->second));
    MEMFIT_RETURN_IF_ERROR(write_state(v, plain));
  }
  state_loaded_ = true;
  return Status::ok();
}

size_t Executable::state_copy_bytes() const {
  size_t bytes = 0;
  for (const StateUpdate& u : graph_.updates()) {
    if (plan_.value_slices[u.state.idx()].offset != plan_.value_slices[u.next.idx()].offset) {
      bytes += graph_.value(u.state).bytes();
    }
  }
  return bytes;
}

Result<StepResult> Executable::run(StateStore& state, const Feeds& feeds, const StepContext& step) {
  MEMFIT_RETURN_IF_ERROR(load_state(state));
  MEMFIT_ASSIGN_OR_RETURN(StepResult result, run(feeds, step));
  MEMFIT_RETURN_IF_ERROR(store_state(state));
  return result;
}

Result<StepResult> Executable::run(const Feeds& feeds, const StepContext& step) {
  MEMFIT_CHECK(state_loaded_);
  MEMFIT_RETURN_IF_ERROR(check_communicator());
  using Clock = StepTimes::Clock;
  StepRun run;
  StepTimes& times = run.times;
  times.start = Clock::now();
  for (auto& observer : observers_) observer->begin_step(times);
  MEMFIT_RETURN_IF_ERROR(feed(feeds, run.high_water));
  // The feeds are in (their copies return when done): the device is idle.
  times.nodes_start = times.since_start(Clock::now());
  for (auto& observer : observers_) observer->begin_nodes(times);
  run.events.assign(graph_.num_nodes(), -1);
  for (size_t n = 0; n < graph_.num_nodes() && run.failed.is_ok(); ++n) issue(n, step, run);
  MEMFIT_RETURN_IF_ERROR(drain(run));
  times.outputs_start = times.since_start(Clock::now());
  for (auto& observer : observers_) observer->end_nodes();

  StepResult& result = run.result;
  result.high_water_bytes = run.high_water;
  MEMFIT_RETURN_IF_ERROR(copy_out(result));
  MEMFIT_RETURN_IF_ERROR(device_->synchronize());
  times.end = times.since_start(Clock::now());
  for (auto& observer : observers_) MEMFIT_RETURN_IF_ERROR(observer->end_step(times));
  result.seconds = times.end;
  result.io_seconds = times.nodes_start + (times.end - times.outputs_start);
  add_run(totals_, result);
  return std::move(result);
}

Status Executable::check_communicator() const {
  if (comms_ && !options_.comm) {
    return Status::error("this step sums gradients over ranks and needs a communicator");
  }
  // Its buckets are in the arena: on a GPU only a communicator that sums GPU
  // memory (NCCL) may take them, and on the host only one that sums host memory.
  const bool off_host = device_ != host_device();
  if (comms_ && options_.comm->sums_gpu_memory() != off_host) {
    const std::string kind = options_.comm->kind();
    return Status::error(
        off_host ? "this step's gradient buckets are in the " + std::string(device_->name()) +
                       " device's memory: its ranks sum them with NCCL (memfit train --backend "
                       "cuda under mpirun), not with the '" +
                       kind + "' communicator"
                 : "the '" + kind +
                       "' communicator sums GPU memory, and this step's arena is "
                       "on the host");
  }
  return Status::ok();
}

Status Executable::feed(const Feeds& feeds, size_t& high_water) const {
  for (size_t v = 0; v < graph_.num_values(); ++v) {
    const Value& value = graph_.values()[v];
    if (value.producer.valid()) continue;
    // State is in the arena already; it counts as touched.
    if (is_persistent(value.role)) {
      touch(plan_.value_slices[v], high_water);
      continue;
    }
    auto it = feeds.find(value.name);
    if (it == feeds.end()) return Status::error("no data was given for input '" + value.name + "'");
    MEMFIT_RETURN_IF_ERROR(
        device_->to_device(touch(plan_.value_slices[v], high_water), it->second, value.bytes()));
  }
  return Status::ok();
}

void Executable::issue(size_t n, const StepContext& step, StepRun& run) {
  const Node& node = graph_.nodes()[n];
  for (auto& observer : observers_) observer->before_node(n);
  for (int32_t copy : waits_for_[n]) {
    run.result.copy_wait_seconds += copies_->wait(run.events[static_cast<size_t>(copy)]);
  }
  for (int32_t comm : comm_waits_for_[n]) {
    run.result.comm_wait_seconds += comms_->wait(run.events[static_cast<size_t>(comm)]);
  }
  run.inputs.clear();
  run.outputs.clear();
  for (ValueId in : node.inputs) {
    run.inputs.push_back(touch(plan_.value_slices[in.idx()], run.high_water));
  }
  for (ValueId out : node.outputs) {
    run.outputs.push_back(touch(plan_.value_slices[out.idx()], run.high_water));
  }
  if (is_swap_copy(node.op)) {
    // Issued here, run by the copy thread, which tells the observers when it is done.
    run.events[n] =
        copies_->copy(run.outputs[0], run.inputs[0], graph_.value(node.inputs[0]).bytes(),
                      [this, n](SwapStream::Clock::time_point start, double seconds) {
                        for (auto& observer : observers_) {
                          observer->copy_done(n, start, seconds);
                        }
                      });
  } else {
    const Slice& workspace = plan_.workspace_slices[n];
    void* workspace_data = workspace.bytes > 0 ? touch(workspace, run.high_water) : nullptr;
    for (auto& observer : observers_) observer->before_kernel(n);
    kernels_[n]->run(KernelArgs{run.inputs, run.outputs, workspace_data, step});
    for (auto it = observers_.rbegin(); it != observers_.rend(); ++it) {
      (*it)->after_kernel(n, run.failed);
    }
    if (op_info(node.op).comm) run.events[n] = start_collective(n, run.outputs[0], run);
  }
  for (auto it = observers_.rbegin(); it != observers_.rend(); ++it) {
    (*it)->after_node(n, run.failed);
  }
}

Status Executable::drain(StepRun& run) const {
  // Copies and collectives still running hold references to the step's state.
  const Status copied = copies_ ? copies_->drain() : Status::ok();
  const Status summed = comms_ ? comms_->drain() : Status::ok();
  Status stopped = !run.failed.is_ok() ? run.failed
                   : !copied.is_ok()   ? copied
                   : !summed.is_ok()   ? summed
                                       : run.comm_status;
  if (stopped.is_ok()) return stopped;
  // The device drains too: what it recorded during this step (a library
  // call that failed inside a kernel) is this step's error, not a later
  // synchronize's.
  const Status drained = device_->synchronize();
  if (!drained.is_ok()) {
    stopped = Status::error(stopped.message() + "; the device also reported: " + drained.message());
  }
  return stopped;
}

Status Executable::copy_out(StepResult& result) const {
  for (ValueId v : graph_.outputs()) {
    const Value& value = graph_.value(v);
    MEMFIT_CHECK(value.type.dtype == DType::f32);
    std::vector<float>& output = result.outputs[value.name];
    output.resize(static_cast<size_t>(value.elements()));
    MEMFIT_RETURN_IF_ERROR(
        device_->to_host(output.data(), at(plan_.value_slices[v.idx()]), value.bytes()));
  }
  // The next step finds each state in its own slice: an update not written
  // in place moves there (both live to the end of the step, so they are apart).
  for (const StateUpdate& u : graph_.updates()) {
    const Slice& state = plan_.value_slices[u.state.idx()];
    const Slice& next = plan_.value_slices[u.next.idx()];
    if (state.offset != next.offset) {
      MEMFIT_RETURN_IF_ERROR(device_->within(at(state), at(next), graph_.value(u.state).bytes()));
    }
  }
  return Status::ok();
}

int64_t Executable::start_collective(size_t n, void* bucket, StepRun& run) {
  const Node& node = graph_.nodes()[n];
  const auto& attrs = std::get<BucketAttrs>(node.attrs);
  auto* data = static_cast<float*>(bucket);
  Communicator* comm = options_.comm;
  const OpKind op = node.op;
  const auto size = static_cast<size_t>(attrs.size);
  const auto block = static_cast<size_t>(attrs.block());
  // Runs on the communication thread; the step's result and comm_status are
  // read after drain(). First, untimed, the observers' wait until the bucket
  // may be read (a GPU's kernels filling it).
  Status& status = run.comm_status;
  auto ready = [this, n, &status] {
    for (auto& observer : observers_) {
      if (!status.is_ok()) return;
      if (Status passed = observer->before_collective(n); !passed.is_ok()) {
        status = std::move(passed);
      }
    }
  };
  return comms_->transfer(
      static_cast<size_t>(comm_wire_bytes(op, attrs)),
      [comm, op, data, size, block, &status] {
        if (!status.is_ok()) return;  // a rank failed: later collectives would not match
        Status done = op == OpKind::all_reduce_start       ? comm->all_reduce_sum(data, size)
                      : op == OpKind::reduce_scatter_start ? comm->reduce_scatter_sum(data, block)
                                                           : comm->all_gather(data, block);
        if (!done.is_ok()) status = std::move(done);
      },
      [&result = run.result](SwapStream::Clock::time_point, double seconds) {
        result.comm_seconds += seconds;
      },
      std::move(ready));
}

}  // namespace memfit
