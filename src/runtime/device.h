// The device a backend's kernels run on, as the executor sees it: where the
// arena and the host pool come from, how bytes move between the host and the
// arena, and the stream the swap copies (to_host, to_device) run on beside
// the kernels. The executor touches the arena only through a Device, so one
// plan runs on the host (the cpu and reference backends: the arena is host
// memory and the copy stream a thread) and on a GPU (the cuda backend: the
// arena is device memory and the copy stream a CUDA stream).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "memfit/status.h"

namespace memfit {

// The copies between the arena and the host pool, in the order issued, beside
// the kernels. Events are tickets: the n-th task issued completes n-th.
class SwapStream {
 public:
  using Clock = std::chrono::steady_clock;
  // Called once a copy has completed, with the time it started and the
  // seconds it took.
  using Done = std::function<void(Clock::time_point, double)>;
  virtual ~SwapStream() = default;
  // Issues a copy of `bytes` bytes that starts after the kernels issued so
  // far have finished with `src`; returns its event.
  virtual int64_t copy(void* dst, const void* src, size_t bytes, Done done) = 0;
  // Issues the poisoning (filling with NaN) of `bytes` at `data` (arena or
  // host pool) after every task issued before it: a range an earlier copy
  // still reads.
  virtual int64_t poison(void* data, size_t bytes) = 0;
  // Makes the kernels issued from now on wait for `event` (and so every
  // earlier one); returns the seconds the caller was held up.
  virtual double wait(int64_t event) = 0;
  // Blocks until every task issued so far has completed; the first error of
  // any of them, if one failed.
  virtual Status drain() = 0;
};

// The device's own clock for its kernels, where the host's clock around a
// launch does not time the kernel (a GPU: a launch returns before its kernel
// runs). Marks go on the compute stream in issue order; they are read once
// the stream has drained.
class KernelClock {
 public:
  virtual ~KernelClock() = default;
  // Mark `i` (below the count the clock was made for) passes once every
  // kernel issued before it has run. A failure is read()'s to report.
  virtual void mark(size_t i) = 0;
  // After Device::synchronize: for each mark, the seconds from mark 0 to it,
  // or -1 where it was not set since the last read (all -1 without mark 0);
  // every mark is cleared.
  virtual Result<std::vector<double>> read() = 0;
};

// Points on the compute stream that another thread waits for, where a
// kernel's launch returns before it runs (a GPU): point i passes once every
// kernel issued before its record(i) has run. Made once, recorded again on
// every step.
class StreamPoints {
 public:
  virtual ~StreamPoints() = default;
  // On the thread that issues the kernels, after them.
  virtual Status record(size_t i) = 0;
  // From any thread, after record(i): blocks until point i has passed.
  virtual Status wait(size_t i) = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string_view name() const = 0;
  // `bytes` (at least 1) of the device's memory, aligned to
  // kArenaAlignment: the arena. An error when the device cannot give them.
  virtual Result<std::shared_ptr<std::byte>> allocate(size_t bytes) const = 0;
  // `bytes` (at least 1) of host memory that the swap stream copies to and
  // from: the host pool (pinned on a GPU).
  virtual Result<std::shared_ptr<std::byte>> allocate_host(size_t bytes) const = 0;
  // Copies between the host and the arena that start once the kernels issued
  // so far are done, and return when they are.
  virtual Status to_device(void* device, const void* host, size_t bytes) const = 0;
  virtual Status to_host(void* host, const void* device, size_t bytes) const = 0;
  // A copy within the arena, and the filling of `bytes` of it with NaN
  // (poison mode), in order with the kernels: done before any kernel issued
  // after them runs.
  virtual Status within(void* to, const void* from, size_t bytes) const = 0;
  virtual Status poison(void* device, size_t bytes) const = 0;
  // Blocks until every kernel issued so far has finished.
  virtual Status synchronize() const = 0;
  // A new stream for swap copies, no faster than `link_bytes_per_second`
  // where that is not 0 (to study overlap on a machine without a device).
  virtual Result<std::unique_ptr<SwapStream>> swap_stream(double link_bytes_per_second) const = 0;
  // A clock of `marks` marks that times the kernels; null where the host's
  // clock around a kernel times it (the host, whose kernels return when done).
  virtual Result<std::unique_ptr<KernelClock>> kernel_clock(size_t marks) const;
  // `count` stream points; null where a kernel has run when its launch
  // returns (the host), so that there is nothing to wait for.
  virtual Result<std::unique_ptr<StreamPoints>> stream_points(size_t count) const;
};

// The host as a device: arena and host pool in the process's memory, copies
// by memcpy, the swap stream a thread (runtime/copy_engine.h).
std::shared_ptr<const Device> host_device();

}  // namespace memfit
