// The CUDA device under the cuda backend: what the GPU is, device memory
// for the arena, pinned host memory for the swap pool, and a copy stream
// whose copies overlap the compute stream's kernels (swapping), with the
// host link's bandwidth measured for the cost model. Built with the CUDA
// runtime when CMake finds the toolkit and cuDNN (MEMFIT_HAVE_CUDA); without
// it every call says that this memfit was built without CUDA.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "memfit/status.h"
#include "runtime/device.h"

namespace memfit::cuda {

// Whether this memfit was built with the CUDA backend.
bool built_with_cuda();

struct DeviceInfo {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;  // compute capability
  size_t memory_bytes = 0;   // the device's global memory
  size_t free_bytes = 0;     // free now
  int multiprocessors = 0;
  double clock_hz = 0;                 // the multiprocessors' peak clock
  double memory_bytes_per_second = 0;  // peak: 2 (DDR) x memory clock x bus width
  int runtime_version = 0;             // CUDA runtime, e.g. 13000
  int driver_version = 0;
  // The cuDNN and cuBLAS this memfit was compiled against (their headers'
  // CUDNN_VERSION and CUBLAS_VERSION, e.g. 91900 and 130100); the libraries
  // themselves are linked once the kernels call them.
  size_t cudnn_version = 0;
  int cublas_version = 0;
};

// The GPU `index` and the libraries' versions. Errors: no CUDA build, no
// driver or no GPU (with the runtime's own words), an index out of range.
Result<DeviceInfo> device_info(int index = 0);
// "NVIDIA H100 80GB HBM3, compute capability 9.0, 79.1 GiB (79.0 GiB free),
// CUDA runtime 13.0, driver 13.0, cuDNN 9.19.0 and cuBLAS 130100 (their
// headers)".
std::string describe(const DeviceInfo& info);

// Device memory (cudaMalloc) or pinned host memory (cudaHostAlloc) of a
// fixed size, freed when the buffer goes.
class Buffer {
 public:
  enum class Kind { device, pinned_host };
  static Result<Buffer> allocate(Kind kind, size_t bytes);
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Kind kind() const { return kind_; }

 private:
  Buffer(Kind kind, void* data, size_t bytes) : kind_(kind), data_(data), bytes_(bytes) {}
  Kind kind_ = Kind::device;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// A stream of its own for copies between pinned host memory and the device
// (to_host, to_device), and the events a compute stream waits on
// (swap_wait). Copies are asynchronous: record() marks the copies issued so
// far, wait() blocks the host until they are done.
class CopyStream {
 public:
  static Result<std::unique_ptr<CopyStream>> create();
  ~CopyStream();
  CopyStream(const CopyStream&) = delete;
  CopyStream& operator=(const CopyStream&) = delete;
  Status to_device(void* device, const void* host, size_t bytes);
  Status to_host(void* host, const void* device, size_t bytes);
  // An event after every copy issued so far; its number for wait().
  Result<int> record();
  Status wait(int event);
  Status synchronize();
  void* native_stream() const { return stream_; }  // cudaStream_t

 private:
  CopyStream() = default;
  void* stream_ = nullptr;     // cudaStream_t
  std::vector<void*> events_;  // cudaEvent_t
};

// GPU `index` as the executor's Device (runtime/device.h): the arena in
// device memory (cudaMalloc), the host pool pinned (cudaHostAlloc), the
// kernels on a compute stream of its own, the swap copies on a copy stream
// that waits for the compute stream where it reads what kernels wrote, and
// the compute stream waiting for a copy's event (cudaStreamWaitEvent) rather
// than the host. Poisoning writes 0xFF bytes, a NaN in every float.
Result<std::shared_ptr<const Device>> make_gpu_device(int index = 0);
// The compute stream (cudaStream_t) of a Device that make_gpu_device made,
// for the kernels to launch on.
void* compute_stream(const Device& device);
// A library call in a kernel's run (cuBLAS, cuDNN) failed: the device's next
// synchronize returns the first such error, as it does a failed launch's.
void report_error(const Device& device, Status error);

// The host link's bandwidth in GB/s (1e9 bytes per second): `bytes` copied
// from pinned host memory to the device and back `repeats` times on a copy
// stream, timed by events, the mean of both directions.
Result<double> measure_link_gbps(size_t bytes = size_t{256} << 20, int repeats = 3);

}  // namespace memfit::cuda
