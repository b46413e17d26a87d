// NCCL as the cuda backend's communicator (backends/cuda/nccl_communicator.h).
// Without a GPU, making one says what it needs. On a GPU, with one rank (a
// lent machine has one GPU, and NCCL refuses two ranks on one GPU):
// - its collectives work in place on GPU memory, and host memory goes to the
//   host communicator;
// - a data-parallel step of the cuda backend, its gradient buckets summed by
//   NCCL on the executor's communication thread, matches the cpu backend's
//   (two ranks with the same data, the second one mirrored: every sum is
//   twice rank 0's part, on both backends);
// - the cuda backend refuses a communicator that sums host memory.
#include "backends/cuda/nccl_communicator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_device.h"
#include "memfit/dist.h"
#include "test_util.h"
#include "train/data_source.h"
#include "train/training_program.h"

namespace memfit {
namespace {

// Skips the test unless this build has NCCL and the machine a GPU.
#define REQUIRE_GPU()                                                                          \
  do {                                                                                         \
    if (!cuda::built_with_nccl()) GTEST_SKIP() << "built without NCCL";                        \
    if (auto probe = cuda::device_info(local_rank()); !probe) GTEST_SKIP() << probe.message(); \
  } while (0)

TEST(NcclCommunicator, WithoutAGpuSaysWhatItNeeds) {
  if (cuda::device_info(local_rank())) GTEST_SKIP() << "this machine has a GPU";
  auto host = make_local_communicator();
  auto nccl = cuda::make_nccl_communicator(*host);
  ASSERT_FALSE(nccl);
  const std::string& message = nccl.message();
  EXPECT_TRUE(message.find("GPU") != std::string::npos ||
              message.find("built without") != std::string::npos)
      << message;
}

// Copies `count` floats between GPU and host memory, waiting for them.
Status copy_floats(float* to, const float* from, size_t count, bool to_gpu) {
  MEMFIT_ASSIGN_OR_RETURN(auto copies, cuda::CopyStream::create());
  const size_t bytes = count * sizeof(float);
  MEMFIT_RETURN_IF_ERROR(to_gpu ? copies->to_device(to, from, bytes)
                                : copies->to_host(to, from, bytes));
  return copies->synchronize();
}

// Floats in GPU memory, holding `data`; read back with values().
class GpuFloats {
 public:
  explicit GpuFloats(const std::vector<float>& data)
      : buffer_(cuda::Buffer::allocate(cuda::Buffer::Kind::device, data.size() * sizeof(float))
                    .value()),
        count_(data.size()) {
    EXPECT_TRUE(copy_floats(get(), data.data(), count_, true).is_ok());
  }
  float* get() { return static_cast<float*>(buffer_.data()); }
  std::vector<float> values() {
    std::vector<float> data(count_);
    EXPECT_TRUE(copy_floats(data.data(), get(), count_, false).is_ok());
    return data;
  }

 private:
  cuda::Buffer buffer_;
  size_t count_;
};

TEST(NcclCommunicator, OneRankWorksInPlaceOnGpuAndHostMemory) {
  REQUIRE_GPU();
  auto host = make_local_communicator();
  auto made = cuda::make_nccl_communicator(*host);
  ASSERT_TRUE(made) << made.message();
  Communicator& nccl = **made;
  EXPECT_STREQ(nccl.kind(), "nccl");
  EXPECT_TRUE(nccl.sums_gpu_memory());
  EXPECT_EQ(nccl.rank(), 0);
  EXPECT_EQ(nccl.size(), 1);
  const std::vector<float> data = testing::random_normal(1000, 3);
  GpuFloats gpu(data);
  ASSERT_TRUE(nccl.all_reduce_sum(gpu.get(), data.size()).is_ok());
  EXPECT_EQ(gpu.values(), data) << "one rank's sum is its data";
  ASSERT_TRUE(nccl.reduce_scatter_sum(gpu.get(), data.size()).is_ok());
  EXPECT_EQ(gpu.values(), data);
  ASSERT_TRUE(nccl.all_gather(gpu.get(), data.size()).is_ok());
  EXPECT_EQ(gpu.values(), data);
  ASSERT_TRUE(nccl.broadcast(gpu.get(), data.size() * sizeof(float), 0).is_ok());
  EXPECT_EQ(gpu.values(), data);
  EXPECT_FALSE(nccl.broadcast(gpu.get(), 4, 1).is_ok()) << "rank 1 of a group of 1";
  // Host memory goes to the host communicator (alone: the identity).
  std::vector<float> on_host = data;
  ASSERT_TRUE(nccl.all_reduce_sum(on_host.data(), on_host.size()).is_ok());
  EXPECT_EQ(on_host, data);
  double counts[2] = {3, 4};
  ASSERT_TRUE(nccl.all_reduce_sum(counts, 2).is_ok());
  ASSERT_TRUE(nccl.all_reduce_max(counts, 2).is_ok());
  EXPECT_EQ(counts[0], 3);
  EXPECT_EQ(counts[1], 4);
  EXPECT_TRUE(nccl.barrier().is_ok());
}

// Rank 0 of two ranks whose data are the same: every sum is twice rank 0's
// part, summed first by `inner` (one rank), then doubled, in GPU memory when
// inner sums GPU memory. Only what a step without --shard calls.
class MirroredPair final : public Communicator {
 public:
  explicit MirroredPair(Communicator& inner) : inner_(inner) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  const char* kind() const override { return "mirrored"; }
  bool sums_gpu_memory() const override { return inner_.sums_gpu_memory(); }
  size_t float_sums() const { return float_sums_; }

  Status all_reduce_sum(float* data, size_t count) override {
    MEMFIT_RETURN_IF_ERROR(inner_.all_reduce_sum(data, count));
    ++float_sums_;
    if (!inner_.sums_gpu_memory()) {
      for (size_t i = 0; i < count; ++i) data[i] *= 2;
      return Status::ok();
    }
    std::vector<float> host(count);
    MEMFIT_RETURN_IF_ERROR(copy_floats(host.data(), data, count, false));
    for (float& x : host) x *= 2;
    return copy_floats(data, host.data(), count, true);
  }
  Status all_reduce_sum(double* data, size_t count) override {
    for (size_t i = 0; i < count; ++i) data[i] *= 2;
    return Status::ok();
  }
  Status all_reduce_max(double*, size_t) override { return Status::ok(); }
  Status broadcast(void*, size_t, int) override { return Status::ok(); }
  Status reduce_scatter_sum(float*, size_t) override {
    return Status::error("a mirrored pair does not shard");
  }
  Status all_gather(float*, size_t) override {
    return Status::error("a mirrored pair does not shard");
  }
  Status barrier() override { return Status::ok(); }
  void abort(int) override {}

 private:
  Communicator& inner_;
  size_t float_sums_ = 0;
};

StepSpec two_rank_mlp(BackendKind backend) {
  StepSpec spec = testing::test_spec({.name = "mlp", .batch = 8});
  spec.backend = backend;
  spec.ranks = 2;
  spec.bucket_mb = 0.05;  // several buckets, the first summed while backward runs
  return spec;
}

Result<testing::StepRun> mirrored_step(BackendKind backend, Communicator& inner,
                                       size_t* sums) {
  MirroredPair pair(inner);
  MEMFIT_ASSIGN_OR_RETURN(auto program,
                          TrainingProgram::create(two_rank_mlp(backend), 2, true, &pair));
  testing::StepRun run = testing::run_step(*program, 1, true);
  *sums = pair.float_sums();
  return run;
}

TEST(NcclCommunicator, SumsTheCudaStepsBucketsAsTheCpuStepsAre) {
  REQUIRE_GPU();
  auto host = make_local_communicator();
  auto nccl = cuda::make_nccl_communicator(*host);
  ASSERT_TRUE(nccl) << nccl.message();
  size_t cpu_sums = 0, cuda_sums = 0;
  auto cpu = mirrored_step(BackendKind::cpu, *host, &cpu_sums);
  ASSERT_TRUE(cpu) << cpu.message();
  auto gpu = mirrored_step(BackendKind::cuda, **nccl, &cuda_sums);
  ASSERT_TRUE(gpu) << gpu.message();
  EXPECT_GT(cuda_sums, 1u) << "several buckets";
  EXPECT_EQ(cuda_sums, cpu_sums);
  ASSERT_EQ(cpu->losses.size(), gpu->losses.size());
  for (size_t i = 0; i < cpu->losses.size(); ++i) {
    EXPECT_NEAR(cpu->losses[i], gpu->losses[i], 1e-4 * std::abs(cpu->losses[i]));
  }
  for (const auto& [name, data] : cpu->state.tensors()) {
    const std::vector<float>* other = gpu->state.find(name);
    ASSERT_NE(other, nullptr) << name;
    ASSERT_EQ(other->size(), data.size()) << name;
    size_t far = 0;
    for (size_t i = 0; i < data.size(); ++i) {
      far += std::abs(data[i] - (*other)[i]) > 1e-4 + 1e-3 * std::abs(data[i]);
    }
    EXPECT_EQ(far, 0u) << name;
  }
}

TEST(NcclCommunicator, TheCudaBackendRefusesAHostCommunicator) {
  REQUIRE_GPU();
  auto host = make_local_communicator();
  MirroredPair pair(*host);
  auto program = TrainingProgram::create(two_rank_mlp(BackendKind::cuda), 2, true, &pair);
  ASSERT_TRUE(program) << program.message();
  StateStore state;
  (*program)->init_state(state, 7);
  ASSERT_TRUE((*program)->load_state(state).is_ok());
  Batch zeros = Batch::for_model((*program)->model());
  StepCounters counters;
  auto loss = (*program)->micro_step(zeros.feeds(), 3, 1.0f, counters);
  ASSERT_FALSE(loss);
  EXPECT_NE(loss.message().find("with NCCL"), std::string::npos) << loss.message();
  EXPECT_EQ(pair.float_sums(), 0u);
}

}  // namespace
}  // namespace memfit
