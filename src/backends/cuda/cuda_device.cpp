// The CUDA device (cuda_device.h): the runtime's calls, each failure a
// Status with the runtime's words.
#include "backends/cuda/cuda_device.h"

#include <cstdio>
#include <utility>

#ifdef MEMFIT_HAVE_CUDA
#include <cublas_api.h>
#include <cuda_runtime.h>
#include <cudnn_version.h>

#include "backends/cuda/cuda_call.h"
#endif

namespace memfit::cuda {

#ifndef MEMFIT_HAVE_CUDA

namespace {
Status not_built() {
  return Status::error(
      "this memfit was built without CUDA: CMake found no CUDA toolkit (nvcc, cuBLAS) and cuDNN, "
      "or was given -DMEMFIT_CUDA=OFF; install them and rebuild");
}
}  // namespace

bool built_with_cuda() { return false; }
Result<DeviceInfo> device_info(int) { return not_built(); }
Result<Buffer> Buffer::allocate(Kind, size_t) { return not_built(); }
Buffer::~Buffer() = default;
Result<std::unique_ptr<CopyStream>> CopyStream::create() { return not_built(); }
CopyStream::~CopyStream() = default;
Status CopyStream::to_device(void*, const void*, size_t) { return not_built(); }
Status CopyStream::to_host(void*, const void*, size_t) { return not_built(); }
Result<int> CopyStream::record() { return not_built(); }
Status CopyStream::wait(int) { return not_built(); }
Status CopyStream::synchronize() { return not_built(); }
Result<double> measure_link_gbps(size_t, int) { return not_built(); }

#else

namespace {

cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }
cudaEvent_t as_event(void* event) { return static_cast<cudaEvent_t>(event); }

}  // namespace

bool built_with_cuda() { return true; }

Result<DeviceInfo> device_info(int index) {
  int count = 0;
  if (const cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess) {
    return Status::error(std::string("no CUDA GPU: cudaGetDeviceCount says: ") +
                         cudaGetErrorString(error));
  }
  if (count == 0) return Status::error("no CUDA GPU: cudaGetDeviceCount found none");
  if (index < 0 || index >= count) {
    return Status::error("no CUDA GPU " + std::to_string(index) + ": this machine has " +
                         std::to_string(count));
  }
  cudaDeviceProp props{};
  MEMFIT_CUDA_CALL(cudaGetDeviceProperties(&props, index));
  MEMFIT_CUDA_CALL(cudaSetDevice(index));
  DeviceInfo info;
  info.index = index;
  info.name = props.name;
  info.major = props.major;
  info.minor = props.minor;
  info.memory_bytes = props.totalGlobalMem;
  int clock_khz = 0, memory_clock_khz = 0, bus_bits = 0;
  MEMFIT_CUDA_CALL(
      cudaDeviceGetAttribute(&info.multiprocessors, cudaDevAttrMultiProcessorCount, index));
  MEMFIT_CUDA_CALL(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, index));
  MEMFIT_CUDA_CALL(cudaDeviceGetAttribute(&memory_clock_khz, cudaDevAttrMemoryClockRate, index));
  MEMFIT_CUDA_CALL(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, index));
  info.clock_hz = clock_khz * 1e3;
  info.memory_bytes_per_second = 2.0 * memory_clock_khz * 1e3 * bus_bits / 8.0;
  size_t free = 0, total = 0;
  MEMFIT_CUDA_CALL(cudaMemGetInfo(&free, &total));
  info.free_bytes = free;
  MEMFIT_CUDA_CALL(cudaRuntimeGetVersion(&info.runtime_version));
  MEMFIT_CUDA_CALL(cudaDriverGetVersion(&info.driver_version));
  info.cudnn_version = CUDNN_VERSION;
  info.cublas_version = CUBLAS_VERSION;
  return info;
}

Result<Buffer> Buffer::allocate(Kind kind, size_t bytes) {
  void* data = nullptr;
  if (bytes > 0) {
    if (kind == Kind::device) {
      MEMFIT_CUDA_CALL(cudaMalloc(&data, bytes));
    } else {
      MEMFIT_CUDA_CALL(cudaHostAlloc(&data, bytes, cudaHostAllocDefault));
    }
  }
  return Buffer(kind, data, bytes);
}

Buffer::~Buffer() {
  if (data_ == nullptr) return;
  if (kind_ == Kind::device) {
    cudaFree(data_);
  } else {
    cudaFreeHost(data_);
  }
}

Result<std::unique_ptr<CopyStream>> CopyStream::create() {
  std::unique_ptr<CopyStream> copies(new CopyStream());
  cudaStream_t stream = nullptr;
  MEMFIT_CUDA_CALL(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  copies->stream_ = stream;
  return copies;
}

CopyStream::~CopyStream() {
  for (void* event : events_) cudaEventDestroy(as_event(event));
  if (stream_ != nullptr) cudaStreamDestroy(as_stream(stream_));
}

Status CopyStream::to_device(void* device, const void* host, size_t bytes) {
  MEMFIT_CUDA_CALL(
      cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, as_stream(stream_)));
  return Status::ok();
}

Status CopyStream::to_host(void* host, const void* device, size_t bytes) {
  MEMFIT_CUDA_CALL(
      cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, as_stream(stream_)));
  return Status::ok();
}

Result<int> CopyStream::record() {
  cudaEvent_t event = nullptr;
  MEMFIT_CUDA_CALL(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  events_.push_back(event);
  MEMFIT_CUDA_CALL(cudaEventRecord(event, as_stream(stream_)));
  return static_cast<int>(events_.size() - 1);
}

Status CopyStream::wait(int event) {
  if (event < 0 || static_cast<size_t>(event) >= events_.size()) {
    return Status::error("CopyStream::wait: no event " + std::to_string(event));
  }
  MEMFIT_CUDA_CALL(cudaEventSynchronize(as_event(events_[static_cast<size_t>(event)])));
  return Status::ok();
}

Status CopyStream::synchronize() {
  MEMFIT_CUDA_CALL(cudaStreamSynchronize(as_stream(stream_)));
  return Status::ok();
}

Result<double> measure_link_gbps(size_t bytes, int repeats) {
  if (bytes == 0 || repeats < 1) return Status::error("measure_link_gbps: nothing to copy");
  MEMFIT_ASSIGN_OR_RETURN(Buffer host, Buffer::allocate(Buffer::Kind::pinned_host, bytes));
  MEMFIT_ASSIGN_OR_RETURN(Buffer device, Buffer::allocate(Buffer::Kind::device, bytes));
  MEMFIT_ASSIGN_OR_RETURN(std::unique_ptr<CopyStream> copies, CopyStream::create());
  cudaStream_t stream = as_stream(copies->native_stream());
  cudaEvent_t start = nullptr, stop = nullptr;
  MEMFIT_CUDA_CALL(cudaEventCreate(&start));
  MEMFIT_CUDA_CALL(cudaEventCreate(&stop));
  double seconds = 0;
  Status status = Status::ok();
  for (int r = 0; r <= repeats && status.is_ok(); ++r) {  // r = 0 warms up
    for (const bool up : {true, false}) {
      cudaEventRecord(start, stream);
      status = up ? copies->to_device(device.data(), host.data(), bytes)
                  : copies->to_host(host.data(), device.data(), bytes);
      if (!status.is_ok()) break;
      cudaEventRecord(stop, stream);
      float ms = 0;
      if (const cudaError_t error = cudaEventSynchronize(stop); error != cudaSuccess) {
        status = failed("cudaEventSynchronize", error);
        break;
      }
      cudaEventElapsedTime(&ms, start, stop);
      if (r > 0) seconds += ms / 1e3;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  MEMFIT_RETURN_IF_ERROR(status);
  return static_cast<double>(bytes) * 2.0 * repeats / seconds / 1e9;
}

#endif  // MEMFIT_HAVE_CUDA

Buffer::Buffer(Buffer&& other) noexcept
    : kind_(other.kind_),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Buffer old(std::move(*this));
    kind_ = other.kind_;
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

std::string describe(const DeviceInfo& info) {
  // CUDNN_VERSION: major * 10000 + minor * 100 + patch.
  const std::string cudnn = std::to_string(info.cudnn_version / 10000) + "." +
                            std::to_string(info.cudnn_version % 10000 / 100) + "." +
                            std::to_string(info.cudnn_version % 100);
  char text[256];
  std::snprintf(
      text, sizeof text,
      "%s, compute capability %d.%d, %.1f GiB (%.1f GiB free), CUDA runtime %d.%d, driver "
      "%d.%d, cuDNN %s and cuBLAS %d (their headers)",
      info.name.c_str(), info.major, info.minor, static_cast<double>(info.memory_bytes) / (1 << 30),
      static_cast<double>(info.free_bytes) / (1 << 30), info.runtime_version / 1000,
      info.runtime_version % 1000 / 10, info.driver_version / 1000, info.driver_version % 1000 / 10,
      cudnn.c_str(), info.cublas_version);
  return text;
}

}  // namespace memfit::cuda
