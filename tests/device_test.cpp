// The executor reaches the arena only through its backend's Device
// (src/runtime/device.h), as a GPU needs: on a device whose arena cannot be
// read or written (mprotect) except inside a kernel or one of the device's
// own copies, a step with swapping, blocked layouts and poison mode runs,
// and gives the host device's step bit for bit; the arena is one allocation
// of the plan's bytes; a device other than the host refuses a node that only
// the reference kernels (which run on the host) can run.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>
#include <vector>

#include "memfit/dist.h"
#include "runtime/backend_plan.h"
#include "step/compile_step.h"
#include "test_util.h"
#include "train/data_source.h"

namespace memfit {
namespace {

// A kernel clock whose mark i passes at i milliseconds, whatever the kernels
// do. Each mark also goes into `log` (restarted by mark 0), with the copy
// stream's waits, as the order in which they reach the stream.
class MillisecondClock final : public KernelClock {
 public:
  MillisecondClock(size_t marks, std::vector<int64_t>& log) : set_(marks, false), log_(log) {}
  void mark(size_t i) override {
    set_.at(i) = true;
    if (i == 0) log_.clear();
    log_.push_back(static_cast<int64_t>(i));
  }
  Result<std::vector<double>> read() override {
    std::vector<double> seconds(set_.size(), -1.0);
    for (size_t i = 0; i < set_.size(); ++i) {
      if (set_[0] && set_[i]) seconds[i] = static_cast<double>(i) * 1e-3;
    }
    set_.assign(set_.size(), false);
    return seconds;
  }

 private:
  std::vector<bool> set_;
  std::vector<int64_t>& log_;
};

constexpr int64_t kCopyWait = -1;  // in a MillisecondClock's log

// What a device's stream points saw: how many were recorded, how many
// waited for from a thread other than the recording one, and how many waits
// came before their point's record.
struct PointLog {
  std::mutex mutex;
  std::vector<bool> recorded;  // since its last wait
  std::thread::id recorder;
  size_t records = 0, waits_off_thread = 0, early_waits = 0;
};

class LoggedPoints final : public StreamPoints {
 public:
  LoggedPoints(PointLog& log, size_t count) : log_(log) {
    std::lock_guard<std::mutex> lock(log_.mutex);
    log_.recorded.assign(count, false);
  }
  Status record(size_t i) override {
    std::lock_guard<std::mutex> lock(log_.mutex);
    log_.recorded.at(i) = true;
    log_.recorder = std::this_thread::get_id();
    ++log_.records;
    return Status::ok();
  }
  Status wait(size_t i) override {
    std::lock_guard<std::mutex> lock(log_.mutex);
    if (!log_.recorded.at(i)) ++log_.early_waits;
    log_.recorded[i] = false;
    if (std::this_thread::get_id() != log_.recorder) ++log_.waits_off_thread;
    return Status::ok();
  }

 private:
  PointLog& log_;
};

// Host memory as a device whose arenas are PROT_NONE except while open
// (unless made with guard false: then only a device other than the host);
// its kernel clock is a MillisecondClock, its stream points LoggedPoints.
class GuardedDevice final : public Device {
 public:
  // `points` false: a device without stream points (Device's default).
  explicit GuardedDevice(bool guard = true, bool points = true)
      : guard_(guard), points_on_(points) {}
  std::string_view name() const override { return "guarded"; }

  Result<std::shared_ptr<std::byte>> allocate(size_t bytes) const override {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t mapped = std::max<size_t>((bytes + page - 1) / page * page, page);
    const int access = guard_ ? PROT_NONE : PROT_READ | PROT_WRITE;
    void* data = ::mmap(nullptr, mapped, access, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data == MAP_FAILED) return Status::error("mmap failed");
    std::lock_guard<std::mutex> lock(mutex_);
    arenas_.push_back({data, mapped});
    allocated_.push_back(bytes);
    return std::shared_ptr<std::byte>(static_cast<std::byte*>(data), [this, mapped](std::byte* p) {
      std::lock_guard<std::mutex> lock(mutex_);
      std::erase_if(arenas_, [p](const Mapping& m) { return m.data == p; });
      ::munmap(p, mapped);
    });
  }
  Result<std::shared_ptr<std::byte>> allocate_host(size_t bytes) const override {
    return host_device()->allocate_host(bytes);
  }
  Status to_device(void* device, const void* host, size_t bytes) const override {
    Open open(*this);
    return host_device()->to_device(device, host, bytes);
  }
  Status to_host(void* host, const void* device, size_t bytes) const override {
    Open open(*this);
    return host_device()->to_host(host, device, bytes);
  }
  Status within(void* to, const void* from, size_t bytes) const override {
    Open open(*this);
    return host_device()->within(to, from, bytes);
  }
  Status poison(void* device, size_t bytes) const override {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    if (poisons_until_failure_ == 0) {
      recorded_error_ = Status::error("a library call inside a kernel failed");
      return Status::error("poisoning failed");
    }
    if (poisons_until_failure_ > 0) --poisons_until_failure_;
    Open open(*this);
    return host_device()->poison(device, bytes);
  }
  Status synchronize() const override {
    ++synchronizations_;
    std::lock_guard<std::mutex> lock(failure_mutex_);
    return std::exchange(recorded_error_, Status::ok());
  }
  // A step that stops early: after `poisons` more poisonings, the next one
  // fails, and the device has recorded an error of a kernel's library call
  // (as a GPU records a failed cuBLAS call) for its next synchronize().
  void fail_after_poisons(int64_t poisons) const {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    poisons_until_failure_ = poisons;
  }
  size_t synchronizations() const { return synchronizations_; }
  Result<std::unique_ptr<SwapStream>> swap_stream(double) const override {
    return std::unique_ptr<SwapStream>(std::make_unique<Stream>(*this));
  }
  Result<std::unique_ptr<KernelClock>> kernel_clock(size_t marks) const override {
    ++kernel_clocks_;
    return std::unique_ptr<KernelClock>(std::make_unique<MillisecondClock>(marks, stream_log_));
  }
  size_t kernel_clocks() const { return kernel_clocks_; }
  // The last step's kernel-clock marks and copy waits, in issue order.
  const std::vector<int64_t>& stream_log() const { return stream_log_; }
  Result<std::unique_ptr<StreamPoints>> stream_points(size_t count) const override {
    if (!points_on_) return Device::stream_points(count);
    return std::unique_ptr<StreamPoints>(std::make_unique<LoggedPoints>(points_, count));
  }
  const PointLog& points() const { return points_; }

  // The arena's sizes as asked for, in order.
  std::vector<size_t> allocated() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return allocated_;
  }

  // Opens the arenas for reading and writing while it lives.
  class Open {
   public:
    explicit Open(const GuardedDevice& device) : device_(device) {
      device_.protect(PROT_READ | PROT_WRITE);
    }
    ~Open() { device_.protect(PROT_NONE); }
    Open(const Open&) = delete;
    Open& operator=(const Open&) = delete;

   private:
    const GuardedDevice& device_;
  };

 private:
  struct Mapping {
    void* data;
    size_t bytes;
  };
  // Copies done at once, each inside its own opening.
  class Stream final : public SwapStream {
   public:
    explicit Stream(const GuardedDevice& device) : device_(device) {}
    int64_t copy(void* dst, const void* src, size_t bytes, Done done) override {
      const Clock::time_point start = Clock::now();
      {
        Open open(device_);
        std::memcpy(dst, src, bytes);
      }
      done(start, std::chrono::duration<double>(Clock::now() - start).count());
      return issued_++;
    }
    int64_t poison(void* data, size_t bytes) override {
      Open open(device_);
      std::fill_n(static_cast<float*>(data), bytes / sizeof(float), std::nanf(""));
      return issued_++;
    }
    double wait(int64_t) override {
      device_.stream_log_.push_back(kCopyWait);
      return 0;
    }
    Status drain() override { return Status::ok(); }

   private:
    const GuardedDevice& device_;
    int64_t issued_ = 0;
  };

  void protect(int access) const {
    if (!guard_) return;
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Mapping& m : arenas_) EXPECT_EQ(::mprotect(m.data, m.bytes, access), 0);
  }

  bool guard_;
  bool points_on_;
  mutable std::atomic<size_t> synchronizations_ = 0;
  mutable std::atomic<size_t> kernel_clocks_ = 0;
  mutable std::vector<int64_t> stream_log_;  // marks and waits, on the executor's thread
  mutable std::mutex failure_mutex_;
  mutable int64_t poisons_until_failure_ = -1;  // never
  mutable Status recorded_error_;
  mutable PointLog points_;
  mutable std::mutex mutex_;
  mutable std::vector<Mapping> arenas_;
  mutable std::vector<size_t> allocated_;
};

// The cpu backend's kernels (the reference ones where it has none), each
// run with the arenas open, on a GuardedDevice. `missing`: an op it claims
// no kernel for.
class GuardedBackend final : public Backend {
 public:
  explicit GuardedBackend(std::optional<OpKind> missing = std::nullopt, bool guard = true,
                          bool points = true)
      : cpu_(make_cpu_backend()),
        reference_(make_reference_backend()),
        missing_(missing),
        device_(std::make_shared<GuardedDevice>(guard, points)) {}
  std::string_view name() const override { return "guarded"; }
  bool supports(const Graph&, const Node& node) const override { return node.op != missing_; }
  TensorLayout layout(const Graph& graph, ValueId value) const override {
    return cpu_->layout(graph, value);
  }
  Layout blocked_layout() const override { return cpu_->blocked_layout(); }
  BlockedOperands blocked_operands(const Graph& graph, const Node& node) const override {
    return cpu_->blocked_operands(graph, node);
  }
  Result<std::unique_ptr<Kernel>> make_kernel(const Graph& graph, NodeId id) const override {
    const Backend& maker = cpu_->supports(graph, graph.node(id)) ? *cpu_ : *reference_;
    MEMFIT_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> inner, maker.make_kernel(graph, id));
    return std::unique_ptr<Kernel>(std::make_unique<GuardedKernel>(*device_, std::move(inner)));
  }
  std::string isa() const override { return cpu_->isa(); }
  int threads() const override { return cpu_->threads(); }
  std::shared_ptr<const Device> device() const override { return device_; }
  const GuardedDevice& guarded() const { return *device_; }

 private:
  class GuardedKernel final : public Kernel {
   public:
    GuardedKernel(const GuardedDevice& device, std::unique_ptr<Kernel> inner)
        : device_(device), inner_(std::move(inner)) {}
    size_t workspace_bytes() const override { return inner_->workspace_bytes(); }
    void run(const KernelArgs& args) override {
      GuardedDevice::Open open(device_);
      inner_->run(args);
    }

   private:
    const GuardedDevice& device_;
    std::unique_ptr<Kernel> inner_;
  };

  std::unique_ptr<Backend> cpu_, reference_;
  std::optional<OpKind> missing_;
  std::shared_ptr<GuardedDevice> device_;
};

// The step graph of `model` that applies the update, every swap candidate
// swapped, in the cpu backend's layouts.
CompiledStep swapped_step(const ModelOptions& model) {
  StepSpec spec = testing::test_spec(model);
  spec.swap = Swap::budget;
  auto step = compile_step(spec);
  EXPECT_TRUE(step) << step.message();
  return std::move(step).value();
}

struct Steps {
  std::vector<StepResult> results;
  StateStore state;
  std::unique_ptr<Executable> exe;  // that ran them
  Status error;                     // the first failure, which ended them
};

// `count` steps of `step`'s graph on `backend` with `options`, from seeded
// state (the same on every rank), on synthetic data from example `first` on;
// the first error (compiling or running) ends them.
Steps run_steps(const CompiledStep& step, const Backend& backend, const ExecOptions& options,
                int64_t count, int64_t first = 0, bool time_kernels = false) {
  Steps steps;
  auto exe = Executable::compile(step.apply->graph(), backend, options);
  if (!exe) {
    steps.error = exe.status();
    return steps;
  }
  if (time_kernels) {
    EXPECT_TRUE((*exe)->time_kernels().is_ok());
  }
  uint64_t seed = 1;
  for (const auto& [name, shape] : step.persistent) {
    steps.state[name] = testing::random_normal(static_cast<size_t>(num_elements(shape)), seed++);
  }
  EXPECT_TRUE((*exe)->load_state(steps.state).is_ok());
  const int64_t batch = step.spec.model.batch;
  auto data = synthetic_source(testing::data_kind(step.model.name), step.model,
                               first + count * batch, batch, 5);
  EXPECT_TRUE(data) << data.message();
  Batch inputs = Batch::for_model(step.model);
  std::vector<int64_t> examples(static_cast<size_t>(batch));
  for (int64_t s = 0; s < count && steps.error.is_ok(); ++s) {
    std::iota(examples.begin(), examples.end(), first + s * batch);
    EXPECT_TRUE((*data)->fill(false, examples, inputs).is_ok());
    auto result = (*exe)->run(inputs.feeds(), StepContext{3, s, s, 1.0f});
    if (result) {
      steps.results.push_back(std::move(result).value());
    } else {
      steps.error = result.status();
    }
  }
  EXPECT_TRUE((*exe)->store_state(steps.state).is_ok());
  steps.exe = std::move(exe).value();
  return steps;
}

// Two steps in poison mode; an error is a test failure.
Steps two_steps(const CompiledStep& step, const Backend& backend, bool time_kernels = false) {
  Steps steps = run_steps(step, backend, ExecOptions{.poison = true}, 2, 0, time_kernels);
  EXPECT_TRUE(steps.error.is_ok()) << steps.error.message();
  return steps;
}

// Every output and state tensor the same bits.
void expect_same_bits(const Steps& expected, const Steps& actual) {
  ASSERT_EQ(expected.results.size(), actual.results.size());
  for (size_t s = 0; s < expected.results.size(); ++s) {
    EXPECT_EQ(expected.results[s].high_water_bytes, actual.results[s].high_water_bytes);
    for (const auto& [name, data] : expected.results[s].outputs) {
      const std::vector<float>& other = actual.results[s].outputs.at(name);
      ASSERT_EQ(data.size(), other.size()) << name;
      EXPECT_EQ(std::memcmp(data.data(), other.data(), data.size() * sizeof(float)), 0) << name;
    }
  }
  ASSERT_EQ(expected.state.tensors().size(), actual.state.tensors().size());
  for (const auto& [name, data] : expected.state.tensors()) {
    const std::vector<float>* other = actual.state.find(name);
    ASSERT_NE(other, nullptr) << name;
    EXPECT_EQ(std::memcmp(data.data(), other->data(), data.size() * sizeof(float)), 0) << name;
  }
}

TEST(Device, TheGuardIsReal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  GuardedDevice device;
  auto arena = device.allocate(100);
  ASSERT_TRUE(arena);
  float value = 1.0f;
  ASSERT_TRUE(device.to_device(arena->get(), &value, sizeof value).is_ok());
  float back = 0;
  ASSERT_TRUE(device.to_host(&back, arena->get(), sizeof back).is_ok());
  EXPECT_EQ(back, 1.0f);
  EXPECT_DEATH(std::memcpy(&back, arena->get(), sizeof back), "");
}

class DeviceRunsTheSameStep : public ::testing::TestWithParam<ModelOptions> {};

TEST_P(DeviceRunsTheSameStep, BitForBit) {
  const CompiledStep step = swapped_step(GetParam());
  ASSERT_TRUE(has_copy_nodes(step.apply->graph()));
  const Steps on_host = two_steps(step, *step.backend);
  GuardedBackend guarded;
  const Steps on_device = two_steps(step, guarded);
  ASSERT_EQ(on_host.results.size(), 2u);
  expect_same_bits(on_host, on_device);
  // One arena, of the plan's bytes (which equal the host's: the same layouts).
  const std::vector<size_t> allocated = guarded.guarded().allocated();
  ASSERT_EQ(allocated.size(), 1u);
  EXPECT_EQ(allocated[0], on_host.results[0].high_water_bytes);
}

// A convolutional network (blocked layouts and their reorders) and a
// recurrent one, both with swapping.
INSTANTIATE_TEST_SUITE_P(Models, DeviceRunsTheSameStep,
                         ::testing::Values(ModelOptions{.name = "lenet", .batch = 4},
                                           ModelOptions{.name = "lstm-lm",
                                                        .batch = 2,
                                                        .depth = 2,
                                                        .width = 16,
                                                        .seq_len = 4,
                                                        .vocab = 16}),
                         [](const auto& info) {
                           std::string name = info.param.name;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Off the host, once asked for, a node's time is the device's kernel
// clock's (a GPU's events), not the host's around the launch; a copy node's
// is its copy's.
TEST(Device, NodeTimesAreTheKernelClocks) {
  const CompiledStep step = swapped_step({.name = "lenet", .batch = 4});
  GuardedBackend guarded;
  const Steps steps = two_steps(step, guarded, true);
  ASSERT_TRUE(steps.exe);
  EXPECT_EQ(guarded.guarded().kernel_clocks(), 1u);
  const Graph& g = steps.exe->graph();
  const StepTimeline& last = steps.exe->last_step();
  size_t kernels = 0, copies = 0;
  for (size_t n = 0; n < g.num_nodes(); ++n) {
    const OpKind op = g.nodes()[n].op;
    if (op == OpKind::to_host || op == OpKind::to_device) {
      ++copies;
      EXPECT_GT(std::abs(steps.exe->node_seconds()[n] - 2e-3), 1e-9) << "the copy's own time";
      continue;
    }
    ++kernels;
    EXPECT_NEAR(steps.exe->node_seconds()[n], 2e-3, 1e-9) << "1 ms in each of two steps";
    EXPECT_NEAR(last.nodes[n].start, last.data_in.end + static_cast<double>(1 + 2 * n) * 1e-3,
                1e-9);
    EXPECT_NEAR(last.nodes[n].end, last.data_in.end + static_cast<double>(2 + 2 * n) * 1e-3, 1e-9);
  }
  EXPECT_GT(kernels, 10u);
  EXPECT_GT(copies, 0u);
}

// On a GPU the compute stream's wait for a swap-out's copy is the swap_wait
// node's own time on the kernel clock: its first mark goes before the wait.
// Every other node's marks hold no wait (a swap-in's reader waits before its
// first mark, so the wait is not its kernel's time).
TEST(Device, ASwapWaitsMarksHoldItsCopysWait) {
  const CompiledStep step = swapped_step({.name = "lenet", .batch = 4});
  GuardedBackend guarded;
  const Steps steps = two_steps(step, guarded, true);
  ASSERT_TRUE(steps.exe);
  const std::vector<int64_t>& log = guarded.guarded().stream_log();
  const Graph& g = steps.exe->graph();
  size_t swap_waits = 0;
  for (size_t n = 0; n < g.num_nodes(); ++n) {
    const auto begin = std::find(log.begin(), log.end(), static_cast<int64_t>(1 + 2 * n));
    const auto end = std::find(log.begin(), log.end(), static_cast<int64_t>(2 + 2 * n));
    if (begin == log.end()) continue;  // a copy node: timed by its copy
    ASSERT_LT(begin, end) << g.nodes()[n].name;
    const bool waits = std::find(begin, end, kCopyWait) != end;
    const bool swap_wait = g.nodes()[n].op == OpKind::swap_wait;
    EXPECT_EQ(waits, swap_wait) << g.nodes()[n].name;
    swap_waits += swap_wait ? 1 : 0;
  }
  EXPECT_GT(swap_waits, 0u);
}

// The clock's marks cost the device time on every step: without
// time_kernels() no clock is made, and the host's clock times the launches.
TEST(Device, TheKernelClockIsMadeOnlyWhenAskedFor) {
  const CompiledStep step = swapped_step({.name = "lenet", .batch = 4});
  GuardedBackend guarded;
  const Steps steps = two_steps(step, guarded);
  ASSERT_TRUE(steps.exe);
  EXPECT_EQ(guarded.guarded().kernel_clocks(), 0u);
  const Graph& g = steps.exe->graph();
  size_t by_the_device_clock = 0;
  for (size_t n = 0; n < g.num_nodes(); ++n) {
    const OpKind op = g.nodes()[n].op;
    if (op == OpKind::to_host || op == OpKind::to_device) continue;
    if (std::abs(steps.exe->node_seconds()[n] - 2e-3) < 1e-9) ++by_the_device_clock;
  }
  EXPECT_EQ(by_the_device_clock, 0u);
}

// A step that stops on an error drains the device first: an error the
// device recorded during the step comes back with the step's own, not from
// whatever synchronizes next.
TEST(Device, AStepThatStopsReturnsTheDevicesErrorWithItsOwn) {
  const CompiledStep step = swapped_step({.name = "lenet", .batch = 4});
  GuardedBackend guarded;
  const GuardedDevice& device = guarded.guarded();
  device.fail_after_poisons(5);  // past compile()'s poisoning of the arena, inside the step
  const Steps steps = run_steps(step, guarded, ExecOptions{.poison = true}, 1);
  ASSERT_FALSE(steps.error.is_ok());
  EXPECT_EQ(steps.error.message(),
            "poisoning failed; the device also reported: a library call inside a kernel failed");
  EXPECT_TRUE(device.synchronize().is_ok()) << "nothing left over for a later call";
}

TEST(Device, TheHostTimesKernelsByItsOwnClock) {
  auto clock = host_device()->kernel_clock(3);
  ASSERT_TRUE(clock) << clock.message();
  EXPECT_EQ(*clock, nullptr);
}

// The thread communicator of one rank, claiming to sum device memory as
// NCCL sums a GPU's: an off-host device's buckets go to such a one only.
class DeviceMemoryCommunicator final : public Communicator {
 public:
  explicit DeviceMemoryCommunicator(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  const char* kind() const override { return "device-memory"; }
  bool sums_gpu_memory() const override { return true; }
  Status all_reduce_sum(float* data, size_t count) override {
    return inner_.all_reduce_sum(data, count);
  }
  Status all_reduce_sum(double* data, size_t count) override {
    return inner_.all_reduce_sum(data, count);
  }
  Status all_reduce_max(double* data, size_t count) override {
    return inner_.all_reduce_max(data, count);
  }
  Status broadcast(void* data, size_t bytes, int root) override {
    return inner_.broadcast(data, bytes, root);
  }
  Status reduce_scatter_sum(float* data, size_t count) override {
    return inner_.reduce_scatter_sum(data, count);
  }
  Status all_gather(float* data, size_t count) override { return inner_.all_gather(data, count); }
  Status barrier() override { return inner_.barrier(); }
  void abort(int code) override { inner_.abort(code); }

 private:
  Communicator& inner_;
};

// One data-parallel step of mlp on two ranks (threads), each on its own rows:
// on the host (the cpu backend) or on an unguarded GuardedDevice (a device
// other than the host), with the thread communicators as they are or
// claiming to sum device memory. Rank r's steps, and its device's
// synchronizations and stream points.
struct DeviceWaits {
  size_t synchronizations = 0, point_records = 0, point_waits_off_thread = 0, early_waits = 0;
};
struct RankSteps {
  std::vector<Steps> ranks;
  std::vector<DeviceWaits> waits;
  size_t buckets = 0;
};

RankSteps two_rank_step(bool off_host, bool device_memory_comm, bool stream_points = true) {
  StepSpec spec = testing::test_spec({.name = "mlp", .batch = 4});
  spec.ranks = 2;
  spec.bucket_mb = 0.02;  // several buckets
  spec.threads = 1;
  auto comms = make_thread_communicators(2);
  RankSteps run;
  run.ranks.resize(2);
  run.waits.resize(2);
  std::vector<std::thread> threads;
  std::vector<size_t> buckets(2);
  for (size_t r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      DeviceMemoryCommunicator claiming(*comms[r]);
      Communicator* comm =
          device_memory_comm ? static_cast<Communicator*>(&claiming) : comms[r].get();
      auto step = compile_step(spec, {.comm = comm});
      if (!step) {
        run.ranks[r].error = step.status();
        return;
      }
      buckets[r] = step->passes.all_reduce.buckets;
      GuardedBackend device(std::nullopt, false, stream_points);
      const Backend& backend = off_host ? static_cast<const Backend&>(device) : *step->backend;
      run.ranks[r] = run_steps(*step, backend, ExecOptions{.poison = true, .comm = comm}, 1,
                               static_cast<int64_t>(r) * spec.model.batch);
      const PointLog& points = device.guarded().points();
      run.waits[r] = {device.guarded().synchronizations(), points.records, points.waits_off_thread,
                      points.early_waits};
    });
  }
  for (std::thread& t : threads) t.join();
  run.buckets = buckets[0];
  return run;
}

// Off the host, each collective goes to a communicator that sums device
// memory (NCCL on a GPU) once its bucket's kernels have run: the
// communication thread waits for a stream point after them, while the host
// goes on issuing kernels. The step's bits are the host's.
TEST(Device, OffTheHostBucketsGoToACommunicatorOfDeviceMemory) {
  const RankSteps host = two_rank_step(false, false);
  const RankSteps device = two_rank_step(true, true);
  ASSERT_GT(host.buckets, 1u);
  for (size_t r = 0; r < 2; ++r) {
    SCOPED_TRACE(r);
    ASSERT_TRUE(host.ranks[r].error.is_ok()) << host.ranks[r].error.message();
    ASSERT_TRUE(device.ranks[r].error.is_ok()) << device.ranks[r].error.message();
    ASSERT_EQ(host.ranks[r].results.size(), 1u);
    expect_same_bits(host.ranks[r], device.ranks[r]);
    const DeviceWaits& waits = device.waits[r];
    EXPECT_EQ(waits.point_records, host.buckets) << "one point after each bucket's kernels";
    EXPECT_EQ(waits.point_waits_off_thread, host.buckets) << "each waited for by the collective";
    EXPECT_EQ(waits.early_waits, 0u);
    EXPECT_LT(waits.synchronizations, host.buckets) << "the host does not wait for each bucket";
  }
  // The ranks summed their gradients: both hold the same parameters.
  for (const auto& [name, data] : device.ranks[0].state.tensors()) {
    EXPECT_EQ(*device.ranks[1].state.find(name), data) << name;
  }
}

// A device other than the host without stream points: the host waits for
// it before each collective instead, and the bits are the same.
TEST(Device, OffTheHostWithoutStreamPointsTheHostWaitsBeforeEachCollective) {
  const RankSteps host = two_rank_step(false, false);
  const RankSteps device = two_rank_step(true, true, false);
  ASSERT_GT(host.buckets, 1u);
  for (size_t r = 0; r < 2; ++r) {
    SCOPED_TRACE(r);
    ASSERT_TRUE(device.ranks[r].error.is_ok()) << device.ranks[r].error.message();
    expect_same_bits(host.ranks[r], device.ranks[r]);
    EXPECT_EQ(device.waits[r].point_records, 0u);
    EXPECT_GE(device.waits[r].synchronizations, host.buckets) << "one before each collective";
  }
}

// A communicator that sums host memory cannot take a device's buckets, nor
// one of device memory the host's; every rank says so and none waits.
TEST(Device, BucketsAndCommunicatorAgreeOnTheirMemory) {
  for (const bool off_host : {true, false}) {
    const RankSteps run = two_rank_step(off_host, !off_host);
    for (size_t r = 0; r < 2; ++r) {
      const Status& error = run.ranks[r].error;
      ASSERT_FALSE(error.is_ok()) << r;
      EXPECT_NE(error.message().find(off_host ? "with NCCL" : "sums GPU memory"), std::string::npos)
          << error.message();
    }
  }
}

TEST(Device, OffTheHostEveryNodeNeedsAKernelOfTheBackend) {
  const CompiledStep step = swapped_step({.name = "lenet", .batch = 4});
  GuardedBackend guarded(OpKind::softmax_cross_entropy);
  auto exe = Executable::compile(step.apply->graph(), guarded);
  ASSERT_FALSE(exe);
  EXPECT_NE(exe.message().find("the guarded backend has no kernel for softmax_cross_entropy"),
            std::string::npos)
      << exe.message();
  EXPECT_NE(exe.message().find("run on the host"), std::string::npos) << exe.message();
}

// The refusal comes before the reference backend is asked, whose kernel of a
// blocked reorder could not be made either: the message is the same one.
TEST(Device, OffTheHostANodeWithoutAKernelIsRefusedByItsOp) {
  const Graph graph = testing::blocked_round_trip_graph();
  GuardedBackend guarded(OpKind::reorder);
  auto exe = Executable::compile(graph, guarded);
  ASSERT_FALSE(exe);
  EXPECT_NE(exe.message().find("the guarded backend has no kernel for reorder (node 'to_c8')"),
            std::string::npos)
      << exe.message();
}

}  // namespace
}  // namespace memfit
