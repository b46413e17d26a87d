// A GPU as the executor's Device (cuda_device.h: make_gpu_device): the
// CUDA runtime's memory, copies, streams and events, each failure a Status
// with the runtime's words.
#include <algorithm>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_device.h"

#ifdef MEMFIT_HAVE_CUDA
#include <cuda_runtime.h>

#include "backends/cuda/cuda_call.h"
#endif

namespace memfit::cuda {

#ifndef MEMFIT_HAVE_CUDA

Result<std::shared_ptr<const Device>> make_gpu_device(int index) {
  return device_info(index).status();  // says that this memfit was built without CUDA
}

void* compute_stream(const Device&) { return nullptr; }

#else

namespace {

// The swap copies of one GPU, on a stream of their own. A copy first waits
// for the compute stream (it may read what a kernel just wrote); wait() makes
// the compute stream wait for a copy's event, so the host is never held up.
// Each task records an event after itself; their times are read at drain().
class GpuSwapStream final : public SwapStream {
 public:
  GpuSwapStream(int index, cudaStream_t compute) : index_(index), compute_(compute) {}
  ~GpuSwapStream() override {
    (void)drain();
    for (cudaEvent_t event : free_events_) cudaEventDestroy(event);
    if (copy_ != nullptr) cudaStreamDestroy(copy_);
  }
  GpuSwapStream(const GpuSwapStream&) = delete;
  GpuSwapStream& operator=(const GpuSwapStream&) = delete;

  Status create() {
    MEMFIT_CUDA_CALL(cudaSetDevice(index_));
    MEMFIT_CUDA_CALL(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
    return Status::ok();
  }

  int64_t copy(void* dst, const void* src, size_t bytes, Done done) override {
    Task task;
    task.done = std::move(done);
    task.issued = Clock::now();
    note(after_compute());
    note(record(task.start));
    if (error_.is_ok()) {
      const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, copy_);
      if (e != cudaSuccess) error_ = failed("cudaMemcpyAsync", e);
    }
    note(record(task.end));
    return push(std::move(task));
  }

  int64_t poison(void* data, size_t bytes) override {
    Task task;
    if (error_.is_ok()) {
      const cudaError_t e = cudaMemsetAsync(data, 0xFF, bytes, copy_);
      if (e != cudaSuccess) error_ = failed("cudaMemsetAsync", e);
    }
    note(record(task.end));
    return push(std::move(task));
  }

  double wait(int64_t event) override {
    const size_t at = static_cast<size_t>(event - first_);
    if (event < first_ || at >= tasks_.size() || tasks_[at].end == nullptr) return 0;
    const cudaError_t e = cudaStreamWaitEvent(compute_, tasks_[at].end, 0);
    if (e != cudaSuccess && error_.is_ok()) error_ = failed("cudaStreamWaitEvent", e);
    return 0;  // the compute stream waits on the device; the host goes on issuing
  }

  Status drain() override {
    if (const cudaError_t e = cudaStreamSynchronize(copy_); e != cudaSuccess && error_.is_ok()) {
      error_ = failed("cudaStreamSynchronize", e);
    }
    for (Task& task : tasks_) {
      if (task.done && task.start != nullptr && task.end != nullptr && error_.is_ok()) {
        float ms = 0;
        cudaEventElapsedTime(&ms, task.start, task.end);
        // The device's clock is not the host's: the copy's start is taken as
        // its issue time, its length as the events measured it.
        task.done(task.issued, ms / 1e3);
      }
      for (cudaEvent_t event : {task.start, task.end}) {
        if (event != nullptr) free_events_.push_back(event);
      }
    }
    first_ += static_cast<int64_t>(tasks_.size());
    tasks_.clear();
    return std::exchange(error_, Status::ok());
  }

 private:
  struct Task {
    cudaEvent_t start = nullptr, end = nullptr;
    Done done;
    Clock::time_point issued;
  };

  // The copy stream waits for everything issued to the compute stream so far.
  Status after_compute() {
    cudaEvent_t ready = nullptr;
    MEMFIT_RETURN_IF_ERROR(record_on(ready, compute_));
    MEMFIT_CUDA_CALL(cudaStreamWaitEvent(copy_, ready, 0));
    free_events_.push_back(ready);  // reusable at once: the wait captured its state
    return Status::ok();
  }
  Status record(cudaEvent_t& event) { return record_on(event, copy_); }
  Status record_on(cudaEvent_t& event, cudaStream_t stream) {
    if (free_events_.empty()) {
      MEMFIT_CUDA_CALL(cudaEventCreate(&event));
    } else {
      event = free_events_.back();
      free_events_.pop_back();
    }
    MEMFIT_CUDA_CALL(cudaEventRecord(event, stream));
    return Status::ok();
  }
  void note(Status status) {
    if (!status.is_ok() && error_.is_ok()) error_ = std::move(status);
  }
  int64_t push(Task task) {
    tasks_.push_back(std::move(task));
    return first_ + static_cast<int64_t>(tasks_.size()) - 1;
  }

  int index_;
  cudaStream_t compute_;
  cudaStream_t copy_ = nullptr;
  std::vector<Task> tasks_;  // issued since the last drain
  int64_t first_ = 0;        // the event of tasks_[0]
  std::vector<cudaEvent_t> free_events_;
  Status error_;  // the first failure since the last drain
};

// CUDA events made once on one GPU, destroyed with the set.
class EventSet {
 public:
  EventSet() = default;
  ~EventSet() {
    for (cudaEvent_t event : events_) cudaEventDestroy(event);
  }
  EventSet(const EventSet&) = delete;
  EventSet& operator=(const EventSet&) = delete;

  Status create(int index, size_t count, unsigned flags) {
    MEMFIT_CUDA_CALL(cudaSetDevice(index));
    events_.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      cudaEvent_t event = nullptr;
      MEMFIT_CUDA_CALL(cudaEventCreateWithFlags(&event, flags));
      events_.push_back(event);
    }
    return Status::ok();
  }
  size_t size() const { return events_.size(); }
  cudaEvent_t operator[](size_t i) const { return events_[i]; }

 private:
  std::vector<cudaEvent_t> events_;
};

// Kernel times by CUDA events on the compute stream: one event per mark,
// made once; the seconds between two are cudaEventElapsedTime's (about half
// a microsecond of resolution).
class GpuKernelClock final : public KernelClock {
 public:
  GpuKernelClock(int index, cudaStream_t compute) : index_(index), compute_(compute) {}

  Status create(size_t marks) {
    MEMFIT_RETURN_IF_ERROR(events_.create(index_, marks, cudaEventDefault));
    set_.assign(marks, false);
    return Status::ok();
  }

  void mark(size_t i) override {
    if (i >= events_.size()) {
      if (error_.is_ok())
        error_ = Status::error("kernel clock mark " + std::to_string(i) + " of " +
                               std::to_string(events_.size()));
      return;
    }
    const cudaError_t e = cudaEventRecord(events_[i], compute_);
    if (e != cudaSuccess && error_.is_ok()) error_ = failed("cudaEventRecord", e);
    set_[i] = e == cudaSuccess;
  }

  Result<std::vector<double>> read() override {
    std::vector<double> seconds(events_.size(), -1.0);
    const bool started = !set_.empty() && set_[0];
    for (size_t i = 0; i < events_.size() && error_.is_ok(); ++i) {
      if (!started || !set_[i]) continue;
      float ms = 0;
      const cudaError_t e = cudaEventElapsedTime(&ms, events_[0], events_[i]);
      if (e != cudaSuccess) error_ = failed("cudaEventElapsedTime", e);
      seconds[i] = ms / 1e3;
    }
    set_.assign(set_.size(), false);
    MEMFIT_RETURN_IF_ERROR(std::exchange(error_, Status::ok()));
    return seconds;
  }

 private:
  int index_;
  cudaStream_t compute_;
  EventSet events_;
  std::vector<bool> set_;  // since the last read
  Status error_;           // the first failure since the last read
};

// Stream points as CUDA events on the compute stream, made once without
// timing; another thread waits for one with cudaEventSynchronize, asleep
// (cudaEventBlockingSync) rather than spinning beside the thread that
// issues the kernels.
class GpuStreamPoints final : public StreamPoints {
 public:
  GpuStreamPoints(int index, cudaStream_t compute) : index_(index), compute_(compute) {}

  Status create(size_t count) {
    return events_.create(index_, count, cudaEventDisableTiming | cudaEventBlockingSync);
  }
  Status record(size_t i) override {
    MEMFIT_RETURN_IF_ERROR(check(i));
    MEMFIT_CUDA_CALL(cudaEventRecord(events_[i], compute_));
    return Status::ok();
  }
  Status wait(size_t i) override {
    MEMFIT_RETURN_IF_ERROR(check(i));
    MEMFIT_CUDA_CALL(cudaSetDevice(index_));  // the waiting thread's device
    MEMFIT_CUDA_CALL(cudaEventSynchronize(events_[i]));
    return Status::ok();
  }

 private:
  Status check(size_t i) const {
    if (i < events_.size()) return Status::ok();
    return Status::error("stream point " + std::to_string(i) + " of " +
                         std::to_string(events_.size()));
  }

  int index_;
  cudaStream_t compute_;
  EventSet events_;
};

void free_device(std::byte* p) { cudaFree(p); }
void free_pinned(std::byte* p) { cudaFreeHost(p); }

class GpuDevice final : public Device {
 public:
  explicit GpuDevice(int index) : index_(index) {}
  ~GpuDevice() override {
    if (compute_ != nullptr) cudaStreamDestroy(compute_);
  }
  GpuDevice(const GpuDevice&) = delete;
  GpuDevice& operator=(const GpuDevice&) = delete;

  Status create() {
    MEMFIT_CUDA_CALL(cudaSetDevice(index_));
    MEMFIT_CUDA_CALL(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    return Status::ok();
  }
  cudaStream_t compute() const { return compute_; }

  std::string_view name() const override { return "cuda"; }
  // cudaMalloc aligns to 256 bytes at least, over kArenaAlignment.
  Result<std::shared_ptr<std::byte>> allocate(size_t bytes) const override {
    void* data = nullptr;
    MEMFIT_CUDA_CALL(cudaSetDevice(index_));
    if (const cudaError_t e = cudaMalloc(&data, std::max<size_t>(bytes, 1)); e != cudaSuccess) {
      size_t free = 0, total = 0;
      cudaMemGetInfo(&free, &total);
      return Status::error("the GPU cannot give the arena's " + std::to_string(bytes) + " bytes (" +
                           std::to_string(free) + " free of " + std::to_string(total) +
                           "): " + cudaGetErrorString(e));
    }
    return std::shared_ptr<std::byte>(static_cast<std::byte*>(data), free_device);
  }
  Result<std::shared_ptr<std::byte>> allocate_host(size_t bytes) const override {
    void* data = nullptr;
    MEMFIT_CUDA_CALL(cudaHostAlloc(&data, std::max<size_t>(bytes, 1), cudaHostAllocDefault));
    return std::shared_ptr<std::byte>(static_cast<std::byte*>(data), free_pinned);
  }
  Status to_device(void* device, const void* host, size_t bytes) const override {
    MEMFIT_CUDA_CALL(cudaMemcpyAsync(device, host, bytes, cudaMemcpyDefault, compute_));
    return synchronize();
  }
  Status to_host(void* host, const void* device, size_t bytes) const override {
    MEMFIT_CUDA_CALL(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDefault, compute_));
    return synchronize();
  }
  Status within(void* to, const void* from, size_t bytes) const override {
    if (to == from || bytes == 0) return Status::ok();
    MEMFIT_CUDA_CALL(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, compute_));
    return Status::ok();
  }
  Status poison(void* device, size_t bytes) const override {
    MEMFIT_CUDA_CALL(cudaMemsetAsync(device, 0xFF, bytes, compute_));
    return Status::ok();
  }
  Status synchronize() const override {
    MEMFIT_CUDA_CALL(cudaStreamSynchronize(compute_));
    MEMFIT_CUDA_CALL(cudaGetLastError());  // a kernel launch that failed since the last check
    std::lock_guard<std::mutex> lock(mutex_);
    return std::exchange(library_error_, Status::ok());
  }
  void report_error(Status error) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (library_error_.is_ok()) library_error_ = std::move(error);
  }
  // The link limit is the hardware's own here: `link_bytes_per_second` is
  // for emulating one on the host.
  Result<std::unique_ptr<SwapStream>> swap_stream(double) const override {
    auto stream = std::make_unique<GpuSwapStream>(index_, compute_);
    MEMFIT_RETURN_IF_ERROR(stream->create());
    return std::unique_ptr<SwapStream>(std::move(stream));
  }
  Result<std::unique_ptr<KernelClock>> kernel_clock(size_t marks) const override {
    auto clock = std::make_unique<GpuKernelClock>(index_, compute_);
    MEMFIT_RETURN_IF_ERROR(clock->create(marks));
    return std::unique_ptr<KernelClock>(std::move(clock));
  }
  Result<std::unique_ptr<StreamPoints>> stream_points(size_t count) const override {
    auto points = std::make_unique<GpuStreamPoints>(index_, compute_);
    MEMFIT_RETURN_IF_ERROR(points->create(count));
    return std::unique_ptr<StreamPoints>(std::move(points));
  }

 private:
  int index_;
  cudaStream_t compute_ = nullptr;
  mutable std::mutex mutex_;
  mutable Status library_error_;  // the first since the last synchronize
};

}  // namespace

Result<std::shared_ptr<const Device>> make_gpu_device(int index) {
  MEMFIT_ASSIGN_OR_RETURN(DeviceInfo info, device_info(index));  // no GPU: the runtime's words
  auto device = std::make_shared<GpuDevice>(info.index);
  MEMFIT_RETURN_IF_ERROR(device->create());
  return std::shared_ptr<const Device>(std::move(device));
}

void* compute_stream(const Device& device) {
  const auto* gpu = dynamic_cast<const GpuDevice*>(&device);
  return gpu != nullptr ? gpu->compute() : nullptr;
}

void report_error(const Device& device, Status error) {
  if (const auto* gpu = dynamic_cast<const GpuDevice*>(&device))
    gpu->report_error(std::move(error));
}

#endif  // MEMFIT_HAVE_CUDA

}  // namespace memfit::cuda
