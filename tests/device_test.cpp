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
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <numeric>
#include <optional>
#include <vector>

#include "runtime/backend_plan.h"
#include "step/compile_step.h"
#include "test_util.h"
#include "train/data_source.h"

namespace memfit {
namespace {

// A kernel clock whose mark i passes at i milliseconds, whatever the kernels do.
class MillisecondClock final : public KernelClock {
 public:
  explicit MillisecondClock(size_t marks) : set_(marks, false) {}
  void mark(size_t i) override { set_.at(i) = true; }
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
};

// Host memory as a device whose arenas are PROT_NONE except while open; its
// kernel clock is a MillisecondClock.
class GuardedDevice final : public Device {
 public:
  std::string_view name() const override { return "guarded"; }

  Result<std::shared_ptr<std::byte>> allocate(size_t bytes) const override {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t mapped = std::max<size_t>((bytes + page - 1) / page * page, page);
    void* data = ::mmap(nullptr, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
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
    Open open(*this);
    return host_device()->poison(device, bytes);
  }
  Status synchronize() const override { return Status::ok(); }
  Result<std::unique_ptr<SwapStream>> swap_stream(double) const override {
    return std::unique_ptr<SwapStream>(std::make_unique<Stream>(*this));
  }
  Result<std::unique_ptr<KernelClock>> kernel_clock(size_t marks) const override {
    return std::unique_ptr<KernelClock>(std::make_unique<MillisecondClock>(marks));
  }

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
    double wait(int64_t) override { return 0; }
    Status drain() override { return Status::ok(); }

   private:
    const GuardedDevice& device_;
    int64_t issued_ = 0;
  };

  void protect(int access) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Mapping& m : arenas_) EXPECT_EQ(::mprotect(m.data, m.bytes, access), 0);
  }

  mutable std::mutex mutex_;
  mutable std::vector<Mapping> arenas_;
  mutable std::vector<size_t> allocated_;
};

// The cpu backend's kernels (the reference ones where it has none), each
// run with the arenas open, on a GuardedDevice. `missing`: an op it claims
// no kernel for.
class GuardedBackend final : public Backend {
 public:
  explicit GuardedBackend(std::optional<OpKind> missing = std::nullopt)
      : cpu_(make_cpu_backend()), reference_(make_reference_backend()), missing_(missing) {}
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
  std::shared_ptr<GuardedDevice> device_ = std::make_shared<GuardedDevice>();
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
};

// Two steps of `graph` on `backend` in poison mode, from seeded state, on
// synthetic data.
Steps two_steps(const CompiledStep& step, const Backend& backend) {
  auto exe = Executable::compile(step.apply->graph(), backend, ExecOptions{.poison = true});
  EXPECT_TRUE(exe) << exe.message();
  Steps steps;
  if (!exe) return steps;
  uint64_t seed = 1;
  for (const auto& [name, shape] : step.persistent) {
    steps.state[name] = testing::random_normal(static_cast<size_t>(num_elements(shape)), seed++);
  }
  EXPECT_TRUE((*exe)->load_state(steps.state).is_ok());
  const int64_t batch = step.spec.model.batch;
  auto data =
      synthetic_source(testing::data_kind(step.model.name), step.model, 2 * batch, batch, 5);
  EXPECT_TRUE(data) << data.message();
  Batch inputs = Batch::for_model(step.model);
  std::vector<int64_t> examples(static_cast<size_t>(batch));
  for (int64_t s = 0; s < 2; ++s) {
    std::iota(examples.begin(), examples.end(), s * batch);
    EXPECT_TRUE((*data)->fill(false, examples, inputs).is_ok());
    auto result = (*exe)->run(inputs.feeds(), StepContext{3, s, s, 1.0f});
    EXPECT_TRUE(result) << result.message();
    if (result) steps.results.push_back(std::move(result).value());
  }
  EXPECT_TRUE((*exe)->store_state(steps.state).is_ok());
  steps.exe = std::move(exe).value();
  return steps;
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
  ASSERT_EQ(on_device.results.size(), 2u);
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_EQ(on_host.results[s].high_water_bytes, on_device.results[s].high_water_bytes);
    for (const auto& [name, data] : on_host.results[s].outputs) {
      const std::vector<float>& other = on_device.results[s].outputs.at(name);
      ASSERT_EQ(data.size(), other.size()) << name;
      EXPECT_EQ(std::memcmp(data.data(), other.data(), data.size() * sizeof(float)), 0) << name;
    }
  }
  ASSERT_EQ(on_host.state.tensors().size(), on_device.state.tensors().size());
  for (const auto& [name, data] : on_host.state.tensors()) {
    const std::vector<float>* other = on_device.state.find(name);
    ASSERT_NE(other, nullptr) << name;
    EXPECT_EQ(std::memcmp(data.data(), other->data(), data.size() * sizeof(float)), 0) << name;
  }
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

// Off the host, a node's time is the device's kernel clock's (a GPU's
// events), not the host's around the launch; a copy node's is its copy's.
TEST(Device, NodeTimesAreTheKernelClocks) {
  const CompiledStep step = swapped_step({.name = "lenet", .batch = 4});
  GuardedBackend guarded;
  const Steps steps = two_steps(step, guarded);
  ASSERT_TRUE(steps.exe);
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

TEST(Device, TheHostTimesKernelsByItsOwnClock) {
  auto clock = host_device()->kernel_clock(3);
  ASSERT_TRUE(clock) << clock.message();
  EXPECT_EQ(*clock, nullptr);
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

}  // namespace
}  // namespace memfit
