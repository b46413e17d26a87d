#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <new>

#include "core/check.h"
#include "ops/op_table.h"
#include "runtime/backend_plan.h"

namespace memfit {

const std::vector<float>* StateStore::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Status Executable::poison(const Slice& slice) const {
  if (slice.pool == Pool::device) return device_->poison(at(slice), slice.bytes);
  // The host pool is host memory on every device.
  std::fill_n(reinterpret_cast<float*>(at(slice)), slice.bytes / sizeof(float),
              std::numeric_limits<float>::quiet_NaN());
  return Status::ok();
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
  options_.poison = poison;
  const MemoryPlan& plan = plan_;
  const Graph& scheduled = graph_;

  // A slice dies after its value's last reader, unless a value written in
  // place over it lives on in the same bytes; values live to the end never die.
  std::vector<bool> continued(scheduled.num_values(), false);
  for (ValueId over : plan.inplace_of) {
    if (over.valid()) continued[over.idx()] = true;
  }
  dead_after_.resize(scheduled.num_nodes());
  const auto end = static_cast<int32_t>(scheduled.num_nodes());
  for (size_t v = 0; v < scheduled.num_values(); ++v) {
    const int32_t last = plan.value_live[v].last;
    if (continued[v] || last < 0 || last >= end) continue;
    dead_after_[static_cast<size_t>(last)].push_back(plan.value_slices[v]);
  }
  for (size_t n = 0; n < scheduled.num_nodes(); ++n) {
    if (plan.workspace_slices[n].bytes > 0) dead_after_[n].push_back(plan.workspace_slices[n]);
  }

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
  if (has_comm_nodes(scheduled)) {
    comms_ = std::make_unique<CopyEngine>(options_.comm_gbps * 1e9);
    const auto comm_nodes = std::count_if(scheduled.nodes().begin(), scheduled.nodes().end(),
                                          [](const Node& node) { return op_info(node.op).comm; });
    MEMFIT_ASSIGN_OR_RETURN(points_, device_->stream_points(static_cast<size_t>(comm_nodes)));
  }
  if (poison) {
    // On another executable's arena, the state band is theirs too: left as it is.
    const bool shared = arena_.use_count() > 1;
    const size_t from = shared ? std::min(options_.band.bytes, plan.arena_bytes) : 0;
    MEMFIT_RETURN_IF_ERROR(this->poison(Slice{from, plan.arena_bytes - from, Pool::device}));
    MEMFIT_RETURN_IF_ERROR(this->poison(Slice{0, plan.host_bytes, Pool::host}));
  }
  return Status::ok();
}

Status Executable::time_kernels() {
  if (clock_) return Status::ok();
  // Marks: the kernels' start, one before and one after each node, and the
  // kernels' end.
  MEMFIT_ASSIGN_OR_RETURN(clock_, device_->kernel_clock(2 + 2 * graph_.num_nodes()));
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
  using Clock = std::chrono::steady_clock;
  const Graph& g = graph_;
  const Clock::time_point step_start = Clock::now();
  auto since_start = [step_start](Clock::time_point t) {
    return std::chrono::duration<double>(t - step_start).count();
  };
  last_step_.nodes.assign(g.num_nodes(), Span{});
  size_t high_water = 0;
  auto touch = [&](const Slice& slice) {
    if (slice.pool == Pool::device) high_water = std::max(high_water, slice.end());
    return at(slice);
  };
  for (size_t v = 0; v < g.num_values(); ++v) {
    const Value& value = g.values()[v];
    if (value.producer.valid()) continue;
    // State is in the arena already; it counts as touched.
    if (is_persistent(value.role)) {
      touch(plan_.value_slices[v]);
      continue;
    }
    auto it = feeds.find(value.name);
    if (it == feeds.end()) return Status::error("no data was given for input '" + value.name + "'");
    MEMFIT_RETURN_IF_ERROR(
        device_->to_device(touch(plan_.value_slices[v]), it->second, value.bytes()));
  }

  StepResult result;
  last_step_.data_in = Span{0, since_start(Clock::now())};
  // The feeds are in (their copies return when done): the device is idle, so
  // its clock's mark 0 passes now.
  const double kernels_start = last_step_.data_in.end;
  if (clock_) clock_->mark(0);
  result.io_seconds = last_step_.data_in.end;
  std::vector<int64_t> event(g.num_nodes(), -1);  // the task of each copy or comm node
  size_t comm_nodes_started = 0;
  Status comm_status;  // the first collective's error; written on the communication thread
  Status failed;       // a device's error; the streams drain before it returns
  std::vector<void*> inputs, outputs;
  for (size_t n = 0; n < g.num_nodes() && failed.is_ok(); ++n) {
    const Node& node = g.nodes()[n];
    // A swap_wait's time is its wait for the copy (on a GPU, compute standing
    // still); any other node's wait comes before its kernel's time.
    const bool swap_wait = node.op == OpKind::swap_wait;
    if (clock_ && swap_wait) clock_->mark(1 + 2 * n);
    for (int32_t copy : waits_for_[n]) {
      result.copy_wait_seconds += copies_->wait(event[static_cast<size_t>(copy)]);
    }
    for (int32_t comm : comm_waits_for_[n]) {
      result.comm_wait_seconds += comms_->wait(event[static_cast<size_t>(comm)]);
    }
    inputs.clear();
    outputs.clear();
    for (ValueId in : node.inputs) inputs.push_back(touch(plan_.value_slices[in.idx()]));
    for (ValueId out : node.outputs) outputs.push_back(touch(plan_.value_slices[out.idx()]));
    const bool copy = node.op == OpKind::to_host || node.op == OpKind::to_device;
    if (copy) {
      // Issued here, run by the copy thread; it alone writes this node's time.
      double& seconds = node_seconds_[n];
      Span& span = last_step_.nodes[n];
      event[n] = copies_->copy(outputs[0], inputs[0], g.value(node.inputs[0]).bytes(),
                               [&seconds, &span, since_start](Clock::time_point start, double s) {
                                 seconds += s;
                                 span.start = since_start(start);
                                 span.end = span.start + s;
                               });
    } else {
      const Slice& workspace = plan_.workspace_slices[n];
      void* workspace_data = workspace.bytes > 0 ? touch(workspace) : nullptr;
      if (clock_ && !swap_wait) clock_->mark(1 + 2 * n);
      const Clock::time_point start = Clock::now();
      kernels_[n]->run(KernelArgs{inputs, outputs, workspace_data, step});
      const Clock::time_point end = Clock::now();
      if (clock_) clock_->mark(2 + 2 * n);
      // With a kernel clock these are launch times, replaced once it is read.
      last_step_.nodes[n] = Span{since_start(start), since_start(end)};
      if (op_info(node.op).comm) {
        // On a GPU the kernels that fill the bucket may still run: the
        // communication thread waits for a point after them, not this one.
        // Without a point (a device without them, or a failed record) the
        // host waits for the device here.
        const size_t index = comm_nodes_started++;
        int64_t point = -1;
        if (points_ && failed.is_ok()) {
          failed = points_->record(index);
          if (failed.is_ok()) point = static_cast<int64_t>(index);
        }
        if (point < 0 && off_host) {
          const Status waited = device_->synchronize();
          if (failed.is_ok()) failed = waited;
        }
        event[n] = start_collective(node, outputs[0], point, result, comm_status);
      }
    }
    if (options_.poison) {
      if (copy) {
        // The copy may still read what dies here: poison after it, in stream order.
        for (const Slice& slice : dead_after_[n]) copies_->poison(at(slice), slice.bytes);
      } else {
        for (const Slice& slice : dead_after_[n]) {
          // A copy into or out of a host slice may still run (on a GPU the
          // compute stream, not the host, waits for it): after it, in order.
          if (slice.pool == Pool::host && copies_) {
            copies_->poison(at(slice), slice.bytes);
          } else if (failed.is_ok()) {
            failed = poison(slice);
          }
        }
      }
    }
  }
  // Copies and collectives still running hold references to this frame.
  const Status copied = copies_ ? copies_->drain() : Status::ok();
  const Status summed = comms_ ? comms_->drain() : Status::ok();
  Status stopped = !failed.is_ok()   ? failed
                   : !copied.is_ok() ? copied
                   : !summed.is_ok() ? summed
                                     : comm_status;
  if (!stopped.is_ok()) {
    // The device drains too: what it recorded during this step (a library
    // call that failed inside a kernel) is this step's error, not a later
    // synchronize's.
    const Status drained = device_->synchronize();
    if (!drained.is_ok()) {
      stopped =
          Status::error(stopped.message() + "; the device also reported: " + drained.message());
    }
    return stopped;
  }
  const Clock::time_point outputs_start = Clock::now();
  if (clock_) clock_->mark(1 + 2 * g.num_nodes());

  result.high_water_bytes = high_water;
  for (ValueId v : g.outputs()) {
    const Value& value = g.value(v);
    MEMFIT_CHECK(value.type.dtype == DType::f32);
    std::vector<float>& output = result.outputs[value.name];
    output.resize(static_cast<size_t>(value.elements()));
    MEMFIT_RETURN_IF_ERROR(
        device_->to_host(output.data(), at(plan_.value_slices[v.idx()]), value.bytes()));
  }
  // The next step finds each state in its own slice: an update not written
  // in place moves there (both live to the end of the step, so they are apart).
  for (const StateUpdate& u : g.updates()) {
    const Slice& state = plan_.value_slices[u.state.idx()];
    const Slice& next = plan_.value_slices[u.next.idx()];
    if (state.offset != next.offset) {
      MEMFIT_RETURN_IF_ERROR(device_->within(at(state), at(next), g.value(u.state).bytes()));
    }
  }
  MEMFIT_RETURN_IF_ERROR(device_->synchronize());
  const Clock::time_point step_end = Clock::now();
  result.seconds = since_start(step_end);
  // Copying the outputs out starts once the host has issued every kernel; on
  // a device with a clock, it waits first for the kernels still running,
  // whose time is theirs, not the copy's.
  double outputs_begin = since_start(outputs_start);
  if (clock_) {
    MEMFIT_ASSIGN_OR_RETURN(const std::vector<double> marks, clock_->read());
    for (size_t n = 0; n < g.num_nodes(); ++n) {
      const double begin = marks[1 + 2 * n], end = marks[2 + 2 * n];
      if (begin >= 0 && end >= 0)
        last_step_.nodes[n] = Span{kernels_start + begin, kernels_start + end};
    }
    const double kernels_end = marks[1 + 2 * g.num_nodes()];
    if (kernels_end >= 0) {
      outputs_begin = std::clamp(kernels_start + kernels_end, outputs_begin, result.seconds);
    }
  }
  for (size_t n = 0; n < g.num_nodes(); ++n) {
    const OpKind op = g.nodes()[n].op;
    if (op == OpKind::to_host || op == OpKind::to_device) continue;  // timed by the copy stream
    node_seconds_[n] += last_step_.nodes[n].end - last_step_.nodes[n].start;
  }
  result.io_seconds += result.seconds - outputs_begin;
  last_step_.data_out = Span{outputs_begin, result.seconds};
  last_step_.seconds = result.seconds;
  ++totals_.runs;
  totals_.seconds += result.seconds;
  totals_.io_seconds += result.io_seconds;
  totals_.copy_wait_seconds += result.copy_wait_seconds;
  totals_.comm_seconds += result.comm_seconds;
  totals_.comm_wait_seconds += result.comm_wait_seconds;
  return result;
}

int64_t Executable::start_collective(const Node& node, void* bucket, int64_t point,
                                     StepResult& result, Status& status) {
  const auto& attrs = std::get<BucketAttrs>(node.attrs);
  auto* data = static_cast<float*>(bucket);
  Communicator* comm = options_.comm;
  const OpKind op = node.op;
  const auto size = static_cast<size_t>(attrs.size);
  const auto block = static_cast<size_t>(attrs.block());
  // Runs on the communication thread; `result` and `status` are read after drain().
  // First, untimed, the wait for the kernels that fill the bucket (a GPU's).
  std::function<void()> ready;
  if (point >= 0) {
    ready = [points = points_.get(), point, &status] {
      if (!status.is_ok()) return;
      if (Status passed = points->wait(static_cast<size_t>(point)); !passed.is_ok()) {
        status = std::move(passed);
      }
    };
  }
  return comms_->transfer(
      static_cast<size_t>(comm_wire_bytes(op, attrs)),
      [comm, op, data, size, block, &status] {
        if (!status.is_ok()) return;  // a rank failed: later collectives would not match
        Status done = op == OpKind::all_reduce_start       ? comm->all_reduce_sum(data, size)
                      : op == OpKind::reduce_scatter_start ? comm->reduce_scatter_sum(data, block)
                                                           : comm->all_gather(data, block);
        if (!done.is_ok()) status = std::move(done);
      },
      [&result](SwapStream::Clock::time_point, double seconds) { result.comm_seconds += seconds; },
      std::move(ready));
}

}  // namespace memfit
