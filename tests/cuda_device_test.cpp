// The cuda backend's device layer (src/backends/cuda/cuda_device.h) on the
// first GPU: its description, device and pinned memory, copies on the copy
// stream that come back bit for bit, the link's bandwidth, stream points
// waited for from another thread, library errors reported; and what
// --backend cuda says. Without a GPU (or without CUDA in the build) the
// device tests skip, saying why; the message tests run everywhere.
#include "backends/cuda/cuda_device.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "memfit/plan.h"
#include "runtime/device.h"

namespace memfit {
namespace {

// Skips the test unless this build has CUDA and the machine a GPU.
#define REQUIRE_GPU()                                                              \
  do {                                                                             \
    if (!cuda::built_with_cuda()) GTEST_SKIP() << "built without CUDA";            \
    if (auto probe = cuda::device_info(); !probe) GTEST_SKIP() << probe.message(); \
  } while (0)

TEST(CudaDevice, DescribesTheGpu) {
  REQUIRE_GPU();
  auto info = cuda::device_info();
  ASSERT_TRUE(info) << info.message();
  EXPECT_FALSE(info->name.empty());
  EXPECT_GE(info->major, 7);  // CUDA 13 runs on compute capability 7.5 and newer
  EXPECT_GT(info->memory_bytes, info->free_bytes / 2);
  EXPECT_GE(info->runtime_version, 12000);
  EXPECT_GE(info->cudnn_version, 90000u);
  EXPECT_GT(info->cublas_version, 0);
  EXPECT_NE(cuda::describe(*info).find(info->name), std::string::npos);
  // The roofline's machine: a GPU's peaks are in the TFLOP/s and
  // hundreds of GB/s, far above the cpu's defaults.
  EXPECT_GT(info->multiprocessors, 0);
  EXPECT_GT(info->clock_hz, 5e8);
  EXPECT_GT(info->memory_bytes_per_second, 1e11);
  auto backend = make_cuda_backend();
  ASSERT_TRUE(backend) << backend.message();
  const MachineSpec machine = (*backend)->roofline_machine();
  EXPECT_GT(machine.flops_per_second, 1e12);
  EXPECT_EQ(machine.bytes_per_second, info->memory_bytes_per_second);
}

TEST(CudaDevice, CopiesComeBackBitForBit) {
  REQUIRE_GPU();
  constexpr size_t kBytes = size_t{3} << 20;
  auto up = cuda::Buffer::allocate(cuda::Buffer::Kind::pinned_host, kBytes);
  auto down = cuda::Buffer::allocate(cuda::Buffer::Kind::pinned_host, kBytes);
  auto device = cuda::Buffer::allocate(cuda::Buffer::Kind::device, kBytes);
  ASSERT_TRUE(up && down && device);
  auto* in = static_cast<unsigned char*>(up->data());
  for (size_t i = 0; i < kBytes; ++i) in[i] = static_cast<unsigned char>(i * 2654435761u >> 13);
  std::memset(down->data(), 0, kBytes);
  auto copies = cuda::CopyStream::create();
  ASSERT_TRUE(copies) << copies.message();
  ASSERT_TRUE((*copies)->to_device(device->data(), up->data(), kBytes).is_ok());
  ASSERT_TRUE((*copies)->to_host(down->data(), device->data(), kBytes).is_ok());
  auto event = (*copies)->record();
  ASSERT_TRUE(event);
  ASSERT_TRUE((*copies)->wait(*event).is_ok());
  EXPECT_EQ(std::memcmp(up->data(), down->data(), kBytes), 0);
  EXPECT_FALSE((*copies)->wait(*event + 1).is_ok());
}

TEST(CudaDevice, MeasuresTheLink) {
  REQUIRE_GPU();
  auto gbps = cuda::measure_link_gbps(size_t{32} << 20, 2);
  ASSERT_TRUE(gbps) << gbps.message();
  EXPECT_GT(*gbps, 0.5);     // slower than any PCIe link memfit would run on
  EXPECT_LT(*gbps, 2000.0);  // faster than any link there is: a timing error
}

TEST(CudaDevice, BuffersMove) {
  REQUIRE_GPU();
  auto a = cuda::Buffer::allocate(cuda::Buffer::Kind::device, 4096);
  ASSERT_TRUE(a);
  void* data = a->data();
  cuda::Buffer b = std::move(a).value();
  EXPECT_EQ(b.data(), data);
  EXPECT_EQ(b.bytes(), 4096u);
}

// A stream point passes only once the kernels before it have run: a thread
// that waits for it and then copies on a stream of its own reads what the
// last of them wrote, behind several memsets of 1 GiB that take
// milliseconds. Twice, as a step records its points again.
TEST(CudaDevice, StreamPointsPassAfterTheKernelsBeforeThem) {
  REQUIRE_GPU();
  auto device = cuda::make_gpu_device();
  ASSERT_TRUE(device) << device.message();
  constexpr size_t kSlow = size_t{1} << 30, kTail = 4096;
  auto arena = (*device)->allocate(kSlow + kTail);
  ASSERT_TRUE(arena) << arena.message();
  std::byte* slow = arena->get();
  std::byte* tail = slow + kSlow;  // the source, outside the memsets
  std::byte* last = slow + kSlow - kTail;
  auto points = (*device)->stream_points(1);
  ASSERT_TRUE(points && *points) << points.message();
  auto pinned = cuda::Buffer::allocate(cuda::Buffer::Kind::pinned_host, kTail);
  auto copies = cuda::CopyStream::create();
  ASSERT_TRUE(pinned && copies);
  for (const unsigned char pattern : {0x11, 0x5A}) {
    SCOPED_TRACE(pattern);
    const std::vector<unsigned char> want(kTail, pattern);
    ASSERT_TRUE((*device)->to_device(tail, want.data(), kTail).is_ok());
    for (int i = 0; i < 16; ++i) ASSERT_TRUE((*device)->poison(slow, kSlow).is_ok());
    ASSERT_TRUE((*device)->within(last, tail, kTail).is_ok());
    ASSERT_TRUE((*points)->record(0).is_ok());
    Status read;
    std::thread other([&] {
      read = (*points)->wait(0);
      if (!read.is_ok()) return;
      read = (*copies)->to_host(pinned->data(), last, kTail);
      if (!read.is_ok()) return;
      auto event = (*copies)->record();
      read = event ? (*copies)->wait(*event) : event.status();
    });
    other.join();
    ASSERT_TRUE(read.is_ok()) << read.message();
    EXPECT_EQ(std::memcmp(pinned->data(), want.data(), kTail), 0);
    ASSERT_TRUE((*device)->synchronize().is_ok());
  }
}

#ifdef MEMFIT_HAVE_CUDA
// A failed cuBLAS or cuDNN call inside a kernel's run is reported to the
// device, whose next synchronize returns it (once).
TEST(CudaDevice, LibraryErrorsComeBackFromTheNextSynchronize) {
  REQUIRE_GPU();
  auto device = cuda::make_gpu_device();
  ASSERT_TRUE(device) << device.message();
  cuda::report_error(**device, Status::error("cublasSgemmStridedBatched: it failed"));
  cuda::report_error(**device, Status::error("a second failure"));
  const Status first = (*device)->synchronize();
  EXPECT_EQ(first.message(), "cublasSgemmStridedBatched: it failed");
  EXPECT_TRUE((*device)->synchronize().is_ok());
}
#endif

// --backend cuda is refused with what to do: rebuild with CUDA, or find a
// GPU; on a GPU, it plans (resnet-cifar: convolutions, batch norm, pooling).
TEST(CudaBackend, SaysWhatItNeeds) {
  auto backend = make_cuda_backend();
  PlanRequest request;
  request.step.model = {
      .name = "resnet-cifar", .batch = 2, .image_size = 8, .depth = 11, .width = 4};
  request.step.backend = BackendKind::cuda;
  auto plan = plan_training_step(request);
  if (backend) {
    ASSERT_TRUE(plan) << plan.message();
    EXPECT_EQ(plan->backend, "cuda");
    return;
  }
  ASSERT_FALSE(plan);
  const std::string& message = backend.message();
  if (!cuda::built_with_cuda()) {
    EXPECT_NE(message.find("built without CUDA"), std::string::npos) << message;
  } else {
    EXPECT_NE(message.find("needs a GPU"), std::string::npos) << message;
  }
  EXPECT_EQ(message.rfind("--backend cuda", 0), 0u) << message;
  EXPECT_NE(plan.message().find(message), std::string::npos) << plan.message();
}

}  // namespace
}  // namespace memfit
