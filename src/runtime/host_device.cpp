// The host as a device (runtime/device.h): kernels run on the calling
// thread, so every copy is done when memcpy returns.
#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

#include "memory/memory_plan.h"
#include "runtime/copy_engine.h"
#include "runtime/device.h"

namespace memfit {
namespace {

constexpr std::align_val_t kAlign{kArenaAlignment};

std::shared_ptr<std::byte> aligned_bytes(size_t bytes) {
  return std::shared_ptr<std::byte>(
      static_cast<std::byte*>(::operator new[](std::max<size_t>(bytes, 1), kAlign)),
      [](std::byte* p) { ::operator delete[](p, kAlign); });
}

class HostDevice final : public Device {
 public:
  std::string_view name() const override { return "host"; }
  Result<std::shared_ptr<std::byte>> allocate(size_t bytes) const override {
    return aligned_bytes(bytes);
  }
  Result<std::shared_ptr<std::byte>> allocate_host(size_t bytes) const override {
    return aligned_bytes(bytes);
  }
  Status to_device(void* device, const void* host, size_t bytes) const override {
    return within(device, host, bytes);
  }
  Status to_host(void* host, const void* device, size_t bytes) const override {
    return within(host, device, bytes);
  }
  Status within(void* to, const void* from, size_t bytes) const override {
    if (to != from && bytes > 0) std::memcpy(to, from, bytes);
    return Status::ok();
  }
  Status poison(void* device, size_t bytes) const override {
    std::fill_n(static_cast<float*>(device), bytes / sizeof(float),
                std::numeric_limits<float>::quiet_NaN());
    return Status::ok();
  }
  Status synchronize() const override { return Status::ok(); }
  Result<std::unique_ptr<SwapStream>> swap_stream(double link_bytes_per_second) const override {
    return std::unique_ptr<SwapStream>(std::make_unique<CopyEngine>(link_bytes_per_second));
  }
};

}  // namespace

Result<std::unique_ptr<KernelClock>> Device::kernel_clock(size_t) const {
  return std::unique_ptr<KernelClock>();
}

Result<std::unique_ptr<StreamPoints>> Device::stream_points(size_t) const {
  return std::unique_ptr<StreamPoints>();
}

std::shared_ptr<const Device> host_device() {
  static const auto device = std::make_shared<const HostDevice>();
  return device;
}

}  // namespace memfit
